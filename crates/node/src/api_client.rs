//! The client of a domain's public HTTP API, for the command line, the
//! benchmarks and the tests: records, lookups, searches, statistics,
//! cross-archive requests, certificates, the audit log, backups. What
//! domains ask each other is the peer client's (`cluster/client.rs`),
//! whose transport and typed errors this shares: one way to send, one
//! way to read an error.

use std::time::Duration;

use bytes::Bytes;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use crate::cluster::client::{encode_id, transport, Client, ClientError};
use crate::local::domain::VerifyReport;
use crate::local::record::Record;
use crate::wire::{
    ArchiveList, AuditIntegrity, AuditPage, BulkReport, ClusterView, ContainsMany, ErrorCode,
    KeyTypesBody, LookupBody, SearchBody, SearchRequest, Stats, Strategy,
};

/// A client of one domain's public API, as a person or a program calls
/// it (a token, not a member's credential).
#[derive(Clone, Debug)]
pub struct ApiClient {
    /// The transport, shared with the peer client.
    peer: Client,
    /// The peer client's connection pool, for building requests.
    http: reqwest::Client,
}

impl ApiClient {
    /// A client of the domain at `base` (e.g. `http://127.0.0.1:7700`).
    pub fn new(base: &str, timeout: Duration) -> Result<Self, ClientError> {
        Client::new(base, timeout).map(Self::over)
    }

    /// A client sending `token`, trusting only `trust` for TLS if given.
    pub fn with_options(
        base: &str,
        timeout: Duration,
        token: Option<&str>,
        trust: Option<Vec<reqwest::Certificate>>,
    ) -> Result<Self, ClientError> {
        Client::with_options(base, timeout, token, trust).map(Self::over)
    }

    /// A client sharing `http`'s connection pool.
    pub fn with_http(http: reqwest::Client, base: &str) -> Result<Self, ClientError> {
        Client::with_http(http, base).map(Self::over)
    }

    /// Delays every call by `one_way` each way (a WAN between domains).
    #[cfg(feature = "testsuite")]
    #[must_use]
    pub fn with_delay(self, one_way: Duration) -> Self {
        Self::over(self.peer.with_delay(one_way))
    }

    fn over(peer: Client) -> Self {
        let http = peer.http.clone();
        ApiClient { peer, http }
    }

    /// The peer client over the same transport, for the routes domains
    /// ask each other (a test or a benchmark playing a peer).
    pub fn peer(&self) -> &Client {
        &self.peer
    }

    fn url(&self, path: &str) -> String {
        self.peer.url(path)
    }

    async fn send_raw(
        &self,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response, ClientError> {
        self.peer.send_raw(request, url).await
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response, ClientError> {
        self.peer.send(request, url).await
    }

    async fn api_error(response: reqwest::Response, url: &str) -> ClientError {
        Client::api_error(response, url).await
    }

    async fn json<T: DeserializeOwned>(
        response: reqwest::Response,
        url: &str,
    ) -> Result<T, ClientError> {
        Client::json(response, url).await
    }

    /// `GET /v1/archives/{id}`: the record, `None` when the domain says
    /// it has none ([`ClientError::record_absent`]).
    pub async fn get(&self, id: &str) -> Result<Option<Record>, ClientError> {
        self.peer.get(id).await
    }

    /// The domain's own filter answer for `id`.
    pub async fn contains(&self, id: &str) -> Result<bool, ClientError> {
        self.peer.contains(id).await
    }

    /// `GET /healthz` within `timeout`: `Ok` when the domain's process
    /// answered.
    pub async fn healthz(&self, timeout: Duration) -> Result<(), ClientError> {
        self.peer.healthz(timeout).await
    }

    /// `POST /v1/search`: the records with a key and the status (200
    /// every domain that could hold one answered, 503 some could not).
    pub async fn search(&self, request: &SearchRequest) -> Result<(u16, SearchBody), ClientError> {
        self.peer.search(request).await
    }

    /// `GET /v1/certificates/{code}`: checks a certificate by its
    /// verification code.
    pub async fn check_certificate(
        &self,
        code: &str,
    ) -> Result<crate::wire::CertificateCheck, ClientError> {
        self.peer.check_certificate(code).await
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
        let request = self.http.get(&url).timeout(Duration::from_hours(7 * 24));
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

    /// `GET /v1/lookup/{id}`: the answer and its status (200 found, 404
    /// not found anywhere, 503 some domain unreachable or membership not
    /// confirmed).
    pub async fn lookup(
        &self,
        id: &str,
        strategy: Strategy,
    ) -> Result<(u16, LookupBody), ClientError> {
        let url = self.url(&format!(
            "/v1/lookup/{}?strategy={}",
            encode_id(id),
            strategy.as_str()
        ));
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
                code: body.code,
                message: body.message.unwrap_or_default(),
            });
        }
        Ok((status, body))
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
}
