//! Domains joined into one system: membership (a [`Coordinator`]),
//! replicas of every peer's filter kept current by deltas, and lookups
//! routed to the domains that may hold an ID.

mod backoff;
pub mod cache;
mod call_times;
pub mod client;
mod confirm;
pub(crate) mod coordinator;
pub(crate) mod copy_change;
pub(crate) mod inprocess;
mod ledger;
pub(crate) mod lookup;
mod peers;
pub(crate) mod relay;
pub(crate) mod replicas;
mod ruled_out;
pub(crate) mod search;
pub(crate) mod settle;
mod sliced;
pub(crate) mod sync;
pub(crate) mod trace;
pub(crate) mod zookeeper;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use coordinator::{
    AuditAnchor, CoordError, Coordinator, Known, Member, MemberChange, PeerAddress, Roster, View,
};
pub use inprocess::{Hub, InProcessCoordinator};
pub use ledger::lines::{Described, Line};
pub use ledger::valid_group;
pub use relay::{neighbours, pause_after, Relay};
pub use sliced::MIN_SLICED;
pub use zookeeper::{LedgerWrites, ZkSettings, ZooKeeperCoordinator};

use crate::cluster::cache::Cache;
use crate::cluster::client::{Client, ClientError, Whole};
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
use crate::local::filter::FilterKind;
use crate::local::id::ArchiveId;
use crate::security::member::{Admission, MemberKey};
use crate::wire::{ClusterView, DomainView, RelayPart};
use replicas::Replicas;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A text setting as a file or an environment variable gives it: an
/// environment variable that reads as a number (`XARCHIVE_CLUSTER__GROUP=44`)
/// reaches serde as that number.
#[derive(Deserialize)]
#[serde(untagged)]
enum TextOrNumber {
    Text(String),
    Number(u64),
}

fn text_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match TextOrNumber::deserialize(d)? {
        TextOrNumber::Text(text) => text,
        TextOrNumber::Number(n) => n.to_string(),
    })
}

/// A group: a province's two-digit administrative code. Given as a
/// number, it is written with two digits (`XARCHIVE_CLUSTER__GROUP=01`
/// reads as the number 1: its group is `01`).
fn group_code<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match TextOrNumber::deserialize(d)? {
        TextOrNumber::Text(text) => text,
        TextOrNumber::Number(n) => format!("{n:02}"),
    })
}

/// How a domain takes part in its cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// ZooKeeper, as `host:port[,host:port…][/chroot]`; without it the
    /// domain uses the in-process coordinator (alone, or with the other
    /// domains of `xarchive up`).
    pub zk: Option<String>,
    /// The cluster's name (its ZooKeeper folder is `/xarchive/<name>`).
    #[serde(deserialize_with = "text_or_number")]
    pub name: String,
    /// This domain's group: its province's two-digit administrative code
    /// in a nation. The positions every "not found" reads are kept in one
    /// znode per group (`ledger.rs`); one group holds up to about 3 600
    /// domains, so a small cluster keeps the default.
    #[serde(deserialize_with = "group_code")]
    pub group: String,
    /// The URL peers use to reach this domain (default: http://<listen>).
    pub advertise: Option<String>,
    pub session_timeout_ms: u64,
    /// Least time between two publications of this domain's position.
    pub publish_interval_ms: u64,
    /// How long a write waits for its position to be published.
    pub publish_timeout_ms: u64,
    /// Timeout of every call to a peer.
    pub peer_timeout_ms: u64,
    /// Simulated one-way delay added to every call to a peer: the
    /// benchmarks' WAN, not in the package.
    #[cfg(feature = "testsuite")]
    pub wan_delay_ms: u64,
    /// Degree of the relay tree changes travel along (each domain passes
    /// them on to at most this many; src/cluster/relay/tree.rs). 0: every
    /// domain pulls every change from its origin, once a read of the
    /// positions (a "not found", a search, `/v1/cluster`) shows it: with
    /// ZooKeeper nobody is told of a publication, so copies then follow
    /// only as often as the positions are read.
    pub relay_fanout: usize,
    /// How long a copy may stay behind its origin, waiting for the
    /// relay, before it is pulled from the origin itself.
    pub relay_grace_ms: u64,
    /// How long `/v1/cluster` waits for each domain to answer the probe
    /// it makes of every one (`reachable` means answered within it).
    pub probe_timeout_ms: u64,
    /// The audit log's head is written to the coordinator at this fixed
    /// cadence, changed or not (node.rs says why): entries made since the
    /// last write could be cut off unseen, and ZooKeeper takes one write
    /// per domain per cadence.
    pub audit_anchor_ms: u64,
    /// Which layouts of the positions ledger this domain writes: `auto`,
    /// `both` (while a domain of an earlier release may run) or `apart`
    /// (docs/OPERATIONS.md, "Upgrading the ledger").
    pub ledger: LedgerWrites,
}

/// The simulated one-way delay before and after each call to a peer (the
/// benchmarks' WAN); zero in the package, which has no such setting.
fn wan_delay(config: &ClusterConfig) -> Duration {
    #[cfg(feature = "testsuite")]
    return Duration::from_millis(config.wan_delay_ms);
    #[cfg(not(feature = "testsuite"))]
    {
        let _ = config;
        Duration::ZERO
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            zk: None,
            name: "default".into(),
            group: "00".into(),
            advertise: None,
            session_timeout_ms: 6_000,
            publish_interval_ms: 10,
            publish_timeout_ms: 5_000,
            peer_timeout_ms: 3_000,
            #[cfg(feature = "testsuite")]
            wan_delay_ms: 0,
            relay_fanout: 3,
            relay_grace_ms: 1_000,
            probe_timeout_ms: 1_000,
            audit_anchor_ms: 5_000,
            ledger: LedgerWrites::Auto,
        }
    }
}

/// The coordinator `config` asks for: ZooKeeper (with the digest
/// `credentials` derived from the cluster secret), or a new in-process hub.
pub fn coordinator_for(
    config: &ClusterConfig,
    credentials: Option<(String, String)>,
    admission: Admission,
) -> Arc<dyn Coordinator> {
    match &config.zk {
        Some(connect) => ZooKeeperCoordinator::new(ZkSettings {
            connect: connect.clone(),
            cluster: config.name.clone(),
            group: config.group.clone(),
            session_timeout: Duration::from_millis(config.session_timeout_ms),
            publish_interval: Duration::from_millis(config.publish_interval_ms),
            credentials,
            admission,
            ledger: config.ledger,
        }),
        None => Hub::new().coordinator(),
    }
}

pub struct Cluster {
    /// This domain's name.
    pub(crate) me: DomainName,
    /// This domain's advertised address.
    pub(crate) address: String,
    pub(crate) coordinator: Arc<dyn Coordinator>,
    pub(crate) replicas: RwLock<Replicas>,
    pub(crate) cache: Arc<Cache>,
    /// Where the peers known are kept between runs.
    remembered: Option<PathBuf>,
    flights: parking_lot::Mutex<std::collections::HashMap<String, lookup::Flight>>,
    /// Reads of the positions, shared by the "not found"s waiting on them.
    confirmations: Arc<confirm::Confirmations>,
    /// The last read whose positions the replicas took.
    positions_taken: parking_lot::Mutex<Option<Arc<Roster>>>,
    /// Every task it spawns, so that shutdown can wait for them.
    tasks: TaskTracker,
    http: reqwest::Client,
    /// The member key and this domain's name, for its credential.
    member: Option<Arc<(MemberKey, String)>>,
    /// The cluster uses TLS: no `http://` peer is called.
    https_only: bool,
    config: ClusterConfig,
    /// Snapshots fetched and installed at once. A domain joining a nation
    /// fetches thousands; all at once, they timed out against each other
    /// and were fetched again (1 000 domains: 2.1 GB fetched for 0.6 GB
    /// of copies), and decoding them all starved its ZooKeeper session
    /// until it expired (docs/SCALING.md).
    snapshots: tokio::sync::Semaphore,
    /// The changes this domain passes on to its relay tree neighbours.
    pub(crate) relay: relay::Relay,
    /// The relay tree neighbours now: a first copy is
    /// taken from one of them where it can be (`sync.rs`).
    pub(crate) neighbours: RwLock<Vec<PeerAddress>>,
    /// Wakes the relay followers between two reads: a "not found" waits
    /// for copies behind a write in flight (`relay/follow.rs`).
    pub(crate) relay_wanted: tokio::sync::Notify,
    /// How long calls to other domains took lately: how long a "not
    /// found" may wait for a copy instead of asking (`settle.rs`).
    pub(crate) call_times: parking_lot::Mutex<call_times::CallTimes>,
}

/// See [`Cluster::snapshots`].
const SNAPSHOTS_AT_ONCE: usize = 4;

/// A snapshot may take this many peer timeouts: a central archive's
/// filter at national scale is tens of megabytes (40 MB for 20 million
/// IDs), seconds on a 100 Mbit/s link.
const SNAPSHOT_TIMEOUTS: u32 = 20;

/// Probes of `/v1/cluster` in flight at once: a province's hundred
/// domains in two rounds, without opening thousands of connections at a
/// nation's.
const PROBES_AT_ONCE: usize = 64;

impl Cluster {
    /// `key_id` names the filter key of this domain's key filter.
    /// `member_key` (with a cluster secret) makes the credential presented
    /// to peers; `trust` (if any) are the only certificate authorities
    /// their TLS certificates may chain to.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        me: &DomainName,
        address: &str,
        coordinator: Arc<dyn Coordinator>,
        key_id: &str,
        config: ClusterConfig,
        cache: Arc<Cache>,
        member_key: Option<MemberKey>,
        trust: Option<Vec<reqwest::Certificate>>,
        remembered: Option<PathBuf>,
    ) -> Result<Self, ClientError> {
        let timeout = Duration::from_millis(config.peer_timeout_ms);
        let https_only = trust.is_some() || address.starts_with("https://");
        let http =
            crate::cluster::client::http_client(timeout + 2 * wan_delay(&config), None, trust)
                .map_err(|e| ClientError::Address(address.into(), e))?;
        let mut replicas = Replicas::new(me, key_id);
        if let Some(path) = &remembered {
            replicas.remember(&peers::load(path));
        }
        Ok(Cluster {
            me: me.clone(),
            address: address.to_owned(),
            coordinator,
            replicas: RwLock::new(replicas),
            remembered,
            cache,
            snapshots: tokio::sync::Semaphore::new(SNAPSHOTS_AT_ONCE),
            relay: relay::Relay::default(),
            neighbours: RwLock::new(Vec::new()),
            relay_wanted: tokio::sync::Notify::new(),
            call_times: parking_lot::Mutex::new(call_times::CallTimes::new(
                ruled_out::LONGEST_WAIT,
            )),
            flights: parking_lot::Mutex::default(),
            confirmations: Arc::default(),
            positions_taken: parking_lot::Mutex::default(),
            tasks: TaskTracker::new(),
            http,
            member: member_key.map(|key| Arc::new((key, me.to_string()))),
            https_only,
            config,
        })
    }

    /// Keeps the peers known on disk, if they changed since `last`.
    pub(crate) fn remember_peers(&self, last: &mut BTreeMap<DomainName, replicas::Remembered>) {
        let Some(path) = &self.remembered else { return };
        let now = self.replicas.read().to_remember();
        if now != *last {
            match peers::save(path, &now) {
                Ok(()) => *last = now,
                Err(e) => {
                    tracing::warn!(error = %e, path = %path.display(), "cannot keep the peers known");
                }
            }
        }
    }

    /// How long a copy behind waits for the relay, if relaying is on.
    pub(crate) fn relay_grace(&self) -> Option<Duration> {
        (self.config.relay_fanout > 0).then(|| Duration::from_millis(self.config.relay_grace_ms))
    }

    /// The web origins (`scheme://host:port`) of this domain and of every
    /// domain it knows: the pages the cluster serves.
    pub fn origins(&self) -> Vec<String> {
        let peers = self.replicas.read().infos();
        std::iter::once(self.address.as_str())
            .chain(peers.iter().map(|p| p.address.as_str()))
            .filter_map(|address| url::Url::parse(address).ok())
            .map(|url| url.origin().ascii_serialization())
            .collect()
    }

    /// A client for the peer at `address`, sharing the connection pool,
    /// presenting this domain's member credential. In a cluster that uses
    /// TLS an `http://` peer is refused: the credential, and the identity
    /// numbers of searches, would cross the network in clear.
    pub fn peer_client(&self, address: &str) -> Result<Client, ClientError> {
        if self.https_only && !address.starts_with("https://") {
            return Err(ClientError::Address(
                address.into(),
                "an http:// peer in a cluster that uses TLS is never called".into(),
            ));
        }
        let timeout = Duration::from_millis(self.config.peer_timeout_ms);
        let client = Client::with_http(self.http.clone(), address)?
            .with_snapshot_timeout(timeout * SNAPSHOT_TIMEOUTS);
        #[cfg(feature = "testsuite")]
        let client = client.with_delay(wan_delay(&self.config));
        Ok(match &self.member {
            Some(member) => client.as_member(member.clone()),
            None => client,
        })
    }

    /// Starts the coordinator, the replica sync and the relay of `own`
    /// changes; all end when `stop` is cancelled (the coordinator after
    /// deregistering). `keys` is the fingerprint of the key types this
    /// domain declares: it refuses to join a cluster whose members declare
    /// others.
    pub fn start(
        self: &Arc<Self>,
        kind: FilterKind,
        keys: String,
        own: Arc<dyn relay::OwnFilters>,
        positions: watch::Receiver<Position>,
        stop: &CancellationToken,
    ) {
        let position = *positions.borrow();
        let member = Member {
            address: self.address.clone(),
            kind,
            epoch: position.epoch,
            version: position.version,
            keys,
            signing_key: String::new(),
        };
        if self.relay_grace().is_some() {
            self.tasks.spawn(relay::own(
                self.clone(),
                own,
                self.coordinator.published(),
                stop.child_token(),
            ));
        }
        self.tasks.spawn(self.coordinator.clone().run(
            self.me.clone(),
            member,
            positions,
            stop.child_token(),
        ));
        self.tasks
            .spawn(sync::run(self.clone(), stop.child_token()));
    }

    /// Waits until every task of this cluster (the coordinator, the sync
    /// of each peer, the searches in flight) has ended, after `stop` was
    /// cancelled.
    pub async fn stopped(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Whether a write may be taken now: only while the coordinator can
    /// publish it (else peers could not learn of it, and could answer
    /// "not found" for an acknowledged record).
    pub fn writable(&self) -> Result<(), CoordError> {
        if self.coordinator.view().borrow().connected {
            Ok(())
        } else {
            Err(CoordError::Disconnected)
        }
    }

    /// Waits until `position` (or a later one) is published, so that a
    /// write is acknowledged only once peers can learn of it. `current`
    /// gives the domain's position now, for a rebuild in between.
    pub async fn await_published(
        &self,
        position: Position,
        current: impl Fn() -> Position,
    ) -> Result<(), CoordError> {
        let mut published = self.coordinator.published();
        let limit = Duration::from_millis(self.config.publish_timeout_ms);
        let done = |p: &Option<Position>| {
            p.is_some_and(|p| {
                (p.epoch == position.epoch && p.version >= position.version)
                    || (p.epoch != position.epoch && p == current())
            })
        };
        tokio::time::timeout(limit, published.wait_for(done))
            .await
            .map_err(|_| CoordError::NotPublished(limit))?
            .map_err(|_| CoordError::Stopped)?;
        Ok(())
    }

    pub fn coordinator(&self) -> &Arc<dyn Coordinator> {
        &self.coordinator
    }

    /// The cache of other domains' records.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The domains whose copies held here may hold `id`.
    pub fn candidates(&self, id: &str) -> Vec<DomainName> {
        self.replicas.read().candidates(id)
    }

    /// The cluster as `/v1/cluster` shows it, with `me` first. The
    /// positions published are read from the coordinator first (they are
    /// not followed at each publication), so a copy shown current holds
    /// everything its origin acknowledged before this call; if they cannot
    /// be read, those known are shown, and `connected` says why. Every
    /// other domain is probed meanwhile (`GET /healthz`, at most
    /// `probe_timeout_ms`, all at once): `reachable` says it answered
    /// during this call, never that it did once (docs/OPERATIONS.md).
    pub async fn view(&self, me: DomainView) -> ClusterView {
        let peers = self.replicas.read().infos();
        let (confirmed, probes) = futures::join!(self.confirmed(), self.probe(&peers));
        if let Err(e) = confirmed {
            tracing::debug!(error = %e, "positions not read for the cluster's view");
        }
        let mut domains = vec![me];
        let mut views = self.replicas.read().views();
        for view in &mut views {
            let probe = probes.get(view.name.as_str());
            view.reachable = matches!(probe, Some(Ok(_)));
            view.probe_ms = probe.and_then(|p| p.as_ref().ok().copied());
            view.probe_error = match probe {
                Some(Err(e)) => Some(e.clone()),
                None => Some("not probed: it joined during this call".to_owned()),
                Some(Ok(_)) => None,
            };
        }
        domains.extend(views);
        ClusterView {
            domain: self.me.to_string(),
            coordinator: self.coordinator.describe(),
            connected: self.coordinator.view().borrow().connected,
            probe_timeout_ms: self.config.probe_timeout_ms,
            domains,
            page: None,
        }
    }

    /// Asks each of `peers` whether it answers now: its round trip in
    /// milliseconds, or why not. At most [`PROBES_AT_ONCE`] in flight.
    async fn probe(
        &self,
        peers: &[replicas::PeerInfo],
    ) -> HashMap<DomainName, Result<u64, String>> {
        use futures::StreamExt;
        let timeout = Duration::from_millis(self.config.probe_timeout_ms);
        // Futures made first, so that the stream holds no closure over a
        // borrowed peer (which would not be Send for any lifetime).
        let probes: Vec<_> = peers
            .iter()
            .map(|peer| (peer.name.clone(), peer.address.clone()))
            .map(|(name, address)| async move {
                let started = std::time::Instant::now();
                let answer = match self.peer_client(&address) {
                    Ok(client) => client.healthz(timeout).await,
                    Err(e) => Err(e),
                };
                let answer = answer
                    .map(|()| u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX))
                    .map_err(|e| match &e {
                        ClientError::Transport { source, .. } if source.is_timeout() => {
                            format!("no answer within {} ms", timeout.as_millis())
                        }
                        // The innermost cause ("Connection refused") says
                        // more than the layers naming the URL again.
                        ClientError::Transport { source, .. } => {
                            let mut cause: &dyn std::error::Error = source;
                            while let Some(next) = cause.source() {
                                cause = next;
                            }
                            cause.to_string()
                        }
                        _ => e.to_string(),
                    });
                (name, answer)
            })
            .collect();
        futures::stream::iter(probes)
            .buffer_unordered(PROBES_AT_ONCE)
            .collect()
            .await
    }

    /// A peer replaced or deleted these records: cached copies go.
    pub async fn on_changed(&self, peer: &str, ids: &[ArchiveId]) {
        let ids: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
        self.cache.evict(peer, &ids).await;
    }

    /// The copy held of `name`'s `part`, as its origin publishes it.
    pub fn copy_of(&self, name: &str, part: RelayPart) -> Option<Whole> {
        self.replicas.read().copy_view(name, part)
    }

    /// A peer's copy was replaced by a snapshot: which records changed is
    /// unknown, so everything cached from it goes.
    pub fn on_snapshot(&self, peer: &str) {
        self.cache.evict_owner(peer);
    }
}
