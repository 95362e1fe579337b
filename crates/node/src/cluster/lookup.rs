//! Finding a record anywhere: this domain first, then the domains whose
//! replicas may hold the ID, then — only when a replica is not known to be
//! current — the seed paper's broadcast probe (Luo et al., 2023, DOI
//! 10.57237/j.cst.2023.04.008; README.md). "Not found" is answered
//! only when every domain that could hold the ID has said it does not.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use super::cache::Cached;
use super::coordinator::Roster;
use super::replicas::{covers, PeerInfo};
use super::ruled_out::{ask_now, catching_up, everyone_known, not_ruled_out, LONGEST_WAIT};
use super::Cluster;
use crate::local::domain::Position;
use crate::local::id::ArchiveId;
use crate::local::record::{Record, StoredRecord};
use crate::wire::CacheRoute;
pub use crate::wire::{Route, Strategy};

/// How a lookup ended. `Found`, the common end, is as large as a record:
/// boxing it would cost every lookup an allocation to make the rare ends
/// smaller.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
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
    let began = Instant::now();
    match cluster.peer_client(address) {
        Ok(client) => match client.get(id).await {
            Ok(record) => {
                cluster.call_times.lock().record(began.elapsed());
                Answer::Got(record)
            }
            Err(e) => {
                tracing::debug!(peer = name, error = %e, "fetch failed");
                Answer::Unreachable(e.to_string())
            }
        },
        Err(e) => Answer::Unreachable(e.to_string()),
    }
}

async fn probe(cluster: &Cluster, address: &str, id: &str) -> Answer<bool> {
    let began = Instant::now();
    match cluster.peer_client(address) {
        Ok(client) => match client.contains(id).await {
            Ok(maybe) => {
                cluster.call_times.lock().record(began.elapsed());
                Answer::Got(maybe)
            }
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
    /// The candidates for `id` and the positions of the copies they came
    /// from, read together: a copy updated after its candidates were read
    /// must not then pass as current, or an ID it gained would be missed.
    fn routed_by_copies(&self, id: &str) -> (Vec<String>, Vec<PeerInfo>) {
        let replicas = self.replicas.read();
        (replicas.candidates(id), replicas.infos())
    }

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

        let (candidates, peers) = cluster.routed_by_copies(id.as_str());
        route.candidates = candidates;
        // A cached copy from a domain that may hold the ID needs no call,
        // if the owner's copy here is confirmed current (`copy_confirmed`).
        let cache = &cluster.cache;
        cache.seen(id.as_str());
        let mut stale = false;
        for owner in &route.candidates {
            let held = peers.iter().find(|p| p.name == *owner);
            let current = cluster.copy_confirmed(owner, held.and_then(|p| p.position));
            match cache.get(owner, id.as_str(), current).await {
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
    let targets = addressed(&candidates, &peers);
    let mut found = fetch_any(&cluster, id.as_str(), &targets, &mut route).await;

    if found.is_none() {
        // Nobody asked had it. Every other domain that the copies cannot
        // rule out is settled (asked, or its copy waited for); while the
        // coordinator cannot be read, every domain known is asked, and the
        // answer cannot be "not found".
        let asked: BTreeSet<String> = route.asked.iter().cloned().collect();
        // While writes flow, copies behind a write in flight are likely:
        // the relay followers read now, while the ledger is read (a
        // follower in a long poll, when changes are few, is not woken).
        cluster.relay_wanted.notify_waiters();
        match cluster.confirmed().await {
            Ok(roster) => {
                // A candidate retired since its copy was read here: its
                // silence is not a 503 (`cluster forget`).
                let retired = cluster.retire(&roster);
                route.unreachable.retain(|n| !retired.contains(n));
                route.errors.retain(|n, _| !retired.contains(n));
                let mut stale = not_ruled_out(&roster, &peers, &cluster.me);
                stale.retain(|(name, _)| !asked.contains(name));
                if !stale.is_empty() {
                    let behind = catching_up(&roster, &peers, &stale);
                    found = settle(&cluster, &id, &roster, stale, &behind, asked, &mut route).await;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "membership unconfirmed: asking every domain known");
                route.unconfirmed = Some(e.to_string());
                let mut everyone = everyone_known(&cluster, &peers);
                everyone.retain(|(name, _)| !asked.contains(name));
                if !everyone.is_empty() {
                    found = broadcast(&cluster, id.as_str(), everyone, &mut route).await;
                }
            }
        }
    }
    // A catalogue entry (what the holding archive's policy gives another
    // archive of a record it keeps for review) is not cached: the cache
    // holds only records released whole.
    if let Some((record, owner)) = found.as_ref().filter(|(r, _)| !r.catalogue_only) {
        match StoredRecord::from_record(record).encode() {
            Ok(bytes) => cluster.cache.fill(owner, id.as_str(), bytes, &ticket).await,
            Err(e) => tracing::error!(owner, error = %e, "a record found is not cached"),
        }
    }
    Remote { found, route }
}

/// A domain a "not found" must still settle, as [`settle`] holds it.
struct Open {
    address: String,
    /// What the ledger read says it last published: its copy here settles
    /// it once it covers this.
    published: Option<Position>,
    /// Asked already (a probe in flight or answered).
    asked: bool,
    /// Why its probe failed, while its copy may still come to settle it.
    failed: Option<String>,
}

/// What one of [`settle`]'s calls answered.
enum Settled {
    Probe(String, Answer<bool>),
    /// A record read, and whether a probe's "maybe" led to it (else the
    /// domain's copy did).
    Fetch(String, Answer<Option<Record>>, bool),
}

/// Settles each of `stale` (name, address: the domains the copies read
/// with the candidates could not rule out, not asked yet) by whichever
/// comes first:
/// - its answer: a probe of its live filter, then, on "maybe", a read of
///   the record; its live filter holds every write it acknowledged before
///   this lookup began (the filter changes with the store, under the
///   writer lock, before a write is acknowledged);
/// - its copy here, once that covers the position `roster` (a ledger read
///   begun after this lookup began) gives for it, read together with the
///   copies' candidates for `id`: such a copy holds every write the domain
///   acknowledged before this lookup began (`not_ruled_out`), so its "no"
///   rules the domain out and its "maybe" has the record read from it.
///
/// The domains in `behind` (copies of the published epoch only behind its
/// version: a write in flight the relay brings) are asked at once if they
/// are a handful, else waited for, with the relay asked to read now, as
/// long as asking them would take ([`ask_now`]); the others are asked at
/// once. A domain neither answering nor covered by its copy within
/// [`LONGEST_WAIT`] is unreachable: the lookup answers 503, never "not
/// found". So nothing acknowledged before the lookup began is missed,
/// whichever way each domain is settled.
async fn settle(
    cluster: &Cluster,
    id: &ArchiveId,
    roster: &Roster,
    stale: Vec<(String, String)>,
    behind: &[(String, Position)],
    mut fetched: BTreeSet<String>,
    route: &mut Route,
) -> Option<(Record, String)> {
    let id = id.as_str();
    let waiting: BTreeSet<&str> = behind.iter().map(|(name, _)| name.as_str()).collect();
    let mut open: BTreeMap<String, Open> = stale
        .into_iter()
        .map(|(name, address)| {
            let published = roster
                .known
                .get(&name)
                .filter(|known| !known.retired)
                .map(|known| known.member.position());
            let asked = !waiting.contains(name.as_str());
            let open = Open {
                address,
                published,
                asked,
                failed: None,
            };
            (name, open)
        })
        .collect();
    let behind_at_first = waiting.len();
    let mut moved = cluster.replicas.read().moved();
    let woken = !ask_now(behind_at_first, std::time::Duration::ZERO, LONGEST_WAIT);
    if woken {
        cluster.relay_wanted.notify_waiters();
    }
    let began = tokio::time::Instant::now();
    let mut calls: FuturesUnordered<futures::future::BoxFuture<'_, Settled>> =
        FuturesUnordered::new();
    let probe_each = |names: Vec<(String, String)>,
                      calls: &mut FuturesUnordered<_>,
                      route: &mut Route| {
        route.broadcast |= !names.is_empty();
        route.remote_calls += names.len();
        for (name, address) in names {
            route.probed.push(name.clone());
            calls.push(Box::pin(async move {
                let answer = probe(cluster, &address, id).await;
                Settled::Probe(name, answer)
            }) as futures::future::BoxFuture<'_, Settled>);
        }
    };
    let fetch_from = |name: String,
                      address: String,
                      after_probe: bool,
                      calls: &mut FuturesUnordered<_>,
                      route: &mut Route| {
        route.remote_calls += 1;
        route.asked.push(name.clone());
        calls.push(Box::pin(async move {
            let answer = fetch(cluster, &name, &address, id).await;
            Settled::Fetch(name, answer, after_probe)
        }) as futures::future::BoxFuture<'_, Settled>);
    };
    let at_once: Vec<(String, String)> = open
        .iter()
        .filter(|(_, o)| o.asked)
        .map(|(n, o)| (n.clone(), o.address.clone()))
        .collect();
    probe_each(at_once, &mut calls, route);
    loop {
        // Copies that came to cover what their domains published settle
        // them, with their candidates read under the same lock.
        let covered: Vec<(String, String, bool)> = {
            let replicas = cluster.replicas.read();
            let covered: Vec<&String> = open
                .iter()
                .filter(|(name, o)| {
                    o.published.is_some()
                        && covers(
                            replicas.peer(name).and_then(|p| p.copy_position()),
                            o.published,
                        )
                })
                .map(|(name, _)| name)
                .collect();
            let candidates = if covered.is_empty() {
                Vec::new()
            } else {
                replicas.candidates(id)
            };
            covered
                .into_iter()
                .map(|name| {
                    let maybe = candidates.contains(name);
                    (name.clone(), open[name].address.clone(), maybe)
                })
                .collect()
        };
        for (name, address, maybe) in covered {
            open.remove(&name);
            if maybe && fetched.insert(name.clone()) {
                fetch_from(name, address, false, &mut calls, route);
            }
        }
        // Those still waited for are asked once it is time.
        let waited = began.elapsed();
        let still: Vec<(String, String)> = open
            .iter()
            .filter(|(_, o)| !o.asked)
            .map(|(n, o)| (n.clone(), o.address.clone()))
            .collect();
        let mut ask_at = None;
        if !still.is_empty() {
            let mut asking = cluster.call_times.lock().slowest_of(still.len());
            if woken {
                asking += super::relay::WOKEN_SPACING;
            }
            if ask_now(behind_at_first, waited, asking) {
                for (name, _) in &still {
                    if let Some(o) = open.get_mut(name) {
                        o.asked = true;
                    }
                }
                probe_each(still, &mut calls, route);
            } else {
                ask_at = Some(began + asking.min(LONGEST_WAIT));
            }
        }
        // A probe that failed waits for its copy until the longest wait.
        let failed: Vec<String> = open
            .iter()
            .filter(|(_, o)| o.failed.is_some())
            .map(|(n, _)| n.clone())
            .collect();
        if !failed.is_empty() {
            if waited >= LONGEST_WAIT {
                for name in failed {
                    if let Some(Open {
                        failed: Some(e), ..
                    }) = open.remove(&name)
                    {
                        route.errors.insert(name.clone(), e);
                        route.unreachable.push(name);
                    }
                }
            } else {
                let until = began + LONGEST_WAIT;
                ask_at = Some(ask_at.map_or(until, |at: tokio::time::Instant| at.min(until)));
            }
        }
        if open.is_empty() && calls.is_empty() {
            return None;
        }
        let next = tokio::select! {
            Some(settled) = calls.next() => Some(settled),
            changed = moved.changed() => {
                if changed.is_err() {
                    // The copies went with the cluster: no copy will come.
                    moved = tokio::sync::watch::channel(0).1;
                }
                None
            }
            _ = sleep_until_some(ask_at) => None,
        };
        match next {
            Some(Settled::Probe(name, answer)) => {
                let Some(o) = open.get_mut(&name) else {
                    continue; // settled by its copy meanwhile
                };
                match answer {
                    Answer::Got(false) => {
                        open.remove(&name);
                    }
                    Answer::Got(true) => {
                        let address = o.address.clone();
                        open.remove(&name);
                        if fetched.insert(name.clone()) {
                            fetch_from(name, address, true, &mut calls, route);
                        }
                    }
                    Answer::Unreachable(e) if o.published.is_some() => o.failed = Some(e),
                    Answer::Unreachable(e) => {
                        open.remove(&name);
                        route.errors.insert(name.clone(), e);
                        route.unreachable.push(name);
                    }
                }
            }
            Some(Settled::Fetch(name, answer, after_probe)) => match answer {
                Answer::Got(Some(record)) => return Some((record, name)),
                // A probe's "maybe" is not a replica's false positive.
                Answer::Got(None) if !after_probe => route.false_positive_hops += 1,
                Answer::Got(None) => {}
                Answer::Unreachable(e) => {
                    route.errors.insert(name.clone(), e);
                    route.unreachable.push(name);
                }
            },
            None => {}
        }
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => futures::future::pending().await,
    }
}

/// `names` with the addresses of their copies in `peers` (read with them).
fn addressed(names: &[String], peers: &[PeerInfo]) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|name| {
            let peer = peers.iter().find(|p| p.name == *name)?;
            Some((name.clone(), peer.address.clone()))
        })
        .collect()
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
