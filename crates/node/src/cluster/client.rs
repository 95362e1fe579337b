//! A typed client of a domain's HTTP API: used by peers (filters, deltas,
//! records) and by the command line.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use xarchive_filter::Delta;

use crate::local::domain::{Position, VerifyReport};
use crate::local::filter::FilterKind;
use crate::local::id::ArchiveId;
use crate::local::record::Record;
use crate::security::member::MemberKey;
use crate::wire::{
    decode_relay_page, split_delta_with_ids, ArchiveList, AuditIntegrity, AuditPage, BulkReport,
    ClusterView, Contains, ContainsMany, LookupBody, RelayEntry, SearchBody, SearchRequest,
    DELTA_WITH_IDS, EPOCH_HEADER, KEY_ID_HEADER, KIND_HEADER, RELAY_HEADER, RELAY_NEXT_HEADER,
    RELAY_WAITED_HEADER, VERSION_HEADER,
};
use crate::wire::{ErrorCode, KeyTypesBody, Stats};

/// Why a call failed: the server said no (with its JSON error), or the
/// call never got a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{url}: {status} {code}: {message}")]
    Api {
        url: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url}: unexpected answer: {detail}")]
    Decode { url: String, detail: String },
    #[error("invalid server address {0:?}: {1}")]
    Address(String, String),
}

/// Turns a reqwest failure on `url` into [`ClientError::Transport`].
fn transport(url: &str) -> impl FnOnce(reqwest::Error) -> ClientError + '_ {
    move |source| ClientError::Transport {
        url: url.to_owned(),
        source,
    }
}

impl ClientError {
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the server said the record is not there: only the API's
    /// `not_found`, never another 404 (a wrong path, `route_not_found`),
    /// since "no such record" is the one answer never to give wrongly.
    pub fn record_absent(&self) -> bool {
        matches!(self, ClientError::Api { status: 404, code, .. } if code == "not_found")
    }
}

/// A filter as a domain publishes it.
#[derive(Debug, Clone)]
pub struct FetchedFilter {
    pub kind: FilterKind,
    pub position: Position,
    pub bytes: Bytes,
}

/// A peer's key filter as fetched, and which filter key built it.
#[derive(Debug, Clone)]
pub struct FetchedKeys {
    pub filter: FetchedFilter,
    pub key_id: String,
}

/// A page of a peer's relay.
#[derive(Debug)]
pub struct RelayPage {
    /// Which relay answered.
    pub relay: u64,
    /// The sequence number to ask from next.
    pub next: u64,
    pub entries: Vec<RelayEntry>,
    /// Whether the page waited for a change.
    pub waited: bool,
}

/// The answer to a delta request.
#[derive(Debug, Clone)]
pub enum DeltaAnswer {
    Delta {
        delta: Delta,
        changed: Vec<ArchiveId>,
    },
    /// The domain no longer holds the changes (or changed epoch).
    SnapshotRequired,
}

#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    /// Added before each request and after each answer: a simulated
    /// one-way network delay, for benchmarks.
    #[cfg(feature = "testsuite")]
    delay: Duration,
    /// The timeout of a filter snapshot, if not the client's own.
    snapshot_timeout: Option<Duration>,
    /// This domain's name and the cluster's member key: each request
    /// carries a credential naming it, of the current window.
    member: Option<Arc<(MemberKey, String)>>,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: String,
    message: String,
}

/// What stays literal in a path segment: RFC 3986's unreserved marks but
/// the dot, since a segment of `.` or `..` would be resolved away.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes an ID as one path segment.
pub fn encode_id(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}

/// An HTTP client with a timeout, a bearer token on every request (if
/// given), and only `trust` as certificate authorities (if given).
pub fn http_client(
    timeout: Duration,
    token: Option<&str>,
    trust: Option<Vec<reqwest::Certificate>>,
) -> Result<reqwest::Client, String> {
    crate::security::tls::install_crypto();
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        // A request given a longer timeout (a snapshot) still fails as
        // soon as its peer goes silent for this long.
        .read_timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(256);
    if let Some(token) = token {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "the token contains characters a header cannot carry".to_owned())?;
        value.set_sensitive(true);
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::AUTHORIZATION, value);
        builder = builder.default_headers(headers);
    }
    if let Some(certs) = trust {
        builder = builder.tls_certs_only(certs);
    }
    builder.build().map_err(|e| e.to_string())
}

impl Client {
    /// A client of the domain at `base` (e.g. `http://127.0.0.1:7700`).
    pub fn new(base: &str, timeout: Duration) -> Result<Self, ClientError> {
        Self::with_options(base, timeout, None, None)
    }

    /// A client sending `token`, trusting only `trust` for TLS if given.
    pub fn with_options(
        base: &str,
        timeout: Duration,
        token: Option<&str>,
        trust: Option<Vec<reqwest::Certificate>>,
    ) -> Result<Self, ClientError> {
        let http =
            http_client(timeout, token, trust).map_err(|e| ClientError::Address(base.into(), e))?;
        Self::with_http(http, base)
    }

    /// A client sharing `http`'s connection pool.
    pub fn with_http(http: reqwest::Client, base: &str) -> Result<Self, ClientError> {
        let url =
            url::Url::parse(base).map_err(|e| ClientError::Address(base.into(), e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(ClientError::Address(
                base.into(),
                "expected http://host:port or https://host:port".into(),
            ));
        }
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_owned(),
            #[cfg(feature = "testsuite")]
            delay: Duration::ZERO,
            snapshot_timeout: None,
            member: None,
        })
    }

    /// Calls as the member `me` of the cluster whose member key is `key`.
    pub fn as_member(mut self, member: Arc<(MemberKey, String)>) -> Self {
        self.member = Some(member);
        self
    }

    /// Gives filter snapshots their own timeout (they can be large).
    pub fn with_snapshot_timeout(mut self, timeout: Duration) -> Self {
        self.snapshot_timeout = Some(timeout);
        self
    }

    /// Delays every call by `one_way` each way (a WAN between domains).
    #[cfg(feature = "testsuite")]
    pub fn with_delay(mut self, one_way: Duration) -> Self {
        self.delay = one_way;
        self
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends, adding the simulated delay; any HTTP status is returned.
    async fn send_raw(
        &self,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response, ClientError> {
        #[cfg(feature = "testsuite")]
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let request = match &self.member {
            Some(member) => request.bearer_auth(member.0.credential(&member.1)),
            None => request,
        };
        let response = request.send().await;
        #[cfg(feature = "testsuite")]
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        response.map_err(transport(url))
    }

    /// Sends; a status other than 2xx becomes [`ClientError::Api`].
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response, ClientError> {
        let response = self.send_raw(request, url).await?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(Self::api_error(response, url).await)
    }

    async fn api_error(response: reqwest::Response, url: &str) -> ClientError {
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => (e.code, e.message),
            Err(_) => (
                "http_error".to_owned(),
                String::from_utf8_lossy(&body).chars().take(300).collect(),
            ),
        };
        ClientError::Api {
            url: url.to_owned(),
            status,
            code,
            message,
        }
    }

    async fn json<T: DeserializeOwned>(
        response: reqwest::Response,
        url: &str,
    ) -> Result<T, ClientError> {
        let bytes = response.bytes().await.map_err(transport(url))?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
            url: url.to_owned(),
            detail: e.to_string(),
        })
    }

    /// Creates or replaces a record; `true` when it was created.
    pub async fn put(
        &self,
        id: &str,
        body: &serde_json::Value,
    ) -> Result<(bool, Record), ClientError> {
        let url = self.url(&format!("/v1/archives/{}", encode_id(id)));
        let response = self.send(self.http.put(&url).json(body), &url).await?;
        let created = response.status() == StatusCode::CREATED;
        Ok((created, Self::json(response, &url).await?))
    }

    pub async fn get(&self, id: &str) -> Result<Option<Record>, ClientError> {
        let url = self.url(&format!("/v1/archives/{}", encode_id(id)));
        match self.send(self.http.get(&url), &url).await {
            Ok(response) => Ok(Some(Self::json(response, &url).await?)),
            Err(e) if e.record_absent() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes a record; `false` when there was none.
    pub async fn delete(&self, id: &str) -> Result<bool, ClientError> {
        let url = self.url(&format!("/v1/archives/{}", encode_id(id)));
        match self.send(self.http.delete(&url), &url).await {
            Ok(_) => Ok(true),
            Err(e) if e.record_absent() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/stats`: the domain's figures and its cache's.
    pub async fn stats(&self) -> Result<Stats, ClientError> {
        let url = self.url("/v1/stats");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/cluster`: the domains this one knows, and its copies of
    /// their filters.
    pub async fn cluster(&self) -> Result<ClusterView, ClientError> {
        let url = self.url("/v1/cluster");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/archives`: a page of IDs in order, from after `after`.
    pub async fn list(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ArchiveList, ClientError> {
        let mut url = self.url(&format!("/v1/archives?limit={limit}"));
        if let Some(after) = after {
            url.push_str(&format!("&after={}", encode_id(after)));
        }
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/keys`: the key types the domain declares.
    pub async fn key_types(&self) -> Result<KeyTypesBody, ClientError> {
        let url = self.url("/v1/keys");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/backup`: the domain's online backup, to be read as it
    /// streams (`Response::chunk`). No overall time limit (a large domain
    /// takes minutes): the caller bounds each wait for a piece instead.
    pub async fn backup(&self) -> Result<reqwest::Response, ClientError> {
        let url = self.url("/v1/backup");
        let request = self
            .http
            .get(&url)
            .timeout(Duration::from_secs(7 * 24 * 3600));
        self.send(request, &url).await
    }

    /// `GET /v1/filter/verify`: the filter against one rebuilt from the store.
    pub async fn verify(&self) -> Result<VerifyReport, ClientError> {
        let url = self.url("/v1/filter/verify");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `POST /v1/contains`: the filter's answers for `ids`, in order.
    pub async fn contains_many(&self, ids: &[String]) -> Result<ContainsMany, ClientError> {
        let url = self.url("/v1/contains");
        let response = self.send(self.http.post(&url).json(ids), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /readyz`: `Ok` once the domain can answer every lookup
    /// ("not found" included); [`ClientError::Api`] with code `not_ready`
    /// before.
    pub async fn ready(&self) -> Result<(), ClientError> {
        let url = self.url("/readyz");
        self.send(self.http.get(&url), &url).await.map(drop)
    }

    /// `GET /healthz` within `timeout`: `Ok` when the domain's process
    /// answered (the probe `/v1/cluster` makes of every peer).
    pub async fn healthz(&self, timeout: Duration) -> Result<(), ClientError> {
        let url = self.url("/healthz");
        self.send(self.http.get(&url).timeout(timeout), &url)
            .await
            .map(drop)
    }

    /// The domain's own filter answer for `id`.
    pub async fn contains(&self, id: &str) -> Result<bool, ClientError> {
        let url = self.url(&format!("/v1/contains/{}", encode_id(id)));
        let response = self.send(self.http.get(&url), &url).await?;
        let answer: Contains = Self::json(response, &url).await?;
        Ok(answer.maybe)
    }

    /// `GET /v1/lookup/{id}`: the answer and its status (200 found, 404
    /// not found anywhere, 503 some domain unreachable or membership not
    /// confirmed).
    pub async fn lookup(
        &self,
        id: &str,
        broadcast: bool,
    ) -> Result<(u16, LookupBody), ClientError> {
        let strategy = if broadcast { "broadcast" } else { "routed" };
        let url = self.url(&format!("/v1/lookup/{}?strategy={strategy}", encode_id(id)));
        let response = self.send_raw(self.http.get(&url), &url).await?;
        let status = response.status().as_u16();
        if !matches!(status, 200 | 404 | 503) {
            return Err(Self::api_error(response, &url).await);
        }
        let body: LookupBody = Self::json(response, &url).await?;
        // Only the lookup's own answers: a 404 from another route (a
        // server URL ending in /v1) is not "in no domain".
        let expected = match status {
            200 => body.record.is_some(),
            404 => body.code == Some(ErrorCode::NotFound),
            _ => matches!(
                body.code,
                Some(ErrorCode::Unavailable | ErrorCode::NotReady)
            ),
        };
        if !expected {
            return Err(ClientError::Api {
                url,
                status,
                code: body.code.map_or("http_error", ErrorCode::as_str).to_owned(),
                message: body.message.unwrap_or_default(),
            });
        }
        Ok((status, body))
    }

    /// `POST /v1/search`: the records with a key and the status (200
    /// every domain that could hold one answered, 503 some could not).
    pub async fn search(&self, request: &SearchRequest) -> Result<(u16, SearchBody), ClientError> {
        let url = self.url("/v1/search");
        let response = self
            .send_raw(self.http.post(&url).json(request), &url)
            .await?;
        let status = response.status().as_u16();
        if matches!(status, 200 | 503) {
            return Ok((status, Self::json(response, &url).await?));
        }
        Err(Self::api_error(response, &url).await)
    }

    /// `POST /v1/requests`: registers a cross-archive request (`body` as
    /// [`NewRequest`](crate::wire::NewRequest) reads it).
    pub async fn submit_request(
        &self,
        body: &serde_json::Value,
    ) -> Result<crate::wire::RequestView, ClientError> {
        let url = self.url("/v1/requests");
        let response = self.send(self.http.post(&url).json(body), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/requests`: every request registered here, newest first.
    pub async fn requests(&self) -> Result<crate::wire::RequestList, ClientError> {
        let url = self.url("/v1/requests");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/requests/{id}`.
    pub async fn request(&self, id: &str) -> Result<crate::wire::RequestView, ClientError> {
        let url = self.url(&format!("/v1/requests/{}", encode_id(id)));
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/reviews`: the requests waiting for a reviewer here.
    pub async fn reviews(&self) -> Result<crate::wire::ReviewQueue, ClientError> {
        let url = self.url("/v1/reviews");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `POST /v1/reviews/{receiving}/{request}`: a reviewer's decision.
    pub async fn decide(
        &self,
        receiving: &str,
        request: &str,
        decision: &crate::wire::Decision,
    ) -> Result<crate::wire::Answer, ClientError> {
        let url = self.url(&format!(
            "/v1/reviews/{}/{}",
            encode_id(receiving),
            encode_id(request)
        ));
        let response = self.send(self.http.post(&url).json(decision), &url).await?;
        Self::json(response, &url).await
    }

    /// `POST /v1/requests/{id}/certificate`: issues an answered request's
    /// certificate (again: the same one).
    pub async fn issue_certificate(
        &self,
        request: &str,
    ) -> Result<crate::wire::Certificate, ClientError> {
        let url = self.url(&format!("/v1/requests/{}/certificate", encode_id(request)));
        let response = self.send(self.http.post(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/requests/{id}/certificate.pdf`: the certificate's PDF.
    pub async fn certificate_pdf(&self, request: &str) -> Result<Bytes, ClientError> {
        let url = self.url(&format!(
            "/v1/requests/{}/certificate.pdf",
            encode_id(request)
        ));
        let response = self.send(self.http.get(&url), &url).await?;
        response.bytes().await.map_err(transport(&url))
    }

    /// `GET /v1/certificates/{code}`: checks a certificate by its
    /// verification code.
    pub async fn check_certificate(
        &self,
        code: &str,
    ) -> Result<crate::wire::CertificateCheck, ClientError> {
        let url = self.url(&format!("/v1/certificates/{}", encode_id(code)));
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `POST /v1/certificates/verify`: checks a certificate's payload.
    pub async fn verify_certificate(
        &self,
        payload: &str,
    ) -> Result<crate::wire::CertificateCheck, ClientError> {
        let url = self.url("/v1/certificates/verify");
        let body = crate::wire::VerifyRequest {
            payload: payload.to_owned(),
        };
        let response = self.send(self.http.post(&url).json(&body), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/trust-list`: the cluster's trust list, signed.
    pub async fn trust_list(&self) -> Result<crate::wire::TrustListBody, ClientError> {
        let url = self.url("/v1/trust-list");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `POST /v1/peer/requests`: a part of a cross-archive request, sent
    /// to the archive holding its records; answered the same however
    /// often it is sent.
    pub async fn deliver_request(
        &self,
        delivery: &crate::wire::Delivery,
    ) -> Result<crate::wire::Answer, ClientError> {
        let url = self.url("/v1/peer/requests");
        let response = self.send(self.http.post(&url).json(delivery), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/audit`: a page of the searches by private key logged, from
    /// `since` (RFC 3339, or the `next` of the page before).
    pub async fn audit(&self, since: Option<&str>) -> Result<AuditPage, ClientError> {
        let mut url = self.url("/v1/audit");
        if let Some(since) = since {
            url.push_str(&format!("?since={}", encode_id(since)));
        }
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// `GET /v1/audit/verify`: whether the log of searches is intact.
    pub async fn audit_verify(&self) -> Result<AuditIntegrity, ClientError> {
        let url = self.url("/v1/audit/verify");
        let response = self.send(self.http.get(&url), &url).await?;
        Self::json(response, &url).await
    }

    /// Sends NDJSON lines to `_bulk`; returns the server's report.
    pub async fn bulk(&self, body: impl Into<reqwest::Body>) -> Result<BulkReport, ClientError> {
        let url = self.url("/v1/archives/_bulk");
        let request = self
            .http
            .post(&url)
            .header("content-type", "application/x-ndjson")
            .body(body);
        let response = self.send(request, &url).await?;
        Self::json(response, &url).await
    }

    pub async fn filter(&self) -> Result<FetchedFilter, ClientError> {
        Ok(self.fetch_filter("/v1/filter").await?.0)
    }

    /// The key filter (this domain must be a member).
    pub async fn key_filter(&self) -> Result<FetchedKeys, ClientError> {
        self.fetch_keys("/v1/filter/keys").await
    }

    /// This domain's copy of `name`'s filter (`/v1/copies/{name}`; this
    /// domain must be a member).
    pub async fn copy_of(&self, name: &str) -> Result<FetchedFilter, ClientError> {
        Ok(self.fetch_filter(&format!("/v1/copies/{name}")).await?.0)
    }

    /// This domain's copy of `name`'s key filter.
    pub async fn key_copy_of(&self, name: &str) -> Result<FetchedKeys, ClientError> {
        self.fetch_keys(&format!("/v1/copies/{name}/keys")).await
    }

    /// A key filter at `path`, with the filter key that built it.
    async fn fetch_keys(&self, path: &str) -> Result<FetchedKeys, ClientError> {
        let (filter, key_id) = self.fetch_filter(path).await?;
        let key_id = key_id.ok_or_else(|| ClientError::Decode {
            url: self.url(path),
            detail: format!("missing header {KEY_ID_HEADER}"),
        })?;
        Ok(FetchedKeys { filter, key_id })
    }

    /// A filter at `path`, with the key id it names (if any).
    async fn fetch_filter(
        &self,
        path: &str,
    ) -> Result<(FetchedFilter, Option<String>), ClientError> {
        let url = self.url(path);
        let mut request = self.http.get(&url);
        if let Some(timeout) = self.snapshot_timeout {
            request = request.timeout(timeout);
        }
        let response = self.send(request, &url).await?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| ClientError::Decode {
                    url: url.clone(),
                    detail: format!("missing header {name}"),
                })
        };
        let number = |name: &str| {
            header(name)?
                .parse::<u64>()
                .map_err(|e| ClientError::Decode {
                    url: url.clone(),
                    detail: format!("header {name}: {e}"),
                })
        };
        let position = Position {
            epoch: number(EPOCH_HEADER)?,
            version: number(VERSION_HEADER)?,
        };
        let kind = header(KIND_HEADER)?
            .parse::<FilterKind>()
            .map_err(|e| ClientError::Decode {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let key_id = header(KEY_ID_HEADER).ok();
        let bytes = response.bytes().await.map_err(transport(&url))?;
        let filter = FetchedFilter {
            kind,
            position,
            bytes,
        };
        Ok((filter, key_id))
    }

    /// The changes since `since` in `epoch`, with the IDs replaced or
    /// deleted meanwhile.
    pub async fn delta(&self, epoch: u64, since: u64) -> Result<DeltaAnswer, ClientError> {
        let url = self.url(&format!(
            "/v1/filter/delta?epoch={epoch}&since={since}&ids=true"
        ));
        let response = match self.send(self.http.get(&url), &url).await {
            Ok(r) => r,
            Err(ClientError::Api { status: 409, .. }) => return Ok(DeltaAnswer::SnapshotRequired),
            Err(e) => return Err(e),
        };
        let decode = |detail: String| ClientError::Decode {
            url: url.clone(),
            detail,
        };
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if content_type != DELTA_WITH_IDS {
            return Err(decode(format!("content type {content_type:?}")));
        }
        let body = response.bytes().await.map_err(transport(&url))?;
        let (delta, changed) = split_delta_with_ids(&body).map_err(|e| decode(e.to_string()))?;
        Ok(DeltaAnswer::Delta { delta, changed })
    }

    /// A page of this domain's relay from sequence number `from` (of the
    /// relay `relay`; another, or 0, starts at its end), leaving out what
    /// came from `asker`. Waits up to a second for a change.
    pub async fn relay(
        &self,
        relay: u64,
        from: u64,
        asker: &str,
    ) -> Result<RelayPage, ClientError> {
        let url = self.url(&format!(
            "/v1/relay?relay={relay}&from={from}&asker={}",
            percent_encoding::utf8_percent_encode(asker, SEGMENT)
        ));
        let mut request = self.http.get(&url);
        if let Some(timeout) = self.snapshot_timeout {
            request = request.timeout(timeout);
        }
        let response = self.send(request, &url).await?;
        let decode = |detail: String| ClientError::Decode {
            url: url.clone(),
            detail,
        };
        let number = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| decode(format!("missing or bad header {name}")))
        };
        let (relay, next) = (number(RELAY_HEADER)?, number(RELAY_NEXT_HEADER)?);
        let waited = response.headers().contains_key(RELAY_WAITED_HEADER);
        let body = response.bytes().await.map_err(transport(&url))?;
        let entries = decode_relay_page(&body).map_err(|e| decode(e.to_string()))?;
        Ok(RelayPage {
            relay,
            next,
            entries,
            waited,
        })
    }

    /// The key filter's changes since `since` in `epoch` (no IDs: cached
    /// records follow the ID filter's deltas).
    pub async fn key_delta(&self, epoch: u64, since: u64) -> Result<DeltaAnswer, ClientError> {
        let url = self.url(&format!(
            "/v1/filter/keys/delta?epoch={epoch}&since={since}"
        ));
        let response = match self.send(self.http.get(&url), &url).await {
            Ok(r) => r,
            Err(ClientError::Api { status: 409, .. }) => return Ok(DeltaAnswer::SnapshotRequired),
            Err(e) => return Err(e),
        };
        let body = response.bytes().await.map_err(transport(&url))?;
        let delta = Delta::decode(&body).map_err(|e| ClientError::Decode {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        Ok(DeltaAnswer::Delta {
            delta,
            changed: Vec::new(),
        })
    }
}
