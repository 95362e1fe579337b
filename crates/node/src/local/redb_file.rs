//! A redb file that is reopened after an I/O error, so that a domain whose
//! disk filled writes again as soon as space returns, without a restart.
//!
//! redb refuses every later operation once a write to its file failed
//! ("Previous I/O error occurred. Please close and re-open the database").
//! Reopening is safe, and keeps every acknowledged write, because to the
//! file it is the same as the process dying at the moment of the error,
//! which redb is built to survive:
//!
//! - a commit that returned `Ok` was made durable by its final `fsync`
//!   after the header naming it was written; redb never writes over a page
//!   reachable from that commit (its pages are copied on write, and pages
//!   freed by a commit are reused only once a later commit is durable), so
//!   nothing a failed commit wrote can damage it;
//! - a failed commit is not acknowledged (its error goes back to the
//!   client). When it failed for space, the page whose write was refused
//!   never reached the file or the page cache, so on reopening redb's
//!   repair finds the failed commit's tree incomplete (its checksums do
//!   not match) and falls back to the last good commit: nothing of the
//!   refused write is visible;
//! - when an `fsync` failed (an I/O error, not space), the kernel may have
//!   dropped the pages it could not write while keeping them in its cache
//!   marked clean, so a second `fsync` succeeds and the cache shows data
//!   the disk does not hold (PostgreSQL's fsync lesson). Before reopening,
//!   the file's cached pages are therefore evicted (`posix_fadvise`
//!   `DONTNEED`), so that repair reads what the disk really holds. The
//!   failed commit may then turn out to be on the disk after all; the
//!   store sees that (its sequence moved) and the domain rebuilds its
//!   filters from the store, so a record the store holds is never missing
//!   from the filter.
//!
//! Readers and the one writer hold the file's read lock for the length of
//! one transaction; a reopen takes the write lock, so it waits for them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use redb::Database;

use crate::local::space::{is_no_space, DiskFull, DiskSpace};

/// How often a file that could not be reopened is tried again, at most.
const RETRY_REOPEN: Duration = Duration::from_millis(250);

/// The file could not be used now; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{path} could not be reopened after an I/O error ({reason}); nothing was changed, try again"
)]
pub struct Reopening {
    pub path: PathBuf,
    pub reason: String,
}

/// `From` every redb error type for `$error`, into its
/// `Redb(Box<redb::Error>)` variant (the store's and the audit log's).
macro_rules! from_redb_errors {
    ($error:ident) => {
        $crate::local::redb_file::from_redb_errors!(@each $error;
            redb::TransactionError, redb::TableError, redb::StorageError,
            redb::CommitError, redb::Error);
    };
    (@each $error:ident; $($t:ty),*) => {$(
        impl From<$t> for $error {
            fn from(e: $t) -> Self {
                $error::Redb(Box::new(e.into()))
            }
        }
    )*};
}
pub(crate) use from_redb_errors;

/// What a caller's error type tells the file about a failure.
pub trait RedbFailure: From<Reopening> + From<DiskFull> + std::fmt::Display {
    /// The redb error inside, if any.
    fn redb(&self) -> Option<&redb::Error>;
}

pub struct RedbFile {
    path: PathBuf,
    db: RwLock<Option<Database>>,
    space: Arc<DiskSpace>,
    /// Rises with every reopening.
    generation: AtomicU64,
    last_attempt: Mutex<Option<Instant>>,
}

impl RedbFile {
    pub fn open(path: &Path, space: Arc<DiskSpace>) -> Result<RedbFile, redb::DatabaseError> {
        Ok(RedbFile {
            path: path.to_owned(),
            db: RwLock::new(Some(Database::create(path)?)),
            space,
            generation: AtomicU64::new(0),
            last_attempt: Mutex::new(None),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many times the file was reopened.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Runs `read` on the database; once more after a reopening, if an
    /// I/O error (a write failing beside it) made it fail.
    pub fn read<T, E: RedbFailure>(
        &self,
        read: impl Fn(&Database) -> Result<T, E>,
    ) -> Result<T, E> {
        let generation = self.generation();
        match self.run(&read) {
            Err(e) if self.generation() != generation => {
                tracing::debug!(file = %self.path.display(), error = %e, "read again after a reopening");
                self.run(&read)
            }
            result => result,
        }
    }

    /// Runs `scan` on the database, once: a scan that feeds a caller as it
    /// goes cannot be started again without feeding it twice.
    pub fn scan<T, E: RedbFailure>(
        &self,
        scan: impl FnOnce(&Database) -> Result<T, E>,
    ) -> Result<T, E> {
        self.run(scan)
    }

    /// Runs `write` on the database if the disk has room for about `need`
    /// bytes beyond its reserve (`None`: small writes that may use the
    /// reserve, such as an audit entry). A write refused for space, before
    /// or during its commit, is `DiskFull`.
    pub fn write<T, E: RedbFailure>(
        &self,
        need: Option<u64>,
        write: impl FnOnce(&Database) -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some(need) = need {
            self.space.admit(need)?;
        }
        self.run(write)
    }

    fn run<T, E: RedbFailure>(&self, f: impl FnOnce(&Database) -> Result<T, E>) -> Result<T, E> {
        let generation = self.generation();
        let result = {
            let guard = self.db.read();
            let Some(db) = guard.as_ref() else {
                drop(guard);
                self.reopen_now()?;
                return self.run(f);
            };
            f(db)
        };
        let Err(e) = result else { return result };
        match e.redb() {
            Some(redb::Error::Io(io)) if is_no_space(io) => {
                let full = self.space.found_full();
                tracing::warn!(file = %self.path.display(), "{full}");
                self.reopen(generation);
                Err(full.into())
            }
            // Another operation's failure poisoned the file before this
            // one did anything: nothing of it was written.
            Some(redb::Error::PreviousIo) => {
                self.reopen(generation);
                Err(self.reopening("an earlier operation on it failed").into())
            }
            Some(redb::Error::Io(_)) => {
                tracing::error!(file = %self.path.display(), error = %e, "I/O error: reopening the file");
                self.reopen(generation);
                Err(e)
            }
            _ => Err(e),
        }
    }

    /// Reopens the file now if it is not open and was not tried in the
    /// last moment.
    fn reopen_now(&self) -> Result<(), Reopening> {
        let mut last = self.last_attempt.lock();
        if last.is_some_and(|at| at.elapsed() < RETRY_REOPEN) {
            return Err(self.reopening("the last attempt failed moments ago"));
        }
        *last = Some(Instant::now());
        drop(last);
        if self.reopen(self.generation()) {
            Ok(())
        } else {
            Err(self.reopening("see the log"))
        }
    }

    fn reopening(&self, reason: &str) -> Reopening {
        Reopening {
            path: self.path.clone(),
            reason: reason.to_owned(),
        }
    }

    /// Closes the database and opens it again from what the disk holds,
    /// unless it was reopened since `generation` (by another operation
    /// that met the same failure); true if it is open afterwards.
    fn reopen(&self, generation: u64) -> bool {
        let mut guard = self.db.write();
        if self.generation() != generation {
            return guard.is_some();
        }
        // Dropping the database releases its lock on the file.
        *guard = None;
        evict_cached_pages(&self.path);
        match Database::create(&self.path) {
            Ok(db) => {
                *guard = Some(db);
                self.generation.fetch_add(1, Ordering::AcqRel);
                tracing::info!(file = %self.path.display(), "reopened after an I/O error");
                true
            }
            Err(e) => {
                tracing::error!(file = %self.path.display(), error = %e, "cannot reopen yet; will try again");
                false
            }
        }
    }
}

/// Drops the file's pages from the kernel's cache, so that the next read
/// comes from the disk (see the header: a failed `fsync` leaves pages in
/// the cache that the disk does not hold). Best effort: a file that
/// cannot be opened is left to redb's open to report.
fn evict_cached_pages(path: &Path) {
    use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    // Pages still dirty would not be dropped: write them out first (the
    // error of a failed write-back was already reported to redb).
    let _ = file.sync_all();
    if let Err(e) = posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED) {
        tracing::warn!(file = %path.display(), error = %e, "cannot drop the file's cached pages");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{ReadableDatabase, TableDefinition};
    use xarchive_testkit::Tmpfs;

    const TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("t");

    #[derive(Debug, thiserror::Error)]
    enum Failure {
        #[error(transparent)]
        Redb(#[from] redb::Error),
        #[error(transparent)]
        Full(#[from] DiskFull),
        #[error(transparent)]
        Reopening(#[from] Reopening),
    }

    impl RedbFailure for Failure {
        fn redb(&self) -> Option<&redb::Error> {
            match self {
                Failure::Redb(e) => Some(e),
                _ => None,
            }
        }
    }

    fn put(file: &RedbFile, key: &str, bytes: usize) -> Result<(), Failure> {
        file.write(None, |db| {
            let txn = db.begin_write().map_err(redb::Error::from)?;
            txn.open_table(TABLE)
                .map_err(redb::Error::from)?
                .insert(key, vec![7u8; bytes].as_slice())
                .map_err(redb::Error::from)?;
            txn.commit().map_err(redb::Error::from)?;
            Ok(())
        })
    }

    fn len_of(file: &RedbFile, key: &str) -> Option<usize> {
        file.read(|db| {
            let txn = db.begin_read().map_err(redb::Error::from)?;
            let table = txn.open_table(TABLE).map_err(redb::Error::from)?;
            let value = table.get(key).map_err(redb::Error::from)?;
            Ok::<_, Failure>(value.map(|v| v.value().len()))
        })
        .unwrap()
    }

    #[test]
    fn a_commit_refused_for_space_changes_nothing_and_the_file_takes_writes_once_space_returns() {
        let disk = Tmpfs::mount(16 << 20);
        let space = Arc::new(DiskSpace::new(disk.path(), 0));
        let file = RedbFile::open(&disk.path().join("t.redb"), space.clone()).unwrap();
        put(&file, "kept", 100_000).unwrap();
        for round in 0..3 {
            disk.fill();
            let refused = put(&file, &format!("refused-{round}"), 2 << 20).unwrap_err();
            assert!(matches!(refused, Failure::Full(_)), "{refused}");
            // Reopened at once, so reads go on while the disk is full.
            assert_eq!(file.generation(), round + 1);
            assert_eq!(len_of(&file, "kept"), Some(100_000));
            assert!(!space.stats().writable);
            disk.free();
            put(&file, &format!("after-{round}"), 100_000).unwrap();
            assert_eq!(len_of(&file, &format!("refused-{round}")), None);
        }
        // And it all holds when opened afresh.
        drop(file);
        let file = RedbFile::open(&disk.path().join("t.redb"), space).unwrap();
        assert_eq!(len_of(&file, "kept"), Some(100_000));
        assert_eq!(len_of(&file, "after-2"), Some(100_000));
        assert_eq!(len_of(&file, "refused-1"), None);
    }
}
