//! The filters saved at shutdown and loaded at the next start, so that a
//! domain need not rebuild them from the store: valid for one start, and
//! only if they match the store, the settings and the keying exactly.

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use xarchive_filter::CountingBloomFilter;

use super::{DomainError, State, FEED_CAPACITY};
use crate::local::filter::{ChangeFeed, FilterSettings, LocalFilter};
use crate::local::keys::Keying;
use crate::local::store::Store;

const SNAPSHOT_FILE: &str = "filter.snapshot";
const KEYS_SNAPSHOT_FILE: &str = "keys.snapshot";
const SNAPSHOT_META_FILE: &str = "filter.json";

/// Saved beside a snapshot: the store sequence it reflects.
#[derive(Serialize, Deserialize, PartialEq)]
struct SnapshotMeta {
    sequence: u64,
    records: u64,
    capacity: u64,
    settings: FilterSettings,
    key_capacity: u64,
    /// The key types' fingerprint and the filter key's id: a key filter
    /// saved under other types or another cluster secret is rebuilt.
    key_types: String,
    key_id: String,
}

/// The filters saved beside `store` in `dir`, if they match it, the
/// settings and the keying exactly.
pub(super) fn load(
    dir: &Path,
    store: &Store,
    settings: &FilterSettings,
    keying: &Keying,
) -> Option<State> {
    let meta: SnapshotMeta =
        serde_json::from_slice(&std::fs::read(dir.join(SNAPSHOT_META_FILE)).ok()?).ok()?;
    let records = store.len().ok()?;
    if meta.sequence != store.sequence().ok()?
        || meta.records != records
        || &meta.settings != settings
        || meta.key_types != keying.types.fingerprint()
        || meta.key_id != keying.hasher.filter_key_id()
    {
        return None;
    }
    let bytes = std::fs::read(dir.join(SNAPSHOT_FILE)).ok()?;
    let filter = LocalFilter::decode(settings.kind, &bytes, settings.log_capacity).ok()?;
    let bytes = std::fs::read(dir.join(KEYS_SNAPSHOT_FILE)).ok()?;
    let keys = CountingBloomFilter::decode(&bytes)
        .ok()?
        .with_log_capacity(settings.log_capacity);
    if filter.items() != records
        || keys.epoch() != filter.epoch()
        || keys.version() != filter.version()
    {
        return None;
    }
    let version = filter.version();
    Some(State {
        filter,
        capacity: meta.capacity,
        feed: ChangeFeed::new(FEED_CAPACITY, version),
        keys,
        key_capacity: meta.key_capacity,
    })
}

/// A snapshot is good for one start: once writes resume it is stale.
pub(super) fn spend(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(SNAPSHOT_META_FILE));
}

/// Saves `state`'s filters in `dir`, with what they reflect of `store`.
pub(super) fn save(
    dir: &Path,
    store: &Store,
    state: &State,
    settings: &FilterSettings,
    keying: &Keying,
) -> Result<(), DomainError> {
    let meta = SnapshotMeta {
        sequence: store.sequence()?,
        records: store.len()?,
        capacity: state.capacity,
        settings: settings.clone(),
        key_capacity: state.key_capacity,
        key_types: keying.types.fingerprint(),
        key_id: keying.hasher.filter_key_id(),
    };
    // The filters first, their meta (which makes them valid) last.
    write_atomically(&dir.join(SNAPSHOT_FILE), &state.filter.encode())?;
    write_atomically(&dir.join(KEYS_SNAPSHOT_FILE), &state.keys.encode())?;
    let meta = serde_json::to_vec_pretty(&meta).map_err(DomainError::SnapshotMeta)?;
    write_atomically(&dir.join(SNAPSHOT_META_FILE), &meta)?;
    Ok(())
}

/// Writes `bytes` to a temporary file, syncs it, and renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), DomainError> {
    let io = |source| DomainError::Snapshot {
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
    }
    Ok(())
}
