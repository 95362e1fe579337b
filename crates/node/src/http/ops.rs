//! For operators: stats, Prometheus metrics, health.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::error::ApiError;
use crate::node::Node;
use crate::wire::Ready;

/// `GET /v1/stats`: the domain's store and filter, and its cache.
pub async fn stats(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let stats = super::blocking(&node, |node| Ok(node.domain.stats()?)).await?;
    let mut body = serde_json::to_value(stats).map_err(ApiError::internal)?;
    body["cache"] = serde_json::to_value(node.cluster.cache.stats()).map_err(ApiError::internal)?;
    Ok(Json(body).into_response())
}

/// `GET /metrics` in the Prometheus text format.
pub async fn metrics(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let stats = super::blocking(&node, |node| Ok(node.domain.stats()?)).await?;
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

/// `GET /healthz`: the process is alive and serving.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: ready to answer every lookup, "not found" included,
/// which needs the cluster's membership confirmed by the coordinator in
/// its current session. Before that (just started, a new ZooKeeper
/// session) and while the coordinator is unreachable: 503 `not_ready`
/// (records are still found then; only "not found" is withheld).
pub async fn readyz(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let view = node.cluster.coordinator.view().borrow().clone();
    let coordinator = node.cluster.coordinator.describe();
    if !view.connected {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            format!("the cluster's membership is not confirmed by the coordinator ({coordinator})"),
        ));
    }
    Ok(Json(Ready {
        ready: true,
        coordinator,
        domains: view.members.len(),
    })
    .into_response())
}
