//! HTTP errors: a status and a JSON body `{"code": "...", "message": "..."}`
//! whose `code` is stable, for programs, and whose message is for people.

use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use crate::local::audit::AuditError;
use crate::local::domain::DomainError;
use crate::local::id::InvalidId;
use crate::local::record::InvalidRecord;
use crate::local::redb_file::Reopening;
use crate::local::space::DiskFull;
use crate::local::store::StoreError;
use crate::node::SearchError;
use crate::security::auth::Refusal;
use crate::wire::ErrorCode;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    /// Extra fields merged into the body (e.g. the current epoch).
    pub details: Map<String, Value>,
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        let (status, code) = match refusal {
            Refusal::Unauthorized(_) => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            Refusal::Forbidden(_) | Refusal::NotHome { .. } => {
                (StatusCode::FORBIDDEN, ErrorCode::Forbidden)
            }
            Refusal::RateLimited { .. } | Refusal::InFlight { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited)
            }
        };
        ApiError::new(status, code, refusal.to_string())
    }
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    pub fn invalid_id(e: InvalidId) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidId, e.to_string())
    }

    pub fn invalid_parameter(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidParameter,
            message,
        )
    }

    /// Syntax errors are `invalid_json`; well-formed JSON of the wrong
    /// shape (missing title, metadata not an object, unknown field) is
    /// `invalid_record`.
    pub fn from_json(e: serde_json::Error) -> Self {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidRecord,
                e.to_string(),
            ),
            _ => ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidJson,
                e.to_string(),
            ),
        }
    }

    pub fn invalid_record(e: InvalidRecord) -> Self {
        match e {
            InvalidRecord::ContentTooLarge { .. } => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::ContentTooLarge,
                e.to_string(),
            ),
            _ => ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidRecord,
                e.to_string(),
            ),
        }
    }

    pub fn not_found(id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no archive record {id:?} in this domain"),
        )
        .with("id", id)
    }

    /// No page asset is named so (or the name cannot be read).
    pub fn asset_not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::AssetNotFound, message)
    }

    /// A failure of this domain, not of the request: logged in full with
    /// an incident number, and answered with that number alone (what
    /// failed inside may name paths, peers or stored data).
    pub fn internal(e: impl std::fmt::Display) -> Self {
        let incident = format!("{:08x}", rand::random::<u32>());
        tracing::error!(incident, error = %e, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            format!("internal error {incident}: this domain's log says what failed"),
        )
        .with("incident", incident)
    }

    pub fn body(e: BytesRejection) -> Self {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::BodyTooLarge,
                e.body_text(),
            )
        } else {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidBody,
                e.body_text(),
            )
        }
    }

    pub fn path(e: PathRejection) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidId, e.body_text())
    }

    pub fn query(e: QueryRejection) -> Self {
        ApiError::invalid_parameter(e.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> Self {
        ApiError::query(e)
    }
}

impl From<DiskFull> for ApiError {
    fn from(e: DiskFull) -> Self {
        ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            ErrorCode::InsufficientStorage,
            e.to_string(),
        )
        .with("free_bytes", e.free_bytes)
        .with("reserve_bytes", e.reserve_bytes)
    }
}

impl From<Reopening> for ApiError {
    fn from(e: Reopening) -> Self {
        tracing::warn!(error = %e, "a request met a store being reopened");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StoreUnavailable,
            "the domain's store is being reopened after an I/O error; nothing was changed, try again",
        )
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::Store(StoreError::DiskFull(full)) => full.into(),
            DomainError::Store(StoreError::Reopening(r)) => r.into(),
            e @ DomainError::VerifyRunning => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Busy,
                e.to_string(),
            ),
            e => ApiError::internal(e),
        }
    }
}

impl From<SearchError> for ApiError {
    fn from(e: SearchError) -> Self {
        match e {
            SearchError::Key(e) => ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidKey,
                e.to_string(),
            ),
            SearchError::Domain(e) => e.into(),
            // No answer leaves without its audit entry (audit.rs).
            SearchError::Audit(AuditError::DiskFull(full)) => {
                let mut refused = ApiError::from(full);
                refused.message = format!(
                    "the search could not be put on record, so nothing is returned: {}",
                    refused.message
                );
                refused
            }
            SearchError::Audit(AuditError::Reopening(r)) => r.into(),
            e @ SearchError::Audit(_) => ApiError::internal(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = self.details;
        body.insert("code".into(), json!(self.code));
        body.insert("message".into(), json!(self.message));
        (self.status, Json(Value::Object(body))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> DiskFull {
        DiskFull {
            free_bytes: 0,
            reserve_bytes: 1024,
        }
    }

    #[test]
    fn an_internal_error_answers_its_incident_number_not_what_failed() {
        let e = ApiError::internal("cannot open /var/lib/xarchive/A/records.redb");
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!e.message.contains("records.redb"), "{}", e.message);
        let incident = e.details["incident"].as_str().expect("an incident number");
        assert!(e.message.contains(incident), "{}", e.message);
    }

    #[test]
    fn a_write_refused_for_space_is_507_insufficient_storage_saying_nothing_changed() {
        let e = ApiError::from(DomainError::Store(StoreError::DiskFull(full())));
        assert_eq!(e.status, StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(e.code, ErrorCode::InsufficientStorage);
        assert!(e.message.contains("disk is full") && e.message.contains("nothing was changed"));
        assert_eq!(e.details["reserve_bytes"], 1024);
    }

    #[test]
    fn a_search_whose_audit_entry_found_no_space_returns_nothing_and_says_why() {
        let e = ApiError::from(SearchError::Audit(AuditError::DiskFull(full())));
        assert_eq!(e.status, StatusCode::INSUFFICIENT_STORAGE);
        assert!(e.message.contains("nothing is returned"), "{}", e.message);
    }

    #[test]
    fn a_store_being_reopened_is_503_store_unavailable() {
        let e = ApiError::from(DomainError::Store(StoreError::Reopening(Reopening {
            path: "records.redb".into(),
            reason: "no space".into(),
        })));
        assert_eq!(
            (e.status, e.code),
            (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::StoreUnavailable)
        );
    }
}
