//! The light publishers of `xarchive-bench nation`'s cluster part: the many domains
//! a machine cannot run in full. Each has a real ZooKeeper session, its
//! own ephemeral znode and known record in the very form a domain writes
//! them, and a real filter (the bit view a domain serves, sized as a
//! domain sizes it) with a change log; one HTTP server in this process
//! answers for all of them, under `/d/<name>`, the routes a peer calls
//! (filter, delta, key filter, key delta, relay, record, contains), with
//! the headers and error bodies a domain's own router gives them
//! (`xarchive_node::peer_answers`, the relay's page encoder). What
//! they lack: a store (a light domain holds the IDs `n<d>-<i>` for `i`
//! below its count, and answers record reads from that rule), replicas of
//! the others, and a watch on the membership.
//!
//! The relay tree (src/cluster/relay/tree.rs in the node crate) is laid out
//! over all N names as a domain lays it out. The changes that would reach
//! the measured domain through one of its tree neighbours are put in that
//! neighbour's relay at once: the hops between their origin and that
//! neighbour, through light domains that keep no copies, are not run.
//!
//! Written here rather than by running `xarchive serve` 3 301 times: a
//! full domain holds copies of every other filter, so N of them on one
//! machine would hold N² copies.
//!
//! Its files: this one (the light domains, their filters and change logs,
//! their writes and relays), `zookeeper.rs` (their registrations and
//! ledger entries), `routes.rs` (their HTTP server).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use parking_lot::Mutex;
use xarchive_filter::{BloomFilter, BloomGeometry, CellChange, Delta};
use xarchive_node::cluster::{ClusterConfig, Relay};
use xarchive_node::wire::{frame_delta_with_ids, RelayEntry, RelayHeader, RelayPart};
use xarchive_node::{capacity_for, FilterKind, FilterSettings, KeyHasher};
use zookeeper_client as zk;

mod routes;
mod zookeeper;

/// Light domains per group of the positions ledger: about a province.
const LEDGER_GROUP: usize = 100;

/// The ID of item `i` of domain `d`, as the cluster part writes it
/// (`fill` writes the same).
pub fn light_id(d: usize, i: u64) -> String {
    format!("n{d}-{i}")
}

/// The bits set, by version, for deltas: a light domain only inserts, so
/// a change is a bit set to 1. (The filter crate's own change log is
/// private to it; this is the few lines an insert-only log needs.)
struct Log {
    /// At most a domain's `log_capacity` (a peer further behind takes a
    /// snapshot, as from a real domain whose log has moved on).
    changes: VecDeque<(u64, u64)>,
    capacity: usize,
    /// Deltas can start at this version and no earlier.
    oldest: u64,
}

impl Log {
    fn new(version: u64) -> Self {
        Log {
            changes: VecDeque::new(),
            capacity: FilterSettings::default().log_capacity,
            oldest: version,
        }
    }

    fn record(&mut self, version: u64, cell: u64) {
        if self.changes.len() == self.capacity {
            if let Some((v, _)) = self.changes.pop_front() {
                self.oldest = self.oldest.max(v);
            }
        }
        self.changes.push_back((version, cell));
    }

    /// The cells set after `since`, each once, in order.
    fn since(&self, since: u64) -> Option<Vec<CellChange>> {
        if since < self.oldest {
            return None;
        }
        let mut cells: Vec<u64> = self
            .changes
            .iter()
            .filter(|(v, _)| *v > since)
            .map(|(_, c)| *c)
            .collect();
        cells.sort_unstable();
        cells.dedup();
        Some(
            cells
                .into_iter()
                .map(|cell| CellChange { cell, value: 1 })
                .collect(),
        )
    }
}

/// One light domain's filter and what peers have been sent of it.
struct Filter {
    bits: BloomFilter,
    log: Log,
    /// Versions written and not yet sent to the measured domain, with
    /// when each was acknowledged (its publication confirmed; none yet
    /// while it is being published).
    unsent: VecDeque<(u64, Option<Instant>)>,
}

impl Filter {
    /// Inserts `id` as one version, logging the bits it sets for deltas.
    fn insert(&mut self, id: &str) {
        let g = self.bits.geometry();
        let probes = g.probes(id.as_bytes());
        let version = self.bits.version() + 1;
        for p in 0..g.k() {
            let cell = probes.position(p);
            if !self.bits.bit(cell) {
                self.log.record(version, cell);
            }
        }
        self.bits.insert(id.as_bytes());
    }
}

struct LightDomain {
    name: String,
    index: usize,
    /// What it would pass on to the measured domain (its tree neighbours').
    relay: Relay,
    /// Bytes of bodies it served, on every route.
    sent: AtomicU64,
    /// IDs `n<index>-0` .. `n<index>-(held-1)`.
    held: AtomicU64,
    filter: Mutex<Filter>,
    /// The ZooKeeper session that owns its znode.
    session: Mutex<Option<zk::Client>>,
    /// Killed ([`Nation::kill`]): its registration gone, its ledger entry
    /// left, and nothing answered under its name.
    dead: AtomicBool,
}

/// What the HTTP server sent, by kind, in bytes (bodies only).
#[derive(Default)]
pub struct Sent {
    pub snapshots: AtomicU64,
    pub deltas: AtomicU64,
    pub relays: AtomicU64,
    /// Relay pages read by light domains (not sent to the measured one).
    pub relayed_to_lights: AtomicU64,
    pub key_filters: AtomicU64,
    pub records: AtomicU64,
    pub requests: AtomicU64,
    /// Relay pages the measured domain read.
    pub relay_pages: AtomicU64,
    pub record_reads: AtomicU64,
    pub probes: AtomicU64,
}

impl Sent {
    /// Calls a lookup made to light domains: record reads and probes.
    pub fn lookup_calls(&self) -> u64 {
        self.record_reads.load(Ordering::Relaxed) + self.probes.load(Ordering::Relaxed)
    }

    /// Bytes sent to the measured domain.
    pub fn bytes(&self) -> u64 {
        self.snapshots.load(Ordering::Relaxed)
            + self.deltas.load(Ordering::Relaxed)
            + self.relays.load(Ordering::Relaxed)
            + self.key_filters.load(Ordering::Relaxed)
            + self.records.load(Ordering::Relaxed)
    }
}

/// The light domains of one nation, and their server.
pub struct Nation {
    domains: Vec<LightDomain>,
    by_name: HashMap<String, usize>,
    /// How every filter is sized: the rate `fpr`, or in proportion to its
    /// size with `cluster_ids` (as the domains size theirs).
    filters: FilterSettings,
    /// The empty key filter's bytes are the same for every light domain
    /// but for the position, so only its geometry is kept.
    key_geometry: BloomGeometry,
    key_id: String,
    pub sent: Sent,
    /// Seconds from a write's acknowledgement until the measured domain
    /// was sent a delta or snapshot that includes it.
    pub lags: Mutex<Vec<f64>>,
    /// The HTTP server's base address, once it serves.
    address: Mutex<String>,
    cluster: String,
    /// Every domain's name (the measured one's too) in name order: the
    /// relay tree's layout.
    pub tree: Vec<String>,
    pub fanout: usize,
    /// Each ledger group's entries (or lines) and znode version as last
    /// written here; a group's publications take its lock one at a time
    /// (they all come from this process), so they rarely meet another
    /// writer.
    ledgers: Vec<tokio::sync::Mutex<Option<(Ledger, i32)>>>,
    /// Whether they write whole entries, as domains of earlier releases
    /// read them (`--whole-entries`), instead of lines.
    pub whole_entries: AtomicBool,
}

/// A ledger znode's entries, or its lines (each a JSON string).
type Ledger = serde_json::Map<String, serde_json::Value>;

/// The measured domain's name.
pub const MEASURED: &str = "measured";

fn capacity(held: u64) -> u64 {
    capacity_for(&FilterSettings::default(), held, 0)
}

fn geometry(held: u64, filters: &FilterSettings) -> anyhow::Result<BloomGeometry> {
    let capacity = capacity(held);
    Ok(BloomGeometry::for_capacity(
        capacity,
        filters.rate_for(capacity),
    )?)
}

impl Nation {
    /// Light domains of these sizes, their filters sized by `filters`
    /// and filled (`progress` is told of every ID inserted, by domain).
    pub fn new(
        sizes: &[u64],
        filters: FilterSettings,
        cluster: String,
        progress: &(dyn Fn(u64) + Sync),
    ) -> anyhow::Result<Arc<Nation>> {
        // Filled on every core: at 10^9 IDs this is minutes.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let sizing = &filters;
        let mut filled: Vec<Option<anyhow::Result<BloomFilter>>> =
            (0..sizes.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            for (t, part) in filled
                .chunks_mut(sizes.len().div_ceil(threads).max(1))
                .enumerate()
            {
                let first = t * sizes.len().div_ceil(threads).max(1);
                scope.spawn(move || {
                    for (j, slot) in part.iter_mut().enumerate() {
                        let (d, held) = (first + j, sizes[first + j]);
                        *slot = Some(geometry(held, sizing).map(|g| fill(d, held, g, 1)));
                        progress(held);
                    }
                });
            }
        });
        let domains = sizes
            .iter()
            .zip(filled)
            .enumerate()
            .map(|(d, (&held, bits))| {
                let bits = bits.context("a light filter was not filled")??;
                Ok(LightDomain {
                    name: format!("n{d:04}"),
                    index: d,
                    relay: Relay::default(),
                    sent: AtomicU64::new(0),
                    held: AtomicU64::new(held),
                    filter: Mutex::new(Filter {
                        log: Log::new(bits.version()),
                        bits,
                        unsent: VecDeque::new(),
                    }),
                    session: Mutex::new(None),
                    dead: AtomicBool::new(false),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let by_name: HashMap<String, usize> =
            domains.iter().map(|d| (d.name.clone(), d.index)).collect();
        let mut tree: Vec<String> = by_name.keys().cloned().collect();
        tree.push(MEASURED.to_owned());
        tree.sort();
        let ledgers = (0..domains.len().div_ceil(LEDGER_GROUP))
            .map(|_| tokio::sync::Mutex::new(None))
            .collect();
        Ok(Arc::new(Nation {
            domains,
            by_name,
            key_geometry: BloomGeometry::for_capacity(capacity(0), filters.fpr)?,
            filters,
            key_id: KeyHasher::new(None).filter_key_id(),
            sent: Sent::default(),
            lags: Mutex::new(Vec::new()),
            address: Mutex::new(String::new()),
            cluster,
            tree,
            fanout: ClusterConfig::default().relay_fanout,
            ledgers,
            whole_entries: AtomicBool::new(false),
        }))
    }

    /// Writes `count` new IDs at domain `d` as one version range, then
    /// publishes its position; returns once ZooKeeper confirmed it (the
    /// acknowledgement). A filter outgrown is rebuilt twice as large in a
    /// new epoch, as a domain's is.
    pub async fn write(&self, d: usize, count: u64) -> anyhow::Result<()> {
        let domain = &self.domains[d];
        let first = domain.held.fetch_add(count, Ordering::SeqCst);
        let held = first + count;
        let relayed = {
            let mut f = domain.filter.lock();
            let before = (f.bits.epoch(), f.bits.version());
            // (Sized like a domain: rebuilt once it holds more than its
            // capacity, which changes only at powers of two.)
            if capacity(held) == capacity(f.bits.items()) {
                for i in first..held {
                    f.insert(&light_id(d, i));
                }
            } else {
                let epoch = f.bits.epoch() + 1;
                f.bits = fill(d, held, geometry(held, &self.filters)?, epoch);
                f.log = Log::new(f.bits.version());
            }
            let version = f.bits.version();
            f.unsent.push_back((version, None));
            self.relayed(domain, &f, before)
        };
        self.pass_on(d, relayed);
        self.publish(domain).await
    }

    /// `domain`'s change since `before` as a relay keeps it: a delta of
    /// each filter, or the whole filter when no delta says it.
    fn relayed(&self, domain: &LightDomain, f: &Filter, before: (u64, u64)) -> Vec<RelayEntry> {
        let (epoch, version) = (f.bits.epoch(), f.bits.version());
        let header = |part, from| RelayHeader {
            origin: domain.name.clone(),
            part,
            epoch,
            version,
            from,
            kind: from.is_none().then_some(FilterKind::Counting),
            key_id: (from.is_none() && part == RelayPart::Keys).then(|| self.key_id.clone()),
        };
        let same_epoch = before.0 == epoch;
        let filter = match delta_since(f, before.1).filter(|_| same_epoch) {
            Some(delta) => RelayEntry {
                header: header(RelayPart::Filter, Some(before.1)),
                body: frame_delta_with_ids(&delta.encode(), &[]).into(),
            },
            None => RelayEntry {
                header: header(RelayPart::Filter, None),
                body: f.bits.encode().into(),
            },
        };
        let keys = if same_epoch {
            RelayEntry {
                header: header(RelayPart::Keys, Some(before.1)),
                body: self.key_delta(epoch, before.1, version).encode().into(),
            }
        } else {
            RelayEntry {
                header: header(RelayPart::Keys, None),
                body: self.key_filter(epoch, version).encode().into(),
            }
        };
        vec![filter, keys]
    }

    /// Puts `d`'s change in the relay of the measured domain's tree
    /// neighbour it would come through, as if it had come there along the
    /// tree (a neighbour's own change in its own relay, as a domain puts
    /// it there).
    fn pass_on(&self, d: usize, entries: Vec<RelayEntry>) {
        let through = &self.domains[self.toward(d)];
        for entry in entries {
            through.relay.push(entry, &self.domains[d].name);
        }
    }

    /// The light domain next to the measured one on the tree path from
    /// light domain `d` (a heap: a member's ancestors come before it).
    fn toward(&self, d: usize) -> usize {
        let at = |name: &str| {
            self.tree
                .binary_search_by(|n| n.as_str().cmp(name))
                .unwrap_or(0)
        };
        let m = at(MEASURED);
        let parent = |i: usize| (i - 1) / self.fanout;
        let mut i = at(&self.domains[d].name);
        let next = loop {
            if i <= m {
                break parent(m);
            }
            if parent(i) == m {
                break i;
            }
            i = parent(i);
        };
        self.by_name.get(&self.tree[next]).copied().unwrap_or(d)
    }

    /// The tree neighbours of `name`.
    pub fn neighbours(&self, name: &str) -> Vec<String> {
        xarchive_node::cluster::neighbours(self.tree.iter().map(String::as_str), name, self.fanout)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// The light domains' server, as `http://host:port`.
    pub fn address(&self) -> String {
        self.address.lock().clone()
    }

    /// Bytes light domain `d` served so far.
    pub fn sent_by(&self, d: usize) -> u64 {
        self.domains[d].sent.load(Ordering::Relaxed)
    }

    /// How many light domains there are.
    pub fn len(&self) -> usize {
        self.domains.len()
    }

    pub fn name(&self, d: usize) -> &str {
        &self.domains[d].name
    }

    /// A light domain's key filter: empty (it declares no keys), at its
    /// filter's position (as a real domain keeps them aligned).
    fn key_filter(&self, epoch: u64, version: u64) -> BloomFilter {
        let mut keys = BloomFilter::new(self.key_geometry);
        keys.set_epoch(epoch);
        keys.set_version(version);
        keys
    }

    /// The empty change of a light key filter from `since` to `version`.
    fn key_delta(&self, epoch: u64, since: u64, version: u64) -> Delta {
        Delta {
            epoch,
            from_version: since,
            to_version: version,
            num_cells: self.key_geometry.num_bits(),
            cell_bits: 1,
            items: 0,
            changes: Vec::new(),
        }
    }

    /// Where each write since the last call went: the measured domain
    /// was sent everything up to `version` of `d`.
    fn sent_up_to(&self, domain: &LightDomain, epoch: u64, version: u64) {
        let mut f = domain.filter.lock();
        if epoch != f.bits.epoch() {
            return;
        }
        let now = Instant::now();
        let mut lags = self.lags.lock();
        while let Some(&(v, acked)) = f.unsent.front() {
            if v > version {
                break;
            }
            // Sent before its acknowledgement: no lag at all.
            lags.push(acked.map_or(0.0, |a| now.saturating_duration_since(a).as_secs_f64()));
            f.unsent.pop_front();
        }
    }

    /// The light domain a request names, the request counted.
    fn asked(&self, name: &str) -> Option<&LightDomain> {
        self.sent.requests.fetch_add(1, Ordering::Relaxed);
        self.by_name.get(name).map(|&i| &self.domains[i])
    }

    /// Whether light domain `name` was killed.
    pub(super) fn is_dead(&self, name: &str) -> bool {
        self.by_name
            .get(name)
            .is_some_and(|&d| self.domains[d].dead.load(Ordering::SeqCst))
    }

    /// Whether the measured domain was sent every version `d` wrote.
    pub fn sent_all(&self, d: usize) -> bool {
        self.domains[d].filter.lock().unsent.is_empty()
    }

    pub fn held(&self, d: usize) -> u64 {
        self.domains[d].held.load(Ordering::SeqCst)
    }

    /// The encoded net change of `d` from `from` (epoch, version) to now:
    /// a delta in the same epoch, else the snapshot a peer would take.
    pub fn one_copy(&self, d: usize, from: (u64, u64)) -> usize {
        let f = self.domains[d].filter.lock();
        if f.bits.epoch() != from.0 {
            return f.bits.encode().len();
        }
        match delta_since(&f, from.1) {
            Some(delta) => delta.encode().len(),
            None => f.bits.encode().len(),
        }
    }

    pub fn position(&self, d: usize) -> (u64, u64) {
        let f = self.domains[d].filter.lock();
        (f.bits.epoch(), f.bits.version())
    }
}

/// A filter of `geometry` holding IDs `0..held` of domain `d`, at
/// version `held` of `epoch`.
fn fill(d: usize, held: u64, geometry: BloomGeometry, epoch: u64) -> BloomFilter {
    use std::fmt::Write;
    let mut bits = BloomFilter::new(geometry);
    // One buffer for all: at 10^9 IDs, an allocation each was half the time.
    let mut id = String::new();
    for i in 0..held {
        id.clear();
        let _ = write!(id, "n{d}-{i}");
        bits.insert(id.as_bytes());
    }
    bits.set_epoch(epoch);
    bits
}

fn delta_since(f: &Filter, since: u64) -> Option<Delta> {
    let current = f.bits.version();
    if since > current {
        return None;
    }
    let changes = f.log.since(since)?;
    // As a domain does: no delta that outweighs the snapshot.
    if changes.len() as u64 > f.bits.geometry().num_bits() / 8 {
        return None;
    }
    Some(Delta {
        epoch: f.bits.epoch(),
        from_version: since,
        to_version: current,
        num_cells: f.bits.geometry().num_bits(),
        cell_bits: 1,
        items: f.bits.items(),
        changes,
    })
}

/// Filters at 1 %, for the tests.
#[cfg(test)]
pub(super) fn test_filters() -> FilterSettings {
    FilterSettings {
        fpr: 0.01,
        ..FilterSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_from_a_light_domain_brings_a_copy_to_its_filter() {
        let nation = Nation::new(&[1_000], test_filters(), "t".into(), &|_| {}).unwrap();
        let mut copy = BloomFilter::decode(&nation.domains[0].filter.lock().bits.encode()).unwrap();
        let since = copy.version();
        // Written without publishing: the filter and log only.
        nation.domains[0].held.store(1_100, Ordering::SeqCst);
        {
            let mut f = nation.domains[0].filter.lock();
            for i in 1_000..1_100 {
                f.insert(&light_id(0, i));
            }
        }
        let delta = delta_since(&nation.domains[0].filter.lock(), since).unwrap();
        copy.apply(&Delta::decode(&delta.encode()).unwrap())
            .unwrap();
        assert_eq!(copy, nation.domains[0].filter.lock().bits);
        assert!((1_000..1_100).all(|i| copy.contains(light_id(0, i).as_bytes())));
    }

    #[test]
    fn every_light_domain_reaches_the_measured_one_through_one_of_its_tree_neighbours() {
        let nation = Nation::new(&[1; 40], test_filters(), "t".into(), &|_| {}).unwrap();
        let around = nation.neighbours(MEASURED);
        assert!(!around.is_empty());
        for d in 0..40 {
            let through = nation.name(nation.toward(d)).to_owned();
            assert!(around.contains(&through), "n{d} through {through}");
            // A neighbour is reached directly; any other through the
            // neighbour on the tree path, so one of its own neighbours
            // lies on that path too.
            if around.contains(&nation.name(d).to_owned()) {
                assert_eq!(nation.toward(d), d);
            }
        }
        // "measured" is the first name, the tree's root: every subtree
        // below it brings changes.
        let children: std::collections::HashSet<usize> =
            (0..40).map(|d| nation.toward(d)).collect();
        assert_eq!(children.len(), around.len());
    }
}
