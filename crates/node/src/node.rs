//! A running domain: its store and filter, metrics, and its place in a
//! cluster. Handlers share one `Arc<Node>`.

use std::sync::Arc;

use xarchive_filter::BloomGeometry;

use crate::api::error::ApiError;
use crate::auth::Authority;
use crate::cache::Cache;
use crate::cluster::{Cluster, Coordinator, Hub};
use crate::config::NodeConfig;
use crate::domain::{Domain, DomainError};
use crate::metrics::Metrics;
use crate::shutdown::Trigger;

pub struct Node {
    pub config: NodeConfig,
    pub domain: Domain,
    pub cluster: Arc<Cluster>,
    pub auth: Authority,
    pub metrics: Metrics,
}

impl Node {
    /// A domain on its own (an in-process coordinator of one), reachable
    /// at `address`.
    pub fn open(config: NodeConfig, address: &str) -> Result<Arc<Node>, DomainError> {
        let coordinator = Hub::new().coordinator();
        Self::open_in(config, coordinator, address)
    }

    /// The coordinator the configuration asks for (ZooKeeper or a new
    /// in-process hub), with the cluster secret's credentials.
    pub fn coordinator_for(config: &NodeConfig) -> Result<Arc<dyn Coordinator>, DomainError> {
        let auth = Authority::new(&config.auth, &config.cluster.name)
            .map_err(|e| DomainError::Task(e.to_string()))?;
        Ok(crate::cluster::coordinator_for(&config.cluster, &auth))
    }

    /// A domain joining the cluster that `coordinator` coordinates.
    pub fn open_in(
        config: NodeConfig,
        coordinator: Arc<dyn Coordinator>,
        address: &str,
    ) -> Result<Arc<Node>, DomainError> {
        let geometry =
            BloomGeometry::for_capacity(config.filter.expected_items, config.filter.fpr)?;
        let setup = |e: String| DomainError::Task(e);
        let auth =
            Authority::new(&config.auth, &config.cluster.name).map_err(|e| setup(e.to_string()))?;
        let trust = config.tls.trust().map_err(|e| setup(e.to_string()))?;
        let cache = Cache::new(&config.cache, &config.cluster.name, &config.name)
            .map_err(|e| setup(e.to_string()))?;
        let cluster = Cluster::new(
            &config.name,
            address,
            coordinator,
            geometry,
            config.cluster.clone(),
            Arc::new(cache),
            auth.member_token(),
            trust,
        )
        .map_err(|e| setup(e.to_string()))?;
        let domain = Domain::open(&config.name, &config.data, config.filter.clone())?;
        let mut metrics = Metrics::new();
        cluster.cache.counters.register(metrics.registry_mut());
        Ok(Arc::new(Node {
            config,
            domain,
            cluster: Arc::new(cluster),
            auth,
            metrics,
        }))
    }

    /// Starts the background work (registration and replica sync), which
    /// ends when `trigger` fires.
    pub fn start(&self, trigger: &Trigger) -> Vec<tokio::task::JoinHandle<()>> {
        self.cluster.start(
            self.domain.settings().kind,
            self.domain.subscribe(),
            trigger,
        )
    }

    /// Runs `f` on the blocking pool: store reads and writes wait on the
    /// disk (fsync) and must not hold up the async workers.
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Node) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let node = self.clone();
        tokio::task::spawn_blocking(move || f(&node))
            .await
            .map_err(ApiError::internal)?
    }
}
