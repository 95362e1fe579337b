//! The relay's kept changes: a ring bounded in bytes, read in pages that
//! leave out what an asker already has, long-polled by `GET /v1/relay`.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, HeaderValue};
use parking_lot::Mutex;
use tokio::sync::watch;
use xarchive_filter::Delta;

use crate::cluster::client::FetchedFilter;
use crate::local::id::ArchiveId;
use crate::wire::{
    encode_relay_page, frame_delta_with_ids, RelayEntry, RelayHeader, RelayPageError, RelayPart,
    RELAY_HEADER, RELAY_NEXT_HEADER, RELAY_PAGE, RELAY_WAITED_HEADER,
};

/// Bytes of changes a relay keeps; a neighbour further behind misses
/// some, and the per-peer sync makes up for them.
const KEPT_BYTES: usize = 64 << 20;
/// Bytes of bodies in one page (at least one entry is sent).
const PAGE_BYTES: usize = 8 << 20;
/// How long a pull waits for a change when there is none.
const LONG_POLL: Duration = Duration::from_secs(1);
/// What a first read of a relay starts with: the changes kept this long.
const RECENT: Duration = Duration::from_secs(2);
/// See [`pause_after`](super::pause_after).
const IDLE: Duration = Duration::from_millis(5);

struct Held {
    /// The domain it came from (a neighbour's relay, or the origin
    /// pulled): not sent back there.
    via: String,
    entry: Arc<RelayEntry>,
    kept_at: Instant,
}

#[derive(Default)]
struct Ring {
    kept: VecDeque<Held>,
    /// The sequence number of `kept[0]`.
    first: u64,
    bytes: usize,
}

impl Ring {
    fn next(&self) -> u64 {
        self.first + self.kept.len() as u64
    }
}

/// What a read of a relay found.
pub struct RelayRead {
    /// The relay read.
    pub relay: u64,
    pub entries: Vec<Arc<RelayEntry>>,
    /// The sequence number to read from next.
    pub next: u64,
    /// Whether it waited [`IDLE`] or more for a change.
    pub waited: bool,
}

impl RelayRead {
    /// The answer's headers and body, as `GET /v1/relay` sends them
    /// (docs/FORMAT.md §9).
    pub fn encode(&self) -> Result<(HeaderMap, Vec<u8>), RelayPageError> {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(RELAY_PAGE));
        headers.insert(RELAY_HEADER, HeaderValue::from(self.relay));
        headers.insert(RELAY_NEXT_HEADER, HeaderValue::from(self.next));
        if self.waited {
            headers.insert(RELAY_WAITED_HEADER, HeaderValue::from_static("1"));
        }
        let body = encode_relay_page(self.entries.iter().map(|e| e.as_ref()))?;
        Ok((headers, body))
    }
}

/// This domain's relay.
pub struct Relay {
    /// Tells this relay from the one before a restart: a follower that
    /// knew another starts at the end.
    pub id: u64,
    ring: Mutex<Ring>,
    next: watch::Sender<u64>,
}

impl Default for Relay {
    fn default() -> Self {
        Relay {
            id: rand::random::<u64>() | 1,
            ring: Mutex::default(),
            next: watch::Sender::new(0),
        }
    }
}

impl Relay {
    /// Keeps `entry`, taken in from `via`, for the other neighbours.
    pub fn push(&self, entry: RelayEntry, via: &str) {
        let mut ring = self.ring.lock();
        ring.bytes += entry.body.len();
        ring.kept.push_back(Held {
            via: via.to_owned(),
            entry: Arc::new(entry),
            kept_at: Instant::now(),
        });
        while ring.bytes > KEPT_BYTES && ring.kept.len() > 1 {
            if let Some(old) = ring.kept.pop_front() {
                ring.bytes -= old.entry.body.len();
                ring.first += 1;
            }
        }
        self.next.send_replace(ring.next());
    }

    /// The sequence number the next entry will have.
    pub fn next(&self) -> u64 {
        self.ring.lock().next()
    }

    /// The entries from sequence number `from` on that neither came from
    /// `asker` nor are of its own filters, up to [`PAGE_BYTES`], and the
    /// number to ask from next. A whole filter in the page makes the
    /// earlier entries of the same filter in it needless: they are left
    /// out.
    pub fn page(&self, from: u64, asker: &str) -> (Vec<Arc<RelayEntry>>, u64) {
        let ring = self.ring.lock();
        let start = from.clamp(ring.first, ring.next());
        let mut taken = Vec::new();
        let (mut bytes, mut next) = (0, start);
        // `start` is at most `next()`, `first` + the entries kept.
        let skip = usize::try_from(start - ring.first).unwrap_or(ring.kept.len());
        for kept in ring.kept.iter().skip(skip) {
            if bytes > 0 && bytes + kept.entry.body.len() > PAGE_BYTES {
                break;
            }
            next += 1;
            if kept.via != asker && kept.entry.header.origin != asker {
                bytes += kept.entry.body.len();
                taken.push(kept.entry.clone());
            }
        }
        let mut whole: HashSet<(&str, RelayPart)> = HashSet::new();
        let mut page: Vec<Arc<RelayEntry>> = Vec::with_capacity(taken.len());
        for entry in taken.iter().rev() {
            let filter = (entry.header.origin.as_str(), entry.header.part);
            if whole.contains(&filter) {
                continue;
            }
            if entry.header.from.is_none() {
                whole.insert(filter);
            }
            page.push(entry.clone());
        }
        page.reverse();
        (page, next)
    }

    /// What `GET /v1/relay` answers: a page from `from` for an asker
    /// that read relay `relay` (this one), else (a first read, or this
    /// domain restarted) from what was kept in the last [`RECENT`], which
    /// a new follower may have just missed (older changes are in the
    /// copies it pulled from their origins); waiting up to [`LONG_POLL`]
    /// for a page that is not empty.
    pub async fn read(&self, relay: u64, from: u64, asker: &str) -> RelayRead {
        let from = if relay == self.id {
            from
        } else {
            let ring = self.ring.lock();
            let since = Instant::now().checked_sub(RECENT);
            let old = ring
                .kept
                .iter()
                .take_while(|k| since.is_some_and(|s| k.kept_at < s))
                .count();
            ring.first + old as u64
        };
        let (entries, next) = self.page(from, asker);
        if !entries.is_empty() {
            return RelayRead {
                relay: self.id,
                entries,
                next,
                waited: false,
            };
        }
        let mut kept = self.next.subscribe();
        let asked = Instant::now();
        let _ = tokio::time::timeout(LONG_POLL, kept.wait_for(|n| *n > next)).await;
        let (entries, next) = self.page(next, asker);
        RelayRead {
            relay: self.id,
            entries,
            next,
            waited: asked.elapsed() >= IDLE,
        }
    }
}

/// A change pulled from `origin` itself, as the relay keeps it: a delta
/// (with the IDs it changed, for the filter), or a whole filter.
pub(crate) fn pulled(origin: &str, part: RelayPart, change: Pulled<'_>) -> RelayEntry {
    let header = |epoch, version, from, kind, key_id| RelayHeader {
        origin: origin.to_owned(),
        part,
        epoch,
        version,
        from,
        kind,
        key_id,
    };
    match change {
        Pulled::Delta(delta, changed) => RelayEntry {
            header: header(
                delta.epoch,
                delta.to_version,
                Some(delta.from_version),
                None,
                None,
            ),
            body: match part {
                RelayPart::Filter => frame_delta_with_ids(&delta.encode(), changed).into(),
                RelayPart::Keys => delta.encode().into(),
            },
        },
        Pulled::Whole(filter, key_id) => RelayEntry {
            header: header(
                filter.position.epoch,
                filter.position.version,
                None,
                Some(filter.kind),
                key_id.map(str::to_owned),
            ),
            body: filter.bytes.clone(),
        },
    }
}

/// What a pull from an origin brought.
pub(crate) enum Pulled<'a> {
    Delta(&'a Delta, &'a [ArchiveId]),
    /// A whole filter, and the key id of a key filter.
    Whole(&'a FetchedFilter, Option<&'a str>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::filter::FilterKind;

    fn entry(origin: &str, from: Option<u64>, version: u64, len: usize) -> RelayEntry {
        RelayEntry {
            header: RelayHeader {
                origin: origin.into(),
                part: RelayPart::Filter,
                epoch: 1,
                version,
                from,
                kind: from.is_none().then_some(FilterKind::Counting),
                key_id: None,
            },
            body: vec![0; len].into(),
        }
    }

    fn versions(page: &[Arc<RelayEntry>]) -> Vec<(String, u64)> {
        page.iter()
            .map(|e| (e.header.origin.clone(), e.header.version))
            .collect()
    }

    #[test]
    fn a_page_leaves_out_what_came_from_the_asker_or_is_its_own_and_starts_where_asked() {
        let relay = Relay::default();
        relay.push(entry("a", Some(0), 1, 10), "b");
        relay.push(entry("c", Some(0), 1, 10), "");
        relay.push(entry("a", Some(1), 2, 10), "c");
        let (page, next) = relay.page(0, "b");
        assert_eq!(versions(&page), [("c".into(), 1), ("a".into(), 2)]);
        assert_eq!(next, 3);
        let (page, _) = relay.page(0, "c");
        assert_eq!(versions(&page), [("a".into(), 1)]);
        let (page, next) = relay.page(2, "x");
        assert_eq!(versions(&page), [("a".into(), 2)]);
        assert_eq!(next, 3);
        assert!(relay.page(3, "x").0.is_empty());
    }

    #[test]
    fn a_whole_filter_in_a_page_leaves_out_the_same_filters_earlier_entries() {
        let relay = Relay::default();
        relay.push(entry("a", Some(0), 1, 10), "");
        relay.push(entry("b", Some(0), 1, 10), "");
        relay.push(entry("a", None, 5, 100), "");
        relay.push(entry("a", Some(5), 6, 10), "");
        let (page, _) = relay.page(0, "x");
        assert_eq!(
            versions(&page),
            [("b".into(), 1), ("a".into(), 5), ("a".into(), 6)]
        );
    }

    #[test]
    fn a_relay_keeps_a_bounded_number_of_bytes_and_a_late_asker_starts_at_the_oldest_kept() {
        let relay = Relay::default();
        for v in 0..5u64 {
            relay.push(entry("a", Some(v), v + 1, KEPT_BYTES / 2), "");
        }
        // Two halves are kept; a page holds at most PAGE_BYTES but never nothing.
        let (page, next) = relay.page(0, "x");
        assert_eq!((versions(&page), next), (vec![("a".into(), 4)], 4));
        let (page, next) = relay.page(next, "x");
        assert_eq!((versions(&page), next), (vec![("a".into(), 5)], 5));
    }
}
