//! The HTTP API under `/v1`, plus `/metrics` and `/healthz`.

pub mod archives;
pub mod cluster;
pub mod error;
pub mod filter;
pub mod ops;
pub mod web;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use crate::node::Node;
use error::ApiError;

/// Every route of a domain.
pub fn router(node: Arc<Node>) -> Router {
    let limits = &node.config.limits;
    // A record's JSON: base64 content (4 bytes per 3) plus room for the rest.
    let max_body = limits.max_content_bytes / 3 * 4 + 64 * 1024;
    Router::new()
        .route("/v1/archives", get(archives::list))
        .route(
            "/v1/archives/_bulk",
            post(archives::bulk).layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/v1/archives/{id}",
            get(archives::get)
                .put(archives::put)
                .delete(archives::delete),
        )
        .route("/v1/contains/{id}", get(filter::contains_one))
        .route("/v1/contains", post(filter::contains_many))
        .route("/v1/filter", get(filter::snapshot))
        .route("/v1/filter/delta", get(filter::delta))
        .route("/v1/filter/verify", get(filter::verify))
        .route("/v1/lookup/{id}", get(cluster::lookup))
        .route("/v1/route/{id}", get(cluster::route))
        .route("/v1/cluster", get(cluster::cluster))
        .route("/v1/stats", get(ops::stats))
        .route("/metrics", get(ops::metrics))
        .route("/healthz", get(ops::healthz))
        .route("/", get(web::index))
        .route("/assets/{file}", get(web::asset))
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(node.clone(), observe))
        .layer(cors())
        .with_state(node)
}

/// The page served by one domain reads and writes every domain: any
/// origin may call the API (it has no cookies or credentials to protect).
fn cors() -> tower_http::cors::CorsLayer {
    use axum::http::{header, Method};
    use tower_http::cors::{Any, CorsLayer};
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::PUT, Method::DELETE, Method::OPTIONS])
        .allow_headers([header::CONTENT_TYPE])
        .expose_headers([
            header::HeaderName::from_static(filter::EPOCH_HEADER),
            header::HeaderName::from_static(filter::VERSION_HEADER),
            header::HeaderName::from_static(filter::FROM_VERSION_HEADER),
            header::HeaderName::from_static(filter::KIND_HEADER),
        ])
        .max_age(std::time::Duration::from_secs(600))
}

async fn route_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "route_not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// Counts requests and their latency by route template and status.
async fn observe(State(node): State<Arc<Node>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    node.metrics.observe_request(
        &route,
        &method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}
