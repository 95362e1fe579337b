//! One domain: the store and the filter kept in step with it.
//!
//! The store is the source of truth. The filter changes only after the
//! store has committed, under the same writer lock, so that after every
//! write the filter holds exactly the store's IDs: an ID is inserted when
//! its record is created (not when replaced) and removed when its record is
//! deleted, never otherwise (removing an absent ID would corrupt it).
//!
//! Beside it, the key filter holds an element for every key of every
//! stored record (see [`Keying`]), kept the same way. It is served only to
//! members. Both filters share one epoch and, after every write, one
//! version, so the one position a domain publishes says how current a
//! peer's copy of either is.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tokio::sync::watch;
use xarchive_filter::{CountingBloomFilter, Delta, DeltaError, GeometryError};

use crate::local::filter::{
    counting_stats, size_class, ChangeFeed, FilterKind, FilterSettings, FilterStats, LocalFilter,
};
use crate::local::id::ArchiveId;
use crate::local::id_profile::{self, IdProfile};
use crate::local::keys::Keying;
use crate::local::record::{now_ms, Record, RecordBody};
use crate::local::space::{DiskSpace, SpaceStats};
use crate::local::store::{Store, StoreError, Write, WriteOutcome};

mod snapshot;

/// The key filter's size when the cluster declares no key types.
const MIN_KEY_CAPACITY: u64 = 64;
/// The smallest filter (of IDs, or of keys).
const MIN_CAPACITY: u64 = 1_024;

/// What a filter is sized for: the size class above the `held` items
/// (and at least `expected_items` and `at_least`), one of 2^m and
/// 3 · 2^(m−1) ([`size_class`]), so that the filters of a cluster's many
/// domains fall into a dozen geometries, each bit-sliced at their peers
/// (docs/SCALING.md). The rounding leaves room to grow, 1.2 × on average;
/// a filter that outgrows it is rebuilt twice as large (a class again).
pub fn capacity_for(settings: &FilterSettings, held: u64, at_least: u64) -> u64 {
    let floor = (held + 1)
        .max(settings.expected_items)
        .max(at_least)
        .max(MIN_CAPACITY);
    size_class(floor)
}
/// Changed IDs kept for cache eviction at peers.
const FEED_CAPACITY: usize = 1 << 16;

/// A domain failure (bad input is refused earlier, at the API).
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid filter settings: {0}")]
    Settings(#[from] GeometryError),
    #[error("cannot write the filter snapshot {path}: {source}")]
    Snapshot {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode the filter snapshot's description: {0}")]
    SnapshotMeta(#[source] serde_json::Error),
    #[error("a verification of the filters is already running; ask again when it ends")]
    VerifyRunning,
    /// A store that loses a record its own commit just wrote, under the
    /// writer lock: not expected of redb, reported rather than assumed.
    #[error("the record just put could not be read back")]
    PutNotReadBack(ArchiveId),
    /// The blocking task doing the work panicked or was cancelled.
    #[error("the store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Where the filter stands: peers compare this with their replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub epoch: u64,
    pub version: u64,
}

impl Position {
    /// Whether a position read later may replace `known`: a later version
    /// of the same epoch, or another epoch (epochs are random, so a new
    /// one cannot be told from an old one but by when it was read).
    pub fn replaces(self, known: Position) -> bool {
        self.epoch != known.epoch || self.version > known.version
    }
}

/// A filter as peers and browsers receive it (`/v1/filter`,
/// `/v1/filter/keys`): what a copy is made from. Not to be confused with a
/// *published* position, which is one recorded in the coordinator.
pub struct FilterView {
    pub kind: FilterKind,
    pub position: Position,
    pub bytes: Vec<u8>,
}

/// Why a delta cannot be served: the peer must take a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeltaRefusal {
    #[error("the filter was rebuilt: epoch is now {current}")]
    EpochChanged { current: u64 },
    #[error("changes since version {since} are no longer held; take a snapshot")]
    SnapshotRequired { since: u64 },
    #[error("version {since} is ahead of the filter (at {current})")]
    FutureVersion { since: u64, current: u64 },
    #[error("the {changes} changes since version {since} outweigh the filter's {bytes} bytes; take a snapshot")]
    SnapshotSmaller {
        since: u64,
        changes: usize,
        bytes: u64,
    },
}

/// Refuses a delta that would be no smaller than a snapshot (a change
/// takes at least one byte): a peer far behind, after an import, then
/// fetches the snapshot. A county archive importing a million records
/// sets about six million bits of a filter of twenty million.
fn smaller_than_snapshot(delta: Delta) -> Result<Delta, DeltaRefusal> {
    let bytes = delta.num_cells * u64::from(delta.cell_bits) / 8;
    if delta.changes.len() as u64 > bytes {
        return Err(DeltaRefusal::SnapshotSmaller {
            since: delta.from_version,
            changes: delta.changes.len(),
            bytes,
        });
    }
    Ok(delta)
}

/// Result of comparing the filter with one rebuilt from the store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct VerifyReport {
    pub consistent: bool,
    pub store_records: u64,
    pub filter_items: u64,
    /// Stored IDs the filter does not hold (false negatives): must be 0.
    pub missing: u64,
    /// The key filter matches one rebuilt from the stored records' keys.
    pub key_filter_consistent: bool,
}

/// What the domain knows of itself, for `/v1/stats`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct DomainStats {
    pub domain: String,
    pub records: u64,
    pub store_bytes: u64,
    pub filter: FilterStats,
    /// The data directory's free space, and whether writes are admitted.
    pub space: SpaceStats,
}

struct State {
    filter: LocalFilter,
    /// Records the filter was sized for.
    capacity: u64,
    feed: ChangeFeed,
    /// Every key element of the stored records; at `filter`'s epoch, and
    /// at its version after every write.
    keys: CountingBloomFilter,
    /// Key elements the key filter was sized for.
    key_capacity: u64,
}

impl State {
    /// Brings both filters to the higher of their versions, by versions
    /// that change no cell: after this, a delta of either since a
    /// published version is exactly the change since that position.
    fn align(&mut self) {
        while self.keys.version() < self.filter.version() {
            self.keys.touch();
        }
        while self.filter.version() < self.keys.version() {
            self.filter.touch();
        }
    }

    fn position(&self) -> Position {
        Position {
            epoch: self.filter.epoch(),
            version: self.filter.version(),
        }
    }

    /// Takes a record's keys from `old` to `new`: elements of keys that
    /// changed leave, new ones enter.
    fn change_keys(
        &mut self,
        keying: &Keying,
        old: &BTreeMap<String, String>,
        new: &BTreeMap<String, String>,
    ) {
        let changed = |from: &BTreeMap<String, String>, to: &BTreeMap<String, String>| {
            from.iter()
                .filter(|(t, v)| to.get(*t) != Some(*v))
                .filter_map(|(t, v)| keying.element(t, v))
                .collect::<Vec<_>>()
        };
        for element in changed(old, new) {
            if self.keys.remove(&element).is_err() {
                tracing::error!("a removed key was not in the key filter");
            }
        }
        for element in changed(new, old) {
            self.keys.insert(element);
        }
    }
}

pub struct Domain {
    name: String,
    dir: PathBuf,
    store: Store,
    space: Arc<DiskSpace>,
    /// The store's reopenings taken into account (see `heal`).
    store_generation: Mutex<u64>,
    settings: FilterSettings,
    keying: Keying,
    state: RwLock<State>,
    /// One writer at a time: store commit, then filter update.
    writer: Mutex<()>,
    /// One verification at a time (`verify`).
    verifying: Mutex<()>,
    position: watch::Sender<Position>,
}

impl Domain {
    /// Opens the domain in `dir`: the store, then the filter, from a saved
    /// snapshot if it matches the store exactly, else rebuilt from it.
    /// `space` watches the directory's free space for writes.
    pub fn open(
        name: &str,
        dir: &Path,
        settings: FilterSettings,
        keying: Keying,
        space: Arc<DiskSpace>,
    ) -> Result<Domain, DomainError> {
        // Refuse bad settings before touching anything.
        LocalFilter::new(&settings, 1)?;
        let store = Store::open(dir, space.clone())?;
        let started = Instant::now();
        let (state, how) = match snapshot::load(dir, &store, &settings, &keying) {
            Some(state) => (state, "loaded the saved filter snapshot"),
            None => (
                Self::rebuild(&store, &settings, &keying, 0, 0)?,
                "rebuilt the filters from the store",
            ),
        };
        snapshot::spend(dir);
        tracing::info!(
            domain = name,
            records = state.filter.items(),
            key_elements = state.keys.items(),
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "{how}"
        );
        let position = state.position();
        Ok(Domain {
            name: name.to_owned(),
            dir: dir.to_owned(),
            store_generation: Mutex::new(store.generation()),
            store,
            space,
            settings,
            keying,
            state: RwLock::new(state),
            writer: Mutex::new(()),
            verifying: Mutex::new(()),
            position: watch::channel(position).0,
        })
    }

    /// New filters from every ID and key in the store, in a new epoch; the
    /// ID filter's capacity doubles until it holds every ID.
    fn rebuild(
        store: &Store,
        settings: &FilterSettings,
        keying: &Keying,
        at_least: u64,
        keys_at_least: u64,
    ) -> Result<State, DomainError> {
        let mut capacity = capacity_for(settings, store.len()?, at_least);
        let filter = loop {
            let mut filter = LocalFilter::new(settings, capacity)?;
            let mut full = false;
            store.for_each_id(|id| full = full || filter.insert(id).is_err())?;
            if !full {
                break filter;
            }
            capacity = capacity.saturating_mul(2);
        };
        let (keys, key_capacity) = Self::rebuild_keys(store, settings, keying, keys_at_least)?;
        let mut state = State {
            feed: ChangeFeed::new(FEED_CAPACITY, 0),
            filter,
            capacity,
            keys,
            key_capacity,
        };
        state.align();
        let epoch = rand::random::<u64>() | 1;
        state.filter.set_epoch(epoch);
        state.keys.set_epoch(epoch);
        state.feed = ChangeFeed::new(FEED_CAPACITY, state.filter.version());
        Ok(state)
    }

    /// A key filter of every key in the store, sized like the ID filter;
    /// the smallest one when no key types are declared.
    fn rebuild_keys(
        store: &Store,
        settings: &FilterSettings,
        keying: &Keying,
        at_least: u64,
    ) -> Result<(CountingBloomFilter, u64), DomainError> {
        let capacity = if keying.types.is_empty() {
            MIN_KEY_CAPACITY
        } else {
            capacity_for(settings, store.key_entries()?, at_least)
        };
        let rate = settings.rate_for(capacity);
        let geometry = xarchive_filter::BloomGeometry::for_capacity(capacity, rate)?;
        let mut keys = CountingBloomFilter::new(geometry).with_log_capacity(settings.log_capacity);
        fill_keys(store, keying, &mut keys)?;
        Ok((keys, capacity))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store, for a backup's snapshot (`backup.rs`).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub fn settings(&self) -> &FilterSettings {
        &self.settings
    }

    /// The key types and the hashing of their values.
    pub fn keying(&self) -> &Keying {
        &self.keying
    }

    /// Applies `writes` in order, durably, then updates the filter to match.
    pub fn apply(&self, writes: &[Write]) -> Result<Vec<WriteOutcome>, DomainError> {
        let _writer = self.writer.lock();
        self.apply_holding_the_writer(writes)
    }

    /// Puts one record and reads it back as stored, with no other write
    /// between the two: the PUT's answer is the record it wrote, never
    /// one a concurrent writer replaced or deleted in the meantime.
    pub fn put(
        &self,
        id: ArchiveId,
        body: RecordBody,
    ) -> Result<(WriteOutcome, Record), DomainError> {
        let _writer = self.writer.lock();
        let outcome = self.apply_holding_the_writer(&[Write::Put(id.clone(), body)])?[0];
        let record = self.get(&id)?.ok_or(DomainError::PutNotReadBack(id))?;
        Ok((outcome, record))
    }

    fn apply_holding_the_writer(&self, writes: &[Write]) -> Result<Vec<WriteOutcome>, DomainError> {
        self.heal()?;
        let applied = match self.store.apply(writes, now_ms()) {
            Ok(applied) => applied,
            Err(e) => {
                if let Err(heal) = self.heal() {
                    tracing::warn!(domain = %self.name, error = %heal, "the store is not usable yet");
                }
                return Err(e.into());
            }
        };
        let mut state = self.state.write();
        let mut rebuild = false;
        let no_keys = BTreeMap::new();
        for (write, applied) in writes.iter().zip(&applied) {
            let new_keys = match (write, applied.outcome) {
                (Write::Put(_, body), WriteOutcome::Created | WriteOutcome::Replaced) => &body.keys,
                _ => &no_keys,
            };
            state.change_keys(&self.keying, &applied.old_keys, new_keys);
            match (write, &applied.outcome) {
                (Write::Put(id, _), WriteOutcome::Created) => {
                    // Full: the rebuild below reads this ID from the store.
                    rebuild = state.filter.insert(id.as_str()).is_err();
                    if rebuild {
                        break;
                    }
                }
                (Write::Put(id, _), WriteOutcome::Replaced) => {
                    state.filter.touch();
                    let version = state.filter.version();
                    state.feed.push(version, id.clone());
                }
                (Write::Delete(id), WriteOutcome::Deleted) => {
                    if state.filter.remove(id.as_str()).is_err() {
                        tracing::error!(domain = %self.name, %id, "deleted record was not in the filter");
                    }
                    let version = state.filter.version();
                    state.feed.push(version, id.clone());
                }
                _ => {}
            }
        }
        let ids_outgrown = rebuild || state.filter.outgrown(state.capacity);
        let keys_outgrown = state.keys.items() > state.key_capacity;
        if ids_outgrown || keys_outgrown {
            // Both are rebuilt (one epoch); only an outgrown one doubles.
            let grow =
                |capacity: u64, outgrown: bool| capacity.saturating_mul(1 + u64::from(outgrown));
            let at_least = grow(state.capacity, ids_outgrown);
            let keys_at_least = grow(state.key_capacity, keys_outgrown);
            let started = Instant::now();
            *state = Self::rebuild(
                &self.store,
                &self.settings,
                &self.keying,
                at_least,
                keys_at_least,
            )?;
            // A growing domain's filters double as it grows: routine.
            tracing::info!(
                domain = %self.name,
                capacity = state.capacity,
                key_capacity = state.key_capacity,
                elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "filters rebuilt for more records, in a new epoch"
            );
        }
        state.align();
        let position = state.position();
        drop(state);
        self.position.send_replace(position);
        Ok(applied.into_iter().map(|a| a.outcome).collect())
    }

    /// After the store was reopened (an I/O error: `redb_file.rs`), makes
    /// sure the filters hold what the file holds: a commit whose `fsync`
    /// failed may be on the disk after all, and then the filters are
    /// rebuilt from the store, in a new epoch, so that no record the store
    /// holds is missing from them. Called with the writer lock held.
    fn heal(&self) -> Result<(), DomainError> {
        let mut seen = self.store_generation.lock();
        let generation = self.store.generation();
        if *seen == generation {
            return Ok(());
        }
        if self.store.holds_a_failed_commit()? {
            let mut state = self.state.write();
            *state = Self::rebuild(
                &self.store,
                &self.settings,
                &self.keying,
                state.capacity,
                state.key_capacity,
            )?;
            state.align();
            let position = state.position();
            drop(state);
            self.position.send_replace(position);
            self.store.accept_contents()?;
            tracing::warn!(
                domain = %self.name,
                "the store holds a write whose commit had failed; filters rebuilt from it, in a new epoch"
            );
        }
        *seen = generation;
        Ok(())
    }

    /// The record `id`, without the values of its private keys (their
    /// types are listed in `keys_withheld`).
    ///
    /// Why: a record read by its ID reaches anyone with a read token, and
    /// any token can list every ID, so a value returned here would let
    /// every role read every identity number, unaudited. So no record
    /// read by its ID carries a private key's value, to anyone: not
    /// `GET /v1/archives/{id}`, not the PUT's answer, not a lookup (local,
    /// or from a peer, which reads the peer's records through this), not
    /// the cache of other domains' records (filled from those reads).
    /// Public key types keep their values. The one door to private values
    /// is [`Domain::search`] (`POST /v1/search`, for the search role),
    /// which is put on record in the audit log of every domain it reaches.
    pub fn get(&self, id: &ArchiveId) -> Result<Option<Record>, DomainError> {
        Ok(self.store.get(id)?.map(|stored| {
            let mut record = stored.into_record(id.clone(), &self.name);
            record.withhold_private_keys(&self.keying.types);
            record
        }))
    }

    /// The record with every key's value, private ones included: for the
    /// release policy, which compares a requesting applicant's digest
    /// with the record's identity numbers (`requests/holding.rs`); the copies it
    /// releases carry title, metadata and content, never keys.
    pub fn get_with_keys(&self, id: &ArchiveId) -> Result<Option<Record>, DomainError> {
        Ok(self
            .store
            .get(id)?
            .map(|stored| stored.into_record(id.clone(), &self.name)))
    }

    /// The records here whose key `key_type` is `value` (normalised),
    /// with every key's value, private ones included: the caller
    /// (`Node::search`) puts the search on record before it answers.
    pub fn search(&self, key_type: &str, value: &str) -> Result<Vec<Record>, DomainError> {
        Ok(self
            .store
            .with_key(key_type, value)?
            .into_iter()
            .map(|(id, stored)| stored.into_record(id, &self.name))
            .collect())
    }

    /// The filter's answer: false means the domain certainly lacks `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.state.read().filter.contains(id)
    }

    pub fn position(&self) -> Position {
        *self.position.borrow()
    }

    /// Follows the filter's position as writes land.
    pub fn subscribe(&self) -> watch::Receiver<Position> {
        self.position.subscribe()
    }

    pub fn filter_view(&self) -> FilterView {
        let state = self.state.read();
        FilterView {
            kind: state.filter.kind(),
            position: state.position(),
            bytes: state.filter.peer_view(),
        }
    }

    /// The size of the published filter as a reader holds it
    /// ([`LocalFilter::peer_view_bytes`]), without encoding it.
    pub fn filter_view_bytes(&self) -> u64 {
        self.state.read().filter.peer_view_bytes()
    }

    /// The key filter's bit view, for members.
    pub fn key_filter_view(&self) -> FilterView {
        let state = self.state.read();
        FilterView {
            kind: FilterKind::Counting,
            position: state.position(),
            bytes: state.keys.bit_view().encode(),
        }
    }

    /// The key filter's changes since `since` in `epoch`, or why a
    /// snapshot is needed instead.
    pub fn key_delta(&self, epoch: u64, since: u64) -> Result<Delta, DeltaRefusal> {
        let state = self.state.read();
        let current = state.keys.epoch();
        if epoch != current {
            return Err(DeltaRefusal::EpochChanged { current });
        }
        smaller_than_snapshot(state.keys.flips_since(since).map_err(refusal)?)
    }

    /// The changes (cells, and IDs replaced or deleted) since `since` in
    /// `epoch`, or why a snapshot is needed instead.
    pub fn delta(&self, epoch: u64, since: u64) -> Result<(Delta, Vec<ArchiveId>), DeltaRefusal> {
        let state = self.state.read();
        let current = state.filter.epoch();
        if epoch != current {
            return Err(DeltaRefusal::EpochChanged { current });
        }
        let delta = smaller_than_snapshot(state.filter.delta_since(since).map_err(refusal)?)?;
        let changed = state
            .feed
            .since(since)
            .ok_or(DeltaRefusal::SnapshotRequired { since })?;
        Ok((delta, changed))
    }

    /// What `/v1/stats` shows. Not the key filter's figures: its fill
    /// tells how many keys the domain holds, which read tokens need not
    /// know (see [`Domain::key_filter_stats`]).
    pub fn stats(&self) -> Result<DomainStats, DomainError> {
        let filter = self.state.read().filter.stats();
        Ok(DomainStats {
            domain: self.name.clone(),
            records: self.store.len()?,
            store_bytes: std::fs::metadata(self.store.path()).map_or(0, |m| m.len()),
            filter,
            space: self.space.stats(),
        })
    }

    /// The key filter's figures (its size, fill and rate), for the
    /// process itself and its tests; served to nobody.
    pub fn key_filter_stats(&self) -> FilterStats {
        counting_stats(&self.state.read().keys)
    }

    /// The archive numbers held here nearest to `query` (a form read by
    /// `profile`), nearest first: "did you mean" after a lookup that found
    /// nothing. Reads a few thousand IDs at most (`id_profile::probes`).
    pub fn nearest(&self, profile: &IdProfile, query: &str) -> Result<Vec<String>, DomainError> {
        let (prefix, mut probes) = id_profile::probes(query);
        // Where an ID stored before the profile, with an ASCII dot for the
        // separator, sorts.
        if let Some(separator) = profile.separator.chars().next() {
            let dotted = query.replace(separator, ".");
            if dotted != query {
                probes.insert(1, dotted);
            }
        }
        if prefix.is_empty() {
            return Ok(Vec::new());
        }
        let candidates = self
            .store
            .ids_near(&prefix, &probes, id_profile::PER_PROBE)?;
        Ok(id_profile::nearest(profile, query, &candidates))
    }

    /// Up to `limit` IDs after `after`, in order.
    pub fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>, DomainError> {
        Ok(self.store.list(after, limit)?)
    }

    /// Rebuilds a filter of the same shape from the store and compares.
    /// Counting filters must match counter for counter; a cuckoo table
    /// depends on insertion order, so it must hold every stored ID and the
    /// same number of items.
    ///
    /// Writes go on meanwhile: under the writer lock (no commit half
    /// done, so the filters match the store) both filters are copied and
    /// a read snapshot of the store is taken, and the lock is let go
    /// before the rebuild (1.6 s at a million records), which compares
    /// the copies with that snapshot. One verification runs at a time;
    /// another asked for meanwhile is refused with
    /// [`DomainError::VerifyRunning`].
    pub fn verify(&self) -> Result<VerifyReport, DomainError> {
        self.verify_with(|| {})
    }

    /// [`Domain::verify`], calling `meanwhile` once the snapshot is taken
    /// and the writer lock let go, before the rebuild (tests write there).
    fn verify_with(&self, meanwhile: impl FnOnce()) -> Result<VerifyReport, DomainError> {
        let Some(_one) = self.verifying.try_lock() else {
            return Err(DomainError::VerifyRunning);
        };
        let mut writer = Some(self.writer.lock());
        let (filter, keys) = {
            let state = self.state.read();
            (state.filter.clone(), state.keys.clone())
        };
        let mut rebuilt = filter.empty_like();
        let mut rebuilt_keys = CountingBloomFilter::new(keys.geometry());
        let with_keys = !self.keying.types.is_empty();
        let mut missing = 0u64;
        let mut records = 0u64;
        self.store.scan_snapshot(
            with_keys,
            || {
                drop(writer.take());
                meanwhile();
            },
            |id, held| {
                records += 1;
                let _ = rebuilt.insert(id);
                missing += u64::from(!filter.contains(id));
                for element in held.into_iter().flat_map(|k| self.keying.elements(k)) {
                    rebuilt_keys.insert(element);
                }
            },
        )?;
        drop(writer);
        let same = match (&filter, &rebuilt) {
            (LocalFilter::Counting(a), LocalFilter::Counting(b)) => a.matches_rebuild(b),
            _ => filter.items() == records,
        };
        let key_filter_consistent = keys.matches_rebuild(&rebuilt_keys);
        Ok(VerifyReport {
            consistent: same && missing == 0 && key_filter_consistent,
            store_records: records,
            filter_items: filter.items(),
            missing,
            key_filter_consistent,
        })
    }

    /// Saves the filter so that the next start can skip the rebuild. Call
    /// when no more writes will come (at shutdown).
    pub fn close(&self) -> Result<(), DomainError> {
        let _writer = self.writer.lock();
        let state = self.state.read();
        snapshot::save(&self.dir, &self.store, &state, &self.settings, &self.keying)?;
        tracing::info!(domain = %self.name, "saved the filter snapshot");
        Ok(())
    }
}

/// Inserts the element of every key in `store` into `keys` (nothing to
/// read when no key types are declared).
fn fill_keys(
    store: &Store,
    keying: &Keying,
    keys: &mut CountingBloomFilter,
) -> Result<(), StoreError> {
    if keying.types.is_empty() {
        return Ok(());
    }
    store.for_each_keys(|held| {
        for element in keying.elements(held) {
            keys.insert(element);
        }
    })
}

/// A filter's refusal to give a delta, as the domain states it.
fn refusal(e: DeltaError) -> DeltaRefusal {
    match e {
        DeltaError::SnapshotRequired { since, .. } => DeltaRefusal::SnapshotRequired { since },
        DeltaError::FutureVersion { since, current } => {
            DeltaRefusal::FutureVersion { since, current }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::store::tests::unlimited;

    /// Domain A in `dir`, with no disk reserve.
    fn open_in(dir: &Path, settings: FilterSettings, keying: Keying) -> Domain {
        Domain::open("A", dir, settings, keying, unlimited(dir)).unwrap()
    }

    fn put(id: &str) -> Write {
        Write::Put(
            ArchiveId::parse(id).unwrap(),
            RecordBody {
                title: id.into(),
                metadata: serde_json::Map::default(),
                content: None,
                keys: BTreeMap::default(),
            },
        )
    }

    fn del(id: &str) -> Write {
        Write::Delete(ArchiveId::parse(id).unwrap())
    }

    fn keying(secret: Option<&str>) -> Keying {
        Keying {
            types: crate::local::keys::KeyTypes::new(crate::config::default_key_types()).unwrap(),
            hasher: crate::local::keys::KeyHasher::new(secret),
        }
    }

    fn keyed(id: &str, card: &str) -> Write {
        let Write::Put(id, mut body) = put(id) else {
            unreachable!()
        };
        body.keys = BTreeMap::from([("id_card".to_string(), card.to_string())]);
        Write::Put(id, body)
    }

    fn small() -> FilterSettings {
        FilterSettings {
            expected_items: 100,
            ..FilterSettings::default()
        }
    }

    #[test]
    fn filter_follows_the_store_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_in(dir.path(), small(), keying(Some("secret")));
        d.apply(&[put("a"), put("b"), put("a"), del("b"), del("zz")])
            .unwrap();
        assert!(d.contains("a"));
        assert!(d.verify().unwrap().consistent);
        let position = d.position();
        d.close().unwrap();
        drop(d);
        // Clean restart: the snapshot is used, so the epoch is kept.
        let d = open_in(dir.path(), small(), keying(Some("secret")));
        assert_eq!(d.position(), position);
        assert!(d.verify().unwrap().consistent);
        d.apply(&[put("c")]).unwrap();
        drop(d);
        // No close: the next start rebuilds, in a new epoch.
        let d = open_in(dir.path(), small(), keying(Some("secret")));
        assert_ne!(d.position().epoch, position.epoch);
        assert!(d.contains("a") && d.contains("c"));
        assert_eq!(d.stats().unwrap().records, 2);
    }

    #[test]
    fn a_write_refused_for_space_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_in(dir.path(), small(), keying(Some("secret")));
        d.apply(&[put("a")]).unwrap();
        drop(d);
        // A reserve no disk has: every write must refuse.
        let full = Arc::new(DiskSpace::new(dir.path(), u64::MAX / 2));
        let d = Domain::open("A", dir.path(), small(), keying(Some("secret")), full).unwrap();
        let (position, stats) = (d.position(), d.stats().unwrap());
        let refused = d.apply(&[put("b"), del("a")]).unwrap_err();
        assert!(
            matches!(refused, DomainError::Store(StoreError::DiskFull(_))),
            "{refused}"
        );
        assert!(refused.to_string().contains("nothing was changed"));
        assert_eq!(d.position(), position);
        assert!(d.contains("a") && !d.contains("b"));
        assert_eq!(d.stats().unwrap().records, stats.records);
        assert!(d.verify().unwrap().consistent);
        let space = d.stats().unwrap().space;
        assert!(!space.writable);
        assert_eq!(space.writes_refused, 1);
    }

    #[test]
    fn a_verification_lets_writes_through_while_it_rebuilds_and_runs_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_in(dir.path(), small(), keying(Some("secret")));
        d.apply(&[keyed("a", "11010519491231002X"), put("b")])
            .unwrap();
        let mut during = None;
        let report = d
            .verify_with(|| {
                // The writer lock is free: a write lands meanwhile…
                assert!(d.writer.try_lock().is_some(), "the writer lock is held");
                d.apply(&[keyed("c", "110101199003071234"), del("b")])
                    .unwrap();
                // …and a second verification is refused, not queued.
                during = Some(d.verify());
            })
            .unwrap();
        // The report is of the snapshot, taken before that write.
        assert!(report.consistent, "{report:?}");
        assert_eq!((report.store_records, report.filter_items), (2, 2));
        assert!(matches!(during, Some(Err(DomainError::VerifyRunning))));
        // And the next one sees the write.
        let after = d.verify().unwrap();
        assert!(after.consistent, "{after:?}");
        assert_eq!(after.store_records, 2);
        assert!(d.contains("c") && d.get(&ArchiveId::parse("b").unwrap()).unwrap().is_none());
    }

    #[test]
    fn a_record_read_by_its_id_withholds_its_private_keys_and_a_search_returns_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_in(dir.path(), small(), keying(Some("secret")));
        let card = "11010519491231002X";
        d.apply(&[keyed("a", card)]).unwrap();
        let read = d.get(&ArchiveId::parse("a").unwrap()).unwrap().unwrap();
        assert!(read.keys.is_empty(), "{read:?}");
        assert_eq!(read.keys_withheld, ["id_card"]);
        let found = d.search("id_card", card).unwrap();
        assert_eq!(found[0].keys["id_card"], card);
        assert!(found[0].keys_withheld.is_empty());
    }

    #[test]
    fn full_cuckoo_filter_is_rebuilt_larger() {
        let dir = tempfile::tempdir().unwrap();
        let settings = FilterSettings {
            kind: FilterKind::Cuckoo,
            expected_items: 8,
            ..FilterSettings::default()
        };
        let d = open_in(dir.path(), settings, keying(Some("secret")));
        let epoch = d.position().epoch;
        let ids: Vec<Write> = (0..3_000).map(|i| put(&format!("ID-{i}"))).collect();
        for batch in ids.chunks(100) {
            d.apply(batch).unwrap();
        }
        assert_ne!(d.position().epoch, epoch);
        for i in 0..3_000 {
            assert!(d.contains(&format!("ID-{i}")));
        }
        assert!(d.verify().unwrap().consistent);
    }

    #[test]
    fn a_filter_is_sized_for_the_domains_own_records_and_rebuilt_before_its_rate_is_passed() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_in(dir.path(), FilterSettings::default(), keying(None));
        let (smallest, keys_before) = {
            let stats = d.stats().unwrap();
            (stats.filter, d.key_filter_stats())
        };
        let epoch = d.position().epoch;
        // 1 024 records fill the smallest filter; one more rebuilds it
        // twice as large: 2 048.
        let ids: Vec<Write> = (0..1_025).map(|i| put(&format!("ID-{i}"))).collect();
        for batch in ids.chunks(256) {
            d.apply(batch).unwrap();
        }
        let grown = d.stats().unwrap().filter;
        assert_ne!(d.position().epoch, epoch);
        // The key filter, which did not outgrow its size, kept it.
        assert_eq!(d.key_filter_stats().cells, keys_before.cells);
        assert!(grown.cells > smallest.cells);
        assert!(grown.estimated_fpr <= 0.01, "{grown:?}");
        let reference = FilterSettings {
            expected_items: 2_048,
            ..FilterSettings::default()
        };
        let same = LocalFilter::new(&reference, 2_048).unwrap().stats();
        assert_eq!(grown.cells, same.cells);
        assert!(d.verify().unwrap().consistent);
    }

    #[test]
    fn deltas_carry_flips_and_changed_ids() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_in(dir.path(), small(), keying(Some("secret")));
        d.apply(&[put("a")]).unwrap();
        let FilterView {
            position, bytes, ..
        } = d.filter_view();
        let mut replica = xarchive_filter::BloomFilter::decode(&bytes).unwrap();
        d.apply(&[put("b"), put("a"), del("b")]).unwrap();
        let (delta, changed) = d.delta(position.epoch, position.version).unwrap();
        replica.apply(&delta).unwrap();
        assert_eq!(replica.encode(), d.filter_view().bytes);
        let names: Vec<&str> = changed.iter().map(|id| id.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            d.delta(position.epoch + 1, 0).unwrap_err(),
            DeltaRefusal::EpochChanged {
                current: position.epoch
            }
        );
    }

    #[test]
    fn a_delta_that_would_outweigh_the_snapshot_is_refused_for_one() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_in(dir.path(), FilterSettings::default(), keying(None));
        let start = d.position();
        d.apply(&[put("first")]).unwrap();
        assert!(d.delta(start.epoch, start.version).is_ok(), "a few bits");
        let before = d.position();
        // 600 records set about 4 000 bits of the smallest filter's
        // 10 000 (1.2 KB): more changes than the snapshot has bytes.
        let ids: Vec<Write> = (0..600).map(|i| put(&format!("ID-{i}"))).collect();
        d.apply(&ids).unwrap();
        assert_eq!(d.position().epoch, start.epoch, "not rebuilt");
        assert!(matches!(
            d.delta(start.epoch, start.version),
            Err(DeltaRefusal::SnapshotSmaller { .. })
        ));
        d.apply(&[put("last")]).unwrap();
        let after = d.position();
        assert!(d.delta(after.epoch, after.version - 1).is_ok());
        assert!(d.delta(before.epoch, before.version).is_err());
    }

    #[test]
    fn the_key_filter_follows_puts_replacements_and_deletes_at_the_published_position() {
        let dir = tempfile::tempdir().unwrap();
        let k = keying(Some("secret"));
        let d = Domain::open("A", dir.path(), small(), k.clone(), unlimited(dir.path())).unwrap();
        let id_card = k.types.get("id_card").unwrap().clone();
        let element = |card: &str| k.hasher.filter_element(&id_card, card);
        let (one, two) = ("11010519491231002X", "110101199003071235");
        d.apply(&[keyed("a", one)]).unwrap();
        let start = d.key_filter_view();
        assert_eq!(start.position, d.position());
        let mut copy = xarchive_filter::BloomFilter::decode(&start.bytes).unwrap();
        assert!(copy.contains(element(one)));

        // Replaced with another key, then a second record, then deleted.
        d.apply(&[keyed("a", two), keyed("b", one)]).unwrap();
        d.apply(&[del("b")]).unwrap();
        let now = d.position();
        let delta = d.key_delta(now.epoch, start.position.version).unwrap();
        assert_eq!(delta.to_version, now.version);
        copy.apply(&delta).unwrap();
        assert_eq!(copy.encode(), d.key_filter_view().bytes);
        assert!(copy.contains(element(two)) && !copy.contains(element(one)));
        assert!(d.verify().unwrap().key_filter_consistent);

        // The ID filter's delta from the same position lands at the same
        // version: one published position covers both.
        let (ids, _) = d.delta(now.epoch, start.position.version).unwrap();
        assert_eq!(ids.to_version, now.version);
    }

    #[test]
    fn a_key_filter_saved_under_another_secret_is_rebuilt_in_a_new_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let card = "11010519491231002X";
        let d = open_in(dir.path(), small(), keying(Some("old")));
        d.apply(&[keyed("a", card)]).unwrap();
        let before = d.position();
        d.close().unwrap();
        drop(d);
        let d = open_in(dir.path(), small(), keying(Some("new")));
        assert_ne!(d.position().epoch, before.epoch);
        let new = keying(Some("new"));
        let element = new
            .hasher
            .filter_element(new.types.get("id_card").unwrap(), card);
        let copy = xarchive_filter::BloomFilter::decode(&d.key_filter_view().bytes).unwrap();
        assert!(copy.contains(element));
        assert!(d.verify().unwrap().consistent);
    }
}
