//! The copies this domain holds of every peer's published filter, and
//! the routing over them. Bloom copies of a geometry that at least
//! [`MIN_SLICED`] copies share live bit-sliced in one index per geometry
//! ([`Sliced`]); others are held one by one.
//!
//! Beside each, a copy of the peer's key filter routes searches by key.
//! It has its own position: both filters of a peer stand at the one
//! position the peer publishes, but the two copies are fetched apart.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use xarchive_filter::{
    candidates_all, ApplyError, BloomFilter, BloomGeometry, CuckooFilter, DecodeError, Delta,
    GeometryMismatch, SlicedIndex,
};

use super::coordinator::{MemberChange, Roster, View};
use super::sliced::{Sliced, MIN_SLICED};
use crate::cluster::client::{FetchedFilter, Whole};
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use crate::local::filter::{bloom_bytes, cuckoo_bytes, FilterKind};
use crate::local::id::ArchiveId;
use crate::wire::{DomainView, RelayPart};

/// A change to a copy of either of a peer's filters, as it came.
#[derive(Clone, Debug)]
pub(crate) enum Change {
    /// The changes from one version to another in one epoch. Where the two
    /// filters differ: an ID filter's delta carries the IDs it replaced or
    /// deleted, whose cached records must go; a key filter's carries none
    /// (cached records follow the ID filter's deltas).
    Delta {
        delta: Delta,
        changed: Vec<ArchiveId>,
    },
    /// The whole filter (a key filter's with the filter key that built it).
    Whole(Whole),
}

impl Change {
    /// The position the change brings a copy to.
    pub fn to(&self) -> Position {
        match self {
            Change::Delta { delta, .. } => Position {
                epoch: delta.epoch,
                version: delta.to_version,
            },
            Change::Whole(whole) => whole.filter.position,
        }
    }
}

#[derive(Debug)]
enum Held {
    None,
    /// In the index of this geometry, in this slot.
    Slot(BloomGeometry, usize),
    Bloom(BloomFilter),
    Cuckoo(CuckooFilter),
}

/// One peer as this domain sees it.
#[derive(Debug)]
pub struct Peer {
    pub address: String,
    pub kind: FilterKind,
    held: Held,
    /// Position of the copy held.
    pub position: Option<Position>,
    /// The copy of its key filter (members only), and its position.
    keys: Option<BloomFilter>,
    pub key_position: Option<Position>,
    /// Its position recorded in the coordinator now (None once the domain
    /// left).
    pub published: Option<Position>,
    /// The last position it published while a member.
    pub last_published: Option<Position>,
    /// Since when the copy has not covered `last_published` (None while
    /// it does): how long a cached record of this peer may be stale.
    behind_since: Option<Instant>,
    pub reachable: bool,
    pub last_synced: Option<Instant>,
    pub last_error: Option<String>,
    /// Times the copy stayed behind for the relay's grace period and was
    /// pulled from the peer itself (the sync's sweep woke its pull).
    pub grace_pulls: u64,
    /// Where the first copy came from: the peer itself or a tree
    /// neighbour (`first_copy_from` in `/v1/cluster`).
    first_copy_from: Option<String>,
}

impl Peer {
    /// A peer just heard of: no copy yet, not known to be up.
    fn new(address: &str, kind: FilterKind) -> Self {
        Peer {
            address: address.to_owned(),
            kind,
            held: Held::None,
            position: None,
            keys: None,
            key_position: None,
            published: None,
            last_published: None,
            behind_since: None,
            reachable: true,
            last_synced: None,
            last_error: None,
            grace_pulls: 0,
            first_copy_from: None,
        }
    }

    /// The position of the copy held, if one is.
    pub fn copy_position(&self) -> Option<Position> {
        self.position.filter(|_| self.holds_copy())
    }

    /// The position of the copy of `part` held, if one is.
    pub fn position_of(&self, part: RelayPart) -> Option<Position> {
        match part {
            RelayPart::Filter => self.copy_position(),
            RelayPart::Keys => self.key_position,
        }
    }

    pub fn holds_copy(&self) -> bool {
        !matches!(self.held, Held::None)
    }

    /// The size of the copy held as a reader holds it (`/v1/cluster`'s
    /// `filter_bytes`): the peer's published filter has the copy's geometry.
    pub fn copy_bytes(&self) -> Option<u64> {
        match &self.held {
            Held::None => None,
            Held::Slot(geometry, _) => Some(bloom_bytes(*geometry)),
            Held::Bloom(f) => Some(bloom_bytes(f.geometry())),
            Held::Cuckoo(f) => Some(cuckoo_bytes(f.geometry())),
        }
    }

    /// The copy includes everything the domain last published.
    pub fn current(&self) -> bool {
        self.holds_copy() && covers(self.position, self.last_published)
    }

    /// Registered with the coordinator now (it publishes a position).
    pub fn registered(&self) -> bool {
        self.published.is_some()
    }

    /// For how long the copy has not covered what the peer last published
    /// (None while it does).
    pub fn lagging(&self) -> Option<std::time::Duration> {
        if self.current() {
            return None;
        }
        Some(
            self.behind_since
                .map_or(std::time::Duration::MAX, |t| t.elapsed()),
        )
    }

    /// Starts or ends the lag clock after the copy or the published
    /// position moved.
    fn note_lag(&mut self) {
        if self.current() {
            self.behind_since = None;
        } else if self.behind_since.is_none() {
            self.behind_since = Some(Instant::now());
        }
    }
}

/// The names of `copies` that may hold `id`, their block reads started
/// together ([`BloomFilter::contains_each`]).
fn asked_together(copies: &[(&DomainName, &BloomFilter)], id: &[u8]) -> Vec<DomainName> {
    let filters: Vec<&BloomFilter> = copies.iter().map(|(_, f)| *f).collect();
    copies
        .iter()
        .zip(BloomFilter::contains_each(&filters, id))
        .filter(|(_, maybe)| *maybe)
        .map(|((name, _), _)| (*name).clone())
        .collect()
}

/// Whether a copy at `held` includes every change up to `published`.
pub fn covers(held: Option<Position>, published: Option<Position>) -> bool {
    match (held, published) {
        (Some(h), Some(p)) => h.epoch == p.epoch && h.version >= p.version,
        _ => false,
    }
}

/// A peer as kept on disk between runs (`peers.json` in the data
/// directory): who to ask when the coordinator has forgotten it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Remembered {
    pub address: String,
    pub kind: FilterKind,
}

/// What a lookup needs to know of a peer, copied out of the lock.
#[derive(Clone, Debug)]
pub struct PeerInfo {
    pub name: DomainName,
    pub address: String,
    pub position: Option<Position>,
    /// The position of the copy of its key filter.
    pub key_position: Option<Position>,
}

/// A peer as `/metrics` shows it, copied out of the lock.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerHealth {
    pub name: DomainName,
    /// Registered with the coordinator now.
    pub registered: bool,
    /// For how long the copy has not covered what the peer last
    /// published (zero while it does); `None` while nothing it published
    /// is known here (a peer remembered from an earlier run only).
    pub lag: Option<std::time::Duration>,
    /// See [`Peer::grace_pulls`].
    pub grace_pulls: u64,
}

pub struct Replicas {
    me: DomainName,
    /// Which filter key this domain hashes keys with: a peer's key filter
    /// built under another cannot rule a key out.
    key_id: String,
    sliced: HashMap<BloomGeometry, Sliced>,
    peers: BTreeMap<DomainName, Peer>,
    /// Counts the times a copy moved (installed or brought forward), for
    /// the lookups waiting for copies behind a write in flight.
    moved: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("unknown peer {0}")]
    UnknownPeer(String),
    #[error("cannot decode the filter of {peer}: {source}")]
    Decode { peer: String, source: DecodeError },
    #[error("the filter of {peer} does not fit the index of its geometry: {source}")]
    Slice {
        peer: String,
        source: GeometryMismatch,
    },
    #[error("delta does not apply to the copy of {peer}: {source}")]
    Apply { peer: String, source: ApplyError },
    #[error("no copy of {0} to apply a delta to")]
    NoCopy(String),
    #[error("the key filter of {0} was built under another cluster secret")]
    OtherKey(String),
    #[error("the key filter of {0} came without the filter key that built it")]
    NoKeyId(String),
}

impl Replicas {
    /// Replicas for domain `me`; `key_id` names the filter key of this
    /// domain's key filter.
    pub fn new(me: &DomainName, key_id: &str) -> Self {
        Replicas {
            me: me.clone(),
            key_id: key_id.to_owned(),
            sliced: HashMap::new(),
            peers: BTreeMap::new(),
            moved: tokio::sync::watch::channel(0).0,
        }
    }

    /// Changes whenever a copy is installed or brought forward.
    pub fn moved(&self) -> tokio::sync::watch::Receiver<u64> {
        self.moved.subscribe()
    }

    /// Takes in the positions a read of the coordinator's ledger found,
    /// where they are ahead of those known here (the view is not told of
    /// each publication), so that the lag shown and the lag clock count
    /// from them.
    pub fn take_positions(&mut self, roster: &Roster) {
        for (name, known) in roster.active() {
            let Some(peer) = self.peers.get_mut(name) else {
                continue;
            };
            let read = known.member.position();
            if peer.last_published.is_none_or(|p| read.replaces(p)) {
                peer.last_published = Some(read);
                peer.note_lag();
            }
        }
    }

    /// Peers remembered from an earlier run (no copy, not known up): asked
    /// by lookups until the coordinator tells of them again.
    pub fn remember(&mut self, peers: &BTreeMap<DomainName, Remembered>) {
        for (name, r) in peers.iter().filter(|(n, _)| **n != self.me) {
            self.peers
                .entry(name.clone())
                .or_insert_with(|| Peer::new(&r.address, r.kind));
        }
    }

    /// Every peer known, as [`remember`](Self::remember) takes them back.
    pub fn to_remember(&self) -> BTreeMap<DomainName, Remembered> {
        self.peers
            .iter()
            .map(|(name, p)| {
                let r = Remembered {
                    address: p.address.clone(),
                    kind: p.kind,
                };
                (name.clone(), r)
            })
            .collect()
    }

    /// Takes in what changed in the coordinator's view: new peers, addresses,
    /// published positions; peers that left are kept (marked down) with
    /// their copy, once the view follows the coordinator. Returns whether
    /// the peers known (names, addresses, kinds) changed.
    pub fn update_view(&mut self, view: &View, changes: &[MemberChange]) -> bool {
        let mut known_changed = false;
        for change in changes.iter().filter(|c| *c.name() != self.me) {
            match change {
                MemberChange::Present(name, member) => {
                    let peer = self.peers.entry(name.clone()).or_insert_with(|| {
                        known_changed = true;
                        Peer::new(&member.address, member.kind)
                    });
                    if peer.address != member.address || peer.kind != member.kind {
                        known_changed = true;
                        peer.address.clone_from(&member.address);
                        peer.kind = member.kind;
                    }
                    peer.published = Some(member.position());
                    peer.last_published = Some(member.position());
                    peer.note_lag();
                }
                MemberChange::Gone(name) if view.connected => {
                    if let Some(peer) = self.peers.get_mut(name) {
                        peer.published = None;
                    }
                }
                MemberChange::Gone(_) => {}
            }
        }
        known_changed
    }

    pub fn peer(&self, name: &str) -> Option<&Peer> {
        self.peers.get(name)
    }

    /// Drops `name` and its copies: it was retired for good (`cluster
    /// forget`), so nothing it held is asked for any more. Returns whether
    /// it was held.
    pub fn retire(&mut self, name: &str) -> bool {
        self.release(name);
        self.peers.remove(name).is_some()
    }

    /// Every peer as `/v1/cluster` shows it.
    pub fn views(&self) -> Vec<DomainView> {
        self.peers
            .iter()
            .map(|(name, peer)| DomainView {
                name: name.to_string(),
                address: peer.address.clone(),
                is_self: false,
                up: peer.registered(),
                // Set by the probe of the call (`Cluster::view`).
                reachable: false,
                probe_ms: None,
                probe_error: None,
                kind: peer.kind,
                filter_bytes: peer.copy_bytes(),
                epoch: peer.last_published.map(|p| p.epoch),
                version: peer.last_published.map(|p| p.version),
                replica_epoch: peer.position.map(|p| p.epoch),
                replica_version: peer.position.map(|p| p.version),
                lag: match (peer.position, peer.last_published) {
                    (Some(held), Some(published)) if held.epoch == published.epoch => {
                        Some(published.version.saturating_sub(held.version))
                    }
                    _ => None,
                },
                current: Some(peer.current()),
                keys_current: Some(covers(peer.key_position, peer.last_published)),
                last_sync_ms_ago: peer
                    .last_synced
                    .map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)),
                last_error: peer.last_error.clone(),
                behind_ms: peer
                    .behind_since
                    .filter(|_| !peer.current())
                    .map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)),
                grace_pulls: Some(peer.grace_pulls),
                first_copy_from: peer.first_copy_from.clone(),
            })
            .collect()
    }

    pub fn infos(&self) -> Vec<PeerInfo> {
        self.peers
            .iter()
            .map(|(name, p)| PeerInfo {
                name: name.clone(),
                address: p.address.clone(),
                position: p.position,
                key_position: p.key_position,
            })
            .collect()
    }

    /// Every peer known, with its lag clock read now.
    pub fn health(&self) -> Vec<PeerHealth> {
        self.peers
            .iter()
            .map(|(name, p)| PeerHealth {
                name: name.clone(),
                registered: p.registered(),
                lag: p
                    .last_published
                    .map(|_| p.lagging().unwrap_or(std::time::Duration::ZERO)),
                grace_pulls: p.grace_pulls,
            })
            .collect()
    }

    /// Notes where the first copy of `name` was taken from.
    pub fn first_copy_from(&mut self, name: &str, from: &str) {
        if let Some(peer) = self.peers.get_mut(name) {
            peer.first_copy_from = Some(from.to_owned());
        }
    }

    /// The outcome of a sync with `name`: `None` when it succeeded.
    pub fn mark(&mut self, name: &str, failure: Option<&dyn std::error::Error>) {
        if let Some(peer) = self.peers.get_mut(name) {
            peer.reachable = failure.is_none();
            peer.last_error = failure.map(|e| e.to_string());
            if peer.reachable && peer.current() {
                peer.last_synced = Some(Instant::now());
            }
        }
    }

    /// A copy of `name` brought forward by the relay: once current, it
    /// counts as synced (`last_sync_ms_ago`), as after a pull.
    pub fn relayed(&mut self, name: &str) {
        if let Some(peer) = self.peers.get_mut(name) {
            if peer.current() {
                peer.last_synced = Some(Instant::now());
            }
        }
    }

    /// The copies of `names` stayed behind for the relay's grace period:
    /// their pulls from the peers themselves were woken.
    pub fn pulled_after_grace(&mut self, names: &[&str]) {
        for name in names {
            if let Some(peer) = self.peers.get_mut(*name) {
                peer.grace_pulls += 1;
            }
        }
    }

    /// Takes `name`'s copy out of its index, if it is in one.
    fn release(&mut self, name: &str) {
        if let Some(Held::Slot(geometry, slot)) = self.peers.get(name).map(|p| &p.held) {
            let (geometry, slot) = (*geometry, *slot);
            if let Some(sliced) = self.sliced.get_mut(&geometry) {
                sliced.clear(slot);
            }
        }
    }

    /// Once [`MIN_SLICED`] copies held one by one share `geometry`, moves
    /// them into an index of their own.
    fn slice_if_worth_it(&mut self, geometry: BloomGeometry) {
        if self.sliced.contains_key(&geometry) {
            return;
        }
        let same: Vec<DomainName> = self
            .peers
            .iter()
            .filter(|(_, p)| matches!(&p.held, Held::Bloom(f) if f.geometry() == geometry))
            .map(|(name, _)| name.clone())
            .collect();
        if same.len() < MIN_SLICED {
            return;
        }
        let mut sliced = Sliced::new(geometry, same.len());
        for name in same {
            let Some(peer) = self.peers.get_mut(&name) else {
                continue;
            };
            if let Held::Bloom(filter) = &peer.held {
                if let Ok(slot) = sliced.put(&name, filter, None) {
                    peer.held = Held::Slot(geometry, slot);
                }
            }
        }
        self.sliced.insert(geometry, sliced);
    }

    /// The copy held of `name`'s `part`, encoded as its origin publishes
    /// it (`/v1/copies/{name}` and `/v1/copies/{name}/keys`), for a domain
    /// joining nearby; a key filter's under this cluster's filter key.
    ///
    /// Correctness: a copy holds exactly the origin's bits at its position
    /// (it is built only from what the origin published, whole or by
    /// deltas, and a delta is applied only to the copy it starts from), so
    /// a copy taken from this one at that position is as exact as one
    /// taken from the origin, and may rule the origin out as such. Only the
    /// item count is not kept in a bit-sliced index; no copy uses it.
    pub fn copy_view(&self, name: &str, part: RelayPart) -> Option<Whole> {
        let peer = self.peers.get(name)?;
        let position = peer.position_of(part)?;
        let (kind, bytes) = match (part, &peer.held) {
            (RelayPart::Keys, _) => (FilterKind::Counting, peer.keys.as_ref()?.encode()),
            (RelayPart::Filter, Held::None) => return None,
            (RelayPart::Filter, Held::Slot(geometry, slot)) => (
                FilterKind::Counting,
                self.sliced.get(geometry)?.index().filter(*slot).encode(),
            ),
            (RelayPart::Filter, Held::Bloom(f)) => (FilterKind::Counting, f.encode()),
            (RelayPart::Filter, Held::Cuckoo(f)) => (FilterKind::Cuckoo, f.encode()),
        };
        Some(Whole {
            filter: FetchedFilter {
                kind,
                position,
                bytes: bytes.into(),
            },
            // Only a key filter is built under a filter key.
            key_id: (part == RelayPart::Keys).then(|| self.key_id.clone()),
        })
    }

    /// Takes `change` into the copy of `name`'s `part`: a delta applied
    /// (only to a copy inside its span: the filter's own check), or a
    /// whole filter installed. Whether it should be is the door's to
    /// decide (`copy_change.rs`), and so is the cache.
    pub(crate) fn take(
        &mut self,
        name: &str,
        part: RelayPart,
        change: &Change,
    ) -> Result<(), ReplicaError> {
        match change {
            Change::Delta { delta, .. } => self.apply(name, part, delta),
            Change::Whole(whole) => match part {
                RelayPart::Filter => self.install(name, &whole.filter),
                RelayPart::Keys => self.install_keys(name, whole),
            },
        }
    }

    /// Replaces the copy of `name` with a published snapshot.
    fn install(&mut self, name: &str, fetched: &FetchedFilter) -> Result<(), ReplicaError> {
        let Some((name, _)) = self.peers.get_key_value(name) else {
            return Err(ReplicaError::UnknownPeer(name.into()));
        };
        let name = &name.clone();
        let decode = |source: DecodeError| ReplicaError::Decode {
            peer: name.into(),
            source,
        };
        let held = match fetched.kind {
            FilterKind::Counting => {
                let filter = BloomFilter::decode(&fetched.bytes).map_err(decode)?;
                let geometry = filter.geometry();
                let same_slot = match self.peers.get(name).map(|p| &p.held) {
                    Some(Held::Slot(g, slot)) if *g == geometry => Some(*slot),
                    _ => None,
                };
                if same_slot.is_none() {
                    self.release(name);
                }
                match self.sliced.get_mut(&geometry) {
                    Some(sliced) => {
                        let slot = sliced.put(name, &filter, same_slot).map_err(|source| {
                            ReplicaError::Slice {
                                peer: name.into(),
                                source,
                            }
                        })?;
                        Held::Slot(geometry, slot)
                    }
                    None => Held::Bloom(filter),
                }
            }
            FilterKind::Cuckoo => {
                let filter = CuckooFilter::decode(&fetched.bytes).map_err(decode)?;
                self.release(name);
                Held::Cuckoo(filter)
            }
        };
        let peer = self
            .peers
            .get_mut(name)
            .ok_or_else(|| ReplicaError::UnknownPeer(name.into()))?;
        let unsliced = match &held {
            Held::Bloom(f) => Some(f.geometry()),
            _ => None,
        };
        peer.held = held;
        peer.kind = fetched.kind;
        peer.position = Some(fetched.position);
        peer.note_lag();
        if let Some(geometry) = unsliced {
            self.slice_if_worth_it(geometry);
        }
        self.moved.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Brings the copy of `name`'s `part` forward by `delta`.
    fn apply(&mut self, name: &str, part: RelayPart, delta: &Delta) -> Result<(), ReplicaError> {
        let peer = self
            .peers
            .get_mut(name)
            .ok_or_else(|| ReplicaError::UnknownPeer(name.into()))?;
        let applied = match (part, &mut peer.held) {
            (RelayPart::Keys, _) => match &mut peer.keys {
                Some(keys) => keys.apply(delta),
                None => return Err(ReplicaError::NoCopy(name.into())),
            },
            (RelayPart::Filter, Held::None) => return Err(ReplicaError::NoCopy(name.into())),
            (RelayPart::Filter, Held::Slot(geometry, slot)) => {
                match self.sliced.get_mut(geometry) {
                    Some(sliced) => sliced.apply(*slot, delta),
                    None => return Err(ReplicaError::NoCopy(name.into())),
                }
            }
            (RelayPart::Filter, Held::Bloom(f)) => f.apply(delta),
            (RelayPart::Filter, Held::Cuckoo(f)) => f.apply(delta),
        };
        applied.map_err(|source| ReplicaError::Apply {
            peer: name.into(),
            source,
        })?;
        let at = Some(Position {
            epoch: delta.epoch,
            version: delta.to_version,
        });
        match part {
            RelayPart::Filter => {
                peer.position = at;
                peer.note_lag();
                self.moved.send_modify(|n| *n += 1);
            }
            // Where the two differ: the lag clock and the lookups waiting
            // for a copy to move follow the ID filter's copy only.
            RelayPart::Keys => peer.key_position = at,
        }
        Ok(())
    }

    /// Replaces the copy of `name`'s key filter with a published one; one
    /// built under another filter key (or none named) is refused, and
    /// none kept.
    fn install_keys(&mut self, name: &str, fetched: &Whole) -> Result<(), ReplicaError> {
        let peer = self
            .peers
            .get_mut(name)
            .ok_or_else(|| ReplicaError::UnknownPeer(name.into()))?;
        let Some(key_id) = &fetched.key_id else {
            return Err(ReplicaError::NoKeyId(name.into()));
        };
        peer.keys = None;
        peer.key_position = None;
        if *key_id != self.key_id {
            return Err(ReplicaError::OtherKey(name.into()));
        }
        let filter =
            BloomFilter::decode(&fetched.filter.bytes).map_err(|source| ReplicaError::Decode {
                peer: name.into(),
                source,
            })?;
        peer.keys = Some(filter);
        peer.key_position = Some(fetched.filter.position);
        Ok(())
    }

    /// Peers that may hold a record with the key whose filter element is
    /// `element` (in name order): those whose key filter copy may hold it,
    /// and those of which no copy is held.
    pub fn key_candidates(&self, element: &[u8]) -> Vec<DomainName> {
        let (mut names, mut copies) = (Vec::new(), Vec::new());
        for (name, peer) in &self.peers {
            match &peer.keys {
                Some(f) => copies.push((name, f)),
                None => names.push(name.clone()),
            }
        }
        names.extend(asked_together(&copies, element));
        names.sort();
        names
    }

    /// Peers whose copy may hold `id` (in name order). The indexes and the
    /// Bloom copies held one by one are asked together, every memory read
    /// started before any is used ([`candidates_all`]).
    pub fn candidates(&self, id: &str) -> Vec<DomainName> {
        let mut names = Vec::new();
        let mut copies = Vec::new();
        for (name, peer) in &self.peers {
            match &peer.held {
                Held::Bloom(f) => copies.push((name, f)),
                Held::Cuckoo(f) if f.contains(id) => names.push(name.clone()),
                _ => {}
            }
        }
        let sliced: Vec<&Sliced> = self.sliced.values().collect();
        let indexes: Vec<&SlicedIndex> = sliced.iter().map(|s| s.index()).collect();
        let filters: Vec<&BloomFilter> = copies.iter().map(|(_, f)| *f).collect();
        let (sets, maybe) = candidates_all(&indexes, &filters, id);
        for (s, set) in sliced.iter().zip(&sets) {
            s.owners(set, &mut names);
        }
        names.extend(
            copies
                .iter()
                .zip(maybe)
                .filter(|(_, maybe)| *maybe)
                .map(|((name, _), _)| (*name).clone()),
        );
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::coordinator::Member;
    use crate::local::filter::FilterKind;
    use bytes::Bytes;
    use xarchive_filter::{CountingBloomFilter, CuckooGeometry};

    fn view(names: &[(&str, u64, u64)]) -> View {
        View::of(
            names
                .iter()
                .map(|(n, e, v)| {
                    (
                        DomainName::from(*n),
                        Member {
                            address: format!("http://{n}"),
                            kind: FilterKind::Counting,
                            epoch: *e,
                            version: *v,
                            keys: String::new(),
                            signing_key: String::new(),
                        },
                    )
                })
                .collect(),
        )
    }

    impl Replicas {
        /// Takes in the whole of `view`, as a follower that saw it change
        /// from nothing (or from the peers held) would.
        fn update_view_all(&mut self, view: &View) {
            let changes = view.changes_since(0, &self.me.clone(), self.peers.keys().cloned());
            self.update_view(view, &changes);
        }
    }

    #[test]
    fn copies_route_follow_deltas_and_survive_departure() {
        let g = BloomGeometry::for_capacity(1000, 0.01).unwrap();
        let mut r = Replicas::new(&"A".into(), "key");
        let mut b = CountingBloomFilter::new(g);
        b.set_epoch(7);
        b.insert("B-1");
        r.update_view_all(&view(&[("A", 1, 1), ("B", 7, b.version())]));
        assert!(!r.peer("B").unwrap().current());
        let fetched = FetchedFilter {
            kind: FilterKind::Counting,
            position: Position {
                epoch: 7,
                version: b.version(),
            },
            bytes: Bytes::from(b.bit_view().encode()),
        };
        r.install("B", &fetched).unwrap();
        assert!(r.peer("B").unwrap().current());
        assert_eq!(r.candidates("B-1"), vec!["B".to_string()]);

        let since = b.version();
        b.insert("B-2");
        r.update_view_all(&view(&[("A", 1, 1), ("B", 7, b.version())]));
        assert!(!r.peer("B").unwrap().current());
        r.apply("B", RelayPart::Filter, &b.flips_since(since).unwrap())
            .unwrap();
        assert!(r.peer("B").unwrap().current());
        assert_eq!(r.candidates("B-2"), vec!["B".to_string()]);

        // B leaves: down, but its copy still routes.
        r.update_view_all(&view(&[("A", 1, 1)]));
        let peer = r.peer("B").unwrap();
        assert!(!peer.registered() && peer.current());
        assert_eq!(r.candidates("B-1"), vec!["B".to_string()]);
        assert!(r.candidates("nowhere").is_empty());
    }

    #[test]
    fn positions_read_from_the_ledger_move_what_a_copy_is_measured_against_forward_only() {
        let mut r = Replicas::new(&"A".into(), "key");
        r.update_view_all(&view(&[("A", 1, 1), ("B", 7, 3)]));
        let read = |epoch, version, departed| {
            let mut known = BTreeMap::new();
            let member = view(&[("B", epoch, version)]).members["B"].clone();
            let entry = crate::cluster::Known {
                member,
                departed,
                retired: false,
            };
            known.insert("B".into(), entry);
            Roster { known }
        };
        let last = |r: &Replicas| r.peer("B").and_then(|p| p.last_published);
        r.take_positions(&read(7, 9, false));
        assert_eq!(
            last(&r),
            Some(Position {
                epoch: 7,
                version: 9
            })
        );
        r.take_positions(&read(7, 5, false));
        assert_eq!(last(&r).map(|p| p.version), Some(9), "an older read");
        r.take_positions(&read(8, 2, true));
        assert_eq!(
            last(&r),
            Some(Position {
                epoch: 8,
                version: 2
            }),
            "rebuilt, then left"
        );
        assert!(
            r.peer("B").unwrap().lagging().is_some(),
            "no copy covers it"
        );
    }

    #[test]
    fn health_reports_the_lag_clock_of_each_peer_and_whether_it_is_registered() {
        let g = BloomGeometry::for_capacity(1000, 0.01).unwrap();
        let mut r = Replicas::new(&"A".into(), "key");
        let remembered = Remembered {
            address: "http://C".into(),
            kind: FilterKind::Counting,
        };
        r.remember(&BTreeMap::from([("C".into(), remembered)]));
        let mut b = CountingBloomFilter::new(g);
        b.set_epoch(7);
        b.insert("B-1");
        r.update_view_all(&view(&[("A", 1, 1), ("B", 7, b.version())]));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let health = r.health();
        assert_eq!(health.len(), 2);
        assert!(health[0].name == "B" && health[0].registered);
        assert!(health[0].lag.is_some_and(|lag| lag.as_millis() >= 5));
        // Nothing C published is known: no lag to report, and not up.
        assert_eq!(
            health[1],
            PeerHealth {
                name: "C".into(),
                registered: false,
                lag: None,
                grace_pulls: 0
            }
        );

        let fetched = FetchedFilter {
            kind: FilterKind::Counting,
            position: Position {
                epoch: 7,
                version: b.version(),
            },
            bytes: Bytes::from(b.bit_view().encode()),
        };
        r.install("B", &fetched).unwrap();
        assert_eq!(r.health()[0].lag, Some(std::time::Duration::ZERO));
        r.update_view_all(&view(&[("A", 1, 1)]));
        assert!(!r.health()[0].registered);
    }

    #[test]
    fn a_peer_is_a_search_candidate_unless_a_copy_of_its_key_filter_under_our_key_rules_it_out() {
        let g = BloomGeometry::for_capacity(1000, 0.01).unwrap();
        let mut r = Replicas::new(&"A".into(), "ours");
        r.update_view_all(&view(&[("A", 1, 1), ("B", 7, 2), ("C", 7, 2)]));
        // No key filter copies yet: both may hold anything.
        assert_eq!(r.key_candidates(b"k1"), ["B", "C"]);

        let mut keys = CountingBloomFilter::new(g);
        keys.set_epoch(7);
        keys.insert(b"k1");
        keys.touch();
        let fetched = |key_id: &str| Whole {
            filter: FetchedFilter {
                kind: FilterKind::Counting,
                position: Position {
                    epoch: 7,
                    version: keys.version(),
                },
                bytes: Bytes::from(keys.bit_view().encode()),
            },
            key_id: Some(key_id.into()),
        };
        r.install_keys("B", &fetched("ours")).unwrap();
        assert_eq!(r.peer("B").unwrap().key_position.unwrap().version, 2);
        assert_eq!(r.key_candidates(b"k1"), ["B", "C"]);
        assert_eq!(r.key_candidates(b"k2"), ["C"]);

        // Built under another secret: refused, and no longer trusted.
        assert!(matches!(
            r.install_keys("B", &fetched("theirs")),
            Err(ReplicaError::OtherKey(_))
        ));
        assert_eq!(r.key_candidates(b"k2"), ["B", "C"]);
        assert_eq!(r.peer("B").unwrap().key_position, None);

        // A delta brings the copy forward.
        r.install_keys("B", &fetched("ours")).unwrap();
        let since = keys.version();
        keys.insert(b"k2");
        r.apply("B", RelayPart::Keys, &keys.flips_since(since).unwrap())
            .unwrap();
        assert_eq!(r.key_candidates(b"k2"), ["B", "C"]);
        assert_eq!(r.key_candidates(b"k3"), ["C"]);
    }

    #[test]
    fn copies_sharing_a_geometry_are_bit_sliced_once_there_are_enough_and_route_the_same() {
        let small = BloomGeometry::for_capacity(1_024, 0.01).unwrap();
        let large = BloomGeometry::for_capacity(4_096, 0.01).unwrap();
        let names: Vec<String> = (0..70).map(|i| format!("D{i:02}")).collect();
        let members: Vec<(&str, u64, u64)> = names.iter().map(|n| (n.as_str(), 7, 2)).collect();
        let mut r = Replicas::new(&"A".into(), "key");
        r.update_view_all(&view(&members));
        let copy = |geometry, ids: &[String]| {
            let mut f = CountingBloomFilter::new(geometry);
            f.set_epoch(7);
            for id in ids {
                f.insert(id);
            }
            f
        };
        let fetched = |f: &CountingBloomFilter| FetchedFilter {
            kind: FilterKind::Counting,
            position: Position {
                epoch: 7,
                version: f.version(),
            },
            bytes: Bytes::from(f.bit_view().encode()),
        };
        for (i, name) in names.iter().enumerate() {
            // 66 small filters (enough for an index), 4 large ones.
            let geometry = if i < 66 { small } else { large };
            r.install(name, &fetched(&copy(geometry, &[format!("{name}-1")])))
                .unwrap();
            assert_eq!(
                r.sliced.len(),
                usize::from(i >= MIN_SLICED - 1),
                "after {i}"
            );
        }
        assert!(r.sliced.contains_key(&small) && !r.sliced.contains_key(&large));
        for name in &names {
            let name = DomainName::from(name.as_str());
            assert!(r.candidates(&format!("{name}-1")).contains(&name), "{name}");
        }

        // A delta reaches a bit-sliced copy.
        let mut d00 = copy(small, &["D00-1".to_string()]);
        let since = d00.version();
        d00.insert("D00-2");
        r.apply("D00", RelayPart::Filter, &d00.flips_since(since).unwrap())
            .unwrap();
        assert!(r.candidates("D00-2").contains(&"D00".into()));

        // Rebuilt larger, D01 leaves its slot: its old copy routes nothing.
        r.install("D01", &fetched(&copy(large, &["D01-9".to_string()])))
            .unwrap();
        assert!(!r.candidates("D01-1").contains(&"D01".into()));
        assert!(r.candidates("D01-9").contains(&"D01".into()));
    }

    /// `/v1/cluster`'s `filter_bytes`, which the page weighs against its
    /// budget before fetching a filter, is what the page then holds: the
    /// published bytes less the envelope and header (docs/FORMAT.md: 52
    /// bytes around an XABL's bits, 60 around an XACK's table).
    #[test]
    fn every_copy_is_shown_with_the_size_a_reader_of_its_published_filter_holds() {
        let small = BloomGeometry::for_capacity(1_024, 0.01).unwrap();
        let large = BloomGeometry::for_capacity(4_096, 0.01).unwrap();
        let names: Vec<String> = (0..MIN_SLICED + 2).map(|i| format!("D{i:02}")).collect();
        let members: Vec<(&str, u64, u64)> = names.iter().map(|n| (n.as_str(), 7, 0)).collect();
        let mut r = Replicas::new(&"A".into(), "key");
        r.update_view_all(&view(&members));
        assert!(
            r.views().iter().all(|v| v.filter_bytes.is_none()),
            "no copy yet"
        );

        let mut published = BTreeMap::new();
        for (i, name) in names.iter().enumerate() {
            // Enough small copies to be bit-sliced, one large, one cuckoo.
            let (kind, bytes) = match i.cmp(&MIN_SLICED) {
                std::cmp::Ordering::Less => (
                    FilterKind::Counting,
                    CountingBloomFilter::new(small).bit_view().encode(),
                ),
                std::cmp::Ordering::Equal => (
                    FilterKind::Counting,
                    CountingBloomFilter::new(large).bit_view().encode(),
                ),
                std::cmp::Ordering::Greater => {
                    let g = CuckooGeometry::new(1_000, 12, 3).unwrap();
                    (FilterKind::Cuckoo, CuckooFilter::new(g).encode())
                }
            };
            let fetched = FetchedFilter {
                kind,
                position: Position {
                    epoch: 0,
                    version: 0,
                },
                bytes: Bytes::from(bytes.clone()),
            };
            r.install(name, &fetched).unwrap();
            let envelope = if kind == FilterKind::Cuckoo { 60 } else { 52 };
            published.insert(name.clone(), bytes.len() as u64 - envelope);
        }
        assert!(r.sliced.contains_key(&small));
        for shown in r.views() {
            assert_eq!(
                shown.filter_bytes,
                Some(published[&shown.name]),
                "{}",
                shown.name
            );
        }
        assert_eq!(published["D00"], small.num_bits() / 8);
        assert_eq!(published[&names[MIN_SLICED + 1]], (4 * 1_000 * 12) / 8);
    }
}
