//! `GET /v1/backup`: the domain's online backup, streamed as it is read
//! from one snapshot, so that a running domain is saved without stopping
//! and without room on its own disk for a copy.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::mpsc;

use super::error::ApiError;
use crate::local::backup::BackupError;
use crate::node::Node;
use crate::wire::ErrorBody;

/// Bytes gathered before a piece of the backup is sent.
const CHUNK: usize = 256 * 1024;
/// Pieces waiting to be sent: a slow client holds the snapshot longer,
/// never the domain's memory.
const QUEUED: usize = 4;

/// The media type of a backup.
pub const BACKUP_TYPE: &str = "application/vnd.xarchive.backup";

impl From<BackupError> for ApiError {
    fn from(e: BackupError) -> Self {
        match e {
            BackupError::Reopening(r) => r.into(),
            e => ApiError::internal(e),
        }
    }
}

/// Sends what the backup writes, a piece at a time, to the response.
struct Pieces {
    buf: Vec<u8>,
    tx: mpsc::Sender<Result<Bytes, BackupError>>,
}

impl Pieces {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let piece = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(piece)).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the client stopped reading the backup",
            )
        })
    }
}

impl std::io::Write for Pieces {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// `GET /v1/backup`: the store and the audit log as of one moment.
#[utoipa::path(
    get,
    path = "/v1/backup",
    tag = "operations",
    responses(
        (status = 200, description = "The backup (docs/FORMAT.md, \"Backup\"), streamed; complete only if it ends with its end frame, which `xarchive backup` checks; the end frame carries an HMAC-SHA-256 under a key from the cluster secret (or the domain's own `seal/backup.key`), which `xarchive restore` checks before it writes anything", body = Vec<u8>, content_type = "application/vnd.xarchive.backup"),
        (status = 503, description = "`store_unavailable`: the store is being reopened after an I/O error", body = ErrorBody),
    )
)]
pub async fn backup(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, BackupError>>(QUEUED);
    let errors = tx.clone();
    let taker = node.clone();
    tokio::task::spawn_blocking(move || {
        let out = Pieces {
            buf: Vec::with_capacity(CHUNK),
            tx,
        };
        match taker.backup(out) {
            Ok(header) => tracing::info!(
                records = header.records,
                audit_entries = header.audit_entries,
                sequence = header.sequence,
                "backup taken"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "backup not completed");
                // The client learns of it: at once if nothing was sent,
                // else as a body that breaks off before its end frame.
                let _ = errors.blocking_send(Err(e));
            }
        }
    });
    // The header is flushed as soon as both snapshots are taken: an error
    // before it is an answer of its own.
    let first = match rx.recv().await {
        Some(Ok(first)) => first,
        Some(Err(e)) => return Err(e.into()),
        None => return Err(ApiError::internal("the backup task ended without a word")),
    };
    let rest = futures::stream::unfold(rx, |mut rx| async move {
        let piece = rx.recv().await?;
        Some((piece.map_err(std::io::Error::other), rx))
    });
    let body = futures::stream::once(async move { Ok::<_, std::io::Error>(first) });
    let body = Body::from_stream(futures::StreamExt::chain(body, rest));
    let name = format!(
        "attachment; filename=\"{}.xarchive-backup\"",
        node.domain.name()
    );
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, BACKUP_TYPE.to_owned()),
            (header::CONTENT_DISPOSITION, name),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        body,
    )
        .into_response())
}
