//! A domain's own changes put in its relay once published, where its
//! tree neighbours read them (long-polled) and pass them on. The
//! coordinator tells nobody of a publication: that would cost every domain
//! a ZooKeeper event per publication anywhere in the nation, N × the
//! writes (docs/SCALING.md, "ZooKeeper").

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use xarchive_filter::Delta;

use super::ring::{pulled, Pulled};
use crate::cluster::client::FetchedFilter;
use crate::cluster::Cluster;
use crate::local::domain::{DeltaRefusal, FilterView, Position};
use crate::local::id::ArchiveId;
use crate::wire::{RelayEntry, RelayPart};

/// A domain's own filters, as its relay sends their changes: what its
/// routes serve peers (src/http/replication.rs), for either `part`.
pub trait OwnFilters: Send + Sync {
    /// The changes of `part` since `since` in `epoch`; an ID filter's with
    /// the IDs replaced or deleted meanwhile (a key filter's with none).
    fn changes(
        &self,
        part: RelayPart,
        epoch: u64,
        since: u64,
    ) -> Result<(Delta, Vec<ArchiveId>), DeltaRefusal>;
    /// The whole of `part`, as published.
    fn view(&self, part: RelayPart) -> FilterView;
    /// The key under which the key filter hashes (sent with it whole).
    fn key_id(&self) -> String;
}

/// The changes of `own`'s two filters since `fed`, as relay entries (a
/// delta, or the whole filter when no delta can say it: a new epoch, or
/// more changes than the filter's bytes), and the position they bring a
/// copy to.
pub(crate) fn own_entries(
    own: &dyn OwnFilters,
    me: &str,
    fed: Position,
) -> (Vec<RelayEntry>, Position) {
    let [filter, keys] = [RelayPart::Filter, RelayPart::Keys].map(|part| {
        match own.changes(part, fed.epoch, fed.version) {
            Ok((delta, changed)) => pulled(me, part, Pulled::Delta(&delta, &changed)),
            Err(_) => {
                let view = own.view(part);
                let fetched = FetchedFilter {
                    kind: view.kind,
                    position: view.position,
                    bytes: view.bytes.into(),
                };
                // Only a key filter is built under a filter key.
                let key_id = (part == RelayPart::Keys).then(|| own.key_id());
                pulled(me, part, Pulled::Whole(&fetched, key_id.as_deref()))
            }
        }
    });
    let at = Position {
        epoch: filter.header.epoch,
        version: filter.header.version,
    };
    let entries = [filter, keys]
        .into_iter()
        .filter(|e| e.header.from != Some(e.header.version))
        .collect();
    (entries, at)
}

/// Puts this domain's own changes in its relay each time the coordinator
/// confirms a new position published, until `stop`.
///
/// Why this cannot cause a false "not found": what a copy holds is
/// trusted only up to its position and only once that covers what the
/// coordinator's ledger says its origin published (`ruled_out.rs`); the
/// entries only bring copies forward sooner. They may carry changes past
/// the position published (writes still waiting for theirs): a copy ahead
/// routes more IDs to this domain, never fewer, and after a crash this
/// domain rebuilds its filters in a new epoch, so no copy's version can
/// be reached again with other contents.
pub(crate) async fn own(
    cluster: Arc<Cluster>,
    own: Arc<dyn OwnFilters>,
    mut published: watch::Receiver<Option<Position>>,
    stop: CancellationToken,
) {
    // Peers take their first copy whole (from a neighbour or from here);
    // the relay carries what changes after the first position published.
    let mut fed: Option<Position> = None;
    loop {
        tokio::select! {
            changed = published.changed() => if changed.is_err() { return },
            () = stop.cancelled() => return,
        }
        let Some(position) = *published.borrow_and_update() else {
            continue;
        };
        let Some(from) = fed else {
            fed = Some(position);
            continue;
        };
        if from == position {
            continue;
        }
        let (entries, at) = own_entries(own.as_ref(), &cluster.me, from);
        for entry in entries {
            cluster.relay.push(entry, &cluster.me);
        }
        fed = Some(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::filter::{FilterSettings, LocalFilter};
    use parking_lot::Mutex;

    /// One filter standing for both of a domain's (the relay treats them
    /// alike), with no IDs changed to tell.
    struct Filters(Mutex<LocalFilter>);

    impl Filters {
        fn view(&self) -> FilterView {
            let f = self.0.lock();
            FilterView {
                kind: f.kind(),
                position: Position {
                    epoch: f.epoch(),
                    version: f.version(),
                },
                bytes: f.peer_view(),
            }
        }

        fn delta(&self, epoch: u64, since: u64) -> Result<Delta, DeltaRefusal> {
            let f = self.0.lock();
            if f.epoch() != epoch {
                return Err(DeltaRefusal::EpochChanged { current: f.epoch() });
            }
            f.delta_since(since)
                .map_err(|_| DeltaRefusal::SnapshotRequired { since })
        }
    }

    impl OwnFilters for Filters {
        fn changes(
            &self,
            _: RelayPart,
            epoch: u64,
            since: u64,
        ) -> Result<(Delta, Vec<ArchiveId>), DeltaRefusal> {
            Ok((Filters::delta(self, epoch, since)?, Vec::new()))
        }
        fn view(&self, _: RelayPart) -> FilterView {
            Filters::view(self)
        }
        fn key_id(&self) -> String {
            "k1".into()
        }
    }

    #[test]
    fn own_changes_go_in_as_deltas_from_the_position_fed_or_whole_in_a_new_epoch() {
        let filter = LocalFilter::new(&FilterSettings::default(), 1_000).unwrap();
        let own = Filters(Mutex::new(filter));
        let fed = own.view().position;
        for id in ["A-1", "A-2", "A-3"] {
            own.0.lock().insert(id).unwrap();
        }
        let (entries, at) = own_entries(&own, "A", fed);
        assert_eq!(at.version, fed.version + 3);
        assert_eq!(entries.len(), 2, "the filter's and the key filter's");
        for entry in &entries {
            let h = &entry.header;
            assert_eq!((h.origin.as_str(), h.epoch), ("A", fed.epoch));
            assert_eq!((h.from, h.version), (Some(fed.version), at.version));
        }

        let (nothing, still) = own_entries(&own, "A", at);
        assert!(nothing.is_empty(), "nothing changed since");
        assert_eq!(still, at);

        own.0.lock().set_epoch(fed.epoch ^ 2);
        let (whole, rebuilt) = own_entries(&own, "A", at);
        assert_eq!(rebuilt.epoch, fed.epoch ^ 2);
        assert_eq!(whole.len(), 2);
        assert!(whole
            .iter()
            .all(|e| e.header.from.is_none() && e.header.kind.is_some()));
        let keys = whole.iter().find(|e| e.header.part == RelayPart::Keys);
        assert_eq!(keys.and_then(|e| e.header.key_id.as_deref()), Some("k1"));
    }
}
