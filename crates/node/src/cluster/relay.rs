//! Passing changes on, so that no domain sends a change to every other.
//!
//! The members in name order are laid out as a tree of degree
//! [`ClusterConfig::relay_fanout`](super::ClusterConfig). A domain pulls
//! the changes of its tree neighbours' own filters from them directly, at
//! once (src/cluster/sync.rs), and keeps every change its copies take in
//! (those pulls, and what comes by relay) in its relay, in order, for a
//! while. Each domain reads its tree neighbours' relays in pages, takes in
//! what brings a copy forward, and keeps that in its own relay for its
//! other neighbours. A change so crosses each edge of the tree once: its
//! origin sends it to at most fanout + 1 neighbours, not to N − 1 peers,
//! and a follower gets a page of many origins' changes per call instead
//! of a call per change (docs/SCALING.md).
//!
//! Why it cannot cause a false "not found": a copy's position is that of
//! what it holds, whoever sent it. A delta is applied only to a copy
//! inside its span and in its epoch (docs/FORMAT.md §6), a whole filter
//! only when it is ahead of the copy or of the epoch its origin
//! publishes; a copy behind its origin's published position is asked
//! about, not trusted, as before. The relay only brings copies forward
//! sooner and cheaper; what it misses (a neighbour down, a page dropped,
//! trees that differ while membership changes) the per-peer sync pulls
//! from the origin itself once the copy has been behind for
//! [`ClusterConfig::relay_grace_ms`](super::ClusterConfig).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::client::{FetchedFilter, FetchedKeys};
use super::Cluster;
use crate::local::domain::Position;
use crate::local::filter::FilterKind;
use crate::local::id::ArchiveId;
use crate::wire::{
    encode_relay_page, frame_delta_with_ids, split_delta_with_ids, RelayEntry, RelayHeader,
    RelayPart, RELAY_HEADER, RELAY_NEXT_HEADER, RELAY_PAGE, RELAY_WAITED_HEADER,
};
use axum::http::{header, HeaderMap, HeaderValue};
use xarchive_filter::Delta;

/// Bytes of changes a relay keeps; a neighbour further behind misses
/// some, and the per-peer sync makes up for them.
const KEPT_BYTES: usize = 64 << 20;
/// Bytes of bodies in one page (at least one entry is sent).
const PAGE_BYTES: usize = 8 << 20;
/// How long a pull waits for a change when there is none.
const LONG_POLL: Duration = Duration::from_secs(1);
/// What a first read of a relay starts with: the changes kept this long.
const RECENT: Duration = Duration::from_secs(2);
/// Least time between two pulls of a neighbour's relay while changes
/// come often: what arrives meanwhile goes in one page (see
/// [`pause_after`]).
const PULL_INTERVAL: Duration = Duration::from_millis(50);
/// See [`pause_after`].
const IDLE: Duration = Duration::from_millis(5);

/// How long a reader waits before reading a relay again, after a page
/// that `waited` [`IDLE`] or more for its change (or not): at once then,
/// so that changes that come seldom are not held up; else
/// [`PULL_INTERVAL`] (at national scale changes come every few
/// milliseconds, and pages of 50 ms are what keeps a domain's CPU low;
/// docs/SCALING.md).
pub fn pause_after(waited: bool) -> Duration {
    if waited {
        Duration::ZERO
    } else {
        PULL_INTERVAL
    }
}

struct Kept {
    /// The domain it came from (a neighbour's relay, or the origin
    /// pulled): not sent back there.
    via: String,
    entry: Arc<RelayEntry>,
    kept_at: Instant,
}

#[derive(Default)]
struct Ring {
    kept: VecDeque<Kept>,
    /// The sequence number of `kept[0]`.
    first: u64,
    bytes: usize,
}

impl Ring {
    fn next(&self) -> u64 {
        self.first + self.kept.len() as u64
    }
}

/// What a read of a relay found.
pub struct RelayRead {
    /// The relay read.
    pub relay: u64,
    pub entries: Vec<Arc<RelayEntry>>,
    /// The sequence number to read from next.
    pub next: u64,
    /// Whether it waited [`IDLE`] or more for a change.
    pub waited: bool,
}

impl RelayRead {
    /// The answer's headers and body, as `GET /v1/relay` sends them
    /// (docs/FORMAT.md §9).
    pub fn encode(&self) -> (HeaderMap, Vec<u8>) {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(RELAY_PAGE));
        headers.insert(RELAY_HEADER, HeaderValue::from(self.relay));
        headers.insert(RELAY_NEXT_HEADER, HeaderValue::from(self.next));
        if self.waited {
            headers.insert(RELAY_WAITED_HEADER, HeaderValue::from_static("1"));
        }
        let body = encode_relay_page(self.entries.iter().map(|e| e.as_ref()));
        (headers, body)
    }
}

/// This domain's relay.
pub struct Relay {
    /// Tells this relay from the one before a restart: a follower that
    /// knew another starts at the end.
    pub id: u64,
    ring: Mutex<Ring>,
    next: watch::Sender<u64>,
}

impl Default for Relay {
    fn default() -> Self {
        Relay {
            id: rand::random::<u64>() | 1,
            ring: Mutex::default(),
            next: watch::Sender::new(0),
        }
    }
}

impl Relay {
    /// Keeps `entry`, taken in from `via`, for the other neighbours.
    pub fn push(&self, entry: RelayEntry, via: &str) {
        let mut ring = self.ring.lock();
        ring.bytes += entry.body.len();
        ring.kept.push_back(Kept {
            via: via.to_owned(),
            entry: Arc::new(entry),
            kept_at: Instant::now(),
        });
        while ring.bytes > KEPT_BYTES && ring.kept.len() > 1 {
            if let Some(old) = ring.kept.pop_front() {
                ring.bytes -= old.entry.body.len();
                ring.first += 1;
            }
        }
        self.next.send_replace(ring.next());
    }

    /// The sequence number the next entry will have.
    pub fn next(&self) -> u64 {
        self.ring.lock().next()
    }

    /// The entries from sequence number `from` on that neither came from
    /// `asker` nor are of its own filters, up to [`PAGE_BYTES`], and the
    /// number to ask from next. A whole filter in the page makes the
    /// earlier entries of the same filter in it needless: they are left
    /// out.
    pub fn page(&self, from: u64, asker: &str) -> (Vec<Arc<RelayEntry>>, u64) {
        let ring = self.ring.lock();
        let start = from.clamp(ring.first, ring.next());
        let mut taken = Vec::new();
        let (mut bytes, mut next) = (0, start);
        for kept in ring.kept.iter().skip((start - ring.first) as usize) {
            if bytes > 0 && bytes + kept.entry.body.len() > PAGE_BYTES {
                break;
            }
            next += 1;
            if kept.via != asker && kept.entry.header.origin != asker {
                bytes += kept.entry.body.len();
                taken.push(kept.entry.clone());
            }
        }
        let mut whole: HashSet<(&str, RelayPart)> = HashSet::new();
        let mut page: Vec<Arc<RelayEntry>> = Vec::with_capacity(taken.len());
        for entry in taken.iter().rev() {
            let filter = (entry.header.origin.as_str(), entry.header.part);
            if whole.contains(&filter) {
                continue;
            }
            if entry.header.from.is_none() {
                whole.insert(filter);
            }
            page.push(entry.clone());
        }
        page.reverse();
        (page, next)
    }

    /// What `GET /v1/relay` answers: a page from `from` for an asker
    /// that read relay `relay` (this one), else (a first read, or this
    /// domain restarted) from what was kept in the last [`RECENT`], which
    /// a new follower may have just missed (older changes are in the
    /// copies it pulled from their origins); waiting up to [`LONG_POLL`]
    /// for a page that is not empty.
    pub async fn read(&self, relay: u64, from: u64, asker: &str) -> RelayRead {
        let from = if relay == self.id {
            from
        } else {
            let ring = self.ring.lock();
            let since = Instant::now().checked_sub(RECENT);
            let old = ring
                .kept
                .iter()
                .take_while(|k| since.is_some_and(|s| k.kept_at < s))
                .count();
            ring.first + old as u64
        };
        let (entries, next) = self.page(from, asker);
        if !entries.is_empty() {
            return RelayRead {
                relay: self.id,
                entries,
                next,
                waited: false,
            };
        }
        let mut kept = self.next.subscribe();
        let asked = Instant::now();
        let _ = tokio::time::timeout(LONG_POLL, kept.wait_for(|n| *n > next)).await;
        let (entries, next) = self.page(next, asker);
        RelayRead {
            relay: self.id,
            entries,
            next,
            waited: asked.elapsed() >= IDLE,
        }
    }
}

/// The neighbours of `me` in the relay tree: `names` (every member, in
/// name order, `me` among them) laid out as a heap of degree `fanout`,
/// its parent and its children. None when relaying is off or `me` is not
/// among them.
pub fn neighbours<'a>(
    names: impl Iterator<Item = &'a str>,
    me: &str,
    fanout: usize,
) -> Vec<&'a str> {
    if fanout == 0 {
        return Vec::new();
    }
    let names: Vec<&str> = names.collect();
    let Some(i) = names.iter().position(|n| *n == me) else {
        return Vec::new();
    };
    let parent = (i > 0).then(|| (i - 1) / fanout);
    let children = (i * fanout + 1)..((i + 1) * fanout + 1).min(names.len());
    parent
        .into_iter()
        .chain(children)
        .map(|j| names[j])
        .collect()
}

/// A change pulled from `origin` itself, as the relay keeps it: a delta
/// (with the IDs it changed, for the filter), or a whole filter.
pub(crate) fn pulled(origin: &str, part: RelayPart, change: Pulled<'_>) -> RelayEntry {
    let header = |epoch, version, from, kind, key_id| RelayHeader {
        origin: origin.to_owned(),
        part,
        epoch,
        version,
        from,
        kind,
        key_id,
    };
    match change {
        Pulled::Delta(delta, changed) => RelayEntry {
            header: header(
                delta.epoch,
                delta.to_version,
                Some(delta.from_version),
                None,
                None,
            ),
            body: match part {
                RelayPart::Filter => frame_delta_with_ids(&delta.encode(), changed).into(),
                RelayPart::Keys => delta.encode().into(),
            },
        },
        Pulled::Whole(filter, key_id) => RelayEntry {
            header: header(
                filter.position.epoch,
                filter.position.version,
                None,
                Some(filter.kind),
                key_id.map(str::to_owned),
            ),
            body: filter.bytes.clone(),
        },
    }
}

/// What a pull from an origin brought.
pub(crate) enum Pulled<'a> {
    Delta(&'a Delta, &'a [ArchiveId]),
    /// A whole filter, and the key id of a key filter.
    Whole(&'a FetchedFilter, Option<&'a str>),
}

/// Keeps one follower per tree neighbour: started for new neighbours
/// (or a new address), stopped for those that are no longer.
#[derive(Default)]
pub(crate) struct Followers {
    running: BTreeMap<String, (String, CancellationToken)>,
}

impl Followers {
    /// Whether `name` is a tree neighbour followed.
    pub fn follows(&self, name: &str) -> bool {
        self.running.contains_key(name)
    }

    /// Follows exactly `wanted` (name, address).
    pub fn set(
        &mut self,
        cluster: &Arc<Cluster>,
        wanted: Vec<(String, String)>,
        stop: &CancellationToken,
    ) {
        let wanted: BTreeMap<String, String> = wanted.into_iter().collect();
        self.running.retain(|name, (address, token)| {
            let keep = wanted.get(name) == Some(address);
            if !keep {
                token.cancel();
            }
            keep
        });
        for (name, address) in wanted {
            if self.running.contains_key(&name) {
                continue;
            }
            let token = stop.child_token();
            cluster.tasks.spawn(follow(
                cluster.clone(),
                name.clone(),
                address.clone(),
                token.clone(),
            ));
            self.running.insert(name, (address, token));
        }
    }
}

/// Pulls `neighbour`'s relay page by page, taking in what brings a copy
/// forward, until `stop`.
async fn follow(
    cluster: Arc<Cluster>,
    neighbour: String,
    address: String,
    stop: CancellationToken,
) {
    let client = match cluster.peer_client(&address) {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(peer = %neighbour, error = %e, "cannot follow the relay of a neighbour");
            return;
        }
    };
    let (mut relay, mut from) = (0, 0);
    let mut failing = Backoff::new(PULL_INTERVAL * 2, Duration::from_secs(2));
    loop {
        let page = tokio::select! {
            page = client.relay(relay, from, &cluster.me) => page,
            _ = stop.cancelled() => return,
        };
        let pause = match page {
            Ok(page) => {
                (relay, from) = (page.relay, page.next);
                for entry in page.entries {
                    take_in(&cluster, entry, &neighbour).await;
                }
                failing.reset();
                pause_after(page.waited)
            }
            Err(e) => {
                tracing::debug!(peer = %neighbour, error = %e, "relay pull failed");
                failing.wait()
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// Whether a whole filter at `offered` should replace a copy at `held`:
/// no copy; a later version of the same epoch; or the epoch its origin
/// publishes now (a copy of another epoch says nothing of it).
fn wanted_whole(held: Option<Position>, published: Option<Position>, offered: Position) -> bool {
    match held {
        None => true,
        Some(h) if h.epoch == offered.epoch => h.version < offered.version,
        Some(_) => published.is_some_and(|p| p.epoch == offered.epoch),
    }
}

/// Whether a delta from `from` to `to` brings a copy at `held` forward.
fn advances(held: Option<Position>, epoch: u64, from: u64, to: u64) -> bool {
    held.is_some_and(|h| h.epoch == epoch && from <= h.version && h.version < to)
}

/// Takes in one relayed change if it brings the copy of its origin
/// forward, and keeps it to pass on; anything else is dropped (the
/// per-peer sync still pulls what the copy lacks).
async fn take_in(cluster: &Cluster, entry: RelayEntry, via: &str) {
    let h = &entry.header;
    if h.origin == cluster.me {
        return;
    }
    let offered = Position {
        epoch: h.epoch,
        version: h.version,
    };
    let (held, published) = {
        let replicas = cluster.replicas.read();
        let Some(peer) = replicas.peer(&h.origin) else {
            return;
        };
        let held = match h.part {
            RelayPart::Filter => peer.copy_position(),
            RelayPart::Keys => peer.key_position,
        };
        (held, peer.published)
    };
    let taken = match (h.part, h.from) {
        (RelayPart::Filter, Some(from)) if advances(held, h.epoch, from, h.version) => {
            match split_delta_with_ids(&entry.body) {
                Ok((delta, changed)) if matches(&delta, h) => {
                    // Evict first, as the per-peer sync does.
                    cluster.on_changed(&h.origin, &changed).await;
                    cluster.replicas.write().apply(&h.origin, &delta).is_ok()
                }
                _ => false,
            }
        }
        (RelayPart::Keys, Some(from)) if advances(held, h.epoch, from, h.version) => {
            match Delta::decode(&entry.body) {
                Ok(delta) if matches(&delta, h) => cluster
                    .replicas
                    .write()
                    .apply_keys(&h.origin, &delta)
                    .is_ok(),
                _ => false,
            }
        }
        (part, None) if wanted_whole(held, published, offered) => {
            let filter = FetchedFilter {
                kind: h.kind.unwrap_or(FilterKind::Counting),
                position: offered,
                bytes: entry.body.clone(),
            };
            match (part, &h.key_id) {
                (RelayPart::Filter, _) => {
                    cluster.on_snapshot(&h.origin);
                    cluster.replicas.write().install(&h.origin, &filter).is_ok()
                }
                (RelayPart::Keys, Some(key_id)) => {
                    let keys = FetchedKeys {
                        filter,
                        key_id: key_id.clone(),
                    };
                    cluster
                        .replicas
                        .write()
                        .install_keys(&h.origin, &keys)
                        .is_ok()
                }
                (RelayPart::Keys, None) => false,
            }
        }
        _ => false,
    };
    if taken {
        cluster.replicas.write().relayed(&h.origin);
        cluster.relay.push(entry, via);
    }
}

/// Whether a delta's own span is the one its header claims.
fn matches(delta: &Delta, h: &RelayHeader) -> bool {
    delta.epoch == h.epoch && delta.to_version == h.version && Some(delta.from_version) == h.from
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(origin: &str, from: Option<u64>, version: u64, len: usize) -> RelayEntry {
        RelayEntry {
            header: RelayHeader {
                origin: origin.into(),
                part: RelayPart::Filter,
                epoch: 1,
                version,
                from,
                kind: from.is_none().then_some(FilterKind::Counting),
                key_id: None,
            },
            body: vec![0; len].into(),
        }
    }

    fn versions(page: &[Arc<RelayEntry>]) -> Vec<(String, u64)> {
        page.iter()
            .map(|e| (e.header.origin.clone(), e.header.version))
            .collect()
    }

    #[test]
    fn a_page_leaves_out_what_came_from_the_asker_or_is_its_own_and_starts_where_asked() {
        let relay = Relay::default();
        relay.push(entry("a", Some(0), 1, 10), "b");
        relay.push(entry("c", Some(0), 1, 10), "");
        relay.push(entry("a", Some(1), 2, 10), "c");
        let (page, next) = relay.page(0, "b");
        assert_eq!(versions(&page), [("c".into(), 1), ("a".into(), 2)]);
        assert_eq!(next, 3);
        let (page, _) = relay.page(0, "c");
        assert_eq!(versions(&page), [("a".into(), 1)]);
        let (page, next) = relay.page(2, "x");
        assert_eq!(versions(&page), [("a".into(), 2)]);
        assert_eq!(next, 3);
        assert!(relay.page(3, "x").0.is_empty());
    }

    #[test]
    fn a_whole_filter_in_a_page_leaves_out_the_same_filters_earlier_entries() {
        let relay = Relay::default();
        relay.push(entry("a", Some(0), 1, 10), "");
        relay.push(entry("b", Some(0), 1, 10), "");
        relay.push(entry("a", None, 5, 100), "");
        relay.push(entry("a", Some(5), 6, 10), "");
        let (page, _) = relay.page(0, "x");
        assert_eq!(
            versions(&page),
            [("b".into(), 1), ("a".into(), 5), ("a".into(), 6)]
        );
    }

    #[test]
    fn a_relay_keeps_a_bounded_number_of_bytes_and_a_late_asker_starts_at_the_oldest_kept() {
        let relay = Relay::default();
        for v in 0..5u64 {
            relay.push(entry("a", Some(v), v + 1, KEPT_BYTES / 2), "");
        }
        // Two halves are kept; a page holds at most PAGE_BYTES but never nothing.
        let (page, next) = relay.page(0, "x");
        assert_eq!((versions(&page), next), (vec![("a".into(), 4)], 4));
        let (page, next) = relay.page(next, "x");
        assert_eq!((versions(&page), next), (vec![("a".into(), 5)], 5));
    }

    #[test]
    fn a_copy_takes_a_delta_only_inside_its_span_and_a_whole_filter_only_forward() {
        let at = |epoch, version| Some(Position { epoch, version });
        assert!(advances(at(1, 3), 1, 2, 5));
        assert!(!advances(at(1, 5), 1, 2, 5), "already there");
        assert!(!advances(at(1, 1), 1, 2, 5), "a gap before the span");
        assert!(!advances(at(2, 3), 1, 2, 5), "another epoch");
        assert!(!advances(None, 1, 0, 5), "no copy to apply it to");
        let offered = Position {
            epoch: 1,
            version: 5,
        };
        assert!(wanted_whole(None, None, offered));
        assert!(wanted_whole(at(1, 4), None, offered));
        assert!(!wanted_whole(at(1, 5), None, offered));
        assert!(
            !wanted_whole(at(2, 9), at(2, 9), offered),
            "not what is published"
        );
        assert!(wanted_whole(at(2, 9), at(1, 5), offered));
    }

    proptest::proptest! {
        /// Every member's neighbours name it back, and the tree links
        /// every member to the first: a change from anywhere reaches all.
        #[test]
        fn the_relay_tree_is_one_tree_whose_edges_go_both_ways(
            n in 1usize..200,
            fanout in 1usize..20,
        ) {
            let names: Vec<String> = (0..n).map(|i| format!("d{i:04}")).collect();
            let of = |me: &str| neighbours(names.iter().map(String::as_str), me, fanout);
            let mut edges = 0;
            for me in &names {
                let around = of(me);
                proptest::prop_assert!(around.len() <= fanout + 1);
                for other in &around {
                    proptest::prop_assert!(of(other).contains(&me.as_str()));
                }
                edges += around.len();
            }
            // A tree of n members has n - 1 edges, each counted from both ends.
            proptest::prop_assert_eq!(edges, 2 * (n - 1));
            let mut reached = vec![names[0].as_str()];
            let mut i = 0;
            while i < reached.len() {
                for other in of(reached[i]) {
                    if !reached.contains(&other) {
                        reached.push(other);
                    }
                }
                i += 1;
            }
            proptest::prop_assert_eq!(reached.len(), n);
        }
    }
}
