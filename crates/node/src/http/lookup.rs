//! Cross-domain lookups and the cluster's state.

use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::archives::parse_id;
use super::error::ApiError;
use crate::cluster::lookup::{lookup as find, Outcome, Strategy};
use crate::node::Node;

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
    let result = find(&node, &id, params.strategy).await?;
    node.metrics.observe_lookup(&result);
    let route = serde_json::to_value(&result.route).unwrap_or_default();
    Ok(match result.outcome {
        Outcome::Found { record, owner } => {
            Json(json!({ "record": record, "owner": owner, "route": route })).into_response()
        }
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
    let candidates = node.cluster.replicas.read().candidates(id.as_str());
    Ok(Json(json!({
        "id": id,
        "local": node.domain.contains(id.as_str()),
        "candidates": candidates,
    }))
    .into_response())
}

/// `GET /v1/cluster`: every domain known, up or down, with the position
/// it published and the copy held here.
pub async fn cluster(State(node): State<Arc<Node>>) -> Response {
    let cluster = &node.cluster;
    let view = cluster.coordinator.view().borrow().clone();
    let me = node.domain.position();
    let replicas = cluster.replicas.read();
    let mut domains = vec![json!({
        "name": cluster.me,
        "address": cluster.address,
        "self": true,
        "up": true,
        "reachable": true,
        "kind": node.domain.settings().kind,
        "epoch": crate::wire::epoch(me.epoch),
        "version": me.version,
    })];
    for (name, peer) in replicas.peers() {
        let lag = match (peer.position, peer.last_published) {
            (Some(held), Some(published)) if held.epoch == published.epoch => {
                Some(published.version.saturating_sub(held.version))
            }
            _ => None,
        };
        domains.push(json!({
            "name": name,
            "address": peer.address,
            "self": false,
            "up": peer.up(),
            "reachable": peer.reachable,
            "kind": peer.kind,
            "epoch": peer.last_published.map(|p| crate::wire::epoch(p.epoch)),
            "version": peer.last_published.map(|p| p.version),
            "replica_epoch": peer.position.map(|p| crate::wire::epoch(p.epoch)),
            "replica_version": peer.position.map(|p| p.version),
            "lag": lag,
            "current": peer.current(),
            "last_sync_ms_ago": peer.last_synced.map(|t| t.elapsed().as_millis() as u64),
            "last_error": peer.last_error,
        }));
    }
    Json(json!({
        "domain": cluster.me,
        "coordinator": cluster.coordinator.describe(),
        "connected": view.connected,
        "domains": domains,
    }))
    .into_response()
}
