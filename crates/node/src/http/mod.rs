//! The HTTP surface: the API under `/v1`, plus `/metrics`, `/healthz`,
//! `/readyz` and the page. Handlers act on a [`Node`]; errors of the
//! layers below become JSON with a stable `code` here and only here.

pub(crate) mod archives;
pub(crate) mod backup;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod lookup;
pub(crate) mod openapi;
pub(crate) mod ops;
pub(crate) mod replication;
pub(crate) mod requests;
pub(crate) mod search;
pub(crate) mod web;

use std::sync::Arc;
use std::time::Instant;

use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;

use tower::ServiceBuilder;
use tower_http::compression::predicate::Predicate;

use crate::config::Limits;
use crate::local::id::MAX_ID_BYTES;
use crate::node::Node;
use crate::security::auth::{Need, Needs, Refusal};
use crate::wire::ErrorCode;
use error::ApiError;

/// Runs `f` on the blocking pool: store reads and writes wait on the
/// disk (fsync) and must not hold up the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    node: &Arc<Node>,
    f: impl FnOnce(&Node) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let node = node.clone();
    tokio::task::spawn_blocking(move || f(&node))
        .await
        .map_err(ApiError::internal)?
}

/// Every route of a domain, behind (outermost first) CORS, metrics,
/// authentication with rate limits, and a bound on requests in flight;
/// all but bulk imports also have a time limit.
pub fn router(node: Arc<Node>) -> Router {
    let limits = &node.config.limits;
    // A record's JSON: base64 content (4 bytes per 3) plus room for the rest.
    let max_body = limits.max_content_bytes / 3 * 4 + 64 * 1024;
    let routes = routes(limits);
    let needs = Arc::new(needs_by_route(&routes));
    let (untimed, timed): (Vec<Endpoint>, Vec<Endpoint>) =
        routes.into_iter().partition(|r| r.path == BULK);
    let into_router = |routes: Vec<Endpoint>| {
        routes
            .into_iter()
            .fold(Router::new(), |router, r| router.route(r.path, r.handlers))
    };
    let timed = into_router(timed).layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(refused))
            .timeout(Duration::from_millis(limits.request_timeout_ms)),
    );
    into_router(untimed)
        .merge(timed)
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(
            (node.clone(), needs),
            authenticate,
        ))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refused))
                .load_shed()
                .concurrency_limit(limits.max_concurrent_requests),
        )
        .layer(middleware::from_fn_with_state(node.clone(), observe))
        .layer(cors(node.clone()))
        .with_state(node)
}

/// Bodies smaller than this are not compressed.
const COMPRESS_ABOVE: u16 = 4096;

/// `handlers` with their answers compressed (zstd, br or gzip, by what
/// the caller accepts) when they are [`COMPRESS_ABOVE`] bytes or more.
/// Only on the routes whose answers can be large: filters are mostly
/// zeros until full (a domain of 10 000 records sized for a million ships
/// 1.2 MB raw, under 100 KB compressed), and records, pages of IDs,
/// searches and the page's assets compress well. The layer costs every
/// request it wraps, even one it leaves alone: on `GET /v1/contains` it
/// cost 11 % of the throughput (docs/BENCHMARKS.md §3).
fn compressed(handlers: MethodRouter<Arc<Node>>) -> MethodRouter<Arc<Node>> {
    use tower_http::compression::predicate::{NotForContentType, SizeAbove};
    handlers.layer(
        tower_http::compression::CompressionLayer::new().compress_when(
            SizeAbove::new(COMPRESS_ABOVE)
                .and(NotForContentType::GRPC)
                .and(NotForContentType::IMAGES)
                .and(NotForContentType::const_new("text/event-stream")),
        ),
    )
}

/// The bulk import's route: the one without a time or size limit.
const BULK: &str = "/v1/archives/_bulk";

/// A search's body: a key type, a value (256 bytes once normalised,
/// `local/keys/normalise.rs`) and, when a member passes it on, the requester.
const SEARCH_BODY_LIMIT: usize = 64 * 1024;

/// `POST /v1/certificates/verify`'s body: a payload a QR code holds (a
/// few kilobytes), with room to spare.
const VERIFY_BODY_LIMIT: usize = 16 * 1024;

/// `POST /v1/contains`'s body: `limits.max_contains_ids` IDs of the
/// longest (256 bytes), each allowed twice its length in JSON (escapes,
/// or non-ASCII characters sent as `\uXXXX`), with quotes and commas.
fn contains_body_limit(limits: &Limits) -> usize {
    limits
        .max_contains_ids
        .saturating_mul(2 * MAX_ID_BYTES + 4)
        .saturating_add(1024)
}

/// An endpoint: its path template, what each method needs (declared here,
/// beside the handlers, and nowhere else), and its handlers.
pub(crate) struct Endpoint {
    pub path: &'static str,
    pub needs: Needs,
    handlers: MethodRouter<Arc<Node>>,
}

fn route(path: &'static str, needs: Needs, handlers: MethodRouter<Arc<Node>>) -> Endpoint {
    Endpoint {
        path,
        needs,
        handlers,
    }
}

/// The bulk import: the one route without a time or size limit.
fn bulk() -> Endpoint {
    route(
        BULK,
        Needs::write(Need::Write),
        post(archives::bulk).layer(DefaultBodyLimit::disable()),
    )
}

/// Every other route. With [`bulk`], the one list ([`routes`]) that the
/// router, the authentication and the OpenAPI document are built from.
/// Routes that take small bodies (searches, `contains`) have body limits
/// of their own, below a record's. Peers call the routes that need `MemberOrRead` (filters,
/// deltas, membership checks, record fetches) and `Member` (key filters,
/// the relay), which no client role opens.
fn timed_routes(limits: &Limits) -> Vec<Endpoint> {
    use Need::{
        Audit, Backup, Clerk, Member, MemberOrRead, MemberOrSearch, Metrics, Open, Read, Reviewer,
        Write,
    };
    vec![
        route(
            "/v1/archives",
            Needs::read(Read),
            compressed(get(archives::list)),
        ),
        route(
            "/v1/archives/{id}",
            Needs {
                read: MemberOrRead,
                write: Write,
            },
            compressed(
                get(archives::get)
                    .put(archives::put)
                    .delete(archives::delete),
            ),
        ),
        route(
            "/v1/contains/{id}",
            Needs::read(MemberOrRead),
            get(replication::contains_one),
        ),
        route(
            "/v1/contains",
            Needs::any(Read),
            compressed(post(replication::contains_many))
                .layer(DefaultBodyLimit::max(contains_body_limit(limits))),
        ),
        route(
            "/v1/filter",
            Needs::read(MemberOrRead),
            compressed(get(replication::snapshot)),
        ),
        route(
            "/v1/filter/delta",
            Needs::read(MemberOrRead),
            compressed(get(replication::delta)),
        ),
        route(
            "/v1/filter/keys",
            Needs::read(Member),
            compressed(get(replication::key_snapshot)),
        ),
        route(
            "/v1/filter/keys/delta",
            Needs::read(Member),
            compressed(get(replication::key_delta)),
        ),
        route(
            "/v1/copies/{name}",
            Needs::read(Member),
            compressed(get(replication::copy)),
        ),
        route(
            "/v1/copies/{name}/keys",
            Needs::read(Member),
            compressed(get(replication::key_copy)),
        ),
        route(
            "/v1/filter/verify",
            Needs::read(Read),
            get(replication::verify),
        ),
        // Not compressed: its pages are mostly deltas, already packed, and
        // starting a compressor per page cost 7 % of a domain's CPU at
        // national scale (docs/SCALING.md).
        route("/v1/relay", Needs::read(Member), get(replication::relay)),
        route(
            "/v1/lookup/{id}",
            Needs::read(Read),
            compressed(get(lookup::lookup)),
        ),
        route("/v1/route/{id}", Needs::read(Read), get(lookup::route)),
        route("/v1/keys", Needs::read(Read), get(search::key_types)),
        route(
            "/v1/search",
            Needs::write(MemberOrSearch),
            compressed(post(search::search)).layer(DefaultBodyLimit::max(SEARCH_BODY_LIMIT)),
        ),
        route(
            "/v1/audit",
            Needs::read(Audit),
            compressed(get(search::audit)),
        ),
        route(
            "/v1/audit/verify",
            Needs::read(Audit),
            get(search::audit_verify),
        ),
        route(
            "/v1/cluster",
            Needs::read(Read),
            compressed(get(lookup::cluster)),
        ),
        route("/v1/stats", Needs::read(Read), get(ops::stats)),
        // Not compressed: a stream a client checks as it arrives.
        route("/v1/backup", Needs::read(Backup), get(backup::backup)),
        route(
            "/v1/requests",
            Needs::any(Clerk),
            compressed(get(requests::list).post(requests::submit)),
        ),
        route(
            "/v1/requests/{id}",
            Needs::read(Clerk),
            compressed(get(requests::get)),
        ),
        route(
            "/v1/peer/requests",
            Needs::any(Member),
            compressed(post(requests::deliver)),
        ),
        route(
            "/v1/requests/{id}/certificate",
            Needs::any(Clerk),
            compressed(get(requests::certificate).post(requests::certify)),
        ),
        route(
            "/v1/requests/{id}/certificate.pdf",
            Needs::read(Clerk),
            get(requests::certificate_pdf),
        ),
        route(
            "/v1/certificates/{code}",
            Needs::any(Open),
            get(requests::check_certificate),
        ),
        route(
            "/v1/certificates/verify",
            Needs::any(Open),
            post(requests::verify_certificate).layer(DefaultBodyLimit::max(VERIFY_BODY_LIMIT)),
        ),
        route(
            "/v1/trust-list",
            Needs::any(Open),
            compressed(get(requests::trust_list)),
        ),
        route("/v1/reviews", Needs::read(Reviewer), get(requests::reviews)),
        route(
            "/v1/reviews/{receiving}/{request}",
            Needs::any(Reviewer),
            post(requests::decide),
        ),
        route(
            "/v1/openapi.json",
            Needs::any(Open),
            compressed(get(openapi::openapi_json)),
        ),
        route(
            "/metrics",
            Needs::any(Metrics),
            compressed(get(ops::metrics)),
        ),
        route("/healthz", Needs::any(Open), get(ops::healthz)),
        route("/readyz", Needs::any(Open), get(ops::readyz)),
        route("/", Needs::any(Open), compressed(get(web::index))),
        route(
            "/assets/{file}",
            Needs::any(Open),
            compressed(get(web::asset)),
        ),
    ]
}

/// Every route, the bulk import's included.
pub(crate) fn routes(limits: &Limits) -> Vec<Endpoint> {
    let mut routes = timed_routes(limits);
    routes.push(bulk());
    routes
}

/// Every route's path.
#[cfg(test)]
pub(crate) fn route_paths() -> Vec<&'static str> {
    routes(&Limits::default()).iter().map(|r| r.path).collect()
}

/// What each route template needs, for [`authenticate`].
type NeedsByRoute = Arc<std::collections::HashMap<&'static str, Needs>>;

fn needs_by_route(routes: &[Endpoint]) -> std::collections::HashMap<&'static str, Needs> {
    routes.iter().map(|r| (r.path, r.needs)).collect()
}

/// A request the server would not (or could not in time) handle.
async fn refused(e: tower::BoxError) -> ApiError {
    if e.is::<tower::load_shed::error::Overloaded>() {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Overloaded,
            "too many requests in flight; try again shortly",
        )
    } else if e.is::<tower::timeout::error::Elapsed>() {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Timeout,
            "the request took longer than the domain allows",
        )
    } else {
        ApiError::internal(e)
    }
}

/// Who is calling, whether they may, and whether they are within their
/// rate; before any handler, so a refused request changes nothing.
async fn authenticate(
    State((node, needs)): State<(Arc<Node>, NeedsByRoute)>,
    mut request: Request,
    next: Next,
) -> Response {
    use crate::security::auth::{Principal, UNROUTED};
    let auth = &node.auth;
    let needs = request
        .extensions()
        .get::<MatchedPath>()
        .and_then(|p| needs.get(p.as_str()))
        .unwrap_or(&UNROUTED)
        .of(request.method());
    let who = if auth.enabled() {
        match auth.identify(request.headers().get(header::AUTHORIZATION)) {
            Ok(who) => who,
            Err(e) => return challenge(e),
        }
    } else {
        Principal::Anonymous
    };
    if let Err(e) = auth.allow(&who, needs, &node.cluster.me) {
        return challenge(e);
    }
    // The rates and the requests in flight are per token: members and
    // (where no token is required) anonymous callers are bounded only by
    // the domain's requests in flight.
    let _in_flight = match &who {
        Principal::Client { name, .. } => match auth.spend(name).and_then(|()| auth.enter(name)) {
            Ok(in_flight) => Some(in_flight),
            Err(e) => return challenge(e),
        },
        _ => None,
    };
    // The handlers that log who asked, or answer by who asks, read it here.
    request.extensions_mut().insert(who);
    next.run(request).await
}

/// A refusal as HTTP: 401 with the challenge HTTP asks for, 403, or 429
/// with `Retry-After` (whole seconds, rounded up).
pub(super) fn challenge(refusal: Refusal) -> Response {
    let extra = match &refusal {
        Refusal::Unauthorized(_) => Some((
            header::WWW_AUTHENTICATE,
            "Bearer realm=\"xarchive\"".to_owned(),
        )),
        Refusal::RateLimited { retry_after } => Some((
            header::RETRY_AFTER,
            retry_after.as_millis().max(1).div_ceil(1000).to_string(),
        )),
        Refusal::InFlight { .. } => Some((header::RETRY_AFTER, "1".to_owned())),
        Refusal::Forbidden(_) | Refusal::NotHome { .. } => None,
    };
    let mut response = ApiError::from(refusal).into_response();
    if let Some((name, value)) = extra {
        if let Ok(value) = header::HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// The page served by one domain reads every domain, and writes at the one
/// that holds or will hold a record: the cluster's own origins (its
/// domains' advertised addresses) may call everything, any other origin
/// only read (GET). So a foreign page open in an archivist's browser
/// cannot make it write or delete, even at a domain that asks for no
/// token (and a token is kept per tab, for the page's own origin only).
fn cors(node: Arc<Node>) -> tower_http::cors::CorsLayer {
    use axum::http::{header, HeaderValue, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let allowed = move |origin: &HeaderValue, parts: &axum::http::request::Parts| {
        let method = parts
            .headers
            .get(header::ACCESS_CONTROL_REQUEST_METHOD)
            .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
            .unwrap_or_else(|| parts.method.clone());
        matches!(method, Method::GET | Method::HEAD)
            || origin
                .to_str()
                .is_ok_and(|origin| node.cluster.origins().iter().any(|o| o == origin))
    };
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(allowed))
        .allow_methods([Method::GET, Method::PUT, Method::DELETE, Method::OPTIONS])
        .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION])
        .expose_headers([
            header::HeaderName::from_static(crate::wire::EPOCH_HEADER),
            header::HeaderName::from_static(crate::wire::VERSION_HEADER),
            header::HeaderName::from_static(crate::wire::FROM_VERSION_HEADER),
            header::HeaderName::from_static(crate::wire::KIND_HEADER),
        ])
        .max_age(std::time::Duration::from_mins(10))
}

async fn route_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::RouteNotFound,
        "no such route",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
        "this route does not take that method",
    )
}

/// Counts requests and their latency by route template and status.
async fn observe(State(node): State<Arc<Node>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    #[test]
    fn routes_need_what_they_should() {
        let table = needs_by_route(&routes(&Limits::default()));
        let need = |method: Method, path: &str| {
            table
                .get(path)
                .unwrap_or(&crate::security::auth::UNROUTED)
                .of(&method)
        };
        assert_eq!(need(Method::GET, "/healthz"), Need::Open);
        assert_eq!(need(Method::GET, "/readyz"), Need::Open);
        assert_eq!(need(Method::GET, "/assets/{file}"), Need::Open);
        assert_eq!(need(Method::PUT, "/v1/archives/{id}"), Need::Write);
        assert_eq!(need(Method::DELETE, "/v1/archives/{id}"), Need::Write);
        assert_eq!(need(Method::POST, BULK), Need::Write);
        assert_eq!(need(Method::GET, "/v1/archives/{id}"), Need::MemberOrRead);
        assert_eq!(need(Method::GET, "/v1/filter/delta"), Need::MemberOrRead);
        assert_eq!(need(Method::GET, "/v1/lookup/{id}"), Need::Read);
        assert_eq!(need(Method::GET, "unmatched"), Need::Read);
        assert_eq!(need(Method::GET, "/metrics"), Need::Metrics);
        assert_eq!(need(Method::POST, "/v1/search"), Need::MemberOrSearch);
        assert_eq!(need(Method::GET, "/v1/audit"), Need::Audit);
        assert_eq!(need(Method::GET, "/v1/backup"), Need::Backup);
        assert_eq!(need(Method::POST, "/v1/requests"), Need::Clerk);
        assert_eq!(need(Method::GET, "/v1/requests/{id}"), Need::Clerk);
        assert_eq!(need(Method::POST, "/v1/peer/requests"), Need::Member);
        assert_eq!(
            need(Method::POST, "/v1/requests/{id}/certificate"),
            Need::Clerk
        );
        assert_eq!(need(Method::GET, "/v1/certificates/{code}"), Need::Open);
        assert_eq!(
            need(Method::POST, "/v1/reviews/{receiving}/{request}"),
            Need::Reviewer
        );
        assert_eq!(need(Method::GET, "/v1/relay"), Need::Member);
        assert_eq!(need(Method::GET, "/v1/filter/keys"), Need::Member);
        assert_eq!(need(Method::OPTIONS, "/v1/backup"), Need::Open);
    }
}
