//! A running domain: its store and filter, metrics, and (later) its place
//! in a cluster. Handlers share one `Arc<Node>`.

use std::sync::Arc;

use crate::api::error::ApiError;
use crate::config::NodeConfig;
use crate::domain::{Domain, DomainError};
use crate::metrics::Metrics;

pub struct Node {
    pub config: NodeConfig,
    pub domain: Domain,
    pub metrics: Metrics,
}

impl Node {
    pub fn open(config: NodeConfig) -> Result<Arc<Node>, DomainError> {
        let domain = Domain::open(&config.name, &config.data, config.filter.clone())?;
        Ok(Arc::new(Node {
            config,
            domain,
            metrics: Metrics::new(),
        }))
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
