//! The record store: one redb file per domain, every write committed
//! durably (fsync) before it is acknowledged.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

use crate::local::id::ArchiveId;
use crate::local::record::{RecordBody, StoredRecord, StoredRecordError};

const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("records");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Rises with every committed write transaction: a saved filter snapshot is
/// valid only for the sequence it was saved at.
const SEQUENCE: &str = "sequence";

/// The store's file inside the data directory.
pub const STORE_FILE: &str = "records.redb";

/// A store failure: the disk, the file, or a value in it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create data directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open store {path}: {source}")]
    Open {
        path: PathBuf,
        source: Box<redb::DatabaseError>,
    },
    #[error("store error: {0}")]
    Redb(Box<redb::Error>),
    #[error("record {id} in the store is unreadable: {source}")]
    Corrupt {
        id: String,
        source: StoredRecordError,
    },
}

macro_rules! impl_from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Redb(Box::new(e.into()))
            }
        }
    )*};
}
impl_from_redb!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::Error
);

/// One write of a batch.
#[derive(Debug, Clone)]
pub enum Write {
    Put(ArchiveId, RecordBody),
    Delete(ArchiveId),
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Replaced,
    Deleted,
    NotFound,
}

pub struct Store {
    db: Database,
    path: PathBuf,
}

impl Store {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(STORE_FILE);
        let db = Database::create(&path).map_err(|source| StoreError::Open {
            path: path.clone(),
            source: Box::new(source),
        })?;
        let txn = db.begin_write()?;
        txn.open_table(RECORDS)?;
        txn.open_table(META)?;
        txn.commit()?;
        Ok(Store { db, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn get(&self, id: &ArchiveId) -> Result<Option<StoredRecord>, StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        let Some(value) = table.get(id.as_str())? else {
            return Ok(None);
        };
        StoredRecord::decode(value.value())
            .map(Some)
            .map_err(|source| StoreError::Corrupt {
                id: id.to_string(),
                source,
            })
    }

    /// Applies `writes` in order in one transaction and commits it durably.
    /// A replaced record keeps its creation time. `now_ms` stamps the rest.
    pub fn apply(&self, writes: &[Write], now_ms: i64) -> Result<Vec<Outcome>, StoreError> {
        let txn = self.db.begin_write()?;
        let mut outcomes = Vec::with_capacity(writes.len());
        {
            let mut table = txn.open_table(RECORDS)?;
            for write in writes {
                outcomes.push(match write {
                    Write::Put(id, body) => {
                        let previous = table.get(id.as_str())?.map(|old| {
                            StoredRecord::decode(old.value())
                                .map(|r| r.created_at_ms)
                                .unwrap_or(now_ms)
                        });
                        let (outcome, created_at) = match previous {
                            Some(created_at) => (Outcome::Replaced, created_at),
                            None => (Outcome::Created, now_ms),
                        };
                        let stored = StoredRecord::new(body, created_at, now_ms);
                        table.insert(id.as_str(), stored.encode().as_slice())?;
                        outcome
                    }
                    Write::Delete(id) => {
                        if table.remove(id.as_str())?.is_some() {
                            Outcome::Deleted
                        } else {
                            Outcome::NotFound
                        }
                    }
                });
            }
            if outcomes.iter().all(|o| *o == Outcome::NotFound) {
                // Nothing changed: leave the file exactly as it was.
                drop(table);
                txn.abort()?;
                return Ok(outcomes);
            }
            let mut meta = txn.open_table(META)?;
            let sequence = meta.get(SEQUENCE)?.map(|v| v.value()).unwrap_or(0);
            meta.insert(SEQUENCE, sequence + 1)?;
        }
        txn.commit()?;
        Ok(outcomes)
    }

    /// The number of committed write transactions so far.
    pub fn sequence(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_read()?;
        let meta = txn.open_table(META)?;
        Ok(meta.get(SEQUENCE)?.map(|v| v.value()).unwrap_or(0))
    }

    pub fn len(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_read()?;
        Ok(txn.open_table(RECORDS)?.len()?)
    }

    /// Calls `f` with every ID in the store, in order, from one snapshot.
    pub fn for_each_id(&self, mut f: impl FnMut(&str)) -> Result<(), StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        for entry in table.iter()? {
            let (key, _) = entry?;
            f(key.value());
        }
        Ok(())
    }

    /// Up to `limit` IDs after `after` (exclusive), in order.
    pub fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>, StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        let range = match after {
            Some(a) => {
                table.range::<&str>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))?
            }
            None => table.range::<&str>(..)?,
        };
        let mut ids = Vec::new();
        for entry in range.take(limit) {
            ids.push(entry?.0.value().to_owned());
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(title: &str) -> RecordBody {
        RecordBody {
            title: title.into(),
            metadata: Default::default(),
            content: None,
        }
    }

    #[test]
    fn writes_report_what_they_did_and_keep_creation_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = ArchiveId::parse("档案/2024/001").unwrap();
        let out = store
            .apply(
                &[
                    Write::Put(a.clone(), body("one")),
                    Write::Put(a.clone(), body("two")),
                    Write::Delete(ArchiveId::parse("absent").unwrap()),
                ],
                10,
            )
            .unwrap();
        assert_eq!(
            out,
            [Outcome::Created, Outcome::Replaced, Outcome::NotFound]
        );
        store
            .apply(&[Write::Put(a.clone(), body("three"))], 20)
            .unwrap();
        let r = store.get(&a).unwrap().unwrap();
        assert_eq!(
            (r.title.as_str(), r.created_at_ms, r.updated_at_ms),
            ("three", 10, 20)
        );
        assert_eq!(store.sequence().unwrap(), 2);
        assert_eq!(
            store.list(None, 10).unwrap(),
            vec!["档案/2024/001".to_string()]
        );
        assert_eq!(
            store.apply(&[Write::Delete(a.clone())], 30).unwrap(),
            [Outcome::Deleted]
        );
        assert!(store.get(&a).unwrap().is_none());
    }
}
