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
        for (path, item) in &mut doc.paths.paths {
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
        let mut doc = match serde_json::to_value(ApiDoc::openapi()) {
            Ok(doc) => doc,
            Err(e) => return format!("{{\"error\": \"{e}\"}}"),
        };
        state_constraints(&mut doc);
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    })
}

/// Text that is not only white space (as Rust's `str::trim` reads it): at
/// least one character outside Unicode's `White_Space`.
const NOT_BLANK: &str = "[^\\u0009-\\u000D\\u0020\\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";

/// An archive ID as `local/id.rs` takes it: no control character
/// (Unicode's Cc), not `.` or `..`. Its length is 1..=256 bytes of
/// UTF-8; `maxLength` counts characters, so the document says 256 and
/// the description says bytes.
const ARCHIVE_ID: &str = "^(?:[^.\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*|\\.[^.\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*|\\.\\.[^\\u0000-\\u001F\\u007F-\\u009F]+)$";

/// The rules the server applies to what it is sent, written into the
/// document where utoipa's attributes cannot say them (patterns, lengths,
/// ranges, a reason required with a refusal), so that a client generated
/// from it sends nothing the server refuses for its form. What a schema
/// cannot say (an identity number's check digit, a key type the cluster
/// declares) is in the descriptions; `tests/schemathesis.rs` checks the
/// document against the server both ways.
fn state_constraints(doc: &mut serde_json::Value) {
    use serde_json::json;
    let archive_id = json!({
        "type": "string", "minLength": 1, "maxLength": 256, "pattern": ARCHIVE_ID,
        "description": "An archive ID: 1 to 256 bytes of UTF-8 without control characters, not `.` or `..`"
    });
    let domain_name = json!({
        "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$",
        "description": "A domain's name: 1 to 64 of A-Z a-z 0-9 - _"
    });
    let text = |required: bool, what: &str| {
        let mut schema = json!({
            "type": "string", "maxLength": 1024,
            "description": format!("{what}: at most 1024 bytes of UTF-8{}", if required { ", not only white space" } else { "" })
        });
        if required {
            schema["pattern"] = json!(NOT_BLANK);
        }
        schema
    };
    let parameter = |doc: &mut serde_json::Value,
                     path: &str,
                     method: &str,
                     name: &str,
                     schema: &serde_json::Value| {
        if let Some(list) = doc["paths"][path][method]["parameters"].as_array_mut() {
            for p in list.iter_mut().filter(|p| p["name"] == name) {
                p["schema"] = schema.clone();
            }
        }
    };
    for (path, methods) in [
        ("/v1/archives/{id}", &["get", "put", "delete"][..]),
        ("/v1/contains/{id}", &["get"]),
        ("/v1/lookup/{id}", &["get"]),
        ("/v1/route/{id}", &["get"]),
    ] {
        for method in methods {
            parameter(doc, path, method, "id", &archive_id);
        }
    }
    // Rust's u64 (and usize): what a query's number may be at most.
    let unsigned = |description: &str| json!({"type": "integer", "minimum": 0u64, "maximum": u64::MAX, "description": description});
    parameter(
        doc,
        "/v1/audit",
        "get",
        "limit",
        &unsigned("At most this many entries, 1 to 1000 (0 is taken as 1, more as 1000)"),
    );
    for (path, names) in [
        ("/v1/filter/delta", &["epoch", "since"][..]),
        ("/v1/filter/keys/delta", &["epoch", "since"]),
        ("/v1/relay", &["relay", "from"]),
    ] {
        for name in names {
            parameter(
                doc,
                path,
                "get",
                name,
                &unsigned("An unsigned 64-bit number"),
            );
        }
    }
    parameter(
        doc,
        "/v1/archives",
        "get",
        "limit",
        &json!({"type": "integer", "minimum": 1, "maximum": 10000, "description": "IDs per page, 1 to 10 000 (default 1000)"}),
    );
    parameter(
        doc,
        "/v1/audit",
        "get",
        "since",
        &json!({
            "description": "Entries from this time on: an RFC 3339 time, or microseconds since the Unix epoch (what `next` gives)",
            "oneOf": [
                {"type": "string", "format": "date-time"},
                {"type": "string", "pattern": "^\\+?[0-9]{1,19}$"}
            ]
        }),
    );
    parameter(
        doc,
        "/v1/certificates/{code}",
        "get",
        "code",
        &json!({
            "type": "string", "pattern": "^(?:[A-Za-z0-9_-]{1,64}\\.)?[- ]*(?:[0-9A-Fa-f][- ]*){20}$",
            "description": "A verification code as printed: the issuing archive, a dot and 20 hex digits (ARCHIVE.XXXX-XXXX-XXXX-XXXX-XXXX; dashes and spaces in the hex part are left out, its case does not matter), or the 20 hex digits alone of a copy's code of before"
        }),
    );
    for path in ["/v1/copies/{name}", "/v1/copies/{name}/keys"] {
        parameter(doc, path, "get", "name", &domain_name);
    }
    parameter(doc, "/v1/relay", "get", "asker", &domain_name);
    let schemas = &mut doc["components"]["schemas"];
    schemas["NewRequest"]["properties"]["applicant_name"] = text(true, "The applicant's name");
    schemas["NewRequest"]["properties"]["purpose"] = text(true, "What the copies are for");
    schemas["NewRequest"]["properties"]["records"] = json!({
        "type": ["array", "null"], "items": archive_id, "minItems": 1, "maxItems": 100,
        "description": "The records asked for, 1 to 100 archive numbers; absent or null: those a search by the applicant's identity number finds"
    });
    schemas["Decision"]["properties"]["reason"] = text(false, "Why; required to refuse");
    schemas["Decision"]["oneOf"] = json!([
        {"properties": {"approve": {"const": true}}},
        {"properties": {"approve": {"const": false}, "reason": {"pattern": NOT_BLANK}}, "required": ["reason"]}
    ]);
    // Set only by a member domain passing a client's search on (refused
    // from anyone else): not part of what a client sends.
    if let Some(properties) = schemas["SearchRequest"]["properties"].as_object_mut() {
        properties.remove("requester");
    }
    schemas["SearchRequest"]["additionalProperties"] = json!(false);
    if let Some(body) = doc["paths"]["/v1/contains"]["post"]["requestBody"]["content"]
        ["application/json"]
        .as_object_mut()
    {
        body.insert(
            "schema".into(),
            json!({"type": "array", "items": archive_id}),
        );
    }
    if let Some(body) = doc["paths"]["/v1/archives/_bulk"]["post"]["requestBody"]["content"]
        ["application/x-ndjson"]
        .as_object_mut()
    {
        body.insert(
            "schema".into(),
            json!({"type": "string", "pattern": "[^\\t\\n\\f\\r ]"}),
        );
    }
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
            name: "A".parse().unwrap(),
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
