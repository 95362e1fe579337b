//! The log of searches by private key that reached this domain: who asked
//! (token name and role, and from which domain), when, for which key type,
//! a keyed digest of the value (never the value) and which records were
//! returned. Append-only: nothing here removes or changes an entry.
//!
//! Its own redb file beside the store, so that the record store stays
//! about records; every entry is committed durably before the search is
//! answered, so no answer leaves without its entry.
//!
//! Tamper-evident: each entry carries the hash of the one before it and
//! its own (SHA-256 over its JSON with `hash` empty, `prev` included), so
//! an entry edited in the file, or one taken out of the middle, breaks the
//! chain, which is checked when the log is opened and by
//! [`AuditLog::verify`]. A log cut short or rolled back to an older copy
//! keeps a whole chain: that is caught by comparing its head with the one
//! the domain last anchored outside its own disk (the coordinator, see
//! `cluster::AuditAnchor::anchor_audit`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::local::redb_file::{RedbFailure, RedbFile, Reopening};
use crate::local::role::Acting;
use crate::local::space::{DiskFull, DiskSpace};

/// Entries by the microsecond they were written (made unique by moving a
/// collision one microsecond on), as JSON.
pub(crate) const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new("searches");

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
    Encode(#[source] serde_json::Error),
    #[error("the audit log's check failed: {0}")]
    Task(String),
}

crate::local::redb_file::from_redb_errors!(AuditError);

impl RedbFailure for AuditError {
    fn redb(&self) -> Option<&redb::Error> {
        match self {
            AuditError::Redb(e) => Some(e),
            _ => None,
        }
    }
}

/// Who a search (or a step of a request) was made for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Requester {
    /// The token's name, as configured at the domain it was presented to
    /// (`anonymous` where no token is required; empty for another archive).
    pub token: String,
    /// What it acted as: the token's role (`search`, `clerk`, …), `member`
    /// for another archive, `none` without a token.
    #[schema(value_type = String)]
    pub role: Acting,
    /// The domain the search was made at (for another archive, that
    /// archive).
    pub domain: String,
}

impl Requester {
    /// Another archive, as the log names it for what it asked or caused.
    pub fn archive(domain: &str) -> Requester {
        Requester {
            token: String::new(),
            role: Acting::Member,
            domain: domain.to_owned(),
        }
    }
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
    /// The IDs of the records this domain returned (for a step of a
    /// cross-archive request: the records it is about).
    pub records: Vec<String>,
    /// For a step of a cross-archive request, which (`request_submitted`,
    /// `request_released`, `review_approved`, …); absent for a search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The cross-archive request the step is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The `hash` of the entry before (64 zeros for the first).
    #[serde(default)]
    pub prev: String,
    /// SHA-256 (hex) of this entry's JSON with `hash` empty: the chain.
    #[serde(default)]
    pub hash: String,
}

/// The `prev` of a log's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

impl AuditEntry {
    /// The entry's hash, as the chain defines it.
    pub fn chain_hash(&self) -> Result<String, AuditError> {
        let unsealed = AuditEntry {
            hash: String::new(),
            ..self.clone()
        };
        let json = serde_json::to_vec(&unsealed).map_err(AuditError::Encode)?;
        Ok(hex::encode(Sha256::digest(json)))
    }
}

/// Where a log's chain ends: how many entries, and the last one's hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditHead {
    pub entries: u64,
    /// The last entry's `hash` ([`GENESIS`] for an empty log).
    pub hash: String,
}

/// What a check of the log found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditIntegrity {
    /// The chain is whole and agrees with the anchor, if one was read.
    pub intact: bool,
    pub head: AuditHead,
    /// The head last anchored outside the domain, if read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<AuditHead>,
    /// What is wrong, for people (empty when intact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Why the anchor could not be compared, if it could not (the chain
    /// alone was checked then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unanchored: Option<String>,
}

pub struct AuditLog {
    file: RedbFile,
    /// Appends one at a time, so each links to the one before.
    appending: Mutex<()>,
    /// The last check's findings (at open, then by `verify`).
    integrity: Mutex<AuditIntegrity>,
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
        let log = AuditLog {
            file,
            appending: Mutex::new(()),
            integrity: Mutex::new(AuditIntegrity {
                intact: true,
                head: AuditHead {
                    entries: 0,
                    hash: GENESIS.to_owned(),
                },
                anchor: None,
                problems: Vec::new(),
                unanchored: None,
            }),
        };
        let found = log.verify(None)?;
        if !found.intact {
            tracing::error!(problems = ?found.problems, "the audit log is not intact");
        }
        Ok(log)
    }

    /// Appends `entry` (its `at_us` moved on if taken, linked to the last
    /// entry) durably.
    pub fn append(&self, mut entry: AuditEntry) -> Result<AuditEntry, AuditError> {
        let _one_at_a_time = self.appending.lock();
        self.file.write(None, |db| {
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(ENTRIES)?;
                entry.prev = GENESIS.to_owned();
                if let Some(last) = table.last()? {
                    entry.at_us = entry.at_us.max(last.0.value() + 1);
                    entry.prev = decode(last.0.value(), last.1.value())?.hash;
                }
                entry.hash = entry.chain_hash()?;
                let bytes = serde_json::to_vec(&entry).map_err(AuditError::Encode)?;
                table.insert(entry.at_us, bytes.as_slice())?;
            }
            txn.commit()?;
            Ok::<_, AuditError>(())
        })?;
        let mut integrity = self.integrity.lock();
        integrity.head = AuditHead {
            entries: integrity.head.entries + 1,
            hash: entry.hash.clone(),
        };
        Ok(entry)
    }

    /// The file itself, for a backup's snapshot (`backup.rs`).
    pub(crate) fn file(&self) -> &RedbFile {
        &self.file
    }

    /// Where the chain ends now.
    pub fn head(&self) -> AuditHead {
        self.integrity.lock().head.clone()
    }

    /// The last check's findings, with the head as it is now.
    pub fn integrity(&self) -> AuditIntegrity {
        self.integrity.lock().clone()
    }

    /// Something outside the log shows it is not what it was (the
    /// coordinator's anchor refused its head).
    pub fn found_wanting(&self, problem: String) {
        let mut integrity = self.integrity.lock();
        integrity.intact = false;
        if !integrity.problems.contains(&problem) {
            integrity.problems.push(problem);
        }
    }

    /// Reads the whole log, checks its chain, and, given the head the
    /// domain last anchored outside its disk, that the log still holds
    /// that head where it was (not cut short, rolled back or replaced).
    pub fn verify(&self, anchor: Option<&AuditHead>) -> Result<AuditIntegrity, AuditError> {
        let _no_appends = self.appending.lock();
        let (head, mut problems, at_anchor) = self.file.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(ENTRIES)?;
            let mut problems = Vec::new();
            let mut prev = GENESIS.to_owned();
            let mut entries = 0u64;
            let mut at_anchor = None;
            for item in table.iter()? {
                let (at, bytes) = item?;
                entries += 1;
                match decode(at.value(), bytes.value()) {
                    Ok(entry) => {
                        if entry.prev != prev {
                            problems.push(format!(
                                "entry {} (#{entries}) does not follow the one before it: an entry was removed or replaced",
                                entry.at_us
                            ));
                        }
                        if !entry.chain_hash().is_ok_and(|h| h == entry.hash) {
                            problems.push(format!(
                                "entry {} (#{entries}) was changed after it was written",
                                entry.at_us
                            ));
                        }
                        prev = entry.hash;
                    }
                    Err(e) => problems.push(e.to_string()),
                }
                if anchor.is_some_and(|a| a.entries == entries) {
                    at_anchor = Some(prev.clone());
                }
            }
            Ok::<_, AuditError>((AuditHead { entries, hash: prev }, problems, at_anchor))
        })?;
        if let Some(anchor) = anchor {
            if anchor.entries > head.entries {
                problems.push(format!(
                    "the log holds {} entries, but {} were anchored: it was cut short, rolled back to an older copy or deleted",
                    head.entries, anchor.entries
                ));
            } else if anchor.entries > 0 && at_anchor.as_deref() != Some(anchor.hash.as_str()) {
                problems.push(format!(
                    "entry #{} is not the one anchored: the log was replaced",
                    anchor.entries
                ));
            }
        }
        let found = AuditIntegrity {
            intact: problems.is_empty(),
            head,
            anchor: anchor.cloned(),
            problems,
            unanchored: None,
        };
        *self.integrity.lock() = found.clone();
        Ok(found)
    }

    /// Up to `limit` entries from `since_us` on, oldest first.
    pub fn since(&self, since_us: u64, limit: usize) -> Result<Vec<AuditEntry>, AuditError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(ENTRIES)?;
            let mut entries = Vec::new();
            for item in table.range(since_us..)?.take(limit) {
                let (at, bytes) = item?;
                entries.push(decode(at.value(), bytes.value())?);
            }
            Ok(entries)
        })
    }
}

/// An entry as stored.
fn decode(at_us: u64, bytes: &[u8]) -> Result<AuditEntry, AuditError> {
    serde_json::from_slice(bytes).map_err(|source| AuditError::Corrupt { at_us, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// An audit log's entry as read from a damaged disk: read or
        /// refused, never a panic.
        #[test]
        fn any_bytes_read_as_an_audit_entry_or_are_refused_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        ) {
            if let Ok(entry) = decode(7, &bytes) {
                let _ = entry.chain_hash();
            }
        }
    }

    fn space(dir: &Path) -> Arc<DiskSpace> {
        Arc::new(DiskSpace::new(dir, 0))
    }

    fn entry(at_us: u64, token: &str) -> AuditEntry {
        AuditEntry {
            at_us,
            requester: Requester {
                token: token.into(),
                role: Acting::Client(crate::local::role::Role::Search),
                domain: "A".into(),
            },
            key_type: "id_card".into(),
            value_digest: "00".into(),
            records: vec!["A-1".into()],
            action: None,
            request: None,
            prev: String::new(),
            hash: String::new(),
        }
    }

    /// Three entries, then the log closed; its path.
    fn written(dir: &Path) -> (AuditHead, std::path::PathBuf) {
        let log = AuditLog::open(dir, space(dir)).unwrap();
        for token in ["a", "b", "c"] {
            log.append(entry(10, token)).unwrap();
        }
        (log.head(), dir.join(AUDIT_FILE))
    }

    /// Changes the stored entries with `change`, as someone with the file
    /// and redb would.
    fn tamper(path: &Path, change: impl FnOnce(&mut redb::Table<u64, &[u8]>)) {
        let db = redb::Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        change(&mut txn.open_table(ENTRIES).unwrap());
        txn.commit().unwrap();
    }

    fn problems_after(dir: &Path, anchor: Option<&AuditHead>) -> Vec<String> {
        let log = AuditLog::open(dir, space(dir)).unwrap();
        let found = log.verify(anchor).unwrap();
        assert_eq!(found.intact, found.problems.is_empty());
        found.problems
    }

    #[test]
    fn a_whole_log_verifies_and_agrees_with_its_anchor() {
        let dir = tempfile::tempdir().unwrap();
        let (head, _) = written(dir.path());
        assert_eq!(head.entries, 3);
        assert!(problems_after(dir.path(), Some(&head)).is_empty());
        // An older anchor is still a point of this chain.
        let log = AuditLog::open(dir.path(), space(dir.path())).unwrap();
        let first = log.since(0, 1).unwrap().remove(0);
        assert_eq!(first.prev, GENESIS);
        let older = AuditHead {
            entries: 1,
            hash: first.hash,
        };
        assert!(log.verify(Some(&older)).unwrap().intact);
    }

    #[test]
    fn an_entry_edited_in_the_file_is_detected_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = written(dir.path());
        tamper(&path, |table| {
            let bytes = table.get(11).unwrap().unwrap().value().to_vec();
            let mut e: AuditEntry = serde_json::from_slice(&bytes).unwrap();
            e.requester.token = "someone else".into();
            table
                .insert(11, serde_json::to_vec(&e).unwrap().as_slice())
                .unwrap();
        });
        let problems = problems_after(dir.path(), None);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("changed after it was written")),
            "{problems:?}"
        );
    }

    #[test]
    fn an_entry_removed_from_the_middle_breaks_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = written(dir.path());
        tamper(&path, |table| {
            table.remove(11).unwrap();
        });
        let problems = problems_after(dir.path(), None);
        assert!(
            problems.iter().any(|p| p.contains("does not follow")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_log_cut_short_rolled_back_or_replaced_disagrees_with_its_anchor() {
        let dir = tempfile::tempdir().unwrap();
        let (head, path) = written(dir.path());
        // The last entry gone: the chain is whole, the anchor is not met.
        tamper(&path, |table| {
            table.remove(12).unwrap();
        });
        assert!(problems_after(dir.path(), None).is_empty());
        let problems = problems_after(dir.path(), Some(&head));
        assert!(
            problems.iter().any(|p| p.contains("cut short")),
            "{problems:?}"
        );
        // The file deleted: a new, empty log.
        std::fs::remove_file(&path).unwrap();
        assert!(!problems_after(dir.path(), Some(&head)).is_empty());
        // Another log of as many entries: not the anchored one.
        let other = tempfile::tempdir().unwrap();
        let log = AuditLog::open(other.path(), space(other.path())).unwrap();
        for token in ["x", "y", "z"] {
            log.append(entry(10, token)).unwrap();
        }
        let problems = log.verify(Some(&head)).unwrap().problems;
        assert!(
            problems.iter().any(|p| p.contains("replaced")),
            "{problems:?}"
        );
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
