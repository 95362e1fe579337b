//! The HTTP API under `/v1`, plus `/metrics`, `/healthz` and `/readyz`.

pub mod archives;
pub mod cluster;
pub mod error;
pub mod filter;
pub mod ops;
pub mod web;

use std::sync::Arc;
use std::time::Instant;

use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use tower::ServiceBuilder;

use crate::node::Node;
use error::ApiError;

/// Every route of a domain, behind (outermost first) CORS, metrics,
/// authentication with rate limits, and a bound on requests in flight;
/// all but bulk imports also have a time limit.
pub fn router(node: Arc<Node>) -> Router {
    let limits = &node.config.limits;
    // A record's JSON: base64 content (4 bytes per 3) plus room for the rest.
    let max_body = limits.max_content_bytes / 3 * 4 + 64 * 1024;
    let timed = Router::new()
        .route("/v1/archives", get(archives::list))
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
        .route("/readyz", get(ops::readyz))
        .route("/", get(web::index))
        .route("/assets/{file}", get(web::asset))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refused))
                .timeout(Duration::from_millis(limits.request_timeout_ms)),
        );
    Router::new()
        .route(
            "/v1/archives/_bulk",
            post(archives::bulk).layer(DefaultBodyLimit::disable()),
        )
        .merge(timed)
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(node.clone(), authenticate))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refused))
                .load_shed()
                .concurrency_limit(limits.max_concurrent_requests),
        )
        .layer(middleware::from_fn_with_state(node.clone(), observe))
        .layer(cors())
        .with_state(node)
}

/// A request the server would not (or could not in time) handle.
async fn refused(e: tower::BoxError) -> ApiError {
    if e.is::<tower::load_shed::error::Overloaded>() {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "too many requests in flight; try again shortly",
        )
    } else if e.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the request took longer than the domain allows",
        )
    } else {
        ApiError::internal(e)
    }
}

/// Who is calling, whether they may, and whether they are within their
/// rate; before any handler, so a refused request changes nothing.
async fn authenticate(State(node): State<Arc<Node>>, request: Request, next: Next) -> Response {
    use crate::auth::{need, Principal};
    let auth = &node.auth;
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str());
    let needs = need(request.method(), route);
    let who = if auth.enabled() {
        match auth.identify(request.headers().get(header::AUTHORIZATION)) {
            Ok(who) => who,
            Err(e) => return challenge(e),
        }
    } else {
        Principal::Anonymous
    };
    if let Err(e) = auth.allow(&who, needs) {
        return challenge(e);
    }
    // The rate limit is per token: members and (where no token is
    // required) anonymous callers are bounded only by the requests in
    // flight.
    if let Principal::Client { name, .. } = &who {
        if let Err(e) = auth.spend(name) {
            let retry = e
                .details
                .get("retry_after_ms")
                .and_then(|v| v.as_u64())
                .unwrap_or(1000);
            let mut response = e.into_response();
            if let Ok(v) = header::HeaderValue::from_str(&retry.div_ceil(1000).to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
            return response;
        }
    }
    next.run(request).await
}

/// An authentication failure, with the challenge HTTP asks for on 401.
fn challenge(e: ApiError) -> Response {
    let unauthorized = e.status == StatusCode::UNAUTHORIZED;
    let mut response = e.into_response();
    if unauthorized {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"xarchive\""),
        );
    }
    response
}

/// The page served by one domain reads and writes every domain: any
/// origin may call the API (it has no cookies or credentials to protect).
fn cors() -> tower_http::cors::CorsLayer {
    use axum::http::{header, Method};
    use tower_http::cors::{Any, CorsLayer};
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::PUT, Method::DELETE, Method::OPTIONS])
        .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION])
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
