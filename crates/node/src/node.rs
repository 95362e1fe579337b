//! A domain put together: its store and filter, its place in a cluster,
//! its tokens and its metrics. Handlers share one `Arc<Node>`.

use std::sync::Arc;

use xarchive_filter::{BloomGeometry, GeometryError};

use crate::cluster::cache::{Cache, CacheError};
use crate::cluster::client::ClientError;
use crate::cluster::lookup::{Lookup, Outcome, Started, Strategy};
use crate::cluster::{Cluster, Coordinator, Hub};
use crate::config::NodeConfig;
use crate::local::domain::{Domain, DomainError};
use crate::local::id::ArchiveId;
use crate::metrics::Metrics;
use crate::security::auth::{AuthError, Authority};
use crate::security::tls::TlsError;
use crate::wire::{ClusterView, DomainView};
use tokio_util::sync::CancellationToken;

/// Why a domain could not be opened, by the part that failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error("the filter's size: {0}")]
    Geometry(#[from] GeometryError),
    #[error("tokens or cluster secret: {0}")]
    Auth(#[from] AuthError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("the record cache: {0}")]
    Cache(#[from] CacheError),
    #[error("the client for peers: {0}")]
    Peers(#[from] ClientError),
}

pub struct Node {
    pub(crate) config: NodeConfig,
    pub(crate) domain: Domain,
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) auth: Authority,
    pub(crate) metrics: Metrics,
}

impl Node {
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The local part: store and filter.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Its place among the other domains.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    pub fn auth(&self) -> &Authority {
        &self.auth
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The URL peers and clients reach it at.
    pub fn address(&self) -> &str {
        &self.cluster.address
    }

    /// A domain on its own (an in-process coordinator of one), reachable
    /// at `address`.
    pub fn open(config: NodeConfig, address: &str) -> Result<Arc<Node>, NodeError> {
        let coordinator = Hub::new().coordinator();
        Self::open_in(config, coordinator, address)
    }

    /// The coordinator the configuration asks for (ZooKeeper or a new
    /// in-process hub), with the cluster secret's credentials.
    pub fn coordinator_for(config: &NodeConfig) -> Result<Arc<dyn Coordinator>, NodeError> {
        let auth = Authority::new(&config.auth, &config.cluster.name)?;
        Ok(crate::cluster::coordinator_for(
            &config.cluster,
            auth.zookeeper_credentials(),
        ))
    }

    /// A domain joining the cluster that `coordinator` coordinates.
    pub fn open_in(
        config: NodeConfig,
        coordinator: Arc<dyn Coordinator>,
        address: &str,
    ) -> Result<Arc<Node>, NodeError> {
        let geometry =
            BloomGeometry::for_capacity(config.filter.expected_items, config.filter.fpr)?;
        let auth = Authority::new(&config.auth, &config.cluster.name)?;
        let trust = config.tls.trust()?;
        let cache = Cache::new(&config.cache, &config.cluster.name, &config.name)?;
        let cluster = Cluster::new(
            &config.name,
            address,
            coordinator,
            geometry,
            config.cluster.clone(),
            Arc::new(cache),
            auth.member_token(),
            trust,
            Some(config.data.join("peers.json")),
        )?;
        let domain = Domain::open(&config.name, &config.data, config.filter.clone())?;
        let cluster = Arc::new(cluster);
        let metrics = Metrics::for_domain(&cluster, domain.settings().fpr);
        Ok(Arc::new(Node {
            config,
            domain,
            cluster,
            auth,
            metrics,
        }))
    }

    /// Starts the background work (registration and replica sync), which
    /// ends when `stop` is cancelled.
    pub fn start(&self, stop: &CancellationToken) {
        self.cluster
            .start(self.domain.settings().kind, self.domain.subscribe(), stop)
    }

    /// Finds `id` here or in any other domain (see [`Cluster::find`]).
    pub async fn lookup(
        self: &Arc<Self>,
        id: &ArchiveId,
        strategy: Strategy,
    ) -> Result<Lookup, DomainError> {
        let mut started = Started::new(strategy);
        if self.domain.contains(id.as_str()) {
            let (node, key) = (self.clone(), id.clone());
            let record = tokio::task::spawn_blocking(move || node.domain.get(&key))
                .await
                .map_err(DomainError::from)??;
            if let Some(record) = record {
                started.route.local = true;
                let owner = self.domain.name().to_owned();
                let route = started.route.clone();
                return Ok(started.finish(Outcome::Found { record, owner }, route));
            }
        }
        Ok(self.cluster.find(id, started).await)
    }

    /// Every domain this one knows, itself first (`/v1/cluster`).
    pub fn cluster_view(&self) -> ClusterView {
        let me = self.domain.position();
        self.cluster.view(DomainView {
            name: self.cluster.me.clone(),
            address: self.cluster.address.clone(),
            is_self: true,
            up: true,
            reachable: true,
            kind: self.domain.settings().kind,
            epoch: Some(me.epoch),
            version: Some(me.version),
            replica_epoch: None,
            replica_version: None,
            lag: None,
            current: None,
            last_sync_ms_ago: None,
            last_error: None,
        })
    }
}
