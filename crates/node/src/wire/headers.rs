//! The names of the headers that carry a filter's or a relay's position
//! beside binary bodies, and the media types of the node's own binary
//! bodies.

/// Header names carrying the filter's position beside binary bodies.
pub const EPOCH_HEADER: &str = "x-xarchive-epoch";
pub const VERSION_HEADER: &str = "x-xarchive-version";
pub const FROM_VERSION_HEADER: &str = "x-xarchive-from-version";
pub const KIND_HEADER: &str = "x-xarchive-filter-kind";
/// On the key filter: which filter key built it (`KeyHasher::filter_key_id`).
pub const KEY_ID_HEADER: &str = "x-xarchive-key-id";
/// A delta followed by the IDs replaced or deleted in its span: a u32
/// (little-endian) length of the `XADL` bytes, the bytes, then the IDs,
/// each ending in `\n` (IDs cannot contain control characters).
pub const DELTA_WITH_IDS: &str = "application/x-xarchive-delta-ids";

/// A page of a domain's relay (`GET /v1/relay`): entries, each framed as
/// a u32 (little-endian) length, a [`RelayHeader`](super::RelayHeader) as JSON, a u32 length,
/// and the body: an origin's delta (`DELTA_WITH_IDS` for its filter, a
/// bare `XADL` for its key filter) or a whole filter (`XABL`/`XACK`).
pub const RELAY_PAGE: &str = "application/x-xarchive-relay";
/// Which relay answered (a domain's relay starts anew when it restarts).
pub const RELAY_HEADER: &str = "x-xarchive-relay";
/// The sequence number to ask for next.
pub const RELAY_NEXT_HEADER: &str = "x-xarchive-relay-next";
/// Present (`1`) when the page waited for a change (5 ms or more): the
/// reader may ask again at once, as changes come seldom.
pub const RELAY_WAITED_HEADER: &str = "x-xarchive-relay-waited";
