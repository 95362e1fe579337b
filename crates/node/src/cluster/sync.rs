//! Keeping the replicas current: one task per peer pulls a delta (or a
//! snapshot on first contact, a new epoch, or 409) whenever the peer's
//! published position, as the view last gave it, moves past the copy
//! held; first of its filter, then of its key filter. With relaying on
//! (src/cluster/relay/) a copy held is pulled so only once it has stayed
//! behind for a grace period (the relay brings every change first, its
//! origin's own included). What is pulled enters the copy, and is passed
//! on, through the one door the relay's changes take too (`copy_change.rs`).
//! This loop also keeps a follower of each tree neighbour's relay.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::backoff::Backoff;
use super::client::{Client, ClientError, DeltaAnswer};
use super::coordinator::{Member, MemberChange, PeerAddress, View};
use super::copy_change::{pull, Pull, Source, Taken};
use super::relay;
use super::replicas::{Change, Peer, Remembered, ReplicaError, Replicas};
use super::Cluster;
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use crate::wire::RelayPart;
use tokio_util::sync::CancellationToken;

/// Follows the coordinator's view, starting a sync task for each peer.
///
/// Only what changed is taken in (the view's revisions): at national
/// scale a view holds thousands of members and changes a thousand times
/// a second, and rescanning it, or waking every peer's task, at each
/// change cost most of a core (docs/SCALING.md).
pub async fn run(cluster: Arc<Cluster>, shutdown: CancellationToken) {
    let mut view = cluster.coordinator.view();
    let grace = cluster.relay_grace();
    let mut sweep = tokio::time::interval(grace.unwrap_or(Duration::from_secs(1)) / 4);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sync = Sync::new(cluster);
    loop {
        sync.on_view_changed(&mut view);
        tokio::select! {
            changed = view.changed() => if changed.is_err() { break },
            _ = sweep.tick(), if grace.is_some() => sync.on_sweep(),
            () = shutdown.cancelled() => break,
        }
    }
    sync.stop_peers.cancel();
}

/// What the sync loop keeps between events; one method per event.
struct Sync {
    cluster: Arc<Cluster>,
    /// Stops every peer's task and every relay follower.
    stop_peers: CancellationToken,
    /// Each peer's task, told the member as the view says it now.
    tasks: BTreeMap<DomainName, watch::Sender<Option<Member>>>,
    /// The peers last written to the file of peers remembered.
    remembered: BTreeMap<DomainName, Remembered>,
    /// The view's revision taken in.
    seen: u64,
    /// The removals seen while the view did not follow the coordinator:
    /// a peer is marked gone only by a view that does, so those are taken
    /// in again once it follows.
    unconfirmed: BTreeSet<DomainName>,
    followers: relay::Followers,
    layout: Layout,
    grace: Option<Duration>,
    /// Copies behind, and since when (relaying on): a peer's task is woken
    /// only once its copy has been behind for the grace period.
    behind: HashMap<DomainName, Instant>,
}

impl Sync {
    fn new(cluster: Arc<Cluster>) -> Self {
        Sync {
            grace: cluster.relay_grace(),
            cluster,
            stop_peers: CancellationToken::new(),
            tasks: BTreeMap::new(),
            remembered: BTreeMap::new(),
            seen: 0,
            unconfirmed: BTreeSet::new(),
            followers: relay::Followers::default(),
            layout: Layout::default(),
            behind: HashMap::new(),
        }
    }

    /// The view moved: takes in the members changed since the revision
    /// seen, lays the relay tree out again if the names changed, and tells
    /// each changed peer's task.
    fn on_view_changed(&mut self, view: &mut watch::Receiver<View>) {
        let cluster = self.cluster.clone();
        let (changes, connected, known_changed, neighbours) = {
            let current = view.borrow_and_update();
            // Until this domain is in the view itself, its place in the
            // relay tree is unknown, and with it the neighbours its first
            // copies come from: nothing is taken in before (the changes
            // wait in the view). A lookup meanwhile asks every domain the
            // coordinator knows and no copy here covers (`ruled_out.rs`).
            if !current.members.contains_key(cluster.me.as_str()) {
                return;
            }
            let recheck = if current.connected {
                std::mem::take(&mut self.unconfirmed)
            } else {
                BTreeSet::new()
            };
            let changes = current.changes_since(self.seen, &cluster.me, recheck);
            self.seen = current.revision();
            if !current.connected {
                self.unconfirmed
                    .extend(changes.iter().filter_map(|c| match c {
                        MemberChange::Gone(name) => Some(name.clone()),
                        MemberChange::Present(..) => None,
                    }));
            }
            let known_changed = cluster.replicas.write().update_view(&current, &changes);
            // The tree changes with the membership (rarely): the O(N)
            // layout is redone only then. (This domain's own arrival
            // counts: the changes leave it out.)
            let placed = current.members.contains_key(cluster.me.as_str());
            let membership = self.layout.changed(placed, &changes);
            let neighbours = (membership || known_changed).then(|| {
                relay::neighbours(
                    current.members.keys().map(DomainName::as_str),
                    &cluster.me,
                    cluster.config.relay_fanout,
                )
                .into_iter()
                .filter_map(|n| {
                    let (name, member) = current.members.get_key_value(n)?;
                    Some(PeerAddress::new(name, &member.address))
                })
                .collect::<Vec<_>>()
            });
            (changes, current.connected, known_changed, neighbours)
        };
        if let Some(neighbours) = neighbours {
            self.followers.set(&cluster, neighbours, &self.stop_peers);
        }
        if known_changed {
            cluster.remember_peers(&mut self.remembered);
        }
        for change in changes {
            self.on_member_changed(change, connected);
        }
    }

    /// One member changed: its task is told (and woken if its copy must
    /// be pulled now), started if it has none, or told the member left.
    fn on_member_changed(&mut self, change: MemberChange, connected: bool) {
        let (name, member) = match change {
            MemberChange::Present(name, member) => (name, Some(member)),
            MemberChange::Gone(name) => (name, None),
        };
        match (self.tasks.get(&name), member) {
            (Some(tx), Some(member)) => {
                // With relaying on, a copy held waits for the relay (the
                // sweep wakes it if that takes too long), its tree
                // neighbours' included: each publication comes by their
                // relays, and a position read from the ledger is usually
                // a moment behind what the relay already brought.
                let wake = {
                    let replicas = self.cluster.replicas.read();
                    let copy = replicas.peer(&name).and_then(Peer::copy_position);
                    (self.grace.is_none() || copy.is_none())
                        && needs_sync(&replicas, &name, member.position())
                };
                tx.send_if_modified(|slot| {
                    *slot = Some(member);
                    wake
                });
            }
            (None, Some(member)) => {
                let (tx, rx) = watch::channel(Some(member));
                self.cluster.tasks.spawn(peer(
                    self.cluster.clone(),
                    name.clone(),
                    rx,
                    self.stop_peers.child_token(),
                ));
                self.tasks.insert(name, tx);
            }
            (Some(tx), None) if connected => {
                tx.send_replace(None);
            }
            (_, None) => {}
        }
    }

    /// Every quarter of the grace period: wakes the task of each peer
    /// whose copy has been behind its published position for the grace
    /// period, noting since when the others are behind.
    fn on_sweep(&mut self) {
        let Some(grace) = self.grace else { return };
        let now = Instant::now();
        let mut woken = Vec::new();
        {
            let replicas = self.cluster.replicas.read();
            for (name, tx) in &self.tasks {
                let lagging = tx
                    .borrow()
                    .as_ref()
                    .is_some_and(|m| needs_sync(&replicas, name, m.position()));
                if !lagging {
                    self.behind.remove(name);
                    continue;
                }
                let since = *self.behind.entry(name.clone()).or_insert(now);
                if now.duration_since(since) >= grace {
                    tx.send_modify(|_| {});
                    woken.push(name.as_str());
                }
            }
        }
        // Counted for /v1/cluster and /metrics: a steady count means the
        // relay tree does not carry that peer's changes here.
        if !woken.is_empty() {
            self.cluster.replicas.write().pulled_after_grace(&woken);
        }
    }
}

/// When the relay tree must be laid out again: it depends only on which
/// names are members (this domain among them).
///
/// Correctness: this follows the member names themselves, not
/// the peers' sync tasks. A task outlives its peer's departure (it waits
/// for the peer to come back), so a rule that counted only departures and
/// peers without a task laid the tree out without a peer that left the
/// view and never again once it came back: a domain re-registering after
/// losing its ZooKeeper session (its znode deleted, then created again,
/// taken in as two changes). Its tree neighbours then no longer followed
/// its relay, where its own changes come from, so their copies of it, and
/// the copies relayed from them, followed it only at the pace of the
/// grace sweep, behind for as long as it kept writing.
#[derive(Default)]
struct Layout {
    /// The members other than this domain, as taken in so far.
    members: BTreeSet<DomainName>,
    /// Whether this domain is a member.
    placed: bool,
}

impl Layout {
    /// Takes in whether this domain is a member now and the `changes` of
    /// the others; true when the member names differ from those taken in
    /// before.
    fn changed(&mut self, placed: bool, changes: &[MemberChange]) -> bool {
        let mut changed = std::mem::replace(&mut self.placed, placed) != placed;
        for change in changes {
            changed |= match change {
                MemberChange::Present(name, _) => self.members.insert(name.clone()),
                MemberChange::Gone(name) => self.members.remove(name),
            };
        }
        changed
    }
}

/// Why one pull failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Peer(#[from] ClientError),
    #[error(transparent)]
    Replica(#[from] ReplicaError),
}

/// Both of a peer's filters, in the order their copies are pulled.
const PARTS: [RelayPart; 2] = [RelayPart::Filter, RelayPart::Keys];

/// Whether either copy of `name`'s filters is behind `published`.
fn needs_sync(replicas: &Replicas, name: &str, published: Position) -> bool {
    let peer = replicas.peer(name);
    PARTS
        .iter()
        .any(|part| pull(peer.and_then(|p| p.position_of(*part)), published) != Pull::Nothing)
}

/// Syncs one peer's copy whenever its published position is ahead.
async fn peer(
    cluster: Arc<Cluster>,
    name: DomainName,
    mut member: watch::Receiver<Option<Member>>,
    shutdown: CancellationToken,
) {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        let target = member.borrow_and_update().clone();
        if let Some(m) = target {
            let published = m.position();
            // The key filter's copy only lags its peer's searches (a
            // copy behind is asked, not trusted), so a failure to sync it
            // does not mark the peer unreachable.
            let planned = PARTS
                .into_iter()
                .map(|part| (part, pull(held(&cluster, &name, part), published)))
                .find(|(_, plan)| *plan != Pull::Nothing);
            if let Some((part, plan)) = planned {
                let keys = part == RelayPart::Keys;
                match sync_once(&cluster, &name, &m, part, plan).await {
                    Ok(()) => {
                        if !keys {
                            cluster.replicas.write().mark(&name, None);
                        }
                        backoff.reset();
                    }
                    Err(e) => {
                        tracing::debug!(peer = %name, error = %e, keys, "replica sync failed");
                        if !keys {
                            cluster.replicas.write().mark(&name, Some(&e));
                        }
                        tokio::select! {
                            () = tokio::time::sleep(backoff.wait()) => {}
                            () = shutdown.cancelled() => return,
                        }
                    }
                }
                continue;
            }
        }
        tokio::select! {
            changed = member.changed() => if changed.is_err() { return },
            () = shutdown.cancelled() => return,
        }
    }
}

/// The position of the copy of `name`'s `part` held, if any.
fn held(cluster: &Cluster, name: &str, part: RelayPart) -> Option<Position> {
    cluster
        .replicas
        .read()
        .peer(name)
        .and_then(|p| p.position_of(part))
}

/// One pull of `part` as planned, through the one door
/// (`Cluster::take_change`, which evicts, applies and passes on); a delta
/// the copy does not take falls back to a snapshot.
async fn sync_once(
    cluster: &Cluster,
    name: &str,
    member: &Member,
    part: RelayPart,
    plan: Pull,
) -> Result<(), SyncError> {
    let client = cluster.peer_client(&member.address)?;
    if let Pull::Delta { epoch, since } = plan {
        if let DeltaAnswer::Delta { delta, changed } = client.changes(part, epoch, since).await? {
            let change = Change::Delta { delta, changed };
            match cluster
                .take_change(name, part, change, Source::Origin)
                .await
            {
                Ok(Taken::Moved) => return Ok(()),
                Ok(Taken::Dropped) => {
                    tracing::info!(
                        peer = name,
                        ?part,
                        "delta outside the copy's span; taking a snapshot"
                    );
                }
                Err(e) => {
                    tracing::info!(peer = name, ?part, error = %e, "delta refused; taking a snapshot");
                }
            }
        }
    }
    let _turn = cluster.snapshots.acquire().await;
    let nearby = match held(cluster, name, part) {
        None => {
            from_nearby(
                cluster,
                name,
                |c| async move { c.whole(part, Some(name)).await },
            )
            .await
        }
        Some(_) => None,
    };
    let (whole, neighbour) = match nearby {
        Some((copy, neighbour)) => (copy, Some(neighbour)),
        None => (client.whole(part, None).await?, None),
    };
    let source = neighbour.as_deref().map_or(Source::Origin, Source::Nearby);
    cluster
        .take_change(name, part, Change::Whole(whole), source)
        .await?;
    Ok(())
}

/// A first copy of `name` from a relay tree neighbour holding one (each
/// tried in turn), and which neighbour; None: ask `name` itself.
///
/// A domain joining a nation takes its thousands of first copies from
/// nearby instead of from every origin (a county on a slow link); the
/// origin is then asked only for what the copy lacks, by a delta. A copy
/// from a neighbour is as exact as the origin's filter at its position
/// (`Replicas::copy_view`), so nothing routed from it can be wrong.
async fn from_nearby<T, Fut>(
    cluster: &Cluster,
    name: &str,
    fetch: impl Fn(Client) -> Fut,
) -> Option<(T, DomainName)>
where
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut neighbours = cluster.neighbours.read().clone();
    // Each neighbour asked first for a share of the copies, not the first
    // one for all of them.
    if !neighbours.is_empty() {
        let first = name.bytes().map(usize::from).sum::<usize>() % neighbours.len();
        neighbours.rotate_left(first);
    }
    for PeerAddress {
        name: neighbour,
        address,
    } in neighbours
    {
        // A neighbour down or cut off is not asked again for each of
        // thousands of copies: its own sync marks it reachable again.
        let reachable = cluster
            .replicas
            .read()
            .peer(&neighbour)
            .is_some_and(|p| p.reachable && p.registered());
        if neighbour == name || !reachable {
            continue;
        }
        let fetched = match cluster.peer_client(&address) {
            Ok(client) => fetch(client).await,
            Err(e) => Err(e),
        };
        match fetched {
            Ok(copy) => return Some((copy, neighbour)),
            Err(e) => {
                tracing::debug!(peer = name, %neighbour, error = %e, "no first copy from this neighbour");
                if e.code().is_none() {
                    cluster.replicas.write().mark(&neighbour, Some(&e));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer whose registration went and came back (a new ZooKeeper
    /// session) is laid out in the relay tree again (see [`Layout`]).
    #[test]
    fn the_relay_tree_is_laid_out_again_whenever_the_member_names_change_a_return_included() {
        let member = Member {
            address: "http://x".into(),
            kind: crate::local::filter::FilterKind::Counting,
            epoch: 1,
            version: 1,
            keys: String::new(),
            signing_key: String::new(),
        };
        let up = |n: &str| MemberChange::Present(n.into(), member.clone());
        let gone = |n: &str| MemberChange::Gone(n.into());
        let mut layout = Layout::default();
        assert!(layout.changed(true, &[up("B"), up("C")]), "the first view");
        assert!(!layout.changed(true, &[up("C")]), "only a new position");
        assert!(layout.changed(true, &[gone("C")]), "C's registration gone");
        assert!(!layout.changed(true, &[gone("C")]), "taken in again");
        assert!(layout.changed(true, &[up("C")]), "C registered again");
        assert!(!layout.changed(true, &[gone("D")]), "never a member");
        assert!(
            layout.changed(false, &[]),
            "this domain's registration gone"
        );
        assert!(layout.changed(true, &[]), "and back");
    }
}
