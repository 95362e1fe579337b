//! Finding a record anywhere: this domain first, then the domains whose
//! replicas may hold the ID, then — only when a replica is not known to be
//! current — the seed paper's broadcast probe (Luo et al., 2023, DOI
//! 10.57237/j.cst.2023.04.008; README.md). "Not found" is answered
//! only when every domain that could hold the ID has said it does not.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};

use super::cache::Cached;
use super::replicas::PeerInfo;
use super::ruled_out::{catching_up, everyone_known, not_ruled_out};
use super::Cluster;
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

/// How long a "not found" waits for copies behind a write in flight
/// before it asks their domains instead: two relay reads. While 1 000
/// writes a second flow nationwide, some thirty copies are behind at any
/// moment, and asking each (a probe) made thirty calls of every "not
/// found" (docs/SCALING.md, "Probes while writes flow").
const CATCH_UP: Duration = super::relay::PULL_INTERVAL.saturating_mul(2);

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
        // rule out is probed; while the coordinator cannot be read, that
        // is every domain known, and the answer cannot be "not found".
        let mut asked: BTreeSet<String> = route.asked.iter().cloned().collect();
        let mut stale = match cluster.confirmed().await {
            Ok(roster) => {
                // A candidate retired since its copy was read here: its
                // silence is not a 503 (`cluster forget`).
                let retired = cluster.retire(&roster);
                route.unreachable.retain(|n| !retired.contains(n));
                route.errors.retain(|n, _| !retired.contains(n));
                let mut stale = not_ruled_out(&roster, &peers, &cluster.me);
                stale.retain(|(name, _)| !asked.contains(name));
                // Copies behind a write in flight: waited for, then routed
                // by again (candidates and positions read together, judged
                // against the same ledger read, begun after this lookup
                // began, so the rule above holds unchanged).
                let awaited = catching_up(&roster, &peers, &stale);
                if !awaited.is_empty() && cluster.copies_catch_up(&awaited, CATCH_UP).await {
                    let (candidates, peers) = cluster.routed_by_copies(id.as_str());
                    let mut targets = addressed(&candidates, &peers);
                    targets.retain(|(name, _)| !asked.contains(name));
                    found = fetch_any(&cluster, id.as_str(), &targets, &mut route).await;
                    asked.extend(targets.into_iter().map(|(name, _)| name));
                    stale = not_ruled_out(&roster, &peers, &cluster.me);
                }
                stale
            }
            Err(e) => {
                tracing::debug!(error = %e, "membership unconfirmed: asking every domain known");
                route.unconfirmed = Some(e.to_string());
                everyone_known(&cluster, &peers)
            }
        };
        stale.retain(|(name, _)| !asked.contains(name));
        if found.is_none() && !stale.is_empty() {
            found = broadcast(&cluster, id.as_str(), stale, &mut route).await;
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
