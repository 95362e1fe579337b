//! The one door through which a change enters a copy of a peer's filter
//! or key filter, whoever brought it (a tree neighbour's relay page, or a
//! pull from the origin or from a neighbour): whether it moves the copy
//! forward, the cache evicted before it is applied, and whether it is
//! passed on along the relay tree.

use super::replicas::{covers, Change, ReplicaError, Replicas};
use super::Cluster;
use crate::cluster::relay::{pulled, Pulled};
use crate::local::domain::Position;
use crate::wire::{RelayEntry, RelayPart};

/// Where a change offered to a copy comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source<'a> {
    /// A page of the relay of the tree neighbour `via`: the entry as read,
    /// passed on as it came.
    Relay { via: &'a str, entry: &'a RelayEntry },
    /// Pulled from the origin itself: what it has now.
    Origin,
    /// A first copy from the tree neighbour named.
    Nearby(&'a str),
}

/// What came of a change offered to a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Applied: the copy stands at the change's position.
    Moved,
    /// It would not bring the copy forward: nothing was done.
    Dropped,
}

/// What bringing a copy to a published position takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pull {
    /// The copy already covers it.
    Nothing,
    /// The changes since the copy's version, in the same epoch.
    Delta { epoch: u64, since: u64 },
    /// The whole filter: no copy yet, or another epoch (rebuilt).
    Snapshot,
}

/// The pull from a copy at `held` (none without a copy) to `published`.
pub(crate) fn pull(held: Option<Position>, published: Position) -> Pull {
    match held {
        _ if covers(held, Some(published)) => Pull::Nothing,
        Some(h) if h.epoch == published.epoch => Pull::Delta {
            epoch: h.epoch,
            since: h.version,
        },
        _ => Pull::Snapshot,
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

/// Whether `change` brings a copy at `held` forward, its origin
/// publishing `published`: a delta only inside its span, a whole filter
/// only forward ([`wanted_whole`]).
fn moves_forward(held: Option<Position>, published: Option<Position>, change: &Change) -> bool {
    match change {
        Change::Delta { delta, .. } => {
            advances(held, delta.epoch, delta.from_version, delta.to_version)
        }
        Change::Whole(whole) => wanted_whole(held, published, whole.filter.position),
    }
}

/// Whether a change taken is kept in this domain's relay for its tree
/// neighbours: one read in a neighbour's relay always (it is on its way
/// through the tree); one pulled, with relaying on, only if it changed a
/// copy already held (a first copy is no change: a domain joining would
/// send its neighbours every filter of the nation).
fn passes_on(source: Source<'_>, relaying: bool, held_before: Option<Position>) -> bool {
    match source {
        Source::Relay { .. } => true,
        Source::Origin | Source::Nearby(_) => relaying && held_before.is_some(),
    }
}

impl Replicas {
    /// Whether `change` from `source` brings the copy of `origin`'s `part`
    /// forward ([`moves_forward`]), as the copy and the position its
    /// origin publishes stand now.
    fn moves_forward(
        &self,
        origin: &str,
        part: RelayPart,
        change: &Change,
        source: Source<'_>,
    ) -> Result<bool, ReplicaError> {
        let peer = self
            .peer(origin)
            .ok_or_else(|| ReplicaError::UnknownPeer(origin.into()))?;
        // What comes from the origin itself is the filter it has now: an
        // epoch from there is the one it publishes.
        let from_origin = match source {
            Source::Relay { via, .. } => via == origin,
            Source::Origin => true,
            Source::Nearby(_) => false,
        };
        let published = if from_origin {
            Some(change.to())
        } else {
            peer.published
        };
        Ok(moves_forward(peer.position_of(part), published, change))
    }

    /// Takes `change` into the copy of `origin`'s `part` if it brings the
    /// copy forward as the copy stands now; whether it did.
    fn take_forward(
        &mut self,
        origin: &str,
        part: RelayPart,
        change: &Change,
        source: Source<'_>,
    ) -> Result<bool, ReplicaError> {
        if !self.moves_forward(origin, part, change, source)? {
            return Ok(false);
        }
        self.take(origin, part, change)?;
        Ok(true)
    }
}

impl Cluster {
    /// Takes `change` into the copy of `origin`'s `part` if it brings the
    /// copy forward, and keeps it in the relay if it is to be passed on;
    /// anything else is dropped (the per-peer sync still pulls what the
    /// copy lacks). Every change to a copy comes through here.
    pub(crate) async fn take_change(
        &self,
        origin: &str,
        part: RelayPart,
        change: Change,
        source: Source<'_>,
    ) -> Result<Taken, ReplicaError> {
        let (held, forward) = {
            let replicas = self.replicas.read();
            let held = replicas
                .peer(origin)
                .and_then(|peer| peer.position_of(part));
            (held, replicas.moves_forward(origin, part, &change, source)?)
        };
        if !forward {
            return Ok(Taken::Dropped);
        }
        // Evict first, then apply, so that a cached record is never served
        // against a copy that already dropped it: once the copy covers a
        // position, no cached copy of a record changed up to there may be
        // served (`Cluster::copy_confirmed`, lookup.rs, relies on it). A
        // delta names the IDs it replaced or deleted; which records a whole
        // filter changed is unknown, so everything cached from the origin
        // goes. A key filter's change says nothing of records.
        match (part, &change) {
            (RelayPart::Filter, Change::Delta { changed, .. }) => {
                self.on_changed(origin, changed).await;
            }
            (RelayPart::Filter, Change::Whole(_)) => self.on_snapshot(origin),
            (RelayPart::Keys, _) => {}
        }
        {
            let mut replicas = self.replicas.write();
            // The cache was evicted outside the lock, so another change of
            // this origin (a relay page and a pull, at once) may have moved
            // the copy meanwhile: checked again where it is applied, the
            // copy never goes back. (What was evicted for nothing is only
            // read again.)
            if !replicas.take_forward(origin, part, &change, source)? {
                return Ok(Taken::Dropped);
            }
            match (source, part, &change) {
                // A copy brought forward by the relay counts as synced once
                // current, as after a pull.
                (Source::Relay { .. }, _, _) => replicas.relayed(origin),
                (Source::Origin, RelayPart::Filter, Change::Whole(_)) => {
                    replicas.first_copy_from(origin, origin);
                }
                (Source::Nearby(from), RelayPart::Filter, Change::Whole(_)) => {
                    replicas.first_copy_from(origin, from);
                }
                _ => {}
            }
        }
        if passes_on(source, self.relay_grace().is_some(), held) {
            let (entry, via) = match source {
                Source::Relay { via, entry } => (entry.clone(), via),
                Source::Origin | Source::Nearby(_) => {
                    let pulled_change = match &change {
                        Change::Delta { delta, changed } => Pulled::Delta(delta, changed),
                        Change::Whole(whole) => {
                            Pulled::Whole(&whole.filter, whole.key_id.as_deref())
                        }
                    };
                    (pulled(origin, part, pulled_change), origin)
                }
            };
            self.relay.push(entry, via);
        }
        Ok(Taken::Moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::client::{FetchedFilter, Whole};
    use crate::cluster::coordinator::{Member, MemberChange, View};
    use crate::local::filter::FilterKind;
    use proptest::prelude::*;
    use xarchive_filter::{BloomFilter, BloomGeometry, CountingBloomFilter};

    fn at(epoch: u64, version: u64) -> Position {
        Position { epoch, version }
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

    #[test]
    fn a_copy_that_covers_the_published_position_needs_nothing() {
        assert_eq!(pull(Some(at(7, 10)), at(7, 10)), Pull::Nothing);
        assert_eq!(pull(Some(at(7, 12)), at(7, 10)), Pull::Nothing);
    }

    #[test]
    fn a_copy_behind_in_the_same_epoch_takes_a_delta_from_its_version() {
        assert_eq!(
            pull(Some(at(7, 3)), at(7, 10)),
            Pull::Delta { epoch: 7, since: 3 }
        );
    }

    #[test]
    fn no_copy_or_another_epoch_takes_a_snapshot() {
        assert_eq!(pull(None, at(7, 10)), Pull::Snapshot);
        assert_eq!(pull(None, at(7, 0)), Pull::Snapshot);
        // Rebuilt: a later version of the old epoch says nothing of the new.
        assert_eq!(pull(Some(at(5, 99)), at(7, 1)), Pull::Snapshot);
    }

    #[test]
    fn a_relayed_change_is_always_passed_on_and_a_pulled_one_only_if_it_changed_a_copy_held() {
        let entry = RelayEntry {
            header: crate::wire::RelayHeader {
                origin: "B".into(),
                part: RelayPart::Keys,
                epoch: 1,
                version: 2,
                from: Some(1),
                kind: None,
                key_id: None,
            },
            body: bytes::Bytes::new(),
        };
        let relayed = Source::Relay {
            via: "C",
            entry: &entry,
        };
        assert!(passes_on(relayed, false, None));
        assert!(passes_on(Source::Origin, true, Some(at(1, 1))));
        assert!(!passes_on(Source::Origin, true, None), "a first copy");
        assert!(!passes_on(Source::Nearby("C"), true, None), "a first copy");
        assert!(
            !passes_on(Source::Origin, false, Some(at(1, 1))),
            "relaying off"
        );
    }

    fn geometry() -> BloomGeometry {
        BloomGeometry::for_capacity(256, 0.01).unwrap_or_else(|e| panic!("{e}"))
    }

    /// One step of an origin's history: an ID put in, one taken out, or
    /// the filter rebuilt in a new epoch.
    #[derive(Clone, Debug)]
    enum Step {
        Insert(u8),
        Remove(u8),
        Rebuild,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => any::<u8>().prop_map(Step::Insert),
            2 => any::<u8>().prop_map(Step::Remove),
            1 => Just(Step::Rebuild),
        ]
    }

    /// What an origin published along its history: its filter's bit view
    /// at every position, and every change between two of them a peer
    /// could be offered (deltas of any span in an epoch, whole filters).
    fn history(steps: &[Step]) -> (Vec<(Position, BloomFilter)>, Vec<Change>) {
        let mut filter = CountingBloomFilter::new(geometry());
        filter.set_epoch(1);
        let mut held: Vec<u8> = Vec::new();
        let mut states = vec![(at(1, filter.version()), filter.bit_view())];
        let mut changes = Vec::new();
        let mut epoch_start = 0;
        for step in steps {
            match step {
                Step::Insert(id) => {
                    filter.insert([*id]);
                    held.push(*id);
                }
                Step::Remove(id) => {
                    if let Some(i) = held.iter().position(|h| h == id) {
                        held.swap_remove(i);
                        let _ = filter.remove([*id]);
                    } else {
                        filter.touch();
                    }
                }
                Step::Rebuild => {
                    let epoch = filter.epoch() + 1;
                    filter = CountingBloomFilter::new(geometry());
                    filter.set_epoch(epoch);
                    for id in &held {
                        filter.insert([*id]);
                    }
                    epoch_start = states.len();
                }
            }
            let now = at(filter.epoch(), filter.version());
            for (since, _) in &states[epoch_start..] {
                if since.epoch == now.epoch && since.version < now.version {
                    if let Ok(delta) = filter.flips_since(since.version) {
                        changes.push(Change::Delta {
                            delta,
                            changed: Vec::new(),
                        });
                    }
                }
            }
            let view = filter.bit_view();
            changes.push(Change::Whole(Whole {
                filter: FetchedFilter {
                    kind: FilterKind::Counting,
                    position: now,
                    bytes: view.encode().into(),
                },
                key_id: None,
            }));
            states.push((now, view));
        }
        (states, changes)
    }

    fn with_peer(published: Position) -> Replicas {
        let member = Member {
            address: "http://B".into(),
            kind: FilterKind::Counting,
            epoch: published.epoch,
            version: published.version,
            keys: String::new(),
            signing_key: String::new(),
        };
        let mut replicas = Replicas::new(&"A".into(), "key");
        let view = View::of([("B".into(), member.clone())].into_iter().collect());
        replicas.update_view(&view, &[MemberChange::Present("B".into(), member)]);
        replicas
    }

    /// The door's first check and its cache eviction run before the
    /// write lock is taken; meanwhile a later whole filter was taken in.
    #[test]
    fn a_change_overtaken_while_the_cache_was_evicted_is_dropped_not_applied() {
        let steps: Vec<Step> = (0..4).map(Step::Insert).collect();
        let (states, changes) = history(&steps);
        let whole_at = |version: u64| {
            changes
                .iter()
                .find(|c| matches!(c, Change::Whole(w) if w.filter.position.version == version))
                .unwrap_or_else(|| panic!("a whole filter at version {version}"))
        };
        let (first, middle, last) = (states[1].0, states[2].0, states[4].0);
        let mut replicas = with_peer(last);
        let source = Source::Nearby("C");
        let filter = RelayPart::Filter;
        assert!(replicas
            .take_forward("B", filter, whole_at(first.version), source)
            .unwrap_or_else(|e| panic!("{e}")));
        let earlier = whole_at(middle.version);
        assert!(
            replicas
                .moves_forward("B", filter, earlier, source)
                .unwrap_or_else(|e| panic!("{e}")),
            "forward when first checked"
        );
        assert!(replicas
            .take_forward("B", filter, whole_at(last.version), source)
            .unwrap_or_else(|e| panic!("{e}")));
        assert!(
            !replicas
                .take_forward("B", filter, earlier, source)
                .unwrap_or_else(|e| panic!("{e}")),
            "overtaken by then"
        );
        let held = replicas.peer("B").and_then(|p| p.position_of(filter));
        assert_eq!(held, Some(last));
    }

    proptest! {
        /// Whatever order deltas and whole filters reach the door in, a
        /// copy it keeps never goes backward within an epoch, and holds
        /// exactly the origin's filter at the position it claims.
        #[test]
        fn a_copy_never_goes_backward_and_always_equals_its_origin_at_the_position_it_claims(
            steps in proptest::collection::vec(step(), 1..24),
            order in proptest::collection::vec(any::<prop::sample::Index>(), 1..64),
        ) {
            let (states, changes) = history(&steps);
            let published = states.last().map_or(at(1, 0), |(p, _)| *p);
            let mut replicas = with_peer(published);
            let mut last: Option<Position> = None;
            for pick in order {
                let change = &changes[pick.index(changes.len())];
                // From a neighbour: the epoch published is the view's.
                replicas.take_forward("B", RelayPart::Filter, change, Source::Nearby("C"))
                    .unwrap_or_else(|e| panic!("a change the rule lets in must apply: {e}"));
                let Some(now) = replicas.peer("B").and_then(|p| p.position_of(RelayPart::Filter)) else {
                    continue;
                };
                if let Some(before) = last {
                    prop_assert!(
                        now.epoch != before.epoch || now.version >= before.version,
                        "went back from {before:?} to {now:?}"
                    );
                }
                last = Some(now);
                let copy = replicas.copy_view("B", RelayPart::Filter)
                    .unwrap_or_else(|| panic!("a copy at {now:?} is held"));
                let origin = states.iter().rev().find(|(p, _)| *p == now)
                    .unwrap_or_else(|| panic!("the origin was at {now:?}"));
                let expected = origin.1.encode();
                prop_assert_eq!(copy.filter.bytes.as_ref(), expected.as_slice());
            }
        }
    }
}
