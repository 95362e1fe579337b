//! Finding a record anywhere, and every I/O it takes: this domain
//! first, then the domains whose replicas may hold the ID, then — only
//! when a replica is not known to be current — the seed paper's broadcast
//! probe (Luo et al., 2023, DOI 10.57237/j.cst.2023.04.008; README.md).
//! The driver: the ledger reads, peer calls, waits, relay wake-ups and
//! the cache are here; who must still be asked, and what the lookup
//! concludes, are pure rules (`settle.rs`, `ruled_out.rs`). "Not found"
//! is answered only when every domain that could hold the ID has said it
//! does not.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};

use super::cache::Cached;
use super::coordinator::{Known, PeerAddress, Roster};
use super::replicas::{covers, PeerInfo};
use super::ruled_out;
use super::settle::{conclude, Call, Event, Ready, Reply, Settle};
pub use super::settle::{doubt, Outcome};
use super::trace::TaskFailure;
pub use super::trace::Trace;
use super::Cluster;
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use crate::local::id::ArchiveId;
use crate::local::record::{Record, StoredRecord};
use crate::wire::CacheRoute;
pub use crate::wire::Strategy;

/// A routed search in flight, shared by the lookups of its ID.
pub(super) type Flight = futures::future::Shared<futures::future::BoxFuture<'static, Remote>>;

/// How a lookup ended, and what it did on the way.
#[derive(Debug)]
pub struct Lookup {
    pub outcome: Outcome,
    pub trace: Trace,
}

async fn fetch(cluster: &Cluster, name: &str, address: &str, id: &str) -> Reply<Option<Record>> {
    let began = Instant::now();
    match cluster.peer_client(address) {
        Ok(client) => match client.get(id).await {
            Ok(record) => {
                cluster.call_times.lock().record(began.elapsed());
                Reply::Got(record)
            }
            Err(e) => {
                tracing::debug!(peer = name, error = %e, "fetch failed");
                Reply::Unreachable(e.to_string())
            }
        },
        Err(e) => Reply::Unreachable(e.to_string()),
    }
}

async fn probe(cluster: &Cluster, address: &str, id: &str) -> Reply<bool> {
    let began = Instant::now();
    match cluster.peer_client(address) {
        Ok(client) => match client.contains(id).await {
            Ok(maybe) => {
                cluster.call_times.lock().record(began.elapsed());
                Reply::Got(maybe)
            }
            Err(e) => Reply::Unreachable(e.to_string()),
        },
        Err(e) => Reply::Unreachable(e.to_string()),
    }
}

/// Asks `targets` for the record at once; the first to have it wins.
async fn fetch_any(
    cluster: &Cluster,
    id: &str,
    targets: &[PeerAddress],
    trace: &mut Trace,
) -> Option<(Record, DomainName)> {
    let mut calls: FuturesUnordered<_> = targets
        .iter()
        .map(|PeerAddress { name, address }| async move {
            (name.clone(), fetch(cluster, name, address, id).await)
        })
        .collect();
    trace.remote_calls += targets.len();
    trace.asked.extend(targets.iter().map(|p| p.name.clone()));
    while let Some((name, answer)) = calls.next().await {
        match answer {
            Reply::Got(Some(record)) => return Some((record, name)),
            Reply::Got(None) => trace.false_positive_hops += 1,
            Reply::Unreachable(e) => trace.unreachable(name, e),
        }
    }
    None
}

/// The seed paper's probe: ask `targets` whether their live filters may
/// hold the ID, then fetch from those that say so.
async fn broadcast(
    cluster: &Cluster,
    id: &str,
    targets: Vec<PeerAddress>,
    trace: &mut Trace,
) -> Option<(Record, DomainName)> {
    trace.broadcast = true;
    trace.remote_calls += targets.len();
    trace.probed.extend(targets.iter().map(|p| p.name.clone()));
    let answers = futures::future::join_all(targets.into_iter().map(|peer| async move {
        let answer = probe(cluster, &peer.address, id).await;
        (peer, answer)
    }))
    .await;
    let mut maybe = Vec::new();
    for (peer, answer) in answers {
        match answer {
            Reply::Got(true) => maybe.push(peer),
            Reply::Got(false) => {}
            Reply::Unreachable(e) => trace.unreachable(peer.name, e),
        }
    }
    let found = fetch_any(cluster, id, &maybe, trace).await;
    // Probed domains that said "maybe" but lacked it are not replica hops.
    trace.false_positive_hops -= trace.false_positive_hops.min(maybe.len());
    found
}

/// When a lookup began, and how it is being made: what [`Cluster::find_any`]
/// continues after the local store said no.
pub struct Started {
    pub at: Instant,
    pub trace: Trace,
}

impl Started {
    pub fn new(strategy: Strategy) -> Self {
        Started {
            at: Instant::now(),
            trace: Trace::new(strategy),
        }
    }

    /// The answer, with the trace's time.
    pub fn finish(&self, outcome: Outcome, mut trace: Trace) -> Lookup {
        trace.elapsed = self.at.elapsed();
        Lookup { outcome, trace }
    }
}

impl Cluster {
    /// The candidates for each of `ids` and the positions of the copies
    /// they came from, read together: a copy updated after its candidates
    /// were read must not then pass as current, or an ID it gained would
    /// be missed.
    fn routed_by_copies(&self, ids: &[ArchiveId]) -> (Vec<Vec<DomainName>>, Vec<PeerInfo>) {
        let replicas = self.replicas.read();
        let candidates = ids
            .iter()
            .map(|id| replicas.candidates(id.as_str()))
            .collect();
        (candidates, replicas.infos())
    }

    /// Finds the first of `forms` (an ID's typed forms, in order) that any
    /// other domain holds: the copies are read once for all forms. Of
    /// forms found nowhere, the least certain answer is given ([`doubt`]).
    /// A later form's search uses copies read before it began, which is
    /// safe: an older copy covers less, so it rules out fewer domains, and
    /// each search reads the ledger after it began.
    pub async fn find_any(self: &Arc<Self>, forms: &[ArchiveId], started: Started) -> Lookup {
        let (candidates, peers) = if started.trace.strategy == Strategy::Broadcast {
            (vec![Vec::new(); forms.len()], Vec::new())
        } else {
            self.routed_by_copies(forms)
        };
        let mut kept: Option<Lookup> = None;
        for (id, candidates) in forms.iter().zip(candidates) {
            let this = self.find_by(id, candidates, &peers, &started).await;
            let found = matches!(this.outcome, Outcome::Found { .. });
            kept = Some(match kept {
                Some(kept) if doubt(&kept.outcome) >= doubt(&this.outcome) && !found => kept,
                _ => this,
            });
            if found {
                break;
            }
        }
        // With no form, nothing was asked: that is no "not found".
        kept.unwrap_or_else(|| {
            let outcome = Outcome::NotReady {
                reason: "no form of the ID to look up".into(),
            };
            started.finish(outcome, started.trace.clone())
        })
    }

    /// Finds `id` in the other domains (this one's store said no): by the
    /// replicas, a cached copy, then the domains the replicas cannot rule
    /// out; or, for [`Strategy::Broadcast`], by asking every domain. By
    /// its `candidates` and the copies' positions `peers` read with them.
    async fn find_by(
        self: &Arc<Self>,
        id: &ArchiveId,
        candidates: Vec<DomainName>,
        peers: &[PeerInfo],
        started: &Started,
    ) -> Lookup {
        let cluster = self;
        let mut trace = started.trace.clone();
        if trace.strategy == Strategy::Broadcast {
            let (targets, unconfirmed) = cluster.everyone_now().await;
            trace.unconfirmed = unconfirmed;
            let found = broadcast(cluster, id.as_str(), targets, &mut trace).await;
            return started.finish(conclude(found, &trace), trace);
        }

        trace.candidates = candidates;
        // A cached copy from a domain that may hold the ID needs no call,
        // if the owner's copy here is confirmed current (`copy_confirmed`).
        let cache = &cluster.cache;
        cache.seen(id.as_str());
        let mut stale = false;
        for owner in &trace.candidates {
            let held = peers.iter().find(|p| p.name == *owner);
            let current = cluster.copy_confirmed(owner, held.and_then(|p| p.position));
            match cache.get(owner, id.as_str(), current).await {
                Cached::Fresh(bytes) => match StoredRecord::decode(&bytes) {
                    Ok(stored) => {
                        trace.cache = Some(CacheRoute::Hit);
                        let record = stored.into_record(id.clone(), owner);
                        let owner = owner.clone();
                        return started.finish(Outcome::Found { record, owner }, trace);
                    }
                    Err(e) => {
                        tracing::warn!(%owner, error = %e, "unreadable cached record ignored");
                    }
                },
                Cached::Stale => stale = true,
                Cached::Absent => {}
            }
        }

        // Lookups of one ID in flight at once share one remote search; a
        // joiner keeps only a "found" (a miss may predate its own start).
        let (flight, leader) = cluster.flight(id, trace.candidates.clone(), peers.to_vec());
        let mut result = flight.await;
        if !leader {
            if result.found.is_some() {
                result.trace.coalesced = true;
                result.trace.remote_calls = 0;
            } else {
                result = routed(
                    cluster.clone(),
                    id.clone(),
                    trace.candidates.clone(),
                    peers.to_vec(),
                )
                .await;
            }
        }
        let Remote {
            found,
            trace: remote,
        } = result;
        let trace = Trace {
            candidates: trace.candidates,
            cache: match (cache.enabled(), stale) {
                (false, _) => None,
                (true, false) => Some(CacheRoute::Miss),
                (true, true) => Some(CacheRoute::Stale),
            },
            local: trace.local,
            ..remote
        };
        started.finish(conclude(found, &trace), trace)
    }

    /// The routed search for `id` in flight, or a new one; true when new.
    /// The search runs as its own task, so it finishes (and leaves the
    /// table) even if every lookup waiting on it goes away.
    fn flight(
        self: &Arc<Self>,
        id: &ArchiveId,
        candidates: Vec<DomainName>,
        peers: Vec<PeerInfo>,
    ) -> (Flight, bool) {
        use futures::FutureExt;
        let mut flights = self.flights.lock();
        if let Some(f) = flights.get(id.as_str()) {
            return (f.clone(), false);
        }
        let (cluster, key) = (self.clone(), id.clone());
        let task = self.tasks.spawn(async move {
            let remote = routed(cluster.clone(), key.clone(), candidates, peers).await;
            cluster.flights.lock().remove(key.as_str());
            remote
        });
        let flight = async move {
            task.await.unwrap_or_else(|e| Remote {
                found: None,
                trace: Trace {
                    failed: Some(if e.is_panic() {
                        TaskFailure::Panicked
                    } else {
                        TaskFailure::Cancelled
                    }),
                    ..Trace::new(Strategy::Routed)
                },
            })
        }
        .boxed()
        .shared();
        flights.insert(id.as_str().to_owned(), flight.clone());
        (flight, true)
    }
}

/// What a routed search of the other domains found, and how.
#[derive(Clone, Debug)]
pub struct Remote {
    pub found: Option<(Record, DomainName)>,
    pub trace: Trace,
}

/// The remote part of a routed lookup: the candidates asked directly,
/// then the domains whose replicas are not known to be current. `peers`
/// are the copies' positions read with `candidates`. A record found is
/// offered to the cache (kept if admitted and no eviction from its owner
/// came in since the search began).
async fn routed(
    cluster: Arc<Cluster>,
    id: ArchiveId,
    candidates: Vec<DomainName>,
    peers: Vec<PeerInfo>,
) -> Remote {
    let ticket = cluster.cache.ticket();
    let mut trace = Trace {
        candidates: candidates.clone(),
        ..Trace::new(Strategy::Routed)
    };
    let targets = addressed(&candidates, &peers);
    let mut found = fetch_any(&cluster, id.as_str(), &targets, &mut trace).await;

    if found.is_none() {
        // Nobody asked had it. Every other domain that the copies cannot
        // rule out is settled (asked, or its copy waited for); while the
        // coordinator cannot be read, every domain known is asked, and the
        // answer cannot be "not found".
        let asked: BTreeSet<DomainName> = trace.asked.iter().cloned().collect();
        // While writes flow, copies behind a write in flight are likely:
        // the relay followers read now, while the ledger is read (a
        // follower in a long poll, when changes are few, is not woken).
        cluster.relay_wanted.notify_waiters();
        match cluster.confirmed().await {
            Ok(roster) => {
                // A candidate retired since its copy was read here: its
                // silence is not a 503 (`cluster forget`).
                let retired = cluster.retire(&roster);
                trace.unreachable.retain(|n, _| !retired.contains(n));
                let settle = Settle::new(&roster, &peers, &cluster.me, asked);
                if !settle.is_empty() {
                    found = drive(&cluster, &id, settle, &mut trace).await;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "membership unconfirmed: asking every domain known");
                trace.unconfirmed = Some(e.to_string());
                let mut everyone = everyone_known(&cluster, &peers);
                everyone.retain(|p| !asked.contains(&p.name));
                if !everyone.is_empty() {
                    found = broadcast(&cluster, id.as_str(), everyone, &mut trace).await;
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
            Err(e) => tracing::error!(%owner, error = %e, "a record found is not cached"),
        }
    }
    Remote { found, trace }
}

/// What one of [`drive`]'s calls answered.
enum Settled {
    Probe(DomainName, Reply<bool>),
    Fetch(DomainName, Reply<Option<Record>>, bool),
}

/// Runs `settle` ([`Settle`]: who a "not found" must still settle, and
/// how): makes the calls it asks for, reads the copies it watches (with
/// the candidates, under one lock) each time they move, wakes the relay
/// followers when it waits for copies, and sleeps as long as it says.
async fn drive(
    cluster: &Cluster,
    id: &ArchiveId,
    mut settle: Settle,
    trace: &mut Trace,
) -> Option<(Record, DomainName)> {
    let id = id.as_str();
    let mut moved = cluster.replicas.read().moved();
    if settle.woken() {
        cluster.relay_wanted.notify_waiters();
    }
    let began = tokio::time::Instant::now();
    let mut calls: FuturesUnordered<futures::future::BoxFuture<'_, Settled>> =
        FuturesUnordered::new();
    let mut record: Option<Record> = None;
    loop {
        // Copies that came to cover what their domains published settle
        // them, with their candidates read under the same lock.
        {
            let replicas = cluster.replicas.read();
            let positions: Vec<(DomainName, Option<Position>)> = settle
                .watched()
                .map(|name| {
                    let at = replicas.peer(name).and_then(|p| p.copy_position());
                    (name.clone(), at)
                })
                .collect();
            if settle.any_covered(&positions) {
                let candidates = replicas.candidates(id);
                drop(replicas);
                settle.copies(&positions, &candidates);
            }
        }
        let waited = began.elapsed();
        let ready = settle.ready(waited, |n| cluster.call_times.lock().slowest_of(n), trace);
        let until = match ready {
            Ready::Done { found } => return found.and_then(|owner| Some((record?, owner))),
            Ready::Wait { calls: new, until } => {
                for call in new {
                    calls.push(match call {
                        Call::Probe { name, address } => Box::pin(async move {
                            let answer = probe(cluster, &address, id).await;
                            Settled::Probe(name, answer)
                        }),
                        Call::Fetch {
                            name,
                            address,
                            after_probe,
                        } => Box::pin(async move {
                            let answer = fetch(cluster, &name, &address, id).await;
                            Settled::Fetch(name, answer, after_probe)
                        }),
                    });
                }
                until.map(|d| began + d)
            }
        };
        let next = tokio::select! {
            Some(settled) = calls.next() => Some(settled),
            changed = moved.changed() => {
                if changed.is_err() {
                    // The copies went with the cluster: no copy will come.
                    moved = tokio::sync::watch::channel(0).1;
                }
                None
            }
            () = sleep_until_some(until) => None,
        };
        match next {
            Some(Settled::Probe(name, answer)) => settle.step(Event::Probed(name, answer), trace),
            Some(Settled::Fetch(name, answer, after_probe)) => {
                let answer = match answer {
                    Reply::Got(Some(found)) => {
                        record = Some(found);
                        Reply::Got(true)
                    }
                    Reply::Got(None) => Reply::Got(false),
                    Reply::Unreachable(e) => Reply::Unreachable(e),
                };
                settle.step(Event::Fetched(name, answer, after_probe), trace);
            }
            None => {}
        }
    }
}

impl Cluster {
    /// Every domain's last published position, read after this call began
    /// (shared with the lookups and searches waiting at the same time).
    pub(super) async fn confirmed(&self) -> Result<Arc<Roster>, super::CoordError> {
        let roster = self
            .confirmations
            .confirm(|| self.coordinator.read_current())
            .await?;
        // Positions move only forward, so the same read taken twice changes
        // nothing: a read shared by a hundred lookups is taken once.
        let mut taken = self.positions_taken.lock();
        if !taken.as_ref().is_some_and(|t| Arc::ptr_eq(t, &roster)) {
            self.replicas.write().take_positions(&roster);
            *taken = Some(roster.clone());
        }
        Ok(roster)
    }

    /// Whether the copy of `owner` held here (at `held`) covers what the
    /// coordinator said `owner` had published, in a read begun less than
    /// the cache's `max_lag` ago (one read, shared, serves every lookup
    /// meanwhile). A cached record of `owner` is served only then.
    ///
    /// Why this bounds a cached record's staleness by `max_lag`: a write
    /// `owner` acknowledged before that read began is within the position
    /// read (it is acknowledged only once published); a copy covering that
    /// position took it in, and evicted what it replaced or deleted first
    /// (`Cluster::on_changed` before a delta is applied; a whole copy
    /// renews `owner`'s cache generation). A retired owner, or one the
    /// ledger does not know, is never confirmed.
    pub(super) async fn copy_confirmed(&self, owner: &str, held: Option<Position>) -> bool {
        let coordinator = self.coordinator.clone();
        let read = self
            .confirmations
            .recent(self.cache.max_lag(), move || async move {
                coordinator.read_current().await
            })
            .await;
        match read {
            Ok(roster) => roster
                .known
                .get(owner)
                .is_some_and(|known| !known.retired && covers(held, Some(known.member.position()))),
            Err(e) => {
                tracing::debug!(error = %e, "positions unconfirmed: cached records not served");
                false
            }
        }
    }

    /// Drops the copies of the domains `roster` says were retired, and
    /// returns those names.
    pub(super) fn retire(&self, roster: &Roster) -> Vec<DomainName> {
        let retired: Vec<DomainName> = roster
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
    pub(super) async fn everyone_now(&self) -> (Vec<PeerAddress>, Option<String>) {
        let peers = self.replicas.read().infos();
        match self.confirmed().await {
            Ok(roster) => (ruled_out::everyone(&roster, &peers, &self.me), None),
            Err(e) => (everyone_known(self, &peers), Some(e.to_string())),
        }
    }
}

impl Cluster {
    /// The other domains a search by key must ask: `candidates` (whose
    /// key filter copies may hold the key, read with `peers`), and those
    /// whose key filter copies cannot rule it out by the membership read
    /// now (the rule of [`ruled_out::not_ruled_out`]); while the coordinator cannot
    /// be read, every domain known, and why it could not be read.
    pub(super) async fn search_targets(
        &self,
        candidates: &[DomainName],
        peers: &[PeerInfo],
    ) -> (Vec<PeerAddress>, Option<String>) {
        match self.confirmed().await {
            Ok(roster) => {
                self.retire(&roster);
                let mut targets =
                    ruled_out::not_ruled_out_by(&roster, peers, &self.me, |p| p.key_position);
                let all = ruled_out::everyone(&roster, peers, &self.me);
                targets.extend(all.into_iter().filter(|p| candidates.contains(&p.name)));
                targets.sort();
                targets.dedup();
                (targets, None)
            }
            Err(e) => (everyone_known(self, peers), Some(e.to_string())),
        }
    }
}

/// Every other domain this one knows of without the coordinator: the
/// last view of the membership and the copies held.
pub(super) fn everyone_known(cluster: &Cluster, peers: &[PeerInfo]) -> Vec<PeerAddress> {
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
    ruled_out::everyone(&Roster { known }, peers, &cluster.me)
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => futures::future::pending().await,
    }
}

/// `names` with the addresses of their copies in `peers` (read with them).
fn addressed(names: &[DomainName], peers: &[PeerInfo]) -> Vec<PeerAddress> {
    names
        .iter()
        .filter_map(|name| {
            let peer = peers.iter().find(|p| p.name == *name)?;
            Some(PeerAddress::new(name, &peer.address))
        })
        .collect()
}
