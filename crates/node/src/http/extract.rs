//! The extractors of the handlers' inputs, each answering what it cannot
//! read with the API's JSON error once, here, instead of in every handler.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::local::domain_name::DomainName;
use crate::local::id::ArchiveId;
use crate::wire::ErrorCode;

/// The archive ID in the path, checked: `invalid_id` (400) otherwise.
pub struct PathId(pub ArchiveId);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(ApiError::path)?;
        ArchiveId::parse(&raw)
            .map(PathId)
            .map_err(ApiError::invalid_id)
    }
}

/// A domain's name in the path, checked: `invalid_parameter` (400)
/// otherwise.
pub struct PathName(pub DomainName);

impl<S: Send + Sync> FromRequestParts<S> for PathName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid_parameter(e.body_text()))?;
        DomainName::try_from(name)
            .map(PathName)
            .map_err(|e| ApiError::invalid_parameter(e.to_string()))
    }
}

/// An asset's file name in the path: `asset_not_found` (404) when the
/// path cannot be read (no such asset can be named so).
pub struct AssetName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for AssetName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::asset_not_found(e.body_text()))?;
        Ok(AssetName(name))
    }
}

/// The query's parameters: `invalid_parameter` (400) when they do not
/// read as `T`.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Params<T>(pub T);

/// A JSON body read as a `T`: `invalid_json` (where the syntax broke) or
/// `invalid_request` (saying `shape`), never quoting what was sent. serde's
/// own messages quote a value they refuse, and these bodies carry
/// identity numbers.
pub fn json_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    shape: &str,
) -> Result<T, ApiError> {
    let body = body.map_err(ApiError::body)?;
    serde_json::from_slice(&body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, shape)
        }
        _ => ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidJson,
            format!(
                "the body is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
        ),
    })
}
