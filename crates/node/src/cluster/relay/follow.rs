//! The follower: one task per tree neighbour reads its relay page by page
//! and takes in what brings a copy forward, keeping it to pass on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xarchive_filter::Delta;

use crate::cluster::backoff::Backoff;
use crate::cluster::client::{FetchedFilter, Whole};
use crate::cluster::coordinator::PeerAddress;
use crate::cluster::copy_change::Source;
use crate::cluster::replicas::Change;
use crate::cluster::Cluster;
use crate::local::domain::Position;
use crate::local::domain_name::DomainName;
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
    running: BTreeMap<DomainName, (String, CancellationToken)>,
}

impl Followers {
    /// Follows exactly `wanted`, and makes them the cluster's neighbours
    /// (`Cluster::neighbours`, where first copies are asked for).
    pub fn set(
        &mut self,
        cluster: &Arc<Cluster>,
        wanted: Vec<PeerAddress>,
        stop: &CancellationToken,
    ) {
        cluster.neighbours.write().clone_from(&wanted);
        let wanted: BTreeMap<DomainName, String> =
            wanted.into_iter().map(|p| (p.name, p.address)).collect();
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
    neighbour: DomainName,
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
            () = stop.cancelled() => return,
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
            () = tokio::time::sleep(pause) => {}
            // A lookup waits for copies behind a write in flight: read
            // now, or as soon as the spacing allows.
            () = cluster.relay_wanted.notified(), if wakeable && !pause.is_zero() => {
                tokio::time::sleep_until(began + WOKEN_SPACING).await;
            }
            () = stop.cancelled() => return,
        }
    }
}

/// Offers one relayed change to the copy of its origin (the one door,
/// `Cluster::take_change`), which takes it in if it brings the copy
/// forward and keeps it to pass on; anything else is dropped (the
/// per-peer sync still pulls what the copy lacks).
async fn take_in(cluster: &Cluster, entry: RelayEntry, via: &str) {
    let h = &entry.header;
    if h.origin == cluster.me {
        return;
    }
    let Some(change) = change_of(&entry) else {
        return;
    };
    let source = Source::Relay { via, entry: &entry };
    let _ = cluster.take_change(&h.origin, h.part, change, source).await;
}

/// The change an entry carries, if its body is what its header says.
fn change_of(entry: &RelayEntry) -> Option<Change> {
    let h = &entry.header;
    let change = match (h.part, h.from) {
        (RelayPart::Filter, Some(_)) => {
            let (delta, changed) = split_delta_with_ids(&entry.body).ok()?;
            Change::Delta { delta, changed }
        }
        (RelayPart::Keys, Some(_)) => Change::Delta {
            delta: Delta::decode(&entry.body).ok()?,
            changed: Vec::new(),
        },
        (part, None) => Change::Whole(Whole {
            filter: FetchedFilter {
                kind: h.kind.unwrap_or(FilterKind::Counting),
                position: Position {
                    epoch: h.epoch,
                    version: h.version,
                },
                bytes: entry.body.clone(),
            },
            // A key filter is kept only with the filter key that built it.
            key_id: match part {
                RelayPart::Filter => None,
                RelayPart::Keys => Some(h.key_id.clone()?),
            },
        }),
    };
    match &change {
        Change::Delta { delta, .. } if !matches(delta, h) => None,
        _ => Some(change),
    }
}

/// Whether a delta's own span is the one its header claims.
fn matches(delta: &Delta, h: &RelayHeader) -> bool {
    delta.epoch == h.epoch && delta.to_version == h.version && Some(delta.from_version) == h.from
}
