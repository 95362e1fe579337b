//! The trust list as a domain holds it: its own entry (its real name, its
//! address and its seal's keys) published in the coordinator before each
//! registration, sealed with the cluster secret as the registration is
//! (`Coordinator::set_trust_entry`); every archive's entry read
//! from there, signed with the cluster's anchor, kept for a minute, and
//! saved in the data directory, so that copies and certificates are still
//! checked while the coordinator cannot be read (and after a restart).
//! Read again at once (at most every few seconds) when something is
//! sealed by a key it does not hold: a key rotated since the last read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use xarchive_seal::{ArchiveEntry, SignedTrustList, TrustList};

use super::state::{Trusted, MAX_AGE};
use super::RequestsError;
use crate::local::private_file::write_private;
use crate::node::Node;
use crate::wire::ArchiveName;

/// The least time between two reads forced by an unknown key.
const MIN_FORCED_EVERY: Duration = Duration::from_secs(2);

impl Node {
    /// This archive as the trust list publishes it.
    pub(crate) fn own_trust_entry(&self) -> ArchiveEntry {
        let archive = &self.config.archive;
        ArchiveEntry {
            domain: self.cluster.me.to_string(),
            display_name: archive.display_name.clone(),
            address: archive.address.clone(),
            url: self.public_url(),
            keys: self.requests.seal.records().to_vec(),
        }
    }

    /// Where people reach this archive's page: `archive.url`, or its
    /// advertised address.
    pub(crate) fn public_url(&self) -> String {
        let url = &self.config.archive.url;
        if url.is_empty() {
            format!("{}/", self.cluster.address.trim_end_matches('/'))
        } else {
            url.clone()
        }
    }

    /// The trust list: the one read within [`MAX_AGE`] unless `fresh`
    /// (something was sealed by a key it lacks), else read from the
    /// coordinator, signed and saved; when the coordinator cannot be read,
    /// the last one read. This archive's own entry is always its own
    /// current one.
    pub(crate) async fn trust_list(&self, fresh: bool) -> Result<Arc<Trusted>, RequestsError> {
        let cache = &self.requests.trust;
        let usable = |t: &Arc<Trusted>| {
            let age = t.read_at.elapsed();
            age < MAX_AGE && !(fresh && age >= MIN_FORCED_EVERY)
        };
        if let Some(t) = cache.last().filter(usable) {
            return Ok(t);
        }
        let _one = cache.reading.lock().await;
        // Read by another caller while this one waited.
        if let Some(t) = cache
            .last()
            .filter(|t| t.read_at.elapsed() < MIN_FORCED_EVERY)
        {
            return Ok(t);
        }
        let entries = match self.cluster.coordinator.trust_entries().await {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!(error = %e, "the trust list cannot be read; the last one is used");
                return cache.last().ok_or(RequestsError::TrustUnavailable);
            }
        };
        let own = self.own_trust_entry();
        let mut archives: Vec<ArchiveEntry> = entries
            .into_iter()
            .filter(|e| e.domain != own.domain)
            .collect();
        archives.push(own);
        let list = TrustList::new(&self.config.cluster.name, cache.secured, archives);
        let signed = SignedTrustList::sign(&list, &cache.anchor);
        if let Ok(bytes) = serde_json::to_vec(&signed) {
            if let Err(e) = write_private(&cache.file, &bytes) {
                tracing::warn!(error = %e, "the trust list read is not saved");
            }
        }
        Ok(cache.keep(Trusted {
            list,
            signed,
            read_at: Instant::now(),
        }))
    }

    /// `domain` as people know it, from the trust list last read.
    pub(crate) fn archive_name(&self, domain: &str) -> ArchiveName {
        let entry = self
            .requests
            .trust
            .last()
            .and_then(|t| t.list.archive(domain).cloned());
        match entry {
            Some(e) => ArchiveName {
                domain: e.domain.clone(),
                name: e.name().to_owned(),
                address: e.address,
                url: e.url,
            },
            None if domain == self.cluster.me => {
                let own = self.own_trust_entry();
                ArchiveName {
                    name: own.name().to_owned(),
                    domain: own.domain,
                    address: own.address,
                    url: own.url,
                }
            }
            None => ArchiveName {
                domain: domain.to_owned(),
                name: domain.to_owned(),
                ..ArchiveName::default()
            },
        }
    }
}
