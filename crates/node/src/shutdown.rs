//! Shutdown: one signal (Ctrl-C or SIGTERM) that every task which must
//! stop follows, as in mini-redis.

/// Resolves on Ctrl-C or SIGTERM.
pub async fn signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C: shutting down"),
        () = term => tracing::info!("SIGTERM: shutting down"),
    }
}

/// The stop signal of background tasks: one token cancelled at shutdown,
/// a child token for each task (tokio-util's, rather than a broadcast
/// channel of our own).
pub use tokio_util::sync::CancellationToken;
