//! The domain's own filter (counting or cuckoo), what it publishes to
//! peers and browsers, and the feed of IDs changed per version.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use xarchive_filter::{
    BloomGeometry, CountingBloomFilter, CuckooFilter, CuckooGeometry, DecodeError, Delta,
    DeltaError, ErasableFilter, Filter, Full, GeometryError, NotPresent, Versioned,
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
    /// The highest false-positive rate a filter is sized for, at its
    /// capacity.
    pub fpr: f64,
    /// IDs the whole cluster is sized for (the same at every domain): a
    /// filter for `c` IDs is then sized for a rate of
    /// `VAIN_AT_CAPACITY × c / cluster_ids` (at most `fpr`), so a lookup
    /// of an absent ID finds about one vain candidate however many
    /// domains there are. 0 (the default) sizes every filter for `fpr`.
    /// See [`FilterSettings::rate_for`].
    pub cluster_ids: u64,
    /// Flips (or slot changes) kept for deltas; older copies take a snapshot.
    pub log_capacity: usize,
}

impl Default for FilterSettings {
    fn default() -> Self {
        FilterSettings {
            kind: FilterKind::Counting,
            expected_items: 0,
            fpr: 0.01,
            cluster_ids: 0,
            log_capacity: 1 << 20,
        }
    }
}

/// The vain candidates of a lookup of an absent ID if every filter of a
/// cluster of `cluster_ids` IDs were full (the sum of their rates at
/// capacity). Filters are below capacity (a size class leaves room to
/// grow), and a Bloom filter's rate falls steeply with its load: at
/// 3 301 domains and 10^9 IDs, 1.4 gives 0.65 vain candidates a lookup in
/// 2 449 MB of routing state (2 gave 0.93 in 2 316 MB; 1.2 would spend
/// 2 508 MB, over the 2.5 GB a full domain may). Why under one: each vain
/// candidate that is down turns a "not found" into a 503; with 1 % of the
/// domains down, 99.4 % of absent IDs are still answered 404 in the
/// median draw (`xarchive-bench nation`, docs/SCALING.md, "A margin for
/// one archive in a hundred down").
pub const VAIN_AT_CAPACITY: f64 = 1.4;

impl FilterSettings {
    /// The false-positive rate a filter for `capacity` IDs is sized for:
    /// `VAIN_AT_CAPACITY × capacity / cluster_ids`, at most `fpr`; `fpr`
    /// when `cluster_ids` is 0.
    ///
    /// Why in proportion to the capacity: a lookup of an absent ID asks
    /// every domain whose filter says "maybe", so what a cluster pays is
    /// the sum of its filters' rates, and what it spends is the sum of
    /// their bits, about `c · ln(1/p) / ln²2` for a filter of `c` IDs at
    /// rate `p`. The least sum of rates for a given sum of bits has every
    /// rate in proportion to its filter's IDs (Lagrange: `d(rate)/d(bits)`
    /// equal everywhere, and it is `-p · ln²2 / c`). A large domain's bit
    /// buys less than a small one's, so its filter gets the higher rate;
    /// with every rate equal, a nation's 2 936 county filters would carry
    /// most of the vain calls while holding three quarters of the IDs.
    ///
    /// Summed over a cluster's filters, the rates are at most
    /// `VAIN_AT_CAPACITY × (their capacities) / cluster_ids`: with
    /// capacities within 1.5 × of the IDs held, about 1.4 to 2 lookups in
    /// vain if every filter were full, under one as they are (measured).
    pub fn rate_for(&self, capacity: u64) -> f64 {
        if self.cluster_ids == 0 {
            return self.fpr;
        }
        // Positive: capacity ≥ 1 and cluster_ids finite.
        let rate = VAIN_AT_CAPACITY * capacity.max(1) as f64 / self.cluster_ids as f64;
        rate.min(self.fpr)
    }
}

/// The size class above `items`: the least of 2^m and 3 · 2^(m−1) (m ≥ 1)
/// at or above it, so classes are 1.5 and 1.33 × apart and doubling a
/// class gives a class (a filter that outgrows its class is rebuilt twice
/// as large, into a class again).
///
/// Why these and not powers of two: a filter sized for its class holds
/// between 0.67 and 1 of its capacity (0.5 and 1 with powers of two), so
/// the classes cost 1.2 × the exact sizes' bits on average, not 1.44 ×,
/// while the filters of a nation still fall into a dozen geometries that
/// peers hold bit-sliced (docs/SCALING.md).
pub fn size_class(items: u64) -> u64 {
    if items <= 2 {
        return 2;
    }
    let Some(power) = items.checked_next_power_of_two() else {
        return items; // past 2^63: no filter is that large (MAX_BITS)
    };
    // `power / 4 * 3` lies in (power / 2, power): the class between.
    let between = power / 4 * 3;
    if items <= between {
        between
    } else {
        power
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
    /// An empty filter for `capacity` records, at the rate the settings
    /// give that capacity ([`FilterSettings::rate_for`]).
    pub fn new(settings: &FilterSettings, capacity: u64) -> Result<Self, GeometryError> {
        let rate = settings.rate_for(capacity);
        Ok(match settings.kind {
            FilterKind::Counting => LocalFilter::Counting(
                CountingBloomFilter::with_capacity(capacity, rate)?
                    .with_log_capacity(settings.log_capacity),
            ),
            FilterKind::Cuckoo => LocalFilter::Cuckoo(
                CuckooFilter::with_capacity(capacity, rate)?
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
        self.kept_mut().set_epoch(epoch);
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
    pub fn peer_view(&self) -> Vec<u8> {
        match self {
            LocalFilter::Counting(f) => f.bit_view().encode(),
            LocalFilter::Cuckoo(f) => f.encode(),
        }
    }

    /// The size of what [`peer_view`](Self::peer_view) gives as a reader
    /// holds it (its bits or its table, without the envelope):
    /// `/v1/cluster`'s `filter_bytes`.
    pub fn peer_view_bytes(&self) -> u64 {
        match self {
            LocalFilter::Counting(f) => bloom_bytes(f.geometry()),
            LocalFilter::Cuckoo(f) => cuckoo_bytes(f.geometry()),
        }
    }

    /// The changes since `since`, as applied to what
    /// [`peer_view`](Self::peer_view) gives.
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
                    bytes: cuckoo_bytes(g),
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

/// The bits of a Bloom filter (or a counting filter's bit view) of this
/// geometry, in bytes: what a reader of its published form holds.
pub fn bloom_bytes(g: BloomGeometry) -> u64 {
    g.num_bits() / 8
}

/// The table of a cuckoo filter of this geometry, in bytes (its slots'
/// fingerprints packed): what a reader of its published form holds.
pub fn cuckoo_bytes(g: CuckooGeometry) -> u64 {
    (g.num_slots() * u64::from(g.fingerprint_bits())).div_ceil(8)
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

    proptest::proptest! {
        #[test]
        fn a_size_class_holds_its_items_with_less_than_half_again_of_room(items in 3u64..1 << 62) {
            let class = size_class(items);
            proptest::prop_assert!(class >= items);
            proptest::prop_assert!(u128::from(class) * 2 < u128::from(items) * 3, "{class}");
            // It is one of 2^m and 3 · 2^(m−1).
            let odd = class >> class.trailing_zeros();
            proptest::prop_assert!(odd == 1 || odd == 3, "{class}");
        }

        #[test]
        fn doubling_a_class_gives_a_class_and_classes_grow_with_their_items(
            a in 1u64..1 << 61,
            b in 1u64..1 << 61,
        ) {
            let class = size_class(a);
            proptest::prop_assert_eq!(size_class(class), class);
            proptest::prop_assert_eq!(size_class(class * 2), class * 2);
            let (small, large) = (a.min(b), a.max(b));
            proptest::prop_assert!(size_class(small) <= size_class(large));
        }

        #[test]
        fn rates_are_in_proportion_to_capacity_and_never_above_fpr(
            capacity in 1u64..1 << 40,
            more in 0u64..1 << 40,
            cluster_ids in 1u64..1 << 50,
            fpr in 0.0001f64..0.5,
        ) {
            let settings = FilterSettings { fpr, cluster_ids, ..FilterSettings::default() };
            let rate = settings.rate_for(capacity);
            proptest::prop_assert!(rate > 0.0 && rate <= fpr);
            // Summed over a cluster's filters, at most VAIN_AT_CAPACITY ×
            // their capacities / cluster_ids.
            let share = capacity as f64 / cluster_ids as f64;
            proptest::prop_assert!(rate <= VAIN_AT_CAPACITY * share * (1.0 + 1e-12));
            let larger = settings.rate_for(capacity + more);
            proptest::prop_assert!(larger >= rate);
        }
    }

    #[test]
    // The configured rate and the 1 % ceiling come back as set, not
    // recomputed: equal to the last bit.
    #[allow(clippy::float_cmp)]
    fn without_a_cluster_size_every_filter_is_sized_for_fpr_and_with_one_in_proportion() {
        let default = FilterSettings::default();
        assert_eq!(default.cluster_ids, 0);
        assert_eq!(default.rate_for(1 << 30), default.fpr);
        assert_eq!(default.rate_for(1_024), default.fpr);
        // A nation of 10^9 IDs: a county's filter of 393 216 IDs at
        // 5.5 · 10^-4, a central archive's of 25 million at the 1 % ceiling.
        let nation = FilterSettings {
            cluster_ids: 1_000_000_000,
            ..FilterSettings::default()
        };
        assert_eq!(size_class(300_000), 393_216);
        let county = nation.rate_for(size_class(300_000));
        assert!((county - 393_216.0 * 1.4e-9).abs() < 1e-12, "{county}");
        assert_eq!(nation.rate_for(size_class(20_000_000)), 0.01);
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
