//! Serving a node over HTTP until shutdown, then closing the store cleanly.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::domain::DomainError;
use crate::node::Node;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("closing the domain failed: {0}")]
    Close(#[from] DomainError),
}

/// Serves `node` on `listener` until `shutdown` resolves; requests in
/// flight then finish, and the domain saves its filter snapshot.
pub async fn serve(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = crate::api::router(node.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    let closing = node.clone();
    tokio::task::spawn_blocking(move || closing.domain.close())
        .await
        .map_err(std::io::Error::other)??;
    Ok(())
}
