//! Cross-domain lookups, routes, and the cluster as this domain sees it.

use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::archives::parse_id;
use super::error::ApiError;
use crate::cluster::lookup::{Outcome, Strategy};
use crate::node::Node;
use crate::wire::{ClusterView, ErrorBody, LookupBody, RouteBody};

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LookupParams {
    /// `routed` (default) or `broadcast` (the seed paper's way).
    #[serde(default)]
    #[param(inline)]
    strategy: Strategy,
}

/// `GET /v1/lookup/{id}[?strategy=broadcast]`: the record from whichever
/// domain holds it, with the route the lookup took.
#[utoipa::path(
    get,
    path = "/v1/lookup/{id}",
    tag = "lookup",
    params(("id" = String, Path, description = "The archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`"), LookupParams),
    responses(
        (status = 200, description = "Found: the record, its owner and the route", body = LookupBody),
        (status = 400, description = "`invalid_id` or `invalid_parameter`", body = ErrorBody),
        (status = 404, description = "`not_found`: every domain that might hold it was ruled out, with the membership confirmed", body = LookupBody),
        (status = 503, description = "`unavailable` (a domain that might hold it could not be reached) or `not_ready` (the membership is not confirmed); never \"not found\"", body = LookupBody),
    )
)]
pub async fn lookup(
    State(node): State<Arc<Node>>,
    path: Result<Path<String>, PathRejection>,
    params: Result<Query<LookupParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = parse_id(path)?;
    let Query(params) = params.map_err(ApiError::query)?;
    let result = node.lookup(&id, params.strategy).await?;
    node.metrics.observe_lookup(&result);
    let route = serde_json::to_value(&result.route).map_err(ApiError::internal)?;
    Ok(match result.outcome {
        Outcome::Found { record, owner } => Json(LookupBody {
            record: Some(record),
            owner: Some(owner),
            route: result.route,
            ..LookupBody::default()
        })
        .into_response(),
        Outcome::NotFound => ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no domain holds archive record {:?}", id.as_str()),
        )
        .with("id", id.as_str())
        .with("route", route)
        .into_response(),
        Outcome::Unavailable { domains } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "{:?} was not found in the domains that answered; these could not be reached: {}",
                id.as_str(),
                domains.join(", ")
            ),
        )
        .with("id", id.as_str())
        .with("unavailable", domains)
        .with("route", route)
        .into_response(),
        Outcome::NotReady { reason } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            format!(
                "{:?} was not found in any domain known here, but this domain cannot confirm \
                 the cluster's membership ({reason}), so a domain it does not know of may hold it",
                id.as_str()
            ),
        )
        .with("id", id.as_str())
        .with("route", route)
        .into_response(),
    })
}

/// `GET /v1/route/{id}`: the domains whose replicas may hold the ID, from
/// this domain's replicas alone (no remote call).
#[utoipa::path(
    get,
    path = "/v1/route/{id}",
    tag = "lookup",
    params(("id" = String, Path, description = "The archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`")),
    responses(
        (status = 200, description = "The candidates", body = RouteBody),
        (status = 400, description = "`invalid_id`", body = ErrorBody),
    )
)]
pub async fn route(
    State(node): State<Arc<Node>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = parse_id(path)?;
    Ok(Json(RouteBody {
        local: node.domain.contains(id.as_str()),
        candidates: node.cluster.candidates(id.as_str()),
        id: id.into_string(),
    })
    .into_response())
}

/// `GET /v1/cluster`: every domain known, up or down, with the position
/// it published and the copy held here.
#[utoipa::path(
    get,
    path = "/v1/cluster",
    tag = "lookup",
    responses((status = 200, description = "The cluster as this domain sees it", body = ClusterView))
)]
pub async fn cluster(State(node): State<Arc<Node>>) -> Json<ClusterView> {
    Json(node.cluster_view())
}
