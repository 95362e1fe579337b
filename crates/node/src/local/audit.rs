//! The log of searches by private key that reached this domain: who asked
//! (token name and role, and from which domain), when, for which key type,
//! a keyed digest of the value (never the value) and which records were
//! returned. Append-only: nothing here removes or changes an entry.
//!
//! Its own redb file beside the store, so that the record store stays
//! about records; every entry is committed durably before the search is
//! answered, so no answer leaves without its entry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::local::redb_file::{RedbFailure, RedbFile, Reopening};
use crate::local::space::{DiskFull, DiskSpace};

/// Entries by the microsecond they were written (made unique by moving a
/// collision one microsecond on), as JSON.
const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("searches");

/// The log's file inside the data directory.
pub const AUDIT_FILE: &str = "audit.redb";

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot open the audit log {path}: {source}")]
    Open {
        path: PathBuf,
        source: Box<redb::DatabaseError>,
    },
    #[error("audit log: {0}")]
    Redb(Box<redb::Error>),
    #[error("audit log entry {at_us} is unreadable: {source}")]
    Corrupt {
        at_us: u64,
        source: serde_json::Error,
    },
    #[error("the audit entry cannot be written: {0}")]
    DiskFull(#[from] DiskFull),
    #[error(transparent)]
    Reopening(#[from] Reopening),
    #[error("cannot encode the audit entry: {0}")]
    Encode(serde_json::Error),
}

macro_rules! impl_from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for AuditError {
            fn from(e: $t) -> Self {
                AuditError::Redb(Box::new(e.into()))
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

impl RedbFailure for AuditError {
    fn redb(&self) -> Option<&redb::Error> {
        match self {
            AuditError::Redb(e) => Some(e),
            _ => None,
        }
    }
}

/// Who a search was made for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Requester {
    /// The token's name, as configured at the domain it was presented to
    /// (`anonymous` where no token is required).
    pub token: String,
    /// The token's role (`search`, or `none` without a token).
    pub role: String,
    /// The domain the search was made at.
    pub domain: String,
}

/// One search, as logged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// Microseconds since the Unix epoch.
    pub at_us: u64,
    pub requester: Requester,
    pub key_type: String,
    /// HMAC-SHA-256 of the normalised value under a key derived from the
    /// cluster secret (first 128 bits, hex): equal values give equal
    /// digests, so an auditor can follow one person's searches without
    /// the log holding the identity number.
    pub value_digest: String,
    /// The IDs of the records this domain returned.
    pub records: Vec<String>,
}

pub struct AuditLog {
    file: RedbFile,
}

impl AuditLog {
    /// Opens (or creates) the log in `dir`, whose free space `space`
    /// watches (an entry may use the reserve: a search must not fail for
    /// want of the space that writes of records keep free).
    pub fn open(dir: &Path, space: Arc<DiskSpace>) -> Result<AuditLog, AuditError> {
        let path = dir.join(AUDIT_FILE);
        let file = RedbFile::open(&path, space).map_err(|source| AuditError::Open {
            path,
            source: Box::new(source),
        })?;
        file.write(None, |db| {
            let txn = db.begin_write()?;
            txn.open_table(ENTRIES)?;
            txn.commit()?;
            Ok::<_, AuditError>(())
        })?;
        Ok(AuditLog { file })
    }

    /// Appends `entry` (its `at_us` moved on if taken) durably.
    pub fn append(&self, mut entry: AuditEntry) -> Result<AuditEntry, AuditError> {
        self.file.write(None, |db| {
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(ENTRIES)?;
                if let Some(last) = table.last()? {
                    entry.at_us = entry.at_us.max(last.0.value() + 1);
                }
                let bytes = serde_json::to_vec(&entry).map_err(AuditError::Encode)?;
                table.insert(entry.at_us, bytes.as_slice())?;
            }
            txn.commit()?;
            Ok(entry)
        })
    }

    /// Up to `limit` entries from `since_us` on, oldest first.
    pub fn since(&self, since_us: u64, limit: usize) -> Result<Vec<AuditEntry>, AuditError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(ENTRIES)?;
            let mut entries = Vec::new();
            for item in table.range(since_us..)?.take(limit) {
                let (at, bytes) = item?;
                let entry = serde_json::from_slice(bytes.value()).map_err(|source| {
                    AuditError::Corrupt {
                        at_us: at.value(),
                        source,
                    }
                })?;
                entries.push(entry);
            }
            Ok(entries)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(dir: &Path) -> Arc<DiskSpace> {
        Arc::new(DiskSpace::new(dir, 0))
    }

    fn entry(at_us: u64, token: &str) -> AuditEntry {
        AuditEntry {
            at_us,
            requester: Requester {
                token: token.into(),
                role: "search".into(),
                domain: "A".into(),
            },
            key_type: "id_card".into(),
            value_digest: "00".into(),
            records: vec!["A-1".into()],
        }
    }

    #[test]
    fn entries_read_back_in_order_from_a_time_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path(), space(dir.path())).unwrap();
        log.append(entry(10, "a")).unwrap();
        // The same microsecond, or an earlier one (a clock step back),
        // still goes after the last entry.
        assert_eq!(log.append(entry(10, "b")).unwrap().at_us, 11);
        assert_eq!(log.append(entry(5, "c")).unwrap().at_us, 12);
        drop(log);
        let log = AuditLog::open(dir.path(), space(dir.path())).unwrap();
        let tokens = |since| -> Vec<String> {
            log.since(since, 10)
                .unwrap()
                .into_iter()
                .map(|e| e.requester.token)
                .collect()
        };
        assert_eq!(tokens(0), ["a", "b", "c"]);
        assert_eq!(tokens(11), ["b", "c"]);
        assert!(tokens(13).is_empty());
        assert_eq!(log.since(0, 1).unwrap().len(), 1);
    }
}
