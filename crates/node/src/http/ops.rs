//! For operators: stats, Prometheus metrics, health.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::error::ApiError;
use crate::node::Node;
use crate::wire::{ErrorBody, ErrorCode, Ready, Stats};

/// `GET /v1/stats`: the domain's store and filter, and its cache.
#[utoipa::path(
    get,
    path = "/v1/stats",
    tag = "operations",
    responses((status = 200, description = "Store, filter and cache figures", body = Stats))
)]
pub async fn stats(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let domain = super::blocking(&node, |node| Ok(node.domain.stats()?)).await?;
    Ok(Json(Stats {
        domain,
        cache: node.cluster.cache.stats(),
    })
    .into_response())
}

/// `GET /metrics` in the Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus / OpenMetrics text (docs/OPERATIONS.md lists the series)", body = String, content_type = "application/openmetrics-text"))
)]
pub async fn metrics(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let stats = super::blocking(&node, |node| Ok(node.domain.stats()?)).await?;
    let text = node.metrics.render(&stats, node.audit.integrity().intact);
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
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses((status = 200, description = "`ok`", body = String, content_type = "text/plain"))
)]
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: ready to answer every lookup, "not found" included,
/// which needs the cluster's membership confirmed by the coordinator in
/// its current session. Before that (just started, a new ZooKeeper
/// session) and while the coordinator is unreachable: 503 `not_ready`
/// (records are still found then; only "not found" is withheld).
/// Open to anyone, so it says no more than that and the number of
/// domains: not the coordinator's address nor the cluster's name (the
/// log and `/v1/cluster`, for tokens, have them).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses(
        (status = 200, description = "Ready: the membership is confirmed", body = Ready),
        (status = 503, description = "`not_ready`", body = ErrorBody),
    )
)]
pub async fn readyz(State(node): State<Arc<Node>>) -> Result<Response, ApiError> {
    let view = node.cluster.coordinator.view();
    let (connected, domains) = {
        let view = view.borrow();
        (view.connected, view.members.len())
    };
    if !connected {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            "the cluster's membership is not confirmed by the coordinator",
        ));
    }
    Ok(Json(Ready {
        ready: true,
        domains,
    })
    .into_response())
}
