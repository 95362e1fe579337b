//! The peer client: what one domain asks another over HTTP (a probe, a
//! record, a search, filters, deltas, snapshots, relay pages, a request's
//! delivery), presenting its member credential, and the transport and
//! typed errors the public API's client (`api_client.rs`) shares.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use xarchive_filter::Delta;

use crate::local::domain::Position;
use crate::local::filter::FilterKind;
use crate::local::id::ArchiveId;
use crate::local::record::Record;
use crate::security::member::MemberKey;
use crate::wire::{
    decode_relay_page, split_delta_with_ids, Contains, ErrorBody, ErrorCode, RelayEntry, RelayPart,
    SearchBody, SearchRequest, DELTA_WITH_IDS, EPOCH_HEADER, KEY_ID_HEADER, KIND_HEADER,
    RELAY_HEADER, RELAY_NEXT_HEADER, RELAY_WAITED_HEADER, VERSION_HEADER,
};

/// Why a call failed: the server said no (with its JSON error), or the
/// call never got a usable answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{url}: {status} {}: {message}", code_text(*.code))]
    Api {
        url: String,
        status: u16,
        /// The API's code; `None` when the answer was not the API's
        /// error body (a proxy's page, say).
        code: Option<ErrorCode>,
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
pub(crate) fn transport(url: &str) -> impl FnOnce(reqwest::Error) -> ClientError + '_ {
    move |source| ClientError::Transport {
        url: url.to_owned(),
        source,
    }
}

/// A code as the error says it: the API's, or `http_error` for an answer
/// that was not the API's error body.
pub fn code_text(code: Option<ErrorCode>) -> &'static str {
    code.map_or("http_error", ErrorCode::as_str)
}

impl ClientError {
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { code, .. } => *code,
            _ => None,
        }
    }

    /// Whether the server said the record is not there: only the API's
    /// `not_found`, never another 404 (a wrong path, `route_not_found`),
    /// since "no such record" is the one answer never to give wrongly.
    pub fn record_absent(&self) -> bool {
        matches!(
            self,
            ClientError::Api {
                status: 404,
                code: Some(ErrorCode::NotFound),
                ..
            }
        )
    }
}

/// A filter as a domain publishes it.
#[derive(Debug, Clone)]
pub struct FetchedFilter {
    pub kind: FilterKind,
    pub position: Position,
    pub bytes: Bytes,
}

/// A whole filter as fetched; a key filter's with the filter key that
/// built it (`KEY_ID_HEADER`), which the ID filter has none of.
#[derive(Debug, Clone)]
pub struct Whole {
    pub filter: FetchedFilter,
    pub key_id: Option<String>,
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
    pub(crate) http: reqwest::Client,
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
    #[must_use]
    pub fn as_member(mut self, member: Arc<(MemberKey, String)>) -> Self {
        self.member = Some(member);
        self
    }

    /// Gives filter snapshots their own timeout (they can be large).
    #[must_use]
    pub fn with_snapshot_timeout(mut self, timeout: Duration) -> Self {
        self.snapshot_timeout = Some(timeout);
        self
    }

    /// Delays every call by `one_way` each way (a WAN between domains).
    #[cfg(feature = "testsuite")]
    #[must_use]
    pub fn with_delay(mut self, one_way: Duration) -> Self {
        self.delay = one_way;
        self
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends, adding the simulated delay; any HTTP status is returned.
    pub(crate) async fn send_raw(
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
    pub(crate) async fn send(
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

    pub(crate) async fn api_error(response: reqwest::Response, url: &str) -> ClientError {
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => (Some(e.code), e.message),
            Err(_) => (
                None,
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

    pub(crate) async fn json<T: DeserializeOwned>(
        response: reqwest::Response,
        url: &str,
    ) -> Result<T, ClientError> {
        let bytes = response.bytes().await.map_err(transport(url))?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
            url: url.to_owned(),
            detail: e.to_string(),
        })
    }

    pub async fn get(&self, id: &str) -> Result<Option<Record>, ClientError> {
        let url = self.url(&format!("/v1/archives/{}", encode_id(id)));
        match self.send(self.http.get(&url), &url).await {
            Ok(response) => Ok(Some(Self::json(response, &url).await?)),
            Err(e) if e.record_absent() => Ok(None),
            Err(e) => Err(e),
        }
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

    pub async fn filter(&self) -> Result<FetchedFilter, ClientError> {
        Ok(self.whole(RelayPart::Filter, None).await?.filter)
    }

    /// The whole of `part`: this domain's own (`copy_of` None), or its copy
    /// of `copy_of`'s (`/v1/copies/{name}`, for a domain joining nearby;
    /// this domain must be a member). A key filter comes with the filter
    /// key that built it, or is refused.
    pub async fn whole(
        &self,
        part: RelayPart,
        copy_of: Option<&str>,
    ) -> Result<Whole, ClientError> {
        let path = match (part, copy_of) {
            (RelayPart::Filter, None) => "/v1/filter".to_owned(),
            (RelayPart::Keys, None) => "/v1/filter/keys".to_owned(),
            (RelayPart::Filter, Some(name)) => format!("/v1/copies/{name}"),
            (RelayPart::Keys, Some(name)) => format!("/v1/copies/{name}/keys"),
        };
        let (filter, key_id) = self.fetch_filter(&path).await?;
        if part == RelayPart::Keys && key_id.is_none() {
            return Err(ClientError::Decode {
                url: self.url(&path),
                detail: format!("missing header {KEY_ID_HEADER}"),
            });
        }
        Ok(Whole { filter, key_id })
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
        self.changes(RelayPart::Filter, epoch, since).await
    }

    /// The changes of `part` since `since` in `epoch`, or that a snapshot
    /// is required (409). The ID filter's come framed with the IDs replaced
    /// or deleted meanwhile, for caches; the key filter's have none (cached
    /// records follow the ID filter's deltas).
    pub async fn changes(
        &self,
        part: RelayPart,
        epoch: u64,
        since: u64,
    ) -> Result<DeltaAnswer, ClientError> {
        let url = self.url(&match part {
            RelayPart::Filter => format!("/v1/filter/delta?epoch={epoch}&since={since}&ids=true"),
            RelayPart::Keys => format!("/v1/filter/keys/delta?epoch={epoch}&since={since}"),
        });
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
        if part == RelayPart::Filter && content_type != DELTA_WITH_IDS {
            return Err(decode(format!("content type {content_type:?}")));
        }
        let body = response.bytes().await.map_err(transport(&url))?;
        let (delta, changed) = match part {
            RelayPart::Filter => split_delta_with_ids(&body).map_err(|e| decode(e.to_string()))?,
            RelayPart::Keys => (
                Delta::decode(&body).map_err(|e| decode(e.to_string()))?,
                Vec::new(),
            ),
        };
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

    /// The key filter's changes since `since` in `epoch` (no IDs).
    pub async fn key_delta(&self, epoch: u64, since: u64) -> Result<DeltaAnswer, ClientError> {
        self.changes(RelayPart::Keys, epoch, since).await
    }
}
