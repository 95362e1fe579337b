//! What peers and the page read of this domain's filter: membership
//! answers, the published snapshot, deltas, and the check against the store.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{Params, PathId, PathName};
use crate::cluster::relay::OwnFilters;
use crate::local::domain::VerifyReport;
use crate::local::domain::{DeltaRefusal, Position};
use crate::local::filter::FilterKind;
use crate::local::id::ArchiveId;
use crate::node::Node;
use crate::wire::{
    frame_delta_with_ids, Contains, ContainsMany, ContainsResult, ErrorBody, ErrorCode, RelayPart,
    DELTA_WITH_IDS, EPOCH_HEADER, FROM_VERSION_HEADER, KEY_ID_HEADER, KIND_HEADER, VERSION_HEADER,
};
use xarchive_filter::Delta;

/// `GET /v1/contains/{id}`: the filter's answer, without touching the store.
#[utoipa::path(
    get,
    path = "/v1/contains/{id}",
    tag = "filter",
    params(("id" = String, Path, description = "The archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`")),
    responses(
        (status = 200, description = "`maybe`: false means certainly not here", body = Contains),
        (status = 400, description = "`invalid_id`", body = ErrorBody),
    )
)]
pub async fn contains_one(
    State(node): State<Arc<Node>>,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let maybe = node.domain.contains(id.as_str());
    Ok(Json(Contains {
        id: id.into_string(),
        domain: node.domain.name().to_owned(),
        maybe,
    })
    .into_response())
}

/// `POST /v1/contains` with a JSON array of IDs.
#[utoipa::path(
    post,
    path = "/v1/contains",
    tag = "filter",
    request_body(content = Vec<String>, description = "IDs to check, at most `limits.max_contains_ids`"),
    responses(
        (status = 200, description = "The answers in request order", body = ContainsMany),
        (status = 400, description = "`invalid_json`, `invalid_record` (not an array of strings), `invalid_id` (with its `index`)", body = ErrorBody),
        (status = 413, description = "`too_many_ids` or `body_too_large`", body = ErrorBody),
    )
)]
pub async fn contains_many(
    State(node): State<Arc<Node>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(ApiError::body)?;
    let raw: Vec<String> = serde_json::from_slice(&body).map_err(ApiError::from_json)?;
    let limit = node.config.limits.max_contains_ids;
    if raw.len() > limit {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::TooManyIds,
            format!("{} IDs sent; the limit is {limit}", raw.len()),
        ));
    }
    let ids = raw
        .iter()
        .enumerate()
        .map(|(i, s)| ArchiveId::parse(s).map_err(|e| ApiError::invalid_id(e).with("index", i)))
        .collect::<Result<Vec<_>, _>>()?;
    let results = ids
        .into_iter()
        .map(|id| ContainsResult {
            maybe: node.domain.contains(id.as_str()),
            id: id.into_string(),
        })
        .collect();
    Ok(Json(ContainsMany {
        domain: node.domain.name().to_owned(),
        results,
    })
    .into_response())
}

fn position_headers(response: &mut Response, epoch: u64, version: u64) {
    let headers = response.headers_mut();
    headers.insert(EPOCH_HEADER, HeaderValue::from(epoch));
    headers.insert(VERSION_HEADER, HeaderValue::from(version));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// `GET /v1/filter`: the published filter (docs/FORMAT.md), position in headers.
#[utoipa::path(
    get,
    path = "/v1/filter",
    tag = "filter",
    responses((
        status = 200,
        description = "The published filter: `XABL` (counting) or `XACK` (cuckoo), docs/FORMAT.md; compressed if asked",
        content_type = "application/octet-stream",
        headers(
            ("x-xarchive-epoch" = String, description = "The filter's epoch"),
            ("x-xarchive-version" = u64, description = "The filter's version"),
            ("x-xarchive-filter-kind" = String, description = "`counting` or `cuckoo`"),
        )
    ))
)]
pub async fn snapshot(State(node): State<Arc<Node>>) -> Response {
    whole(&node, RelayPart::Filter)
}

/// `GET /v1/filter/keys`: the key filter (members only).
#[utoipa::path(
    get,
    path = "/v1/filter/keys",
    tag = "filter",
    responses(
        (
            status = 200,
            description = "The key filter's bit view, `XABL` (docs/FORMAT.md), at the domain's position; its elements are keyed by the cluster secret",
            content_type = "application/octet-stream",
            headers(
                ("x-xarchive-epoch" = String, description = "The domain's epoch"),
                ("x-xarchive-version" = u64, description = "The domain's version"),
                ("x-xarchive-key-id" = String, description = "Which filter key built it"),
            )
        ),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a member", body = ErrorBody),
    )
)]
pub async fn key_snapshot(State(node): State<Arc<Node>>) -> Response {
    whole(&node, RelayPart::Keys)
}

/// The whole of this domain's `part` (`/v1/filter`, `/v1/filter/keys`).
fn whole(node: &Node, part: RelayPart) -> Response {
    let view = node.view(part);
    let mut response = filter_response(view.bytes, view.kind, view.position);
    if part == RelayPart::Keys {
        key_id_header(node, &mut response);
    }
    response
}

/// `GET /v1/copies/{name}`: this domain's copy of another domain's filter
/// (members only), for a domain joining nearby: the same bytes `name`
/// published at that position.
#[utoipa::path(
    get,
    path = "/v1/copies/{name}",
    tag = "filter",
    params(("name" = String, Path, description = "The domain whose filter the copy is of")),
    responses(
        (
            status = 200,
            description = "The copy as its domain published it: `XABL` (counting) or `XACK` (cuckoo), docs/FORMAT.md, at the copy's position",
            content_type = "application/octet-stream",
            headers(
                ("x-xarchive-epoch" = String, description = "The copy's epoch"),
                ("x-xarchive-version" = u64, description = "The copy's version"),
                ("x-xarchive-filter-kind" = String, description = "`counting` or `cuckoo`"),
            )
        ),
        (status = 400, description = "`invalid_parameter`: not a domain name", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a member", body = ErrorBody),
        (status = 404, description = "`copy_not_held`", body = ErrorBody),
    )
)]
pub async fn copy(
    State(node): State<Arc<Node>>,
    PathName(name): PathName,
) -> Result<Response, ApiError> {
    copy_response(&node, &name, RelayPart::Filter)
}

/// `GET /v1/copies/{name}/keys`: this domain's copy of another domain's
/// key filter (members only), under the cluster's filter key.
#[utoipa::path(
    get,
    path = "/v1/copies/{name}/keys",
    tag = "filter",
    params(("name" = String, Path, description = "The domain whose key filter the copy is of")),
    responses(
        (
            status = 200,
            description = "The copy as its domain published it, `XABL` (docs/FORMAT.md), at the copy's position",
            content_type = "application/octet-stream",
            headers(
                ("x-xarchive-epoch" = String, description = "The copy's epoch"),
                ("x-xarchive-version" = u64, description = "The copy's version"),
                ("x-xarchive-key-id" = String, description = "Which filter key built it"),
            )
        ),
        (status = 400, description = "`invalid_parameter`: not a domain name", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a member", body = ErrorBody),
        (status = 404, description = "`copy_not_held`", body = ErrorBody),
    )
)]
pub async fn key_copy(
    State(node): State<Arc<Node>>,
    PathName(name): PathName,
) -> Result<Response, ApiError> {
    copy_response(&node, &name, RelayPart::Keys)
}

/// The copy held of `name`'s `part`, as its origin published it; a key
/// filter's with the filter key that built it.
fn copy_response(node: &Node, name: &str, part: RelayPart) -> Result<Response, ApiError> {
    let copy = node
        .cluster
        .copy_of(name, part)
        .ok_or_else(|| no_copy(name))?;
    let filter = copy.filter;
    let mut response = filter_response(filter.bytes, filter.kind, filter.position);
    if let Some(key_id) = &copy.key_id {
        with_key_id(&mut response, key_id);
    }
    Ok(response)
}

fn no_copy(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::CopyNotHeld,
        format!("this domain holds no copy of domain {name:?}'s filter"),
    )
}

fn key_id_header(node: &Node, response: &mut Response) {
    with_key_id(response, &node.domain.keying().hasher.filter_key_id());
}

/// Names the filter key that built a key filter or its delta
/// (`KEY_ID_HEADER`), as `/v1/filter/keys` and its delta do.
pub fn with_key_id(response: &mut Response, key_id: &str) {
    if let Ok(id) = HeaderValue::from_str(key_id) {
        response.headers_mut().insert(KEY_ID_HEADER, id);
    }
}

/// A whole filter as `GET /v1/filter` and `/v1/filter/keys` answer it:
/// its bytes, its kind and position in headers.
pub fn filter_response(bytes: impl Into<Bytes>, kind: FilterKind, position: Position) -> Response {
    let mut response = (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        bytes.into(),
    )
        .into_response();
    position_headers(&mut response, position.epoch, position.version);
    response
        .headers_mut()
        .insert(KIND_HEADER, HeaderValue::from_static(kind.as_str()));
    response
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeltaParams {
    /// The epoch of the copy held.
    epoch: u64,
    /// The version of the copy held.
    since: u64,
    /// Also send the IDs replaced or deleted in the span (for caches).
    #[serde(default)]
    ids: bool,
}

/// Why a delta was refused, as the API says it: 409 `snapshot_required`,
/// or 400 for a version ahead of the filter; with the current position.
fn refused(node: &Node, e: DeltaRefusal) -> ApiError {
    let current = node.domain.position();
    match e {
        DeltaRefusal::FutureVersion { .. } => {
            with_position(ApiError::invalid_parameter(e.to_string()), current)
        }
        _ => take_a_snapshot(current, e.to_string()),
    }
}

fn with_position(err: ApiError, current: Position) -> ApiError {
    err.with("epoch", crate::local::epoch::json(current.epoch))
        .with("version", current.version)
}

fn take_a_snapshot(current: Position, why: impl Into<String>) -> ApiError {
    with_position(
        ApiError::new(StatusCode::CONFLICT, ErrorCode::SnapshotRequired, why),
        current,
    )
}

/// The 409 `snapshot_required` of a delta route, with the filter's
/// `current` position: what a peer reads as "take the whole filter".
#[cfg(feature = "testsuite")]
pub fn snapshot_required(current: Position, why: impl Into<String>) -> Response {
    take_a_snapshot(current, why).into_response()
}

fn delta_headers(response: &mut Response, delta: &Delta) {
    position_headers(response, delta.epoch, delta.to_version);
    response
        .headers_mut()
        .insert(FROM_VERSION_HEADER, HeaderValue::from(delta.from_version));
}

/// A delta as `/v1/filter/delta` and `/v1/filter/keys/delta` answer it:
/// framed with the IDs it `changed` when they are asked for
/// (`DELTA_WITH_IDS`), else its `XADL` bytes; its span in headers.
pub fn delta_response(delta: &Delta, changed: Option<&[ArchiveId]>) -> Response {
    let encoded = delta.encode();
    let mut response = match changed {
        Some(changed) => {
            let body = frame_delta_with_ids(&encoded, changed);
            ([(header::CONTENT_TYPE, DELTA_WITH_IDS)], body).into_response()
        }
        None => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            encoded,
        )
            .into_response(),
    };
    delta_headers(&mut response, delta);
    response
}

/// `GET /v1/filter/delta?epoch=E&since=V[&ids=true]`: the changes since
/// version V as an `XADL` delta, or 409 `snapshot_required` when they are
/// not held (another epoch, or older than the log) or outnumber the
/// snapshot's bytes.
#[utoipa::path(
    get,
    path = "/v1/filter/delta",
    tag = "filter",
    params(DeltaParams),
    responses(
        (
            status = 200,
            description = "An `XADL` delta (docs/FORMAT.md); with `ids=true`, framed with the changed IDs as `application/x-xarchive-delta-ids`",
            content(
                (Vec<u8> = "application/octet-stream"),
                (Vec<u8> = "application/x-xarchive-delta-ids"),
            ),
            headers(
                ("x-xarchive-epoch" = String, description = "The epoch"),
                ("x-xarchive-from-version" = u64, description = "The version the delta starts from"),
                ("x-xarchive-version" = u64, description = "The version it brings the copy to"),
            )
        ),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 409, description = "`snapshot_required`, with the current `epoch` and `version`", body = ErrorBody),
    )
)]
pub async fn delta(
    State(node): State<Arc<Node>>,
    Params(params): Params<DeltaParams>,
) -> Result<Response, ApiError> {
    changes(
        &node,
        RelayPart::Filter,
        params.epoch,
        params.since,
        params.ids,
    )
}

/// The changes of this domain's `part` since `since` in `epoch`, as the
/// two delta routes answer them; the IDs changed only for the ID filter,
/// when asked for, and a key filter's delta names its filter key.
fn changes(
    node: &Node,
    part: RelayPart,
    epoch: u64,
    since: u64,
    ids: bool,
) -> Result<Response, ApiError> {
    let (delta, changed) = node
        .changes(part, epoch, since)
        .map_err(|e| refused(node, e))?;
    let mut response = delta_response(&delta, ids.then_some(&changed[..]));
    if part == RelayPart::Keys {
        key_id_header(node, &mut response);
    }
    Ok(response)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KeyDeltaParams {
    /// The epoch of the copy held.
    epoch: u64,
    /// The version of the copy held.
    since: u64,
}

/// `GET /v1/filter/keys/delta?epoch=E&since=V`: the key filter's changes
/// since version V (members only).
#[utoipa::path(
    get,
    path = "/v1/filter/keys/delta",
    tag = "filter",
    params(KeyDeltaParams),
    responses(
        (
            status = 200,
            description = "An `XADL` delta of the key filter (docs/FORMAT.md)",
            content_type = "application/octet-stream",
            headers(
                ("x-xarchive-epoch" = String, description = "The epoch"),
                ("x-xarchive-from-version" = u64, description = "The version the delta starts from"),
                ("x-xarchive-version" = u64, description = "The version it brings the copy to"),
                ("x-xarchive-key-id" = String, description = "Which filter key built it"),
            )
        ),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a member", body = ErrorBody),
        (status = 409, description = "`snapshot_required`, with the current `epoch` and `version`", body = ErrorBody),
    )
)]
pub async fn key_delta(
    State(node): State<Arc<Node>>,
    Params(params): Params<KeyDeltaParams>,
) -> Result<Response, ApiError> {
    changes(&node, RelayPart::Keys, params.epoch, params.since, false)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RelayParams {
    /// The relay last read (0 at first): another starts at its end.
    #[serde(default)]
    relay: u64,
    /// The sequence number to read from.
    #[serde(default)]
    from: u64,
    /// The asking domain's name: what came from it is not sent back.
    asker: String,
}

/// `GET /v1/relay?relay=R&from=S&asker=NAME`: a page of the changes this
/// domain passes on to its relay tree neighbours (members only; docs/FORMAT.md §9).
#[utoipa::path(
    get,
    path = "/v1/relay",
    tag = "filter",
    params(RelayParams),
    responses(
        (
            status = 200,
            description = "A relay page (docs/FORMAT.md §9), empty after a second without changes",
            content_type = "application/x-xarchive-relay",
            headers(
                ("x-xarchive-relay" = u64, description = "Which relay answered"),
                ("x-xarchive-relay-next" = u64, description = "The sequence number to read from next"),
                ("x-xarchive-relay-waited" = String, description = "`1` when the page waited 5 ms or more for a change (the reader may read again at once)"),
            )
        ),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a member", body = ErrorBody),
    )
)]
pub async fn relay(
    State(node): State<Arc<Node>>,
    Params(params): Params<RelayParams>,
) -> Result<Response, ApiError> {
    let read = node
        .cluster
        .relay
        .read(params.relay, params.from, &params.asker)
        .await;
    Ok(read.encode().map_err(ApiError::internal)?.into_response())
}

/// `GET /v1/filter/verify`: compares the filter with one rebuilt from the
/// store, without holding up writes; one at a time.
#[utoipa::path(
    get,
    path = "/v1/filter/verify",
    tag = "filter",
    responses(
        (status = 200, description = "`missing` must be 0", body = VerifyReport),
        (status = 503, description = "`busy`: another verification is running", body = ErrorBody),
    )
)]
pub async fn verify(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let report = super::blocking(&node, |node| Ok(node.domain.verify()?)).await?;
    Ok(Json(report).into_response())
}
