//! Records: put, get, delete, list, and the streamed bulk import.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{Params, PathId};
use crate::local::id::ArchiveId;
use crate::local::record::Record;
use crate::local::record::{BulkLine, RecordInput};
use crate::local::store::{Write, WriteOutcome};
use crate::node::Node;
use crate::security::auth::Principal;
use crate::wire::{ArchiveList, BulkReport, BulkSummary, ErrorBody, ErrorCode, LineResult};

/// Records committed per store transaction during a bulk import.
pub const BULK_BATCH: usize = 2_000;

/// Refuses a write, before it changes anything, while the cluster could
/// not learn of it.
fn writable(node: &Node) -> Result<(), ApiError> {
    node.cluster.writable().map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::CoordinatorUnavailable,
            format!("{e}, so the other domains could not learn of the write; nothing was changed"),
        )
    })
}

/// Waits until the domain's position after a write is published, so the
/// write is acknowledged only once other domains can learn of it.
async fn published(node: &Arc<Node>) -> Result<(), ApiError> {
    let position = node.domain.position();
    node.cluster
        .await_published(position, || node.domain.position())
        .await
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::NotPublished,
                format!(
                    "the write is stored in this domain but other domains may not see it yet \
                     ({e}); repeating the request is safe"
                ),
            )
        })
}

/// `PUT /v1/archives/{id}`: stores the record, acknowledged once the
/// cluster can learn of it.
#[utoipa::path(
    put,
    path = "/v1/archives/{id}",
    tag = "records",
    params(("id" = String, Path, description = "The archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`")),
    request_body = RecordInput,
    responses(
        (status = 201, description = "Created", body = Record),
        (status = 200, description = "Replaced", body = Record),
        (status = 400, description = "`invalid_id`, `invalid_json`, `invalid_record`, `invalid_body`", body = ErrorBody),
        (status = 413, description = "`content_too_large` or `body_too_large`", body = ErrorBody),
        (status = 503, description = "`coordinator_unavailable` or `store_unavailable` (nothing changed), or `not_published` (stored; repeating is safe)", body = ErrorBody),
        (status = 507, description = "`insufficient_storage`: the data directory's disk is full (below `limits.min_free_bytes`); nothing changed", body = ErrorBody),
    )
)]
pub async fn put(
    State(node): State<Arc<Node>>,
    PathId(id): PathId,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(ApiError::body)?;
    let input: RecordInput = serde_json::from_slice(&body).map_err(ApiError::from_json)?;
    let body = input
        .validate(node.config.limits.max_content_bytes, node.key_types())
        .map_err(ApiError::invalid_record)?;
    writable(&node)?;
    let (outcome, record) =
        super::blocking(&node, move |node| Ok(node.domain.put(id, body)?)).await?;
    node.metrics.count_write(outcome);
    published(&node).await?;
    let status = match outcome {
        WriteOutcome::Created => StatusCode::CREATED,
        _ => StatusCode::OK,
    };
    Ok((status, Json(record)).into_response())
}

/// `GET /v1/archives/{id}`: a record this domain holds.
#[utoipa::path(
    get,
    path = "/v1/archives/{id}",
    tag = "records",
    params(("id" = String, Path, description = "The archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`")),
    responses(
        (status = 200, description = "The record", body = Record),
        (status = 400, description = "`invalid_id`", body = ErrorBody),
        (status = 404, description = "`not_found`: not in this domain (`/v1/lookup` searches the cluster)", body = ErrorBody),
    )
)]
pub async fn get(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let key = id.clone();
    match super::blocking(&node, move |node| Ok(node.domain.get(&key)?)).await? {
        Some(record) => {
            let who = who.map_or(Principal::Anonymous, |w| w.0);
            Ok(Json(node.as_read_by(&who, record)).into_response())
        }
        None => Err(ApiError::not_found(id.as_str())),
    }
}

/// The 404 `not_found` of `GET /v1/archives/{id}` for a record this
/// domain does not hold.
#[cfg(feature = "testsuite")]
pub fn record_not_found(id: &str) -> Response {
    ApiError::not_found(id).into_response()
}

/// `DELETE /v1/archives/{id}`: erases the record and its filter entry.
#[utoipa::path(
    delete,
    path = "/v1/archives/{id}",
    tag = "records",
    params(("id" = String, Path, description = "The archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`invalid_id`", body = ErrorBody),
        (status = 404, description = "`not_found`", body = ErrorBody),
        (status = 503, description = "`coordinator_unavailable` or `store_unavailable` (nothing changed), or `not_published` (deleted; repeating is safe)", body = ErrorBody),
        (status = 507, description = "`insufficient_storage`: the data directory's disk is full (below `limits.min_free_bytes`); nothing changed", body = ErrorBody),
    )
)]
pub async fn delete(
    State(node): State<Arc<Node>>,
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    let key = id.clone();
    writable(&node)?;
    let outcome = super::blocking(&node, move |node| {
        Ok(node.domain.apply(&[Write::Delete(key)])?[0])
    })
    .await?;
    node.metrics.count_write(outcome);
    published(&node).await?;
    match outcome {
        WriteOutcome::Deleted => Ok(StatusCode::NO_CONTENT.into_response()),
        _ => Err(ApiError::not_found(id.as_str())),
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Start after this ID (the previous page's `next`).
    after: Option<String>,
    /// IDs per page, 1 to 10 000 (default 1000).
    limit: Option<usize>,
}

/// `GET /v1/archives?after=ID&limit=N`: IDs in order, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/archives",
    tag = "records",
    params(ListParams),
    responses(
        (status = 200, description = "A page of IDs", body = ArchiveList),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
    )
)]
pub async fn list(
    State(node): State<Arc<Node>>,
    Params(params): Params<ListParams>,
) -> Result<Response, ApiError> {
    let limit = params.limit.unwrap_or(1000);
    if !(1..=10_000).contains(&limit) {
        return Err(ApiError::invalid_parameter("limit must be 1..=10000"));
    }
    let ids = super::blocking(&node, move |node| {
        Ok(node.domain.list(params.after.as_deref(), limit)?)
    })
    .await?;
    let next = (ids.len() == limit).then(|| ids.last().cloned()).flatten();
    Ok(Json(ArchiveList { ids, next }).into_response())
}

/// One line's fate in a bulk import.
/// Accumulates a bulk import: parsed lines wait in a batch until it is
/// committed in one transaction.
struct Bulk {
    node: Arc<Node>,
    pending: Vec<(usize, Write)>,
    report: BulkReport,
}

impl Bulk {
    fn fail(&mut self, line: usize, id: Option<String>, e: ApiError) {
        self.report.summary.failed += 1;
        self.report.results.push(LineResult {
            line,
            id,
            status: e.status.as_u16(),
            code: Some(e.code),
            message: Some(e.message),
        });
    }

    fn parse(&mut self, line: usize, text: &[u8]) {
        let parsed: BulkLine = match serde_json::from_slice(text) {
            Ok(p) => p,
            Err(e) => return self.fail(line, None, ApiError::from_json(e)),
        };
        let (raw_id, input) = parsed.split();
        let id = match ArchiveId::parse(&raw_id) {
            Ok(id) => id,
            Err(e) => return self.fail(line, Some(raw_id), ApiError::invalid_id(e)),
        };
        match input.validate(
            self.node.config.limits.max_content_bytes,
            self.node.key_types(),
        ) {
            Ok(body) => self.pending.push((line, Write::Put(id, body))),
            Err(e) => self.fail(line, Some(raw_id), ApiError::invalid_record(e)),
        }
    }

    async fn flush(&mut self) -> Result<(), ApiError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        let (lines, writes): (Vec<usize>, Vec<Write>) = batch.into_iter().unzip();
        let (writes, outcomes) = super::blocking(&self.node, move |node| {
            let outcomes = node.domain.apply(&writes)?;
            Ok((writes, outcomes))
        })
        .await?;
        for ((line, write), outcome) in lines.into_iter().zip(writes).zip(outcomes) {
            self.node.metrics.count_write(outcome);
            let status = match outcome {
                WriteOutcome::Created => {
                    self.report.summary.created += 1;
                    201
                }
                _ => {
                    self.report.summary.replaced += 1;
                    200
                }
            };
            let id = match write {
                Write::Put(id, _) | Write::Delete(id) => id.into_string(),
            };
            self.report.results.push(LineResult {
                line,
                id: Some(id),
                status,
                code: None,
                message: None,
            });
        }
        Ok(())
    }
}

/// `POST /v1/archives/_bulk`: NDJSON, one record per line, read as it
/// streams in and committed in batches of [`BULK_BATCH`]. Each line gets a
/// result (by line number); a bad line fails alone. Lines past the
/// request's limit are not read and are counted as `beyond_limit`.
#[utoipa::path(
    post,
    path = "/v1/archives/_bulk",
    tag = "records",
    request_body(content = String, content_type = "application/x-ndjson", description = "One JSON record per line, each with its `id` (as `RecordInput` plus `id`); at least one line that is not blank"),
    responses(
        (status = 200, description = "Each line's result; bad lines fail alone", body = BulkReport),
        (status = 400, description = "`invalid_body`: the body could not be read, or holds no line that is not blank (nothing changed)", body = ErrorBody),
        (status = 503, description = "`coordinator_unavailable` or `store_unavailable` (nothing changed), or `not_published` (stored; repeating is safe)", body = ErrorBody),
        (status = 507, description = "`insufficient_storage`: the data directory's disk is full (below `limits.min_free_bytes`); nothing changed", body = ErrorBody),
    )
)]
pub async fn bulk(State(node): State<Arc<Node>>, body: Body) -> Result<Response, ApiError> {
    let limits = &node.config.limits;
    let max_line = limits.max_content_bytes / 3 * 4 + 64 * 1024;
    let max_lines = limits.max_bulk_lines;
    let mut bulk = Bulk {
        node: node.clone(),
        pending: Vec::new(),
        report: BulkReport {
            summary: BulkSummary::default(),
            results: Vec::new(),
        },
    };
    writable(&node)?;
    let mut splitter = LineSplitter::new(max_line);
    let mut stream = body.into_data_stream();
    let mut line_no = 0;
    let mut finished = false;
    while !finished {
        let chunk = match stream.next().await {
            Some(chunk) => chunk.map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::InvalidBody,
                    e.to_string(),
                )
            })?,
            None => {
                finished = true;
                Bytes::new()
            }
        };
        let lines = if finished {
            splitter.finish()
        } else {
            splitter.push(&chunk)
        };
        for line in lines {
            if line.is_blank() {
                continue;
            }
            line_no += 1;
            if line_no > max_lines {
                bulk.report.summary.beyond_limit += 1;
                continue;
            }
            match line {
                Line::Text(text) => bulk.parse(line_no, &text),
                Line::TooLong => bulk.fail(
                    line_no,
                    None,
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        ErrorCode::LineTooLarge,
                        format!("line is longer than {max_line} bytes"),
                    ),
                ),
            }
            if bulk.pending.len() >= BULK_BATCH {
                bulk.flush().await?;
            }
        }
    }
    if line_no == 0 {
        // Nothing was read, so nothing changed: a body the document
        // requires is required.
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidBody,
            "the body holds no record: send one JSON record a line",
        ));
    }
    bulk.flush().await?;
    published(&node).await?;
    bulk.report.summary.lines = line_no.min(max_lines);
    bulk.report.results.sort_by_key(|r| r.line);
    Ok(Json(bulk.report).into_response())
}

/// A line of the body, or the fact that it was too long to keep.
#[derive(Debug, PartialEq)]
enum Line {
    Text(Vec<u8>),
    TooLong,
}

impl Line {
    fn is_blank(&self) -> bool {
        matches!(self, Line::Text(t) if t.iter().all(u8::is_ascii_whitespace))
    }
}

/// Splits a byte stream into lines, never holding more than `max` bytes
/// of one line.
struct LineSplitter {
    current: Vec<u8>,
    overlong: bool,
    max: usize,
}

impl LineSplitter {
    fn new(max: usize) -> Self {
        LineSplitter {
            current: Vec::new(),
            overlong: false,
            max,
        }
    }

    fn push(&mut self, mut chunk: &[u8]) -> Vec<Line> {
        let mut out = Vec::new();
        while let Some(nl) = chunk.iter().position(|&b| b == b'\n') {
            self.take(&chunk[..nl]);
            out.push(self.end_line());
            chunk = &chunk[nl + 1..];
        }
        self.take(chunk);
        out
    }

    fn take(&mut self, bytes: &[u8]) {
        if self.overlong || self.current.len() + bytes.len() > self.max {
            self.overlong = true;
            self.current.clear();
        } else {
            self.current.extend_from_slice(bytes);
        }
    }

    fn end_line(&mut self) -> Line {
        if std::mem::take(&mut self.overlong) {
            Line::TooLong
        } else {
            Line::Text(std::mem::take(&mut self.current))
        }
    }

    fn finish(&mut self) -> Vec<Line> {
        if self.current.is_empty() && !self.overlong {
            Vec::new()
        } else {
            vec![self.end_line()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_and_overlong_lines_are_dropped() {
        let mut s = LineSplitter::new(5);
        let mut lines = s.push(b"ab");
        lines.extend(s.push(b"c\nlonger than five\nxy"));
        lines.extend(s.finish());
        assert_eq!(
            lines,
            vec![
                Line::Text(b"abc".to_vec()),
                Line::TooLong,
                Line::Text(b"xy".to_vec())
            ]
        );
    }
}
