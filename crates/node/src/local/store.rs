//! The record store: one redb file per domain, every write committed
//! durably (fsync) before it is acknowledged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use redb::{
    MultimapTableDefinition, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition,
};

use crate::local::id::ArchiveId;
use crate::local::keys::KeyHasher;
use crate::local::private_file::make_private_dir;
use crate::local::record::{RecordBody, StoredRecord, StoredRecordError};
use crate::local::redb_file::{RedbFailure, RedbFile, Reopening};
use crate::local::space::{DiskFull, DiskSpace};

pub(crate) const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("records");
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Which records carry a key: the key's index digest (never the value)
/// to the IDs. Written in the same transaction as the records, so it is
/// exactly as durable as they are. (Stores written before keys existed
/// hold no keys, so an empty index is right for them.)
pub(crate) const KEYS: MultimapTableDefinition<&[u8], &str> = MultimapTableDefinition::new("keys");
/// Rises with every committed write transaction: a saved filter snapshot is
/// valid only for the sequence it was saved at.
pub(crate) const SEQUENCE: &str = "sequence";

/// The store's file inside the data directory.
pub const STORE_FILE: &str = "records.redb";

/// Whether a running domain holds the store in `dir` (redb locks its file
/// while open): what must be stopped before its files are changed by hand.
pub fn in_use(dir: &std::path::Path) -> bool {
    let path = dir.join(STORE_FILE);
    path.exists()
        && matches!(
            redb::Database::open(&path),
            Err(redb::DatabaseError::DatabaseAlreadyOpen)
        )
}

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
    #[error("cannot encode record {id} to store: {source}")]
    Unencodable {
        id: String,
        source: StoredRecordError,
    },
    #[error(transparent)]
    DiskFull(#[from] DiskFull),
    #[error(transparent)]
    Reopening(#[from] Reopening),
}

impl RedbFailure for StoreError {
    fn redb(&self) -> Option<&redb::Error> {
        match self {
            StoreError::Redb(e) => Some(e),
            _ => None,
        }
    }
}

crate::local::redb_file::from_redb_errors!(StoreError);

/// One write of a batch.
#[derive(Debug, Clone)]
pub enum Write {
    Put(ArchiveId, RecordBody),
    Delete(ArchiveId),
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Created,
    Replaced,
    Deleted,
    NotFound,
}

/// What a write did, and the keys its record carried before (empty when
/// there was none, it had none, or it was unreadable): the domain's key
/// filter removes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub outcome: WriteOutcome,
    pub old_keys: BTreeMap<String, String>,
}

/// Bytes a write may take beyond its records' content and titles (the
/// rest of the record, the key index, the pages copied on write): what the
/// disk must have free for it, above the reserve.
const WRITE_OVERHEAD: u64 = 16 * 1024;

pub struct Store {
    file: RedbFile,
    /// The sequence of the last commit this process saw succeed: after a
    /// reopening, a file at another sequence holds a commit that failed
    /// (see `redb_file.rs`), and the domain's filters must be rebuilt.
    committed: AtomicU64,
}

impl Store {
    /// Opens (or creates) the store in `dir`, whose free space `space`
    /// watches.
    pub fn open(dir: &Path, space: Arc<DiskSpace>) -> Result<Store, StoreError> {
        // The directory holds personal data: its owner's only (0700) when
        // created here. One that exists keeps its mode (`serve` warns).
        make_private_dir(dir).map_err(|source| StoreError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(STORE_FILE);
        let file = RedbFile::open(&path, space).map_err(|source| StoreError::Open {
            path: path.clone(),
            source: Box::new(source),
        })?;
        file.write(None, |db| {
            let txn = db.begin_write()?;
            txn.open_table(RECORDS)?;
            txn.open_multimap_table(KEYS)?;
            txn.open_table(META)?;
            txn.commit()?;
            Ok::<_, StoreError>(())
        })?;
        let store = Store {
            file,
            committed: AtomicU64::new(0),
        };
        store.committed.store(store.sequence()?, Ordering::Release);
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The file itself, for a backup's snapshot (`backup.rs`).
    pub(crate) fn file(&self) -> &RedbFile {
        &self.file
    }

    /// How many times the file was reopened after an I/O error.
    pub fn generation(&self) -> u64 {
        self.file.generation()
    }

    /// Whether the file holds a commit this process was told had failed
    /// (possible only after an `fsync` error: see `redb_file.rs`).
    pub fn holds_a_failed_commit(&self) -> Result<bool, StoreError> {
        Ok(self.sequence()? != self.committed.load(Ordering::Acquire))
    }

    /// Takes the file's contents as they are, after the domain rebuilt
    /// its filters from them.
    pub fn accept_contents(&self) -> Result<(), StoreError> {
        self.committed.store(self.sequence()?, Ordering::Release);
        Ok(())
    }

    pub fn get(&self, id: &ArchiveId) -> Result<Option<StoredRecord>, StoreError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
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
        })
    }

    /// Applies `writes` in order in one transaction and commits it durably,
    /// if the disk has room for them (else `DiskFull`, nothing changed).
    /// A replaced record keeps its creation time. `now_ms` stamps the rest.
    pub fn apply(&self, writes: &[Write], now_ms: i64) -> Result<Vec<Applied>, StoreError> {
        let need = writes
            .iter()
            .map(|write| match write {
                Write::Put(_, body) => {
                    (body.title.len() + body.content.as_ref().map_or(0, Vec::len)) as u64
                        + WRITE_OVERHEAD
                }
                Write::Delete(_) => WRITE_OVERHEAD,
            })
            .sum();
        self.file
            .write(Some(need), |db| self.apply_in(db, writes, now_ms))
    }

    fn apply_in(
        &self,
        db: &redb::Database,
        writes: &[Write],
        now_ms: i64,
    ) -> Result<Vec<Applied>, StoreError> {
        let txn = db.begin_write()?;
        let mut outcomes = Vec::with_capacity(writes.len());
        {
            let mut table = txn.open_table(RECORDS)?;
            let mut keys = txn.open_multimap_table(KEYS)?;
            for write in writes {
                // The record's old keys leave the index and its new keys
                // enter it in the transaction that writes the record.
                // (An unreadable old record keeps its index entries: a
                // search reads each record and keeps only true matches.)
                let previous = table
                    .get(id_of(write).as_str())?
                    .map(|old| StoredRecord::decode(old.value()).ok());
                if let Some(Some(old)) = &previous {
                    index_keys(&mut keys, id_of(write).as_str(), &old.keys, Index::Remove)?;
                }
                let outcome = match write {
                    Write::Put(id, body) => {
                        let (outcome, created_at) = match &previous {
                            Some(old) => (
                                WriteOutcome::Replaced,
                                old.as_ref().map_or(now_ms, |r| r.created_at_ms),
                            ),
                            None => (WriteOutcome::Created, now_ms),
                        };
                        let stored = StoredRecord::new(body, created_at, now_ms);
                        let bytes = stored.encode().map_err(|source| StoreError::Unencodable {
                            id: id.as_str().to_owned(),
                            source,
                        })?;
                        table.insert(id.as_str(), bytes.as_slice())?;
                        index_keys(&mut keys, id.as_str(), &body.keys, Index::Add)?;
                        outcome
                    }
                    Write::Delete(id) => {
                        if table.remove(id.as_str())?.is_some() {
                            WriteOutcome::Deleted
                        } else {
                            WriteOutcome::NotFound
                        }
                    }
                };
                let old_keys = match previous {
                    Some(Some(old)) => old.keys,
                    _ => BTreeMap::new(),
                };
                outcomes.push(Applied { outcome, old_keys });
            }
            if outcomes.iter().all(|a| a.outcome == WriteOutcome::NotFound) {
                // Nothing changed: leave the file exactly as it was.
                drop((table, keys));
                txn.abort()?;
                return Ok(outcomes);
            }
            let mut meta = txn.open_table(META)?;
            let sequence = meta.get(SEQUENCE)?.map_or(0, |v| v.value()) + 1;
            meta.insert(SEQUENCE, sequence)?;
            drop(meta);
            drop((table, keys));
            txn.commit()?;
            self.committed.store(sequence, Ordering::Release);
        }
        Ok(outcomes)
    }

    /// The records whose key `key_type` is `value` (normalised), in ID
    /// order, read from one snapshot.
    pub fn with_key(
        &self,
        key_type: &str,
        value: &str,
    ) -> Result<Vec<(ArchiveId, StoredRecord)>, StoreError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let keys = txn.open_multimap_table(KEYS)?;
            let records = txn.open_table(RECORDS)?;
            let mut found = Vec::new();
            for id in keys.get(KeyHasher::index_digest(key_type, value).as_slice())? {
                let id = id?;
                let Some(bytes) = records.get(id.value())? else {
                    continue;
                };
                let stored =
                    StoredRecord::decode(bytes.value()).map_err(|source| StoreError::Corrupt {
                        id: id.value().to_owned(),
                        source,
                    })?;
                // The index holds digests: keep only the records whose key
                // is truly this value (and only valid IDs, as ever written).
                if stored.keys.get(key_type).map(String::as_str) == Some(value) {
                    if let Ok(id) = ArchiveId::parse(id.value()) {
                        found.push((id, stored));
                    }
                }
            }
            Ok(found)
        })
    }

    /// The number of committed write transactions so far.
    pub fn sequence(&self) -> Result<u64, StoreError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let meta = txn.open_table(META)?;
            Ok(meta.get(SEQUENCE)?.map_or(0, |v| v.value()))
        })
    }

    pub fn len(&self) -> Result<u64, StoreError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            Ok(txn.open_table(RECORDS)?.len()?)
        })
    }

    /// Calls `f` with every ID in the store, in order, from one snapshot.
    pub fn for_each_id(&self, mut f: impl FnMut(&str)) -> Result<(), StoreError> {
        self.file.scan(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(RECORDS)?;
            for entry in table.iter()? {
                let (key, _) = entry?;
                f(key.value());
            }
            Ok(())
        })
    }

    /// Entries in the key index: the keys held, over all records.
    pub fn key_entries(&self) -> Result<u64, StoreError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            Ok(txn.open_multimap_table(KEYS)?.len()?)
        })
    }

    /// Calls `f` with the keys of every readable record that has any, from
    /// one snapshot (an unreadable record is skipped: its keys are unknown,
    /// and a search reads records, so it could not be found by them anyway).
    pub fn for_each_keys(
        &self,
        mut f: impl FnMut(&BTreeMap<String, String>),
    ) -> Result<(), StoreError> {
        self.file.scan(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(RECORDS)?;
            for entry in table.iter()? {
                let (_, value) = entry?;
                if let Ok(stored) = StoredRecord::decode(value.value()) {
                    if !stored.keys.is_empty() {
                        f(&stored.keys);
                    }
                }
            }
            Ok(())
        })
    }

    /// Takes a read snapshot, calls `begun`, then calls `f` with every ID
    /// in the snapshot and, when `with_keys`, its record's keys (None for
    /// an unreadable record). The snapshot is fixed once `begun` runs, so
    /// a caller holding the writer lock can let it go there and scan a
    /// store that no longer changes under it (`Domain::verify`).
    pub fn scan_snapshot(
        &self,
        with_keys: bool,
        begun: impl FnOnce(),
        mut f: impl FnMut(&str, Option<&BTreeMap<String, String>>),
    ) -> Result<(), StoreError> {
        self.file.scan(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(RECORDS)?;
            begun();
            for entry in table.iter()? {
                let (key, value) = entry?;
                if with_keys {
                    let stored = StoredRecord::decode(value.value()).ok();
                    f(key.value(), stored.as_ref().map(|s| &s.keys));
                } else {
                    f(key.value(), None);
                }
            }
            Ok(())
        })
    }

    /// IDs near each of `probes` in the table's order, from one snapshot:
    /// up to `per_probe` from each probe on, and as many just before the
    /// first, only those starting with `prefix` (a bounded read for "did
    /// you mean", whatever the store holds).
    pub fn ids_near(
        &self,
        prefix: &str,
        probes: &[String],
        per_probe: usize,
    ) -> Result<Vec<String>, StoreError> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(RECORDS)?;
            let mut ids = Vec::new();
            for (i, probe) in probes.iter().enumerate() {
                let probe = probe.as_str();
                for entry in table
                    .range::<&str>((Included(probe), Unbounded))?
                    .take(per_probe)
                {
                    let id = entry?.0.value().to_owned();
                    if !id.starts_with(prefix) {
                        break;
                    }
                    ids.push(id);
                }
                if i == 0 {
                    let before = table.range::<&str>((Unbounded, Excluded(probe)))?;
                    for entry in before.rev().take(per_probe) {
                        let id = entry?.0.value().to_owned();
                        if !id.starts_with(prefix) {
                            break;
                        }
                        ids.push(id);
                    }
                }
            }
            ids.sort();
            ids.dedup();
            Ok(ids)
        })
    }

    /// Up to `limit` IDs after `after` (exclusive), in order.
    pub fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>, StoreError> {
        self.file.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(RECORDS)?;
            let range = match after {
                Some(a) => table
                    .range::<&str>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))?,
                None => table.range::<&str>(..)?,
            };
            let mut ids = Vec::new();
            for entry in range.take(limit) {
                ids.push(entry?.0.value().to_owned());
            }
            Ok(ids)
        })
    }
}

fn id_of(write: &Write) -> &ArchiveId {
    match write {
        Write::Put(id, _) | Write::Delete(id) => id,
    }
}

enum Index {
    Add,
    Remove,
}

/// Adds or removes the index entries of one record's keys.
fn index_keys(
    table: &mut redb::MultimapTable<&[u8], &str>,
    id: &str,
    keys: &BTreeMap<String, String>,
    how: Index,
) -> Result<(), StoreError> {
    for (key_type, value) in keys {
        let digest = KeyHasher::index_digest(key_type, value);
        match how {
            Index::Add => table.insert(digest.as_slice(), id)?,
            Index::Remove => table.remove(digest.as_slice(), id)?,
        };
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Free space watched with no reserve.
    pub(crate) fn unlimited(dir: &Path) -> Arc<DiskSpace> {
        Arc::new(DiskSpace::new(dir, 0))
    }

    fn body(title: &str) -> RecordBody {
        RecordBody {
            title: title.into(),
            metadata: serde_json::Map::default(),
            content: None,
            keys: BTreeMap::default(),
        }
    }

    #[test]
    fn writes_report_what_they_did_and_keep_creation_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), unlimited(dir.path())).unwrap();
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
        let outcomes: Vec<WriteOutcome> = out.iter().map(|a| a.outcome).collect();
        assert_eq!(
            outcomes,
            [
                WriteOutcome::Created,
                WriteOutcome::Replaced,
                WriteOutcome::NotFound
            ]
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
            store.apply(&[Write::Delete(a.clone())], 30).unwrap()[0].outcome,
            WriteOutcome::Deleted
        );
        assert!(store.get(&a).unwrap().is_none());
    }

    fn keyed(title: &str, keys: &[(&str, &str)]) -> RecordBody {
        RecordBody {
            keys: keys
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..body(title)
        }
    }

    fn found(store: &Store, key_type: &str, value: &str) -> Vec<String> {
        store
            .with_key(key_type, value)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id.into_string())
            .collect()
    }

    #[test]
    fn a_replaced_record_is_found_by_its_new_keys_only_and_a_deleted_one_by_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), unlimited(dir.path())).unwrap();
        let a = ArchiveId::parse("A-1").unwrap();
        let b = ArchiveId::parse("B-1").unwrap();
        store
            .apply(
                &[
                    Write::Put(a.clone(), keyed("a", &[("id_card", "X1"), ("cert", "c")])),
                    Write::Put(b.clone(), keyed("b", &[("id_card", "X1")])),
                ],
                1,
            )
            .unwrap();
        assert_eq!(found(&store, "id_card", "X1"), ["A-1", "B-1"]);
        // Same value under another type is another key.
        assert!(found(&store, "cert", "X1").is_empty());
        let replaced = store
            .apply(
                &[Write::Put(a.clone(), keyed("a", &[("id_card", "X2")]))],
                2,
            )
            .unwrap();
        // The keys it carried before are reported, for the key filter.
        assert_eq!(
            replaced[0].old_keys,
            keyed("", &[("id_card", "X1"), ("cert", "c")]).keys
        );
        assert_eq!(found(&store, "id_card", "X1"), ["B-1"]);
        assert_eq!(found(&store, "id_card", "X2"), ["A-1"]);
        assert!(found(&store, "cert", "c").is_empty());
        store.apply(&[Write::Delete(b)], 3).unwrap();
        assert!(found(&store, "id_card", "X1").is_empty());
        // The index survives a reopen.
        drop(store);
        let store = Store::open(dir.path(), unlimited(dir.path())).unwrap();
        assert_eq!(found(&store, "id_card", "X2"), ["A-1"]);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;
        use std::collections::{BTreeMap, BTreeSet};

        #[derive(Debug, Clone)]
        enum Op {
            Put(u8, Vec<(u8, u8)>),
            Delete(u8),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (0u8..6, proptest::collection::vec((0u8..2, 0u8..3), 0..3))
                    .prop_map(|(id, keys)| Op::Put(id, keys)),
                (0u8..6).prop_map(Op::Delete),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            /// After any sequence of puts, replacements and deletes, in
            /// batches, a search by key finds exactly the records that
            /// carry it now.
            #[test]
            fn a_search_by_key_finds_exactly_the_records_that_carry_it(
                batches in proptest::collection::vec(proptest::collection::vec(op(), 1..4), 1..8)
            ) {
                let dir = tempfile::tempdir().unwrap();
                let store = Store::open(dir.path(), unlimited(dir.path())).unwrap();
                let mut model: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
                for batch in &batches {
                    let writes: Vec<Write> = batch
                        .iter()
                        .map(|op| match op {
                            Op::Put(id, keys) => {
                                let keys: BTreeMap<String, String> = keys
                                    .iter()
                                    .map(|(t, v)| (format!("t{t}"), format!("v{v}")))
                                    .collect();
                                let id = format!("R-{id}");
                                model.insert(id.clone(), keys.clone());
                                Write::Put(
                                    ArchiveId::parse(&id).unwrap(),
                                    RecordBody { keys, ..body("r") },
                                )
                            }
                            Op::Delete(id) => {
                                let id = format!("R-{id}");
                                model.remove(&id);
                                Write::Delete(ArchiveId::parse(&id).unwrap())
                            }
                        })
                        .collect();
                    store.apply(&writes, 1).unwrap();
                }
                for t in 0..2 {
                    for v in 0..3 {
                        let (t, v) = (format!("t{t}"), format!("v{v}"));
                        let expected: BTreeSet<String> = model
                            .iter()
                            .filter(|(_, keys)| keys.get(&t) == Some(&v))
                            .map(|(id, _)| id.clone())
                            .collect();
                        let got: BTreeSet<String> = found(&store, &t, &v).into_iter().collect();
                        prop_assert_eq!(got, expected);
                    }
                }
            }
        }
    }
}
