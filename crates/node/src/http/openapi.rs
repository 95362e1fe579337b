//! The OpenAPI 3.1 document of the HTTP API, generated from the handlers'
//! `#[utoipa::path]` attributes and the wire types, served at
//! `/v1/openapi.json` so that other systems can generate clients from it.
//! Tests keep it true: every route the router serves is in it, and real
//! responses match its schemas (`tests/openapi.rs`).

use crate::config::Limits;
use crate::security::auth::{Need, Needs};
use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::{archives, backup, lookup, ops, replication, requests, search, web};
use crate::wire::ErrorBody;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "xarchive",
        description = "One xarchive domain: its archive records, its filter for peers and \
                       the page, and lookups across the cluster. Errors are JSON with a \
                       stable `code` (docs/API.md lists them).",
    ),
    paths(
        archives::list,
        archives::get,
        archives::put,
        archives::delete,
        archives::bulk,
        replication::contains_one,
        replication::contains_many,
        replication::snapshot,
        replication::delta,
        replication::key_snapshot,
        replication::key_delta,
        replication::copy,
        replication::key_copy,
        replication::relay,
        replication::verify,
        lookup::lookup,
        lookup::route,
        lookup::cluster,
        search::key_types,
        search::search,
        search::audit,
        search::audit_verify,
        ops::stats,
        backup::backup,
        ops::metrics,
        ops::healthz,
        ops::readyz,
        openapi_json,
        web::index,
        web::asset,
        requests::submit,
        requests::list,
        requests::get,
        requests::deliver,
        requests::reviews,
        requests::decide,
        requests::certify,
        requests::certificate,
        requests::certificate_pdf,
        requests::check_certificate,
        requests::verify_certificate,
        requests::trust_list,
    ),
    components(schemas(ErrorBody)),
    modifiers(&Common),
    tags(
        (name = "records", description = "The records this domain holds"),
        (name = "requests", description = "Cross-archive requests for sealed copies and their certificates (异地查档、跨馆出证)"),
        (name = "lookup", description = "Finding a record in whichever domain holds it"),
        (name = "filter", description = "This domain's filter, for peers and the page"),
        (name = "operations", description = "Health, readiness, statistics, metrics"),
        (name = "page", description = "The browser page"),
    )
)]
struct ApiDoc;

/// Answers every route can give, added to each operation in one place:
/// authentication and rate limits (where a token may be required), load
/// shedding and time limits, internal errors.
struct Common;

impl Modify for Common {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A client token (`xarchive token create`) or a member domain's credential; \
                         needed only when the domain has tokens configured",
                    ))
                    .build(),
            ),
        );
        let error = |description: &str| -> RefOr<utoipa::openapi::Response> {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build()
                .into()
        };
        // Routes anyone may call, token or not, as the router declares them.
        let open: std::collections::HashSet<&str> = super::routes(&Limits::default())
            .iter()
            .filter(|r| r.needs == Needs::any(Need::Open))
            .map(|r| r.path)
            .collect();
        for (path, item) in doc.paths.paths.iter_mut() {
            let open = open.contains(path.as_str());
            for operation in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                let responses = &mut operation.responses.responses;
                if !open {
                    responses.entry("401".into()).or_insert_with(|| {
                        error("`unauthorized`: a token is required and none (or an unknown one) was sent")
                    });
                    responses.entry("403".into()).or_insert_with(|| {
                        error("`forbidden`: the token's role does not allow this")
                    });
                    responses.entry("429".into()).or_insert_with(|| {
                        error("`rate_limited`: the token's rate is used up; `Retry-After` says when to come back")
                    });
                    operation.security =
                        Some(vec![utoipa::openapi::security::SecurityRequirement::new(
                            "token",
                            Vec::<String>::new(),
                        )]);
                }
                responses.entry("503".into()).or_insert_with(|| {
                    error("`overloaded` (too many requests in flight) or `timeout`")
                });
                responses
                    .entry("500".into())
                    .or_insert_with(|| error("`internal`: the domain failed; its log says why"));
            }
        }
    }
}

/// The document as JSON, built once.
pub(crate) fn document() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        ApiDoc::openapi()
            .to_pretty_json()
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    })
}

/// `GET /v1/openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json"))
)]
pub async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], document()).into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use axum::body::Body;
    use axum::http::{Method, Request, StatusCode};
    use tower::ServiceExt;

    use super::document;
    use crate::config::NodeConfig;
    use crate::http::{route_paths, router};
    use crate::node::Node;
    use crate::shutdown::CancellationToken;

    /// `(method, path)` of every operation in the document.
    fn documented() -> BTreeSet<(String, String)> {
        let doc: serde_json::Value =
            serde_json::from_str(document()).expect("the document is JSON");
        let mut out = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in ["get", "put", "post", "delete"] {
                if item.get(method).is_some() {
                    out.insert((method.to_uppercase(), path.clone()));
                }
            }
        }
        out
    }

    #[tokio::test]
    async fn every_route_the_router_serves_is_in_the_document_and_nothing_else_is() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = NodeConfig {
            name: "A".into(),
            data: dir.path().join("A"),
            ..NodeConfig::default()
        };
        let node = Node::open(config, "http://127.0.0.1:1").expect("node");
        let background = CancellationToken::new();
        node.start(&background);
        // What the router serves: every method on every path it is built
        // from that is answered other than 405 (a 400 or a 404 of a
        // handler still means the route exists).
        let mut served = BTreeSet::new();
        for path in route_paths() {
            let uri = path.replace("{id}", "probe-1").replace("{file}", "app.js");
            for method in [Method::GET, Method::PUT, Method::POST, Method::DELETE] {
                let request = Request::builder()
                    .method(method.clone())
                    .uri(&uri)
                    .body(Body::empty())
                    .expect("request");
                let response = router(node.clone())
                    .oneshot(request)
                    .await
                    .expect("infallible");
                if response.status() != StatusCode::METHOD_NOT_ALLOWED {
                    served.insert((method.to_string(), path.to_owned()));
                }
            }
        }
        background.cancel();
        let documented = documented();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let not_served: Vec<_> = documented.difference(&served).collect();
        assert!(
            undocumented.is_empty() && not_served.is_empty(),
            "served but not in /v1/openapi.json: {undocumented:?}; \
             in the document but not served: {not_served:?}"
        );
    }
}
