//! Finding every record that carries a key, in every domain: unlike a
//! lookup, a search does not stop at the first domain that answers, and
//! its answer is complete only when every domain that could hold such a
//! record has answered.
//!
//! Which domains could: those whose key filter copies held here may hold
//! the key, and those whose copies are not known to cover what they
//! published (the rule of a lookup's "not found"); while the coordinator
//! cannot be read, every domain known.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};

use super::coordinator::PeerAddress;
use super::Cluster;
use crate::local::record::Record;
use crate::wire::SearchRequest;

/// What the other domains answered to one search.
#[derive(Debug, Default)]
pub struct Gathered {
    pub records: Vec<Record>,
    pub asked: Vec<String>,
    pub unreachable: Vec<String>,
    pub errors: BTreeMap<String, String>,
    /// Why the membership could not be confirmed: a domain not known
    /// here may hold more.
    pub unconfirmed: Option<String>,
}

impl Cluster {
    /// Asks the other domains that may hold records with the key of
    /// `request` (already normalised; `element` is its key filter element)
    /// for them, all at once.
    pub async fn search_others(
        self: &Arc<Self>,
        request: &SearchRequest,
        element: &[u8],
    ) -> Gathered {
        // Candidates and the positions of the copies they came from, read
        // together: a copy updated after its candidates were read must not
        // then pass as current, or a key it gained would be missed.
        let (candidates, peers) = {
            let replicas = self.replicas.read();
            (replicas.key_candidates(element), replicas.infos())
        };
        let (targets, unconfirmed) = self.search_targets(&candidates, &peers).await;
        let mut gathered = Gathered {
            unconfirmed,
            ..Gathered::default()
        };
        let request = SearchRequest {
            local: true,
            ..request.clone()
        };
        let mut calls: FuturesUnordered<_> = targets
            .iter()
            .map(|PeerAddress { name, address }| {
                let request = &request;
                async move {
                    let answer = match self.peer_client(address) {
                        Ok(client) => client.search(request).await,
                        Err(e) => Err(e),
                    };
                    (name.clone(), answer)
                }
            })
            .collect();
        gathered.asked = targets.iter().map(|p| p.name.to_string()).collect();
        while let Some((name, answer)) = calls.next().await {
            match answer {
                Ok((200, body)) => gathered.records.extend(body.records),
                Ok((status, body)) => {
                    let why = body.message.unwrap_or_else(|| format!("status {status}"));
                    gathered.errors.insert(name.to_string(), why);
                    gathered.unreachable.push(name.into_string());
                }
                Err(e) => {
                    tracing::debug!(peer = %name, error = %e, "search failed");
                    gathered.errors.insert(name.to_string(), e.to_string());
                    gathered.unreachable.push(name.into_string());
                }
            }
        }
        gathered.unreachable.sort();
        gathered
    }
}
