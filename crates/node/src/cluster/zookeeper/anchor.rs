//! The audit anchor in ZooKeeper: each domain's audit head in the cluster's
//! sealed `audit/` folder, moving only forward, and always as many bytes.

use futures::future::BoxFuture;
use futures::FutureExt;
use zookeeper_client as zk;

use super::{failed, ZooKeeperCoordinator};
use crate::cluster::coordinator::{anchor_moves_forward, AuditAnchor, CoordError};
use crate::local::audit::AuditHead;

/// The size of every audit anchor written: its JSON padded with spaces
/// (JSON's own white space), so that the znode's `dataLength`, which
/// anyone may read with `exists`, does not grow with the log.
const ANCHOR_BYTES: usize = 128;

/// `head` as its anchor znode holds it: [`ANCHOR_BYTES`] long.
fn anchor_bytes(head: &AuditHead) -> Result<Vec<u8>, CoordError> {
    let mut data = serde_json::to_vec(head).map_err(|e| CoordError::Encode(e.to_string()))?;
    if data.len() < ANCHOR_BYTES {
        data.resize(ANCHOR_BYTES, b' ');
    }
    Ok(data)
}

impl AuditAnchor for ZooKeeperCoordinator {
    fn anchor_audit<'a>(
        &'a self,
        name: &'a str,
        head: &'a AuditHead,
    ) -> BoxFuture<'a, Result<(), CoordError>> {
        let client = self.client.lock().clone();
        let path = format!("{}/{name}", self.audit_folder());
        async move {
            let client = client.ok_or(CoordError::NoSession)?;
            // Always written, even unchanged, and always as many bytes: the
            // caller anchors on a fixed cadence, so the znode's version,
            // size and time, which anyone may read with `exists`, move the
            // same whatever searches reach this domain (node.rs says why).
            let data = anchor_bytes(head)?;
            // Compare and set on the znode's version: two writers (an old
            // and a new session of the same domain) cannot interleave. The
            // head and version written last are kept, so a tick is one write.
            let known = self.anchored.lock().clone();
            if let Some((anchored_name, old, version)) = known.filter(|(n, ..)| n == name) {
                anchor_moves_forward(Some(&old), head)?;
                match client.set_data(&path, &data, Some(version)).await {
                    Ok(stat) => {
                        *self.anchored.lock() = Some((anchored_name, head.clone(), stat.version));
                        return Ok(());
                    }
                    // Written or deleted by someone else since: read it.
                    Err(zk::Error::BadVersion | zk::Error::NoNode) => {}
                    Err(e) => return Err(failed(e)),
                }
            }
            *self.anchored.lock() = None;
            let written = match client.get_data(&path).await {
                Ok((old, stat)) => {
                    let old = serde_json::from_slice::<AuditHead>(&old).ok();
                    anchor_moves_forward(old.as_ref(), head)?;
                    client
                        .set_data(&path, &data, Some(stat.version))
                        .await
                        .map_err(failed)?
                }
                Err(zk::Error::NoNode) => {
                    client
                        .create(&path, &data, &self.options(zk::CreateMode::Persistent))
                        .await
                        .map_err(failed)?
                        .0
                }
                Err(e) => return Err(failed(e)),
            };
            *self.anchored.lock() = Some((name.to_owned(), head.clone(), written.version));
            Ok(())
        }
        .boxed()
    }

    fn audit_anchor<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<AuditHead>, CoordError>> {
        let client = self.client.lock().clone();
        let path = format!("{}/{name}", self.audit_folder());
        async move {
            let client = client.ok_or(CoordError::NoSession)?;
            client.sync(&path).await.or_else(|e| match e {
                zk::Error::NoNode => Ok(()),
                e => Err(failed(e)),
            })?;
            match client.get_data(&path).await {
                Ok((data, _)) => Ok(serde_json::from_slice(&data).ok()),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(failed(e)),
            }
        }
        .boxed()
    }
}
