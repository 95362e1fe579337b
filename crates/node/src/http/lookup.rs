//! Cross-domain lookups, routes, and the cluster as this domain sees it.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{Params, PathId};
use crate::cluster::lookup::{Outcome, Strategy};
use crate::node::Node;
use crate::security::auth::Principal;
use crate::wire::{ClusterView, ErrorBody, ErrorCode, LookupBody, RouteBody};

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
/// domain holds it, with the route the lookup took. What was typed is
/// read by the cluster's ID profile (`[ids]`) first; a lookup that finds
/// nothing suggests the nearest archive numbers held here.
#[utoipa::path(
    get,
    path = "/v1/lookup/{id}",
    tag = "lookup",
    params(("id" = String, Path, description = "The archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`"), LookupParams),
    responses(
        (status = 200, description = "Found: the record, its owner and the route", body = LookupBody),
        (status = 400, description = "`invalid_id` or `invalid_parameter`", body = ErrorBody),
        (status = 404, description = "`not_found`: every domain that might hold it was ruled out, with the membership confirmed; `suggestions` names the nearest archive numbers this domain holds", body = LookupBody),
        (status = 503, description = "`unavailable` (a domain that might hold it could not be reached) or `not_ready` (the membership is not confirmed); never \"not found\"", body = LookupBody),
    )
)]
pub async fn lookup(
    State(node): State<Arc<Node>>,
    who: Option<Extension<Principal>>,
    PathId(typed): PathId,
    Params(params): Params<LookupParams>,
) -> Result<Response, ApiError> {
    let result = node.lookup(&typed, params.strategy).await?;
    node.metrics.observe_lookup(&result);
    let route = result.trace.into_route();
    let route_json = serde_json::to_value(&route).map_err(ApiError::internal)?;
    // An identity number typed where an archive number goes is neither
    // said back nor used to suggest anything.
    let private = node.reads_as_private_key(typed.as_str());
    let said = if private {
        "that number".to_owned()
    } else {
        format!("{:?}", typed.as_str())
    };
    let echo = |e: ApiError| {
        if private {
            e.with("reads_as_key", true)
        } else {
            e.with("id", typed.as_str())
        }
    };
    Ok(match result.outcome {
        Outcome::Found { record, owner } => Json(LookupBody {
            record: Some(node.as_read_by(&who.map_or(Principal::Anonymous, |w| w.0), record)),
            owner: Some(owner.into_string()),
            route,
            ..LookupBody::default()
        })
        .into_response(),
        Outcome::NotFound => {
            let suggestions = if private {
                Vec::new()
            } else {
                let forms = node.id_forms(&typed);
                let query = forms.first().unwrap_or(&typed).as_str().to_owned();
                super::blocking(&node, move |node| {
                    Ok(node.domain.nearest(&node.config.ids, &query)?)
                })
                .await?
            };
            let mut message = format!("no domain holds archive record {said}");
            if private {
                message.push_str(
                    "; it reads as an identity number or another private key: to find a \
                     person's records, search by key (POST /v1/search)",
                );
            } else if !suggestions.is_empty() {
                message.push_str(&format!(
                    "; domain {} holds {}",
                    node.domain.name(),
                    suggestions.join(", ")
                ));
            }
            let mut e = echo(ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                message,
            ));
            if !suggestions.is_empty() {
                e = e.with("suggestions", suggestions);
            }
            e.with("route", route_json).into_response()
        }
        Outcome::Unavailable { domains } => {
            let domains: Vec<String> = domains.into_iter().map(String::from).collect();
            echo(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                format!(
                    "{said} was not found in the domains that answered; these could not be \
                     reached: {}",
                    domains.join(", ")
                ),
            ))
            .with("unavailable", domains)
            .with("route", route_json)
            .into_response()
        }
        Outcome::NotReady { reason } => echo(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            format!(
                "{said} was not found in any domain known here, but this domain cannot confirm \
                 the cluster's membership ({reason}), so a domain it does not know of may hold it"
            ),
        ))
        .with("route", route_json)
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
    PathId(id): PathId,
) -> Result<Response, ApiError> {
    Ok(Json(RouteBody {
        local: node.domain.contains(id.as_str()),
        candidates: node
            .cluster
            .candidates(id.as_str())
            .into_iter()
            .map(String::from)
            .collect(),
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
    Json(node.cluster_view().await)
}
