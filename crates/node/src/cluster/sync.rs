//! Keeping the replicas current: one task per peer pulls a delta (or a
//! snapshot on first contact, a new epoch, or 409) whenever the peer's
//! published position moves past the copy held.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::coordinator::Member;
use super::replicas::covers;
use super::Cluster;
use crate::client::DeltaAnswer;
use crate::shutdown::{Shutdown, Trigger};

/// Follows the coordinator's view, starting a sync task for each peer.
pub async fn run(cluster: Arc<Cluster>, mut shutdown: Shutdown) {
    let mut view = cluster.coordinator.view();
    let stop_peers = Trigger::new();
    let mut tasks: BTreeMap<String, watch::Sender<Option<Member>>> = BTreeMap::new();
    loop {
        let current = view.borrow_and_update().clone();
        cluster.replicas.write().update_view(&current);
        for (name, member) in current.members.iter().filter(|(n, _)| **n != cluster.me) {
            match tasks.get(name) {
                Some(tx) => {
                    tx.send_replace(Some(member.clone()));
                }
                None => {
                    let (tx, rx) = watch::channel(Some(member.clone()));
                    tokio::spawn(peer(
                        cluster.clone(),
                        name.clone(),
                        rx,
                        stop_peers.subscribe(),
                    ));
                    tasks.insert(name.clone(), tx);
                }
            }
        }
        if current.connected {
            for (name, tx) in &tasks {
                if !current.members.contains_key(name) {
                    tx.send_replace(None);
                }
            }
        }
        tokio::select! {
            changed = view.changed() => if changed.is_err() { break },
            _ = shutdown.recv() => break,
        }
    }
    stop_peers.fire();
}

/// Syncs one peer's copy whenever its published position is ahead.
async fn peer(
    cluster: Arc<Cluster>,
    name: String,
    mut member: watch::Receiver<Option<Member>>,
    mut shutdown: Shutdown,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let target = member.borrow_and_update().clone();
        let behind = target.as_ref().is_some_and(|m| {
            let replicas = cluster.replicas.read();
            let peer = replicas.peer(&name);
            !peer.is_some_and(|p| p.holds_copy() && covers(p.position, Some(m.position())))
        });
        if let (true, Some(m)) = (behind, target) {
            match sync_once(&cluster, &name, &m).await {
                Ok(()) => {
                    cluster.replicas.write().mark(&name, Ok(()));
                    backoff = Duration::from_millis(50);
                    continue;
                }
                Err(e) => {
                    tracing::debug!(peer = %name, error = %e, "replica sync failed");
                    cluster.replicas.write().mark(&name, Err(e));
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.recv() => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            }
        }
        tokio::select! {
            changed = member.changed() => if changed.is_err() { return },
            _ = shutdown.recv() => return,
        }
    }
}

/// One pull: a delta from the position held, else a snapshot.
async fn sync_once(cluster: &Cluster, name: &str, member: &Member) -> Result<(), String> {
    let client = cluster
        .peer_client(&member.address)
        .map_err(|e| e.to_string())?;
    let held = cluster
        .replicas
        .read()
        .peer(name)
        .and_then(|p| p.position.filter(|_| p.holds_copy()));
    if let Some(held) = held.filter(|h| h.epoch == member.epoch) {
        match client
            .delta(held.epoch, held.version)
            .await
            .map_err(|e| e.to_string())?
        {
            DeltaAnswer::Delta { delta, changed } => {
                // Evict first: once the copy is current, no cached copy of
                // a record it changed may be served.
                cluster.on_changed(name, &changed).await;
                let applied = cluster.replicas.write().apply(name, &delta);
                match applied {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        tracing::info!(peer = name, error = %e, "delta refused; taking a snapshot")
                    }
                }
            }
            DeltaAnswer::SnapshotRequired => {}
        }
    }
    let fetched = client.filter().await.map_err(|e| e.to_string())?;
    cluster.on_snapshot(name);
    cluster
        .replicas
        .write()
        .install(name, &fetched)
        .map_err(|e| e.to_string())?;
    Ok(())
}
