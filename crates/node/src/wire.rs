//! The HTTP API's wire forms, in one place: header names, the framing of
//! a delta with the IDs it changed, and the JSON bodies. The server writes
//! these types, and the peer client, the CLI and the tests read them, so
//! no side parses the other's JSON by hand.
//!
//! Epochs are written as decimal strings (`local::epoch` says why).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use xarchive_filter::{DecodeError, Delta};

pub use crate::local::audit::{AuditEntry, AuditHead, AuditIntegrity, Requester};
use crate::local::domain::DomainStats;
use crate::local::filter::FilterKind;
use crate::local::id::{ArchiveId, InvalidId};
pub use crate::local::id_profile::IdProfile;
use crate::local::keys::KeyType;
use crate::local::record::Record;

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

/// Why a `DELTA_WITH_IDS` body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FramingError {
    #[error("body shorter than its length prefix")]
    NoPrefix,
    #[error("delta of {0} bytes is longer than the body")]
    Truncated(usize),
    #[error("the delta: {0}")]
    Delta(#[from] DecodeError),
    #[error("the changed IDs are not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("a changed ID: {0}")]
    Id(#[from] InvalidId),
}

/// Frames an encoded delta and the IDs it changed (`DELTA_WITH_IDS`).
pub fn frame_delta_with_ids(encoded: &[u8], changed: &[ArchiveId]) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + encoded.len() + changed.len() * 24);
    body.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
    body.extend_from_slice(encoded);
    for id in changed {
        body.extend_from_slice(id.as_str().as_bytes());
        body.push(b'\n');
    }
    body
}

/// Reads a `DELTA_WITH_IDS` body.
pub fn split_delta_with_ids(body: &[u8]) -> Result<(Delta, Vec<ArchiveId>), FramingError> {
    let len_bytes: [u8; 4] = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(FramingError::NoPrefix)?;
    let len = u32::from_le_bytes(len_bytes) as usize;
    let end = 4usize
        .checked_add(len)
        .filter(|end| *end <= body.len())
        .ok_or(FramingError::Truncated(len))?;
    let delta = Delta::decode(&body[4..end])?;
    let changed = std::str::from_utf8(&body[end..])?
        .split_terminator('\n')
        .map(ArchiveId::parse)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((delta, changed))
}

/// A page of a domain's relay (`GET /v1/relay`): entries, each framed as
/// a u32 (little-endian) length, a [`RelayHeader`] as JSON, a u32 length,
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

/// Which of an origin's two filters a relayed change is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelayPart {
    Filter,
    Keys,
}

/// What a relayed change is: whose filter, and from which position to which.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayHeader {
    /// The domain whose filter changed.
    pub origin: String,
    pub part: RelayPart,
    #[serde(with = "crate::local::epoch::u64_string")]
    pub epoch: u64,
    /// The version the body brings a copy to.
    pub version: u64,
    /// A delta's first version; absent for a whole filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// A whole filter's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FilterKind>,
    /// A whole key filter's key id (`KEY_ID_HEADER`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
}

/// One relayed change.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayEntry {
    pub header: RelayHeader,
    pub body: bytes::Bytes,
}

/// Why a relay page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RelayPageError {
    #[error("entry at byte {0} runs past the end of the page")]
    Truncated(usize),
    #[error("entry at byte {at}: header: {source}")]
    Header {
        at: usize,
        source: serde_json::Error,
    },
}

/// Writes a relay page.
pub fn encode_relay_page<'a>(entries: impl IntoIterator<Item = &'a RelayEntry>) -> Vec<u8> {
    let mut page = Vec::new();
    for entry in entries {
        // A header of strings and numbers always serializes.
        let header = serde_json::to_vec(&entry.header).unwrap_or_default();
        page.extend_from_slice(&(header.len() as u32).to_le_bytes());
        page.extend_from_slice(&header);
        page.extend_from_slice(&(entry.body.len() as u32).to_le_bytes());
        page.extend_from_slice(&entry.body);
    }
    page
}

/// Reads a relay page; bodies are slices of `page`, not copies.
pub fn decode_relay_page(page: &bytes::Bytes) -> Result<Vec<RelayEntry>, RelayPageError> {
    let mut entries = Vec::new();
    let mut at = 0;
    while at < page.len() {
        let start = at;
        let take = |at: &mut usize| -> Result<bytes::Bytes, RelayPageError> {
            let len = page
                .get(*at..*at + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(|b| u32::from_le_bytes(b) as usize)
                .ok_or(RelayPageError::Truncated(start))?;
            let end = (*at + 4)
                .checked_add(len)
                .filter(|end| *end <= page.len())
                .ok_or(RelayPageError::Truncated(start))?;
            let part = page.slice(*at + 4..end);
            *at = end;
            Ok(part)
        };
        let header = take(&mut at)?;
        let header = serde_json::from_slice(&header)
            .map_err(|source| RelayPageError::Header { at: start, source })?;
        let body = take(&mut at)?;
        entries.push(RelayEntry { header, body });
    }
    Ok(entries)
}

/// Every error body: a stable `code` for programs, a `message` for people,
/// and for some codes more fields (`id`, the current `epoch` and `version`
/// of a 409 `snapshot_required`, the `route` of a lookup, the `index` of a
/// bad ID in a batch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// How a lookup is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Ask only the domains whose replicas may hold the ID.
    #[default]
    Routed,
    /// The seed paper's way: ask every domain to check its live filter.
    Broadcast,
}

/// How a lookup went, returned with its answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct Route {
    pub strategy: Strategy,
    /// Answered from this domain's own store.
    pub local: bool,
    /// Domains whose replicas said "maybe".
    pub candidates: Vec<String>,
    /// Domains asked for the record.
    pub asked: Vec<String>,
    /// Domains asked that did not hold it (replica false positives).
    pub false_positive_hops: usize,
    /// Whether the broadcast probe ran.
    pub broadcast: bool,
    /// Domains whose live filters were probed.
    pub probed: Vec<String>,
    pub unreachable: Vec<String>,
    /// Why each unreachable domain could not answer.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub errors: std::collections::BTreeMap<String, String>,
    pub remote_calls: usize,
    /// `hit` when a cached copy answered, `miss` when the cache was asked
    /// and the lookup went remote, `stale` when a cached copy was refused
    /// because the owner's filter copy lagged longer than
    /// `cache.max_lag_ms`; absent without a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// Answered by another lookup of the same ID in flight at the time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coalesced: bool,
    /// Why the cluster's membership could not be confirmed with the
    /// coordinator (then every domain known was asked, and "not found"
    /// cannot be answered: a domain this one does not know of may hold it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
    pub elapsed_ms: f64,
}

/// `GET /v1/lookup/{id}`, every status: the record and its owner when
/// found (200); otherwise the error's `code` and `message`, with the
/// domains that could not be reached (503 `unavailable`). The route
/// comes with every answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LookupBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Record>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
    /// With `not_found`: the archive numbers this domain holds nearest to
    /// what was typed (docs/API.md), nearest first; none when what was
    /// typed reads as an identity number or other private key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
    #[serde(default)]
    pub route: Route,
}

/// `GET /v1/keys`: the key types declared (the same at every domain).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeyTypesBody {
    pub key_types: Vec<KeyType>,
    /// How archive numbers typed by people are read before a lookup
    /// (`[ids]`; absent from domains older than the profile).
    #[serde(default)]
    pub id_profile: IdProfile,
}

/// The body of `POST /v1/search` (a POST, so that personal data stays
/// out of URLs, access logs and browser history).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// A key type the cluster declares.
    pub key_type: String,
    /// The key's value; normalised as its type says before the search.
    pub value: String,
    /// Only this domain's own records: what one domain asks another.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
    /// Who the search is for, for the audit log: set only by a member
    /// domain passing on its client's search (refused from anyone else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<Requester>,
}

/// `POST /v1/search`, every status: the records found in every domain
/// that answered (200 when every domain that could hold the key did;
/// 503 `unavailable` or `not_ready` with what was found, and the domains
/// that did not answer named: never a silent partial answer).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub key_type: String,
    /// Every record found, by domain, then by ID.
    pub records: Vec<Record>,
    /// The domains asked, this one included.
    pub asked: Vec<String>,
    /// Domains that could not be reached: they may hold more records.
    pub unreachable: Vec<String>,
    /// Why each unreachable domain could not answer.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub errors: std::collections::BTreeMap<String, String>,
    /// Why the membership could not be confirmed with the coordinator
    /// (then every domain known was asked, but one unknown here may hold
    /// more records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
    pub remote_calls: usize,
    pub elapsed_ms: f64,
}

/// `GET /v1/audit?since=...&limit=N`: searches by private key that
/// reached this domain, oldest first; `next` is the `since` of the next
/// page (absent on the last).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub domain: String,
    pub entries: Vec<AuditEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /v1/archives?after=ID&limit=N`: IDs in order; `next` is where
/// the next page starts (absent on the last page).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ArchiveList {
    pub ids: Vec<String>,
    pub next: Option<String>,
}

/// `GET /v1/route/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RouteBody {
    pub id: String,
    pub local: bool,
    pub candidates: Vec<String>,
}

/// `GET /v1/cluster`: every domain this one knows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterView {
    /// The domain answering.
    pub domain: String,
    pub coordinator: String,
    /// Whether the coordinator confirms this list now (see `/readyz`).
    pub connected: bool,
    pub domains: Vec<DomainView>,
}

impl ClusterView {
    /// Connected to its coordinator, `domains` domains (itself included)
    /// up, with a current copy of every other one's filter and key filter.
    pub fn converged(&self, domains: usize) -> bool {
        self.connected
            && self.domains.len() == domains
            && self.domains.iter().all(|d| {
                d.up && (d.is_self || (d.current == Some(true) && d.keys_current == Some(true)))
            })
    }

    pub fn get(&self, name: &str) -> Option<&DomainView> {
        self.domains.iter().find(|d| d.name == name)
    }
}

/// One domain in a [`ClusterView`]. The replica fields are absent for the
/// domain answering.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DomainView {
    pub name: String,
    pub address: String,
    #[serde(rename = "self")]
    pub is_self: bool,
    pub up: bool,
    pub reachable: bool,
    pub kind: FilterKind,
    /// The position it last published.
    #[serde(with = "crate::local::epoch::opt_u64_string")]
    #[schema(value_type = Option<String>)]
    pub epoch: Option<u64>,
    pub version: Option<u64>,
    /// The position of the copy held here.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::local::epoch::opt_u64_string"
    )]
    #[schema(value_type = Option<String>)]
    pub replica_epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_version: Option<u64>,
    /// Versions the copy is behind (same epoch only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
    /// The copy includes everything it last published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<bool>,
    /// The copy of its key filter includes everything it last published
    /// (searches by key trust only such a copy's "no").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_current: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_ms_ago: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// For how long the copy has not included what it last published
    /// (absent while it does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind_ms: Option<u64>,
    /// Times the copy stayed behind for `relay_grace_ms` and was pulled
    /// from the domain itself: neither a pull at its publication nor the
    /// relay brought it. Growing while the domain is reachable: its
    /// changes do not reach this one along the relay tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_pulls: Option<u64>,
}

/// `GET /readyz` when ready: open to anyone, so nothing more (the
/// coordinator and the cluster's name are in `/v1/cluster`, for tokens).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Ready {
    pub ready: bool,
    /// Domains in the membership read.
    pub domains: usize,
}

/// `GET /v1/contains/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Contains {
    pub id: String,
    pub domain: String,
    pub maybe: bool,
}

/// `POST /v1/contains`: the answers in request order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ContainsMany {
    pub domain: String,
    pub results: Vec<ContainsResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ContainsResult {
    pub id: String,
    pub maybe: bool,
}

/// One line's outcome in a bulk import.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct LineResult {
    /// 1-based line number in the request body (blank lines not counted).
    pub line: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What a single PUT of the line would have answered.
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct BulkSummary {
    pub lines: usize,
    pub created: usize,
    pub replaced: usize,
    pub failed: usize,
    /// Lines beyond the per-request limit, not read.
    pub beyond_limit: usize,
}

/// `POST /v1/archives/_bulk`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct BulkReport {
    pub summary: BulkSummary,
    pub results: Vec<LineResult>,
}

/// The cache's counters, for `/v1/stats`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct CacheStats {
    pub backend: String,
    pub hits: u64,
    pub misses: u64,
    pub admissions: u64,
    pub evictions: u64,
    pub errors: u64,
    /// Cached copies refused because the owner's filter copy lagged.
    pub stale_refusals: u64,
}

/// `GET /v1/stats`: the domain's store and filter, and its cache.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
pub struct Stats {
    #[serde(flatten)]
    pub domain: DomainStats,
    pub cache: CacheStats,
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A peer's delta body: any bytes are read or refused, never a panic.
        #[test]
        fn any_bytes_read_as_a_delta_with_ids_or_are_refused_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        ) {
            let _ = split_delta_with_ids(&bytes);
        }
    }

    #[test]
    fn a_framed_delta_reads_back_and_a_damaged_one_is_refused() {
        let mut filter = xarchive_filter::CountingBloomFilter::with_capacity(100, 0.01).unwrap();
        filter.insert(b"a");
        let delta = filter.flips_since(0).unwrap();
        let ids = vec![
            ArchiveId::parse("a").unwrap(),
            ArchiveId::parse("档案/1").unwrap(),
        ];
        let body = frame_delta_with_ids(&delta.encode(), &ids);
        let (read, changed) = split_delta_with_ids(&body).unwrap();
        assert_eq!((read, changed), (delta, ids));
        assert!(matches!(
            split_delta_with_ids(&body[..3]),
            Err(FramingError::NoPrefix)
        ));
        let mut long = body.clone();
        long[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            split_delta_with_ids(&long),
            Err(FramingError::Truncated(_))
        ));
        let mut bad_id = body;
        bad_id.extend_from_slice(b"\x01\n");
        assert!(matches!(
            split_delta_with_ids(&bad_id),
            Err(FramingError::Id(_))
        ));
    }

    fn relay_entry() -> impl proptest::strategy::Strategy<Value = RelayEntry> {
        use proptest::prelude::*;
        (
            "[a-z0-9-]{1,12}",
            any::<bool>(),
            any::<u64>(),
            any::<u64>(),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(origin, keys, epoch, version, from, body)| RelayEntry {
                header: RelayHeader {
                    origin,
                    part: if keys {
                        RelayPart::Keys
                    } else {
                        RelayPart::Filter
                    },
                    epoch,
                    version,
                    from,
                    kind: from.is_none().then_some(FilterKind::Counting),
                    key_id: (keys && from.is_none()).then(|| "k1".to_owned()),
                },
                body: body.into(),
            })
    }

    proptest::proptest! {
        #[test]
        fn a_relay_page_reads_back_as_written(
            entries in proptest::collection::vec(relay_entry(), 0..6)
        ) {
            let page = bytes::Bytes::from(encode_relay_page(&entries));
            proptest::prop_assert_eq!(decode_relay_page(&page).unwrap(), entries);
        }

        #[test]
        fn a_cut_relay_page_is_refused_and_any_bytes_are_read_without_panic(
            entries in proptest::collection::vec(relay_entry(), 1..4),
            cut in 1usize..64,
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
        ) {
            let page = encode_relay_page(&entries);
            let cut = cut.min(page.len());
            let short = bytes::Bytes::copy_from_slice(&page[..page.len() - cut]);
            // What is left may end exactly between entries, else it is refused.
            if let Ok(read) = decode_relay_page(&short) {
                proptest::prop_assert!(read.len() < entries.len());
            }
            let _ = decode_relay_page(&bytes::Bytes::from(noise));
        }
    }
}
