//! Finding a record anywhere: this domain first, then the domains whose
//! replicas may hold the ID, then — only when a replica is not known to be
//! current — the seed paper's broadcast probe (Luo et al., 2023, DOI
//! 10.57237/j.cst.2023.04.008; README.md). "Not found" is answered
//! only when every domain that could hold the ID has said it does not.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use super::cache::Cached;
use super::coordinator::{Known, Member, Roster};
use super::replicas::{covers, PeerInfo};
use super::Cluster;
use crate::local::domain::Position;
use crate::local::id::ArchiveId;
use crate::local::record::{Record, StoredRecord};
use crate::wire::CacheRoute;
pub use crate::wire::{Route, Strategy};

#[derive(Debug)]
pub enum Outcome {
    Found {
        record: Record,
        owner: String,
    },
    NotFound,
    /// Not found where asked, and these domains could not answer.
    Unavailable {
        domains: Vec<String>,
    },
    /// Not found in any domain known, but the membership could not be
    /// confirmed (just started, or the coordinator is unreachable).
    NotReady {
        reason: String,
    },
}

#[derive(Debug)]
pub struct Lookup {
    pub outcome: Outcome,
    pub route: Route,
}

/// A peer's answer to one call.
enum Answer<T> {
    Got(T),
    Unreachable(String),
}

async fn fetch(cluster: &Cluster, name: &str, address: &str, id: &str) -> Answer<Option<Record>> {
    match cluster.peer_client(address) {
        Ok(client) => match client.get(id).await {
            Ok(record) => Answer::Got(record),
            Err(e) => {
                tracing::debug!(peer = name, error = %e, "fetch failed");
                Answer::Unreachable(e.to_string())
            }
        },
        Err(e) => Answer::Unreachable(e.to_string()),
    }
}

async fn probe(cluster: &Cluster, address: &str, id: &str) -> Answer<bool> {
    match cluster.peer_client(address) {
        Ok(client) => match client.contains(id).await {
            Ok(maybe) => Answer::Got(maybe),
            Err(e) => Answer::Unreachable(e.to_string()),
        },
        Err(e) => Answer::Unreachable(e.to_string()),
    }
}

/// Asks `targets` for the record at once; the first to have it wins.
async fn fetch_any(
    cluster: &Cluster,
    id: &str,
    targets: &[(String, String)],
    route: &mut Route,
) -> Option<(Record, String)> {
    let mut calls: FuturesUnordered<_> =
        targets
            .iter()
            .map(|(name, address)| async move {
                (name.clone(), fetch(cluster, name, address, id).await)
            })
            .collect();
    route.remote_calls += targets.len();
    route.asked.extend(targets.iter().map(|(n, _)| n.clone()));
    while let Some((name, answer)) = calls.next().await {
        match answer {
            Answer::Got(Some(record)) => return Some((record, name)),
            Answer::Got(None) => route.false_positive_hops += 1,
            Answer::Unreachable(e) => {
                route.errors.insert(name.clone(), e);
                route.unreachable.push(name);
            }
        }
    }
    None
}

/// The seed paper's probe: ask `targets` whether their live filters may
/// hold the ID, then fetch from those that say so.
async fn broadcast(
    cluster: &Cluster,
    id: &str,
    targets: Vec<(String, String)>,
    route: &mut Route,
) -> Option<(Record, String)> {
    route.broadcast = true;
    route.remote_calls += targets.len();
    route.probed.extend(targets.iter().map(|(n, _)| n.clone()));
    let answers = futures::future::join_all(targets.iter().map(|(name, address)| async move {
        (
            name.clone(),
            address.clone(),
            probe(cluster, address, id).await,
        )
    }))
    .await;
    let mut maybe = Vec::new();
    for (name, address, answer) in answers {
        match answer {
            Answer::Got(true) => maybe.push((name, address)),
            Answer::Got(false) => {}
            Answer::Unreachable(e) => {
                route.errors.insert(name.clone(), e);
                route.unreachable.push(name);
            }
        }
    }
    let found = fetch_any(cluster, id, &maybe, route).await;
    // Probed domains that said "maybe" but lacked it are not replica hops.
    route.false_positive_hops -= route.false_positive_hops.min(maybe.len());
    found
}

/// When a lookup began, and how it is being made: what [`Cluster::find`]
/// continues after the local store said no.
pub struct Started {
    pub at: Instant,
    pub route: Route,
}

impl Started {
    pub fn new(strategy: Strategy) -> Self {
        Started {
            at: Instant::now(),
            route: Route {
                strategy,
                ..Route::default()
            },
        }
    }

    /// The answer, with the route's time and its unreachable domains
    /// sorted once.
    pub fn finish(self, outcome: Outcome, mut route: Route) -> Lookup {
        route.elapsed_ms = self.at.elapsed().as_secs_f64() * 1e3;
        route.unreachable.sort();
        route.unreachable.dedup();
        Lookup { outcome, route }
    }
}

impl Cluster {
    /// Finds `id` in the other domains (this one's store said no): by the
    /// replicas, a cached copy, then the domains the replicas cannot rule
    /// out; or, for [`Strategy::Broadcast`], by asking every domain.
    pub async fn find(self: &Arc<Self>, id: &ArchiveId, started: Started) -> Lookup {
        let cluster = self;
        let mut route = started.route.clone();
        if route.strategy == Strategy::Broadcast {
            let (targets, unconfirmed) = cluster.everyone_now().await;
            route.unconfirmed = unconfirmed;
            let found = broadcast(cluster, id.as_str(), targets, &mut route).await;
            return started.finish(conclude(found, &route), route);
        }

        // Candidates and the positions of the copies they came from, read
        // together: a copy updated after its candidates were read must not
        // then pass as current, or an ID it gained would be missed.
        let (peers, follows, lost_at) = {
            let view = cluster.coordinator.view();
            let view = view.borrow();
            let replicas = cluster.replicas.read();
            route.candidates = replicas.candidates(id.as_str());
            (replicas.infos(), replicas.follows(&view), view.lost_at)
        };
        // A cached copy from a domain that may hold the ID needs no call.
        let cache = &cluster.cache;
        cache.seen(id.as_str());
        // It is served only while the owner's copy here is (nearly)
        // current, and the positions held here follow the coordinator's
        // (connected, and read since its last gap): else a delete at the
        // owner may not have reached this domain. A copy found behind
        // after a gap (a lost connection) may have been behind, unseen,
        // since then: its lag counts from that moment, not from when it
        // was noticed. An owner not registered now may have published
        // writes this domain never saw (it died, or its registration
        // expired, during a gap here): its records are not served from
        // the cache at all.
        let mut stale = false;
        for owner in &route.candidates {
            let lagging = match peers.iter().find(|p| p.name == *owner) {
                Some(p) if follows && p.registered => p
                    .lagging
                    .map(|lag| lost_at.map_or(lag, |at| lag.max(at.elapsed()))),
                _ => Some(std::time::Duration::MAX),
            };
            match cache.get(owner, id.as_str(), lagging).await {
                Cached::Fresh(bytes) => match StoredRecord::decode(&bytes) {
                    Ok(stored) => {
                        route.cache = Some(CacheRoute::Hit);
                        let record = stored.into_record(id.clone(), owner);
                        let owner = owner.clone();
                        return started.finish(Outcome::Found { record, owner }, route);
                    }
                    Err(e) => tracing::warn!(owner, error = %e, "unreadable cached record ignored"),
                },
                Cached::Stale => stale = true,
                Cached::Absent => {}
            }
        }

        // Lookups of one ID in flight at once share one remote search; a
        // joiner keeps only a "found" (a miss may predate its own start).
        let (flight, leader) = cluster.flight(id, route.candidates.clone(), peers.clone());
        let mut result = flight.await;
        if !leader {
            if result.found.is_some() {
                result.route.coalesced = true;
                result.route.remote_calls = 0;
            } else {
                result = routed(cluster.clone(), id.clone(), route.candidates.clone(), peers).await;
            }
        }
        let Remote {
            found,
            route: remote,
        } = result;
        let route = Route {
            candidates: route.candidates,
            cache: match (cache.enabled(), stale) {
                (false, _) => None,
                (true, false) => Some(CacheRoute::Miss),
                (true, true) => Some(CacheRoute::Stale),
            },
            ..remote
        };
        started.finish(conclude(found, &route), route)
    }
}

/// What a routed search of the other domains found, and how.
#[derive(Clone, Debug)]
pub struct Remote {
    pub found: Option<(Record, String)>,
    pub route: Route,
}

/// The remote part of a routed lookup: the candidates asked directly,
/// then the domains whose replicas are not known to be current. `peers`
/// are the copies' positions read with `candidates`. A record found is
/// offered to the cache (kept if admitted and no eviction from its owner
/// came in since the search began).
pub(crate) async fn routed(
    cluster: Arc<Cluster>,
    id: ArchiveId,
    candidates: Vec<String>,
    peers: Vec<PeerInfo>,
) -> Remote {
    let ticket = cluster.cache.ticket();
    let mut route = Route {
        strategy: Strategy::Routed,
        candidates: candidates.clone(),
        ..Route::default()
    };
    let address_of = |name: &str| {
        peers
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.address.clone())
    };
    let targets: Vec<(String, String)> = candidates
        .iter()
        .filter_map(|n| address_of(n).map(|a| (n.clone(), a)))
        .collect();
    let mut found = fetch_any(&cluster, id.as_str(), &targets, &mut route).await;

    if found.is_none() {
        // Nobody asked had it. Every other domain that the copies cannot
        // rule out is probed; while the coordinator cannot be read, that
        // is every domain known, and the answer cannot be "not found".
        let asked: BTreeSet<String> = route.asked.iter().cloned().collect();
        let mut stale = match cluster.confirmed().await {
            Ok(roster) => {
                // A candidate retired since its copy was read here: its
                // silence is not a 503 (`cluster forget`).
                let retired = cluster.retire(&roster);
                route.unreachable.retain(|n| !retired.contains(n));
                route.errors.retain(|n, _| !retired.contains(n));
                not_ruled_out(&roster, &peers, &cluster.me)
            }
            Err(e) => {
                tracing::debug!(error = %e, "membership unconfirmed: asking every domain known");
                route.unconfirmed = Some(e.to_string());
                everyone_known(&cluster, &peers)
            }
        };
        stale.retain(|(name, _)| !asked.contains(name));
        if !stale.is_empty() {
            found = broadcast(&cluster, id.as_str(), stale, &mut route).await;
        }
    }
    if let Some((record, owner)) = &found {
        match StoredRecord::from_record(record).encode() {
            Ok(bytes) => cluster.cache.fill(owner, id.as_str(), bytes, &ticket).await,
            Err(e) => tracing::error!(owner, error = %e, "a record found is not cached"),
        }
    }
    Remote { found, route }
}

/// The other domains whose copies held here cannot rule an ID out, with
/// their addresses, given the positions just read from the coordinator:
/// - a domain with an entry in the positions ledger (registered now or
///   not: left cleanly, or down, paused or cut off past its session),
///   unless the copy covers the position the entry holds: that is the last
///   one it published, since it publishes into its entry in the
///   transaction that publishes into its registration (`zookeeper.rs`
///   `publish`; the in-process hub keeps both together too), and a write
///   is acknowledged only once its position is published, so the entry's
///   position bounds every write it ever acknowledged. Why this cannot
///   give a false "not found": a copy covering it holds every such write;
///   a domain that comes back writes its entry (at its new position)
///   before it acknowledges another write (`register`), and a lookup
///   reads the ledger after `sync`, so a write acknowledged before the
///   lookup began is within the position read;
/// - a domain retired by `cluster forget`: never (the operator retired
///   its records with it; it could not be registered then);
/// - a domain known only here (the coordinator lost its data): always.
///
/// A copy is consulted before this (its "maybe" makes a candidate); this
/// is the rule for trusting its "no". `peers` were read together with the
/// candidates, so a copy updated since cannot pass as covering.
pub(crate) fn not_ruled_out(
    roster: &Roster,
    peers: &[PeerInfo],
    me: &str,
) -> Vec<(String, String)> {
    not_ruled_out_by(roster, peers, me, |p| p.position)
}

/// [`not_ruled_out`] by the copies whose positions `copy` picks: a peer's
/// filter or its key filter.
fn not_ruled_out_by(
    roster: &Roster,
    peers: &[PeerInfo],
    me: &str,
    copy: impl Fn(&PeerInfo) -> Option<Position>,
) -> Vec<(String, String)> {
    let peer = |name: &str| peers.iter().find(|p| p.name == name);
    let covered = |name: &str, published: &Member| {
        peer(name).is_some_and(|p| covers(copy(p), Some(published.position())))
    };
    everyone(roster, peers, me)
        .into_iter()
        .filter(|(name, _)| match roster.known.get(name) {
            Some(known) => !covered(name, &known.member),
            None => true,
        })
        .collect()
}

impl Cluster {
    /// Every domain's last published position, read after this call began
    /// (shared with the lookups and searches waiting at the same time).
    pub(super) async fn confirmed(&self) -> Result<std::sync::Arc<Roster>, super::CoordError> {
        self.confirmations
            .confirm(|| self.coordinator.read_current())
            .await
    }

    /// Drops the copies of the domains `roster` says were retired, and
    /// returns those names.
    pub(super) fn retire(&self, roster: &Roster) -> Vec<String> {
        let retired: Vec<String> = roster
            .known
            .iter()
            .filter(|(_, k)| k.retired)
            .map(|(n, _)| n.clone())
            .collect();
        if retired
            .iter()
            .any(|n| self.replicas.read().peer(n).is_some())
        {
            let mut replicas = self.replicas.write();
            for name in &retired {
                if replicas.retire(name) {
                    tracing::info!(domain = %name, "dropped the copy of a retired domain");
                }
            }
        }
        retired
    }

    /// Every other domain, with its address: the membership read from the
    /// coordinator and the copies held here; while the coordinator cannot
    /// be read, every domain known here, and why it could not be read
    /// (then a domain not known here may exist).
    pub(super) async fn everyone_now(&self) -> (Vec<(String, String)>, Option<String>) {
        let peers = self.replicas.read().infos();
        match self.confirmed().await {
            Ok(roster) => (everyone(&roster, &peers, &self.me), None),
            Err(e) => (everyone_known(self, &peers), Some(e.to_string())),
        }
    }
}

impl Cluster {
    /// The other domains a search by key must ask: `candidates` (whose
    /// key filter copies may hold the key, read with `peers`), and those
    /// whose key filter copies cannot rule it out by the membership read
    /// now (the rule of [`not_ruled_out`]); while the coordinator cannot
    /// be read, every domain known, and why it could not be read.
    pub(super) async fn search_targets(
        &self,
        candidates: &[String],
        peers: &[PeerInfo],
    ) -> (Vec<(String, String)>, Option<String>) {
        match self.confirmed().await {
            Ok(roster) => {
                self.retire(&roster);
                let mut targets = not_ruled_out_by(&roster, peers, &self.me, |p| p.key_position);
                let all = everyone(&roster, peers, &self.me);
                targets.extend(
                    all.into_iter()
                        .filter(|(name, _)| candidates.contains(name)),
                );
                targets.sort();
                targets.dedup();
                (targets, None)
            }
            Err(e) => (everyone_known(self, peers), Some(e.to_string())),
        }
    }
}

/// Every other domain in the roster or held as a copy, with its address,
/// but those retired: the seed paper's broadcast asks them all.
fn everyone(roster: &Roster, peers: &[PeerInfo], me: &str) -> Vec<(String, String)> {
    let mut all: std::collections::BTreeMap<String, String> = peers
        .iter()
        .map(|p| (p.name.clone(), p.address.clone()))
        .collect();
    for (name, known) in &roster.known {
        all.insert(name.clone(), known.member.address.clone());
    }
    all.remove(me);
    all.retain(|name, _| !roster.known.get(name).is_some_and(|k| k.retired));
    all.into_iter().collect()
}

/// Every other domain this one knows of without the coordinator: the
/// last view of the membership and the copies held.
fn everyone_known(cluster: &Cluster, peers: &[PeerInfo]) -> Vec<(String, String)> {
    let members = cluster.coordinator.view().borrow().members.clone();
    let known = members
        .into_iter()
        .map(|(name, member)| {
            let known = Known {
                member,
                departed: false,
                retired: false,
            };
            (name, known)
        })
        .collect();
    everyone(&Roster { known }, peers, &cluster.me)
}

fn conclude(found: Option<(Record, String)>, route: &Route) -> Outcome {
    match (found, &route.unconfirmed) {
        (Some((record, owner)), _) => Outcome::Found { record, owner },
        (None, _) if !route.unreachable.is_empty() => {
            let mut domains = route.unreachable.clone();
            domains.sort();
            domains.dedup();
            Outcome::Unavailable { domains }
        }
        (None, Some(reason)) => Outcome::NotReady {
            reason: reason.clone(),
        },
        (None, None) => Outcome::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::domain::Position;
    use crate::local::filter::FilterKind;

    fn member(name: &str, version: u64) -> Member {
        Member {
            address: format!("http://{name}"),
            kind: FilterKind::Counting,
            epoch: 7,
            version,
            keys: String::new(),
        }
    }

    fn copy(name: &str, version: Option<u64>) -> PeerInfo {
        PeerInfo {
            name: name.into(),
            address: format!("http://{name}"),
            lagging: None,
            position: version.map(|version| Position { epoch: 7, version }),
            key_position: None,
            registered: true,
        }
    }

    /// A ledger of these (name, position published, departed, retired).
    fn roster(entries: &[(&str, u64, bool, bool)]) -> Roster {
        let known = entries
            .iter()
            .map(|&(name, version, departed, retired)| {
                let known = Known {
                    member: member(name, version),
                    departed,
                    retired,
                };
                (name.to_owned(), known)
            })
            .collect();
        Roster { known }
    }

    fn registered(entries: &[(&str, u64)]) -> Roster {
        let all: Vec<_> = entries.iter().map(|&(n, v)| (n, v, false, false)).collect();
        roster(&all)
    }

    fn names(out: Vec<(String, String)>) -> Vec<String> {
        out.into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn a_member_is_ruled_out_only_by_a_copy_covering_what_it_published() {
        let roster = registered(&[("B", 10), ("C", 10), ("D", 10), ("E", 10)]);
        let peers = [
            copy("B", Some(10)),
            copy("C", Some(12)),
            copy("D", Some(9)),
            copy("E", None),
        ];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["D", "E"]);
    }

    #[test]
    fn a_search_trusts_only_key_filter_copies_that_cover_what_was_published() {
        let roster = registered(&[("B", 10), ("C", 10)]);
        let b = PeerInfo {
            key_position: Some(Position {
                epoch: 7,
                version: 10,
            }),
            ..copy("B", Some(10))
        };
        // C's filter copy is current, its key filter copy is not.
        let peers = [b, copy("C", Some(10))];
        assert!(not_ruled_out(&roster, &peers, "A").is_empty());
        let by_keys = not_ruled_out_by(&roster, &peers, "A", |p| p.key_position);
        assert_eq!(names(by_keys), ["C"]);
    }

    #[test]
    fn a_member_without_any_copy_here_is_asked() {
        // Just started: no copies yet, every member must be asked.
        let roster = registered(&[("A", 1), ("B", 10), ("C", 3)]);
        assert_eq!(names(not_ruled_out(&roster, &[], "A")), ["B", "C"]);
    }

    #[test]
    fn a_clean_departure_is_ruled_out_by_a_copy_covering_its_last_position() {
        let roster = roster(&[
            ("B", 10, true, false),
            ("C", 10, true, false),
            ("D", 10, true, false),
        ]);
        // D left while this domain held no copy of it: it may hold anything.
        let peers = [copy("B", Some(10)), copy("C", Some(9))];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["C", "D"]);
    }

    #[test]
    fn a_domain_that_vanished_without_leaving_is_ruled_out_by_a_copy_covering_its_last_publication()
    {
        // Killed, paused or cut off past its session: its ledger entry
        // holds the last position it published (B: 10, D: 12), which
        // bounds what it acknowledged. B's copy covers it; D's is behind;
        // C was never copied here at all (this domain has just started).
        let roster = registered(&[("B", 10), ("C", 4), ("D", 12)]);
        let peers = [copy("B", Some(10)), copy("D", Some(11))];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["C", "D"]);
    }

    #[test]
    fn a_retired_domain_is_neither_asked_nor_counted() {
        // C was forgotten with its copy here behind: still not asked.
        let roster = roster(&[("B", 10, false, false), ("C", 10, true, true)]);
        let peers = [copy("B", Some(9)), copy("C", Some(3))];
        assert_eq!(names(not_ruled_out(&roster, &peers, "A")), ["B"]);
        assert_eq!(names(everyone(&roster, &peers, "A")), ["B"]);
    }

    #[test]
    fn a_domain_known_only_here_is_always_asked() {
        // The coordinator lost its data and B has not registered again.
        let peers = [copy("B", Some(10))];
        assert_eq!(names(not_ruled_out(&Roster::default(), &peers, "A")), ["B"]);
    }

    #[test]
    fn this_domain_is_never_asked() {
        let roster = registered(&[("A", 10)]);
        assert!(not_ruled_out(&roster, &[copy("A", None)], "A").is_empty());
    }

    #[test]
    fn not_found_needs_a_confirmed_membership_and_every_domain_answering() {
        let unconfirmed = Route {
            unconfirmed: Some("no ZooKeeper session".into()),
            ..Route::default()
        };
        assert!(matches!(
            conclude(None, &unconfirmed),
            Outcome::NotReady { .. }
        ));
        let unreachable = Route {
            unreachable: vec!["C".into()],
            ..unconfirmed.clone()
        };
        assert!(
            matches!(conclude(None, &unreachable), Outcome::Unavailable { domains } if domains == ["C"])
        );
        assert!(matches!(
            conclude(None, &Route::default()),
            Outcome::NotFound
        ));
    }
}
