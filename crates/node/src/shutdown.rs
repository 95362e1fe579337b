//! Shutdown: one signal (Ctrl-C or SIGTERM) broadcast to every task that
//! must stop, as in mini-redis.

use tokio::sync::broadcast;

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
        _ = ctrl_c => tracing::info!("Ctrl-C: shutting down"),
        _ = term => tracing::info!("SIGTERM: shutting down"),
    }
}

/// Tells background tasks to stop; each holds a [`Shutdown`].
#[derive(Clone)]
pub struct Trigger(broadcast::Sender<()>);

/// A background task's view of the shutdown signal.
pub struct Shutdown {
    stopped: bool,
    rx: broadcast::Receiver<()>,
}

impl Trigger {
    pub fn new() -> Self {
        Trigger(broadcast::channel(1).0)
    }

    pub fn subscribe(&self) -> Shutdown {
        Shutdown {
            stopped: false,
            rx: self.0.subscribe(),
        }
    }

    pub fn fire(&self) {
        let _ = self.0.send(());
    }
}

impl Default for Trigger {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Waits for the signal (at once if it already came, or if the trigger
    /// was dropped).
    pub async fn recv(&mut self) {
        if !self.stopped {
            let _ = self.rx.recv().await;
            self.stopped = true;
        }
    }
}
