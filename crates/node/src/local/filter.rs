//! The domain's own filter (counting or cuckoo), what it publishes to
//! peers and browsers, and the feed of IDs changed per version.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use xarchive_filter::{
    CountingBloomFilter, CuckooFilter, DecodeError, Delta, DeltaError, ErasableFilter, Filter,
    Full, GeometryError, NotPresent, Versioned,
};

use crate::local::id::ArchiveId;

/// Which filter a domain keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FilterKind {
    /// Counting Bloom filter; publishes its bit view (`XABL`).
    Counting,
    /// Cuckoo filter; publishes its table (`XACK`).
    Cuckoo,
}

impl FilterKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            FilterKind::Counting => "counting",
            FilterKind::Cuckoo => "cuckoo",
        }
    }
}

/// A name that is not a filter kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a filter kind (counting or cuckoo)")]
pub struct UnknownKind(pub String);

impl std::str::FromStr for FilterKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "counting" => Ok(FilterKind::Counting),
            "cuckoo" => Ok(FilterKind::Cuckoo),
            other => Err(UnknownKind(other.to_owned())),
        }
    }
}

/// How a domain sizes its filter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterSettings {
    pub kind: FilterKind,
    /// Least number of records the filter is sized for; 0 (the default)
    /// sizes it for the domain's own records alone (the next power of two
    /// above them). It is rebuilt twice as large (a new epoch) when the
    /// store outgrows it.
    pub expected_items: u64,
    /// Target false-positive rate at `expected_items`.
    pub fpr: f64,
    /// Flips (or slot changes) kept for deltas; older copies take a snapshot.
    pub log_capacity: usize,
}

impl Default for FilterSettings {
    fn default() -> Self {
        FilterSettings {
            kind: FilterKind::Counting,
            expected_items: 0,
            fpr: 0.01,
            log_capacity: 1 << 20,
        }
    }
}

/// The filter itself.
#[derive(Clone, Debug)]
pub enum LocalFilter {
    Counting(CountingBloomFilter),
    Cuckoo(CuckooFilter),
}

/// What the domain asks of its filter whatever its kind, through the
/// filter crate's traits (object-safe: the kinds' insert errors differ, so
/// inserting stays per kind).
trait Kept: Versioned {
    fn remove(&mut self, id: &[u8]) -> Result<(), NotPresent>;
    fn contains(&self, id: &[u8]) -> bool;
    fn items(&self) -> u64;
    fn encode(&self) -> Vec<u8>;
}

impl<F: ErasableFilter + Versioned> Kept for F {
    fn remove(&mut self, id: &[u8]) -> Result<(), NotPresent> {
        ErasableFilter::remove(self, id)
    }
    fn contains(&self, id: &[u8]) -> bool {
        Filter::contains(self, id)
    }
    fn items(&self) -> u64 {
        Filter::items(self)
    }
    fn encode(&self) -> Vec<u8> {
        Filter::encode(self)
    }
}

impl LocalFilter {
    /// An empty filter for `capacity` records.
    pub fn new(settings: &FilterSettings, capacity: u64) -> Result<Self, GeometryError> {
        Ok(match settings.kind {
            FilterKind::Counting => LocalFilter::Counting(
                CountingBloomFilter::with_capacity(capacity, settings.fpr)?
                    .with_log_capacity(settings.log_capacity),
            ),
            FilterKind::Cuckoo => LocalFilter::Cuckoo(
                CuckooFilter::with_capacity(capacity, settings.fpr)?
                    .with_log_capacity(settings.log_capacity),
            ),
        })
    }

    pub fn kind(&self) -> FilterKind {
        match self {
            LocalFilter::Counting(_) => FilterKind::Counting,
            LocalFilter::Cuckoo(_) => FilterKind::Cuckoo,
        }
    }

    pub fn insert(&mut self, id: &str) -> Result<(), Full> {
        match self {
            LocalFilter::Counting(f) => {
                f.insert(id);
                Ok(())
            }
            LocalFilter::Cuckoo(f) => f.insert(id),
        }
    }

    fn kept(&self) -> &dyn Kept {
        match self {
            LocalFilter::Counting(f) => f,
            LocalFilter::Cuckoo(f) => f,
        }
    }

    fn kept_mut(&mut self) -> &mut dyn Kept {
        match self {
            LocalFilter::Counting(f) => f,
            LocalFilter::Cuckoo(f) => f,
        }
    }

    pub fn remove(&mut self, id: &str) -> Result<(), NotPresent> {
        self.kept_mut().remove(id.as_bytes())
    }

    /// A new version without a change of cells (a record replaced).
    pub fn touch(&mut self) {
        match self {
            LocalFilter::Counting(f) => f.touch(),
            LocalFilter::Cuckoo(f) => f.touch(),
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.kept().contains(id.as_bytes())
    }

    pub fn version(&self) -> u64 {
        self.kept().version()
    }

    pub fn epoch(&self) -> u64 {
        self.kept().epoch()
    }

    pub fn set_epoch(&mut self, epoch: u64) {
        self.kept_mut().set_epoch(epoch)
    }

    pub fn items(&self) -> u64 {
        self.kept().items()
    }

    /// Whether the filter should be rebuilt larger: a cuckoo filter whose
    /// victim slot is taken refuses inserts; a counting filter past its
    /// capacity is past its target false-positive rate, which each of a
    /// large cluster's peers pays for in lookups sent in vain.
    pub fn outgrown(&self, capacity: u64) -> bool {
        match self {
            LocalFilter::Counting(f) => f.items() > capacity,
            LocalFilter::Cuckoo(f) => f.is_full(),
        }
    }

    /// What peers and browsers receive: the bit view of a counting filter,
    /// the table of a cuckoo filter.
    pub fn published(&self) -> Vec<u8> {
        match self {
            LocalFilter::Counting(f) => f.bit_view().encode(),
            LocalFilter::Cuckoo(f) => f.encode(),
        }
    }

    /// The changes since `since`, as applied to what [`published`] gives.
    ///
    /// [`published`]: Self::published
    pub fn delta_since(&self, since: u64) -> Result<Delta, DeltaError> {
        match self {
            LocalFilter::Counting(f) => f.flips_since(since),
            LocalFilter::Cuckoo(f) => f.changes_since(since),
        }
    }

    /// The whole filter (counters, or table), for a snapshot on disk.
    pub fn encode(&self) -> Vec<u8> {
        self.kept().encode()
    }

    pub fn decode(
        kind: FilterKind,
        bytes: &[u8],
        log_capacity: usize,
    ) -> Result<Self, DecodeError> {
        Ok(match kind {
            FilterKind::Counting => LocalFilter::Counting(
                CountingBloomFilter::decode(bytes)?.with_log_capacity(log_capacity),
            ),
            FilterKind::Cuckoo => {
                LocalFilter::Cuckoo(CuckooFilter::decode(bytes)?.with_log_capacity(log_capacity))
            }
        })
    }

    /// An empty filter of the same shape.
    pub fn empty_like(&self) -> Self {
        match self {
            LocalFilter::Counting(f) => {
                LocalFilter::Counting(CountingBloomFilter::new(f.geometry()))
            }
            LocalFilter::Cuckoo(f) => LocalFilter::Cuckoo(CuckooFilter::new(f.geometry())),
        }
    }

    pub fn stats(&self) -> FilterStats {
        match self {
            LocalFilter::Counting(f) => counting_stats(f),
            LocalFilter::Cuckoo(f) => {
                let g = f.geometry();
                FilterStats {
                    kind: FilterKind::Cuckoo,
                    cells: g.num_slots(),
                    hashes: None,
                    fingerprint_bits: Some(g.fingerprint_bits()),
                    bytes: (g.num_slots() * u64::from(g.fingerprint_bits())).div_ceil(8),
                    items: f.items(),
                    fill_ratio: f.load_factor(),
                    estimated_fpr: g.theoretical_fpr(f.items()),
                    stuck_counters: None,
                    version: f.version(),
                    epoch: f.epoch(),
                    oldest_delta_version: f.oldest_delta_version(),
                }
            }
        }
    }
}

/// A counting filter's figures (the domain's filter, or its key filter).
pub fn counting_stats(f: &CountingBloomFilter) -> FilterStats {
    FilterStats {
        kind: FilterKind::Counting,
        cells: f.geometry().num_bits(),
        hashes: Some(f.geometry().k()),
        fingerprint_bits: None,
        bytes: f.geometry().num_bits() / 2,
        items: f.items(),
        fill_ratio: f.fill_ratio(),
        estimated_fpr: f.estimated_fpr(),
        stuck_counters: Some(f.stuck_counters()),
        version: f.version(),
        epoch: f.epoch(),
        oldest_delta_version: f.oldest_delta_version(),
    }
}

/// The filter's figures for `/v1/stats` and `/metrics`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct FilterStats {
    pub kind: FilterKind,
    /// Counters (counting) or slots (cuckoo).
    pub cells: u64,
    pub hashes: Option<u32>,
    pub fingerprint_bits: Option<u8>,
    /// Memory of the cells.
    pub bytes: u64,
    pub items: u64,
    /// Counters above zero, or slots taken.
    pub fill_ratio: f64,
    pub estimated_fpr: f64,
    pub stuck_counters: Option<u64>,
    pub version: u64,
    #[serde(with = "crate::local::epoch::u64_string")]
    #[schema(value_type = String)]
    pub epoch: u64,
    pub oldest_delta_version: u64,
}

/// IDs whose records were replaced or deleted, by the version that did it,
/// so that peers can evict cached copies (bounded like the flip log).
#[derive(Debug)]
pub struct ChangeFeed {
    entries: VecDeque<(u64, ArchiveId)>,
    capacity: usize,
    /// Changes at or below this version may be missing.
    floor: u64,
}

impl ChangeFeed {
    pub fn new(capacity: usize, version: u64) -> Self {
        ChangeFeed {
            entries: VecDeque::new(),
            capacity,
            floor: version,
        }
    }

    pub fn push(&mut self, version: u64, id: ArchiveId) {
        if self.entries.len() >= self.capacity {
            match self.entries.pop_front() {
                Some((v, _)) => self.floor = self.floor.max(v),
                None => {
                    self.floor = version;
                    return;
                }
            }
        }
        self.entries.push_back((version, id));
    }

    /// Distinct IDs changed after `since`; `None` when some may be missing.
    pub fn since(&self, since: u64) -> Option<Vec<ArchiveId>> {
        if since < self.floor {
            return None;
        }
        let start = self.entries.partition_point(|(v, _)| *v <= since);
        let mut ids: Vec<ArchiveId> = self
            .entries
            .range(start..)
            .map(|(_, id)| id.clone())
            .collect();
        ids.sort();
        ids.dedup();
        Some(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ArchiveId {
        ArchiveId::parse(s).unwrap()
    }

    #[test]
    fn feed_answers_only_what_it_still_holds() {
        let mut feed = ChangeFeed::new(2, 0);
        feed.push(1, id("a"));
        feed.push(2, id("b"));
        assert_eq!(feed.since(0).unwrap(), vec![id("a"), id("b")]);
        feed.push(3, id("a"));
        assert_eq!(feed.since(0), None);
        assert_eq!(feed.since(1).unwrap(), vec![id("a"), id("b")]);
        assert_eq!(feed.since(3).unwrap(), Vec::<ArchiveId>::new());
    }
}
