//! The JSON bodies of the HTTP API, typed: the server writes them, and the
//! peer client, the CLI and the tests read them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::local::audit::{AuditEntry, Requester};
use crate::local::domain::DomainStats;
use crate::local::filter::FilterKind;
use crate::local::id_profile::IdProfile;
use crate::local::keys::KeyType;
use crate::local::record::Record;

/// Every error body: a stable `code` for programs, a `message` for people,
/// and for some codes more fields (`id`, the current `epoch` and `version`
/// of a 409 `snapshot_required`, the `route` of a lookup, the `index` of a
/// bad ID in a batch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

/// The stable `code` of every error this API answers: one list, so that
/// the OpenAPI document names them all and a client can match on them.
/// A new code is a new variant here; an existing one is never renamed.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    AlreadyDecided,
    AssetNotFound,
    BodyTooLarge,
    Busy,
    CertificateInvalid,
    CertificateKeyNotValid,
    CertificateKeyUnknown,
    CertificateMalformed,
    CertificateNotFound,
    ContentTooLarge,
    CoordinatorUnavailable,
    CopyInvalid,
    CopyNotHeld,
    Forbidden,
    InsufficientStorage,
    Internal,
    InvalidBody,
    InvalidId,
    InvalidJson,
    InvalidKey,
    InvalidParameter,
    InvalidRecord,
    InvalidRequest,
    LineTooLarge,
    MethodNotAllowed,
    NotAnswered,
    NotFound,
    NotPublished,
    NotReady,
    Overloaded,
    PdfUnavailable,
    RateLimited,
    RequestNotFound,
    ReviewNotFound,
    RouteNotFound,
    SnapshotRequired,
    StoreUnavailable,
    Timeout,
    TooManyIds,
    Unauthorized,
    Unavailable,
}

impl ErrorCode {
    /// The code as it is written in a body.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
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

impl Strategy {
    /// The strategy as a query string names it (`?strategy=`).
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Routed => "routed",
            Strategy::Broadcast => "broadcast",
        }
    }
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
    pub cache: Option<CacheRoute>,
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

/// What the cache did for a lookup (`Route.cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum CacheRoute {
    /// A cached copy answered.
    Hit,
    /// The cache was asked and the lookup went remote.
    Miss,
    /// A cached copy was refused: its owner's filter copy lagged too long.
    Stale,
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
    pub code: Option<ErrorCode>,
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
    pub code: Option<ErrorCode>,
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
    /// How long each domain's probe waited for an answer (`reachable`).
    #[serde(default)]
    pub probe_timeout_ms: u64,
    pub domains: Vec<DomainView>,
    /// What the page served by the domain answering may hold in a browser
    /// (its `[page]` settings); absent from domains older than the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageBudget>,
}

/// The page's budget in a browser (`[page]` of the serving domain's
/// configuration): the filters it holds are at most `filter_bytes` in all
/// and at most `filter_requests` (each kept current by one delta request
/// before a search); every other domain is asked of the serving domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PageBudget {
    /// Bytes of filters held, in all (summed as each domain's
    /// `filter_bytes`).
    pub filter_bytes: u64,
    /// Filter and delta requests a search may make: the most domains
    /// whose filters are held.
    pub filter_requests: u32,
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
    /// Registered with the coordinator (its session is alive).
    pub up: bool,
    /// It answered a probe (`GET /healthz`) made during this call, within
    /// `probe_timeout_ms`; never an earlier answer.
    pub reachable: bool,
    /// The probe's round trip, in milliseconds, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_ms: Option<u64>,
    /// Why the probe got no answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_error: Option<String>,
    pub kind: FilterKind,
    /// The size of its published filter as a reader holds it: the bits of
    /// a Bloom filter's bit view, or a cuckoo filter's table, without the
    /// envelope (docs/FORMAT.md); what the page weighs against its budget
    /// before fetching the filter. From the copy held here (absent while
    /// none is held), or the domain's own filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_bytes: Option<u64>,
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
    /// Where the first copy was taken from: the domain itself, or a relay
    /// tree neighbour's copy (a domain joining takes the nation's copies
    /// from nearby).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_copy_from: Option<String>,
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
    pub code: Option<ErrorCode>,
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
