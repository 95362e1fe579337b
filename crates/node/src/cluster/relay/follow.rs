//! The follower: one task per tree neighbour reads its relay page by page
//! and takes in what brings a copy forward, keeping it to pass on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xarchive_filter::Delta;

use crate::cluster::backoff::Backoff;
use crate::cluster::client::{FetchedFilter, FetchedKeys};
use crate::cluster::Cluster;
use crate::local::domain::Position;
use crate::local::filter::FilterKind;
use crate::wire::{split_delta_with_ids, RelayEntry, RelayHeader, RelayPart};

/// Least time between two pulls of a neighbour's relay while changes
/// come often: what arrives meanwhile goes in one page (see
/// [`pause_after`]).
pub(crate) const PULL_INTERVAL: Duration = Duration::from_millis(50);

/// Least time between the start of two reads of a neighbour's relay when
/// a lookup asked for one sooner ([`Cluster::relay_wanted`]): lookups
/// waiting together share a read, and a domain answering hundreds of
/// "not found"s a second reads each neighbour at most this often.
pub(crate) const WOKEN_SPACING: Duration = Duration::from_millis(5);

/// How long a reader waits before reading a relay again, after a page
/// that `waited` `IDLE` (5 ms, `ring.rs`) or more for its change (or not): at once then,
/// so that changes that come seldom are not held up; else
/// [`PULL_INTERVAL`] (at national scale changes come every few
/// milliseconds, and pages of 50 ms are what keeps a domain's CPU low;
/// docs/SCALING.md).
pub fn pause_after(waited: bool) -> Duration {
    if waited {
        Duration::ZERO
    } else {
        PULL_INTERVAL
    }
}

/// Keeps one follower per tree neighbour: started for new neighbours
/// (or a new address), stopped for those that are no longer.
#[derive(Default)]
pub(crate) struct Followers {
    running: BTreeMap<String, (String, CancellationToken)>,
}

impl Followers {
    /// Follows exactly `wanted` (name, address), and makes them the
    /// cluster's neighbours (`Cluster::neighbours`, where first copies are
    /// asked for).
    pub fn set(
        &mut self,
        cluster: &Arc<Cluster>,
        wanted: Vec<(String, String)>,
        stop: &CancellationToken,
    ) {
        cluster.neighbours.write().clone_from(&wanted);
        let wanted: BTreeMap<String, String> = wanted.into_iter().collect();
        self.running.retain(|name, (address, token)| {
            let keep = wanted.get(name) == Some(address);
            if !keep {
                token.cancel();
            }
            keep
        });
        for (name, address) in wanted {
            if self.running.contains_key(&name) {
                continue;
            }
            let token = stop.child_token();
            cluster.tasks.spawn(follow(
                cluster.clone(),
                name.clone(),
                address.clone(),
                token.clone(),
            ));
            self.running.insert(name, (address, token));
        }
    }
}

/// Pulls `neighbour`'s relay page by page, taking in what brings a copy
/// forward, until `stop`.
async fn follow(
    cluster: Arc<Cluster>,
    neighbour: String,
    address: String,
    stop: CancellationToken,
) {
    let client = match cluster.peer_client(&address) {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(peer = %neighbour, error = %e, "cannot follow the relay of a neighbour");
            return;
        }
    };
    let (mut relay, mut from) = (0, 0);
    let mut failing = Backoff::new(PULL_INTERVAL * 2, Duration::from_secs(2));
    loop {
        let began = tokio::time::Instant::now();
        let page = tokio::select! {
            page = client.relay(relay, from, &cluster.me) => page,
            _ = stop.cancelled() => return,
        };
        let (pause, wakeable) = match page {
            Ok(page) => {
                if !page.waited {
                    // Answered at once: a call's time, as asking takes.
                    cluster.call_times.lock().record(began.elapsed());
                }
                (relay, from) = (page.relay, page.next);
                for entry in page.entries {
                    take_in(&cluster, entry, &neighbour).await;
                }
                failing.reset();
                (pause_after(page.waited), true)
            }
            Err(e) => {
                tracing::debug!(peer = %neighbour, error = %e, "relay pull failed");
                (failing.wait(), false)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            // A lookup waits for copies behind a write in flight: read
            // now, or as soon as the spacing allows.
            _ = cluster.relay_wanted.notified(), if wakeable && !pause.is_zero() => {
                tokio::time::sleep_until(began + WOKEN_SPACING).await;
            }
            _ = stop.cancelled() => return,
        }
    }
}

/// Whether a whole filter at `offered` should replace a copy at `held`:
/// no copy; a later version of the same epoch; or the epoch its origin
/// publishes now (a copy of another epoch says nothing of it).
fn wanted_whole(held: Option<Position>, published: Option<Position>, offered: Position) -> bool {
    match held {
        None => true,
        Some(h) if h.epoch == offered.epoch => h.version < offered.version,
        Some(_) => published.is_some_and(|p| p.epoch == offered.epoch),
    }
}

/// Whether a delta from `from` to `to` brings a copy at `held` forward.
fn advances(held: Option<Position>, epoch: u64, from: u64, to: u64) -> bool {
    held.is_some_and(|h| h.epoch == epoch && from <= h.version && h.version < to)
}

/// Takes in one relayed change if it brings the copy of its origin
/// forward, and keeps it to pass on; anything else is dropped (the
/// per-peer sync still pulls what the copy lacks).
async fn take_in(cluster: &Cluster, entry: RelayEntry, via: &str) {
    let h = &entry.header;
    if h.origin == cluster.me {
        return;
    }
    let offered = Position {
        epoch: h.epoch,
        version: h.version,
    };
    let (held, published) = {
        let replicas = cluster.replicas.read();
        let Some(peer) = replicas.peer(&h.origin) else {
            return;
        };
        let held = match h.part {
            RelayPart::Filter => peer.copy_position(),
            RelayPart::Keys => peer.key_position,
        };
        // The origin's own relay sends the filter it has now: an epoch
        // from there is the one it publishes.
        let published = if via == h.origin {
            Some(offered)
        } else {
            peer.published
        };
        (held, published)
    };
    let taken = match (h.part, h.from) {
        (RelayPart::Filter, Some(from)) if advances(held, h.epoch, from, h.version) => {
            match split_delta_with_ids(&entry.body) {
                Ok((delta, changed)) if matches(&delta, h) => {
                    // Evict first, as the per-peer sync does.
                    cluster.on_changed(&h.origin, &changed).await;
                    cluster.replicas.write().apply(&h.origin, &delta).is_ok()
                }
                _ => false,
            }
        }
        (RelayPart::Keys, Some(from)) if advances(held, h.epoch, from, h.version) => {
            match Delta::decode(&entry.body) {
                Ok(delta) if matches(&delta, h) => cluster
                    .replicas
                    .write()
                    .apply_keys(&h.origin, &delta)
                    .is_ok(),
                _ => false,
            }
        }
        (part, None) if wanted_whole(held, published, offered) => {
            let filter = FetchedFilter {
                kind: h.kind.unwrap_or(FilterKind::Counting),
                position: offered,
                bytes: entry.body.clone(),
            };
            match (part, &h.key_id) {
                (RelayPart::Filter, _) => {
                    cluster.on_snapshot(&h.origin);
                    cluster.replicas.write().install(&h.origin, &filter).is_ok()
                }
                (RelayPart::Keys, Some(key_id)) => {
                    let keys = FetchedKeys {
                        filter,
                        key_id: key_id.clone(),
                    };
                    cluster
                        .replicas
                        .write()
                        .install_keys(&h.origin, &keys)
                        .is_ok()
                }
                (RelayPart::Keys, None) => false,
            }
        }
        _ => false,
    };
    if taken {
        cluster.replicas.write().relayed(&h.origin);
        cluster.relay.push(entry, via);
    }
}

/// Whether a delta's own span is the one its header claims.
fn matches(delta: &Delta, h: &RelayHeader) -> bool {
    delta.epoch == h.epoch && delta.to_version == h.version && Some(delta.from_version) == h.from
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_takes_a_delta_only_inside_its_span_and_a_whole_filter_only_forward() {
        let at = |epoch, version| Some(Position { epoch, version });
        assert!(advances(at(1, 3), 1, 2, 5));
        assert!(!advances(at(1, 5), 1, 2, 5), "already there");
        assert!(!advances(at(1, 1), 1, 2, 5), "a gap before the span");
        assert!(!advances(at(2, 3), 1, 2, 5), "another epoch");
        assert!(!advances(None, 1, 0, 5), "no copy to apply it to");
        let offered = Position {
            epoch: 1,
            version: 5,
        };
        assert!(wanted_whole(None, None, offered));
        assert!(wanted_whole(at(1, 4), None, offered));
        assert!(!wanted_whole(at(1, 5), None, offered));
        assert!(
            !wanted_whole(at(2, 9), at(2, 9), offered),
            "not what is published"
        );
        assert!(wanted_whole(at(2, 9), at(1, 5), offered));
    }
}
