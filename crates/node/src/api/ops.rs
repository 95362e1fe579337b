//! For operators: stats, Prometheus metrics, health.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::error::ApiError;
use crate::node::Node;

/// `GET /v1/stats`: the domain's store and filter, and its cache.
pub async fn stats(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let stats = node.blocking(|node| Ok(node.domain.stats()?)).await?;
    let mut body = serde_json::to_value(stats).map_err(ApiError::internal)?;
    body["cache"] = serde_json::to_value(node.cluster.cache.stats()).map_err(ApiError::internal)?;
    Ok(Json(body).into_response())
}

/// `GET /metrics` in the Prometheus text format.
pub async fn metrics(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let stats = node.blocking(|node| Ok(node.domain.stats()?)).await?;
    let text = node.metrics.render(&stats);
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

pub async fn healthz() -> &'static str {
    "ok\n"
}
