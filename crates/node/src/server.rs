//! Serving a node over HTTP until shutdown, then leaving the cluster and
//! closing the store cleanly.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::domain::DomainError;
use crate::node::Node;
use crate::shutdown::Trigger;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("closing the domain failed: {0}")]
    Close(#[from] DomainError),
}

/// Starts `node`'s background work, serves it on `listener` until
/// `shutdown` resolves, lets requests in flight finish, deregisters, and
/// saves the filter snapshot.
pub async fn serve(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let background = Trigger::new();
    node.start(&background);
    let app = crate::api::router(node.clone());
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    background.fire();
    // Give the coordinator a moment to deregister before the store closes.
    tokio::time::sleep(Duration::from_millis(50)).await;
    served?;
    let closing = node.clone();
    tokio::task::spawn_blocking(move || closing.domain.close())
        .await
        .map_err(std::io::Error::other)??;
    Ok(())
}
