//! The durable book of cross-archive requests: those registered here (as
//! the receiving archive) and those taken in from others (as a holding
//! archive). Its own redb file, committed durably before anything is
//! answered, so a request acknowledged to a clerk or to a peer survives
//! kill -9. What the entries mean (`requests/`) is not this file's
//! concern: it keeps JSON documents by key, with the certificates'
//! verification codes that find them, and changes each in one
//! transaction, so that two changes of one request never interleave.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::local::redb_file::{RedbFailure, RedbFile, Reopening};
use crate::local::space::{DiskFull, DiskSpace};

/// The book's file inside the data directory.
pub const REQUESTS_FILE: &str = "requests.redb";

/// Which side of a request an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Registered here by a clerk, by request ID.
    Outgoing,
    /// Taken in from a receiving archive, by `receiving/request ID`.
    Incoming,
}

/// Every table of the book, by name: a backup carries them as they are.
pub const TABLES: [&str; 6] = [
    "outgoing",
    "incoming",
    "outgoing_codes",
    "incoming_codes",
    "outgoing_unfinished",
    "incoming_unfinished",
];

/// One of [`TABLES`]: a side's entries by key; the certificates'
/// verification codes of its entries (code → the entry's key); or the
/// keys of its entries that still wait for something (→ nothing).
pub fn table(name: &str) -> TableDefinition<'_, &'static str, &'static [u8]> {
    TableDefinition::new(name)
}

impl Side {
    fn table(self) -> TableDefinition<'static, &'static str, &'static [u8]> {
        table(TABLES[self as usize])
    }

    fn codes(self) -> TableDefinition<'static, &'static str, &'static [u8]> {
        table(TABLES[2 + self as usize])
    }

    fn unfinished(self) -> TableDefinition<'static, &'static str, &'static [u8]> {
        table(TABLES[4 + self as usize])
    }
}

/// What a change writes: the entry, the verification codes that find it
/// from now on, and whether it still waits for something (an answer to
/// deliver, a reviewer): all in one transaction, so that no certificate
/// exists that its code cannot find, and no entry waits unlisted.
pub struct BookWrite {
    pub bytes: Vec<u8>,
    pub codes: Vec<String>,
    pub unfinished: bool,
}

impl From<Vec<u8>> for BookWrite {
    fn from(bytes: Vec<u8>) -> BookWrite {
        BookWrite {
            bytes,
            codes: Vec::new(),
            unfinished: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BookError {
    #[error("cannot open the request book {path}: {source}")]
    Open {
        path: PathBuf,
        source: Box<redb::DatabaseError>,
    },
    #[error("request book: {0}")]
    Redb(Box<redb::Error>),
    #[error("the request cannot be written: {0}")]
    DiskFull(#[from] DiskFull),
    #[error(transparent)]
    Reopening(#[from] Reopening),
}

crate::local::redb_file::from_redb_errors!(BookError);

impl RedbFailure for BookError {
    fn redb(&self) -> Option<&redb::Error> {
        match self {
            BookError::Redb(e) => Some(e),
            _ => None,
        }
    }
}

pub struct RequestBook {
    file: RedbFile,
    /// One change at a time: a change reads the entry it writes.
    changing: Mutex<()>,
}

/// Bytes a write asks the disk to have free beyond the entry itself (the
/// B-tree pages it copies on write).
const ENTRY_ROOM: u64 = 64 * 1024;

impl RequestBook {
    pub fn open(dir: &Path, space: Arc<DiskSpace>) -> Result<RequestBook, BookError> {
        let path = dir.join(REQUESTS_FILE);
        let file = RedbFile::open(&path, space).map_err(|source| BookError::Open {
            path,
            source: Box::new(source),
        })?;
        file.write(None, |db| {
            let txn = db.begin_write()?;
            for name in TABLES {
                txn.open_table(table(name))?;
            }
            txn.commit()?;
            Ok::<_, BookError>(())
        })?;
        Ok(RequestBook {
            file,
            changing: Mutex::new(()),
        })
    }

    /// The file, for a backup's snapshot (`backup.rs`).
    pub(crate) fn file(&self) -> &RedbFile {
        &self.file
    }

    pub fn get(&self, side: Side, key: &str) -> Result<Option<Vec<u8>>, BookError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(side.table())?;
            Ok(table.get(key)?.map(|v| v.value().to_vec()))
        })
    }

    /// The entry of `side` that a certificate's verification `code` was
    /// issued from, with its key.
    pub fn by_code(&self, side: Side, code: &str) -> Result<Option<(String, Vec<u8>)>, BookError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let Some(key) = txn.open_table(side.codes())?.get(code)? else {
                return Ok(None);
            };
            let key = String::from_utf8_lossy(key.value()).into_owned();
            let entry = txn.open_table(side.table())?.get(key.as_str())?;
            Ok(entry.map(|v| (key, v.value().to_vec())))
        })
    }

    /// The entries of `side` that still wait for something, by key: what
    /// the outbox delivers and the reviewers decide, without reading every
    /// request ever made.
    pub fn unfinished(&self, side: Side) -> Result<Vec<(String, Vec<u8>)>, BookError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let entries = txn.open_table(side.table())?;
            let mut out = Vec::new();
            for key in txn.open_table(side.unfinished())?.iter()? {
                let key = key?.0.value().to_owned();
                if let Some(value) = entries.get(key.as_str())? {
                    let value = value.value().to_vec();
                    out.push((key, value));
                }
            }
            Ok(out)
        })
    }

    /// Every entry of `side`, by key.
    pub fn all(&self, side: Side) -> Result<Vec<(String, Vec<u8>)>, BookError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(side.table())?;
            let mut out = Vec::new();
            for entry in table.iter()? {
                let (k, v) = entry?;
                out.push((k.value().to_owned(), v.value().to_vec()));
            }
            Ok(out)
        })
    }

    /// The entry at `key`, and whether `make` made it (and it was
    /// written durably) because there was none: what is taken in once.
    pub fn get_or_insert<E: From<BookError>>(
        &self,
        side: Side,
        key: &str,
        make: impl FnOnce() -> Result<BookWrite, E>,
    ) -> Result<(Vec<u8>, bool), E> {
        let mut made = false;
        let entry = self.change(side, key, |old| {
            if old.is_some() {
                return Ok(None);
            }
            made = true;
            make().map(Some)
        })?;
        // `change` returns the entry written, or the one kept: one exists.
        Ok((entry.unwrap_or_default(), made))
    }

    /// Writes what `change` makes of the entry at `key` (`None`: there is
    /// none), durably, and returns it; `change` answering `None` writes
    /// nothing and returns the entry as it was.
    pub fn change<E: From<BookError>>(
        &self,
        side: Side,
        key: &str,
        change: impl FnOnce(Option<&[u8]>) -> Result<Option<BookWrite>, E>,
    ) -> Result<Option<Vec<u8>>, E> {
        let _one_at_a_time = self.changing.lock();
        let old = self.get(side, key)?;
        let Some(new) = change(old.as_deref())? else {
            return Ok(old);
        };
        self.file
            .write(Some(ENTRY_ROOM + new.bytes.len() as u64), |db| {
                let txn = db.begin_write()?;
                txn.open_table(side.table())?
                    .insert(key, new.bytes.as_slice())?;
                let mut codes = txn.open_table(side.codes())?;
                for code in &new.codes {
                    codes.insert(code.as_str(), key.as_bytes())?;
                }
                drop(codes);
                let mut unfinished = txn.open_table(side.unfinished())?;
                if new.unfinished {
                    unfinished.insert(key, &[][..])?;
                } else {
                    unfinished.remove(key)?;
                }
                drop(unfinished);
                txn.commit()?;
                Ok::<_, BookError>(())
            })
            .map_err(E::from)?;
        Ok(Some(new.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(dir: &Path) -> RequestBook {
        let space = Arc::new(DiskSpace::new(dir, 0));
        RequestBook::open(dir, space).unwrap()
    }

    #[test]
    fn a_change_is_kept_after_reopening_and_a_declined_one_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        {
            let b = book(dir.path());
            let written = b
                .change::<BookError>(Side::Outgoing, "r1", |old| {
                    assert!(old.is_none());
                    Ok(Some(BookWrite {
                        bytes: b"one".to_vec(),
                        codes: vec!["C0DE".into()],
                        unfinished: true,
                    }))
                })
                .unwrap();
            assert_eq!(written.as_deref(), Some(&b"one"[..]));
            let kept = b
                .change::<BookError>(Side::Outgoing, "r1", |_| Ok(None))
                .unwrap();
            assert_eq!(kept.as_deref(), Some(&b"one"[..]));
        }
        let b = book(dir.path());
        assert_eq!(
            b.get(Side::Outgoing, "r1").unwrap().as_deref(),
            Some(&b"one"[..])
        );
        assert_eq!(b.get(Side::Incoming, "r1").unwrap(), None);
        assert_eq!(b.all(Side::Outgoing).unwrap().len(), 1);
        assert_eq!(
            b.by_code(Side::Outgoing, "C0DE").unwrap(),
            Some(("r1".to_owned(), b"one".to_vec()))
        );
        assert_eq!(b.by_code(Side::Incoming, "C0DE").unwrap(), None);
        assert_eq!(b.unfinished(Side::Outgoing).unwrap().len(), 1);
        // Finished: no longer listed as waiting, still kept.
        b.change::<BookError>(Side::Outgoing, "r1", |_| Ok(Some(b"two".to_vec().into())))
            .unwrap();
        assert!(b.unfinished(Side::Outgoing).unwrap().is_empty());
        assert_eq!(b.all(Side::Outgoing).unwrap().len(), 1);
    }
}
