//! Serving a node over HTTP or HTTPS until shutdown, then leaving the
//! cluster and closing the store cleanly.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum_server::accept::NoDelayAcceptor;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use tokio::net::TcpListener;

use crate::local::domain::DomainError;
use crate::node::Node;
use crate::security::tls::TlsError;
use tokio_util::sync::CancellationToken;

/// How long requests in flight may take to finish after shutdown begins.
const GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("HTTP server failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("closing the domain failed: {0}")]
    Close(#[from] DomainError),
}

/// Starts `node`'s background work, serves it on `listener` (with TLS
/// when a certificate is configured) until `shutdown` resolves, lets
/// requests in flight finish, deregisters, and saves the filter snapshot.
pub async fn serve(
    node: Arc<Node>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let tls = node.config.tls.server()?;
    let handle = axum_server::Handle::new();
    let stopping = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopping.graceful_shutdown(Some(GRACE));
    });
    let background = CancellationToken::new();
    node.start(&background);

    let app = crate::http::router(node.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let mut server = axum_server::from_tcp(listener.into_std()?)?.handle(handle);
    let head = node.config.limits.max_header_bytes;
    server.http_builder().http1().max_buf_size(head);
    server
        .http_builder()
        .http2()
        .max_header_list_size(u32::try_from(head).unwrap_or(u32::MAX));
    // Answers go out as written, not held back by Nagle's algorithm for
    // the client's delayed acknowledgement: a large answer written in
    // parts (a certificate with its QR codes) otherwise waits 40 ms for it.
    let served = match tls {
        Some(config) => {
            server
                .acceptor(
                    RustlsAcceptor::new(RustlsConfig::from_config(config))
                        .acceptor(NoDelayAcceptor::new()),
                )
                .serve(app)
                .await
        }
        None => server.acceptor(NoDelayAcceptor::new()).serve(app).await,
    };
    background.cancel();
    // Deregistered before the store closes (bounded: a lost coordinator
    // must not hold up the shutdown).
    let _ = tokio::time::timeout(Duration::from_secs(5), node.cluster.stopped()).await;
    served?;
    let closing = node.clone();
    tokio::task::spawn_blocking(move || closing.domain.close())
        .await
        .map_err(std::io::Error::other)??;
    Ok(())
}
