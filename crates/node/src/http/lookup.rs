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
use crate::wire::{ClusterView, LookupBody, RouteBody};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupParams {
    #[serde(default)]
    strategy: Strategy,
}

/// `GET /v1/lookup/{id}[?strategy=broadcast]`: the record from whichever
/// domain holds it, with the route the lookup took.
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
pub async fn cluster(State(node): State<Arc<Node>>) -> Json<ClusterView> {
    Json(node.cluster_view())
}
