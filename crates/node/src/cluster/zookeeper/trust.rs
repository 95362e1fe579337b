//! The trust list in ZooKeeper: each domain's entry, sealed, in the cluster's
//! `seals/` folder, written before each registration and read back only
//! where its seal holds.

use futures::future::BoxFuture;
use futures::FutureExt;
use xarchive_seal::ArchiveEntry;
use zookeeper_client as zk;

use super::{failed, Proof, ZooKeeperCoordinator};
use crate::cluster::coordinator::CoordError;
use crate::security::member::Admission;

/// `name`'s trust entry, if readable and sealed with the cluster secret
/// (or the cluster has none): an entry anyone could have written would
/// make a forger's key trusted.
fn admit_trust_entry(admission: &Admission, name: &str, data: &[u8]) -> Option<ArchiveEntry> {
    let entry = serde_json::from_slice::<ArchiveEntry>(data).ok()?;
    let proof = serde_json::from_slice::<Proof>(data).map_or_else(|_| String::new(), |p| p.proof);
    let bytes = serde_json::to_vec(&entry).ok()?;
    if entry.domain != name || !admission.seal_holds(name, &bytes, &proof) {
        tracing::warn!(domain = %name, "ignoring its trust entry: it is not sealed with the cluster secret");
        return None;
    }
    Some(entry)
}

impl ZooKeeperCoordinator {
    /// Writes this domain's trust entry (sealed) in the cluster's `seals/`
    /// folder, if one is set: before registering, so that whoever finds
    /// the domain registered finds its keys.
    pub(super) async fn put_trust_entry(
        &self,
        client: &zk::Client,
        name: &str,
    ) -> Result<(), CoordError> {
        let Some(entry) = self.trust_entry.lock().clone() else {
            return Ok(());
        };
        let path = format!("{}/{name}", self.trust_folder());
        let data = self.sealed(name, &entry)?;
        match client.set_data(&path, &data, None).await {
            Ok(_) => Ok(()),
            Err(zk::Error::NoNode) => match client
                .create(&path, &data, &self.options(zk::CreateMode::Persistent))
                .await
            {
                Ok(_) => Ok(()),
                // Created meanwhile by an earlier session of this domain.
                Err(zk::Error::NodeExists) => client
                    .set_data(&path, &data, None)
                    .await
                    .map(drop)
                    .map_err(failed),
                Err(e) => Err(failed(e)),
            },
            Err(e) => Err(failed(e)),
        }
    }

    /// Every domain's trust entry whose seal holds ([`admit_trust_entry`]).
    pub(super) fn read_trust_entries(
        &self,
    ) -> BoxFuture<'_, Result<Vec<ArchiveEntry>, CoordError>> {
        let client = self.client.lock().clone();
        let folder = self.trust_folder();
        async move {
            let client = client.ok_or(CoordError::NoSession)?;
            let names = match client.list_children(&folder).await {
                Ok(names) => names,
                Err(zk::Error::NoNode) => return Ok(Vec::new()),
                Err(e) => return Err(failed(e)),
            };
            // Read together, pipelined on the session's connection.
            let reads = names.iter().map(|name| {
                let client = client.clone();
                let path = format!("{folder}/{name}");
                async move { (name.clone(), client.get_data(&path).await) }
            });
            let mut entries = Vec::new();
            for (name, read) in futures::future::join_all(reads).await {
                match read {
                    Ok((data, _)) => {
                        entries.extend(admit_trust_entry(&self.settings.admission, &name, &data));
                    }
                    Err(zk::Error::NoNode) => {}
                    Err(e) => return Err(failed(e)),
                }
            }
            Ok(entries)
        }
        .boxed()
    }
}
