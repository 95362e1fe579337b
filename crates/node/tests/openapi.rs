//! Real responses checked against `/v1/openapi.json`: every answer's
//! status is documented for its operation, its media type is one the
//! document names, and a JSON body matches the document's schema. Every
//! documented operation is exercised.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use xarchive_node::security::auth::{sha256_hex, Role, TokenEntry};
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::{Node, NodeConfig};

struct Checked {
    node: Arc<Node>,
    doc: Value,
    /// `(METHOD, path template)` of every operation called so far.
    exercised: BTreeSet<(String, String)>,
    _background: CancellationToken,
    _dir: tempfile::TempDir,
}

struct Reply {
    status: StatusCode,
    /// The media type of `Content-Type`, without parameters.
    media: Option<String>,
    body: Bytes,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

impl Checked {
    async fn start(f: impl FnOnce(&mut NodeConfig)) -> Checked {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = NodeConfig {
            name: "A".parse().unwrap(),
            data: dir.path().join("A"),
            ..NodeConfig::default()
        };
        config.filter.expected_items = 1_000;
        config.limits.max_content_bytes = 64;
        config.limits.max_contains_ids = 3;
        f(&mut config);
        let node = Node::open(config, "http://127.0.0.1:1").expect("node");
        let background = CancellationToken::new();
        node.start(&background);
        let mut checked = Checked {
            node,
            doc: Value::Null,
            exercised: BTreeSet::new(),
            _background: background,
            _dir: dir,
        };
        let reply = checked
            .raw(Method::GET, "/v1/openapi.json", Body::empty(), None)
            .await;
        assert_eq!(reply.status, StatusCode::OK);
        checked.doc = reply.json();
        assert_eq!(checked.doc["openapi"], "3.1.0");
        checked
    }

    async fn raw(&self, method: Method, uri: &str, body: Body, token: Option<&str>) -> Reply {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let response = xarchive_node::router(self.node.clone())
            .oneshot(request.body(body).expect("request"))
            .await
            .expect("infallible");
        let status = response.status();
        let media = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or_default().trim().to_owned());
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        Reply {
            status,
            media,
            body,
        }
    }

    /// Calls `method uri` (an instance of the documented `template`) and
    /// checks the answer against the document.
    async fn call(
        &mut self,
        method: Method,
        template: &str,
        uri: &str,
        body: impl Into<Body>,
        token: Option<&str>,
    ) -> Reply {
        let reply = self.raw(method.clone(), uri, body.into(), token).await;
        let operation = &self.doc["paths"][template][method.as_str().to_lowercase()];
        assert!(
            operation.is_object(),
            "{method} {template} is not in the document"
        );
        let status = reply.status.as_str().to_owned();
        let response = &operation["responses"][&status];
        assert!(
            response.is_object(),
            "{method} {uri} answered {status}, which the document does not list for \
             {template}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        if let Some(content) = response.get("content").and_then(Value::as_object) {
            let media = reply.media.clone().unwrap_or_default();
            let Some(media_type) = content.get(&media) else {
                panic!(
                    "{method} {uri} ({status}) answered {media:?}; the document names {:?}",
                    content.keys().collect::<Vec<_>>()
                )
            };
            if media == "application/json" {
                self.validate(&media_type["schema"], &reply, &format!("{method} {uri}"));
            }
        }
        self.exercised
            .insert((method.as_str().to_owned(), template.to_owned()));
        reply
    }

    /// `GET uri` without a token (`template` as in [`call`](Self::call)).
    async fn get(&mut self, template: &str, uri: &str) -> Reply {
        self.call(Method::GET, template, uri, Body::empty(), None)
            .await
    }

    /// Validates a JSON body against a schema of the document (its
    /// `$ref`s resolve against the document's components).
    fn validate(&self, schema: &Value, reply: &Reply, what: &str) {
        let mut root = json!({ "components": self.doc["components"] });
        if let (Some(root), Some(schema)) = (root.as_object_mut(), schema.as_object()) {
            root.extend(schema.clone());
        }
        let validator = jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("the schema for {what} does not compile: {e}"));
        let body: Value = serde_json::from_slice(&reply.body)
            .unwrap_or_else(|e| panic!("{what}: the body is not JSON: {e}"));
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{what} does not match the document: {errors:?}\nbody: {body}"
        );
    }

    /// Operations in the document not called yet.
    fn not_exercised(&self) -> Vec<(String, String)> {
        let mut missing = Vec::new();
        for (path, item) in self.doc["paths"].as_object().expect("paths") {
            for method in ["get", "put", "post", "delete"] {
                let key = (method.to_uppercase(), path.clone());
                if item.get(method).is_some() && !self.exercised.contains(&key) {
                    missing.push(key);
                }
            }
        }
        missing
    }
}

#[tokio::test]
async fn every_answer_matches_the_openapi_document() {
    use Method as M;
    let mut api = Checked::start(|_| {}).await;
    let record = json!({"title": "婚姻登记", "metadata": {"year": 1998}, "content": "aGVsbG8="});

    // Records.
    let r = api
        .call(
            M::PUT,
            "/v1/archives/{id}",
            "/v1/archives/J-1",
            record.to_string(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = api
        .call(
            M::PUT,
            "/v1/archives/{id}",
            "/v1/archives/J-1",
            record.to_string(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    for (body, status) in [
        ("{not json", StatusCode::BAD_REQUEST),
        (r#"{"title": 1}"#, StatusCode::BAD_REQUEST),
        (
            r#"{"title": "t", "content": "aGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8="}"#,
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
    ] {
        let r = api
            .call(M::PUT, "/v1/archives/{id}", "/v1/archives/J-2", body, None)
            .await;
        assert_eq!(r.status, status);
    }
    let r = api
        .call(
            M::PUT,
            "/v1/archives/{id}",
            "/v1/archives/..",
            record.to_string(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = api.get("/v1/archives/{id}", "/v1/archives/J-1").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api.get("/v1/archives/{id}", "/v1/archives/J-9").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = api.get("/v1/archives", "/v1/archives?limit=10").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api.get("/v1/archives", "/v1/archives?limit=0").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let bulk =
        "{\"id\": \"B-1\", \"title\": \"t\"}\nnot json\n{\"id\": \"..\", \"title\": \"t\"}\n";
    let r = api
        .call(
            M::POST,
            "/v1/archives/_bulk",
            "/v1/archives/_bulk",
            bulk,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["summary"]["failed"], 2);

    // The filter.
    let r = api.get("/v1/contains/{id}", "/v1/contains/J-1").await;
    assert_eq!(r.json()["maybe"], true);
    let r = api
        .call(
            M::POST,
            "/v1/contains",
            "/v1/contains",
            r#"["J-1", "J-9"]"#,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    for (body, status) in [
        (r#"["J-1", ".."]"#, StatusCode::BAD_REQUEST),
        (r#"["a", "b", "c", "d"]"#, StatusCode::PAYLOAD_TOO_LARGE),
    ] {
        let r = api
            .call(M::POST, "/v1/contains", "/v1/contains", body, None)
            .await;
        assert_eq!(r.status, status);
    }
    let r = api.get("/v1/filter", "/v1/filter").await;
    assert_eq!(r.status, StatusCode::OK);
    let epoch = api.node.domain().position().epoch;
    for (query, status) in [
        (format!("epoch={epoch}&since=0"), StatusCode::OK),
        (format!("epoch={epoch}&since=0&ids=true"), StatusCode::OK),
        (format!("epoch={}&since=0", epoch ^ 1), StatusCode::CONFLICT),
        ("epoch=x".to_owned(), StatusCode::BAD_REQUEST),
    ] {
        let uri = format!("/v1/filter/delta?{query}");
        let r = api.get("/v1/filter/delta", &uri).await;
        assert_eq!(r.status, status, "{uri}");
    }
    let r = api.get("/v1/filter/keys", "/v1/filter/keys").await;
    assert_eq!(r.status, StatusCode::OK);
    for (query, status) in [
        (format!("epoch={epoch}&since=0"), StatusCode::OK),
        (format!("epoch={}&since=0", epoch ^ 1), StatusCode::CONFLICT),
        (
            "epoch=1&since=0&ids=true".to_owned(),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let uri = format!("/v1/filter/keys/delta?{query}");
        let r = api.get("/v1/filter/keys/delta", &uri).await;
        assert_eq!(r.status, status, "{uri}");
    }
    // A domain alone holds no copies; a name that is no domain's is refused.
    for template in ["/v1/copies/{name}", "/v1/copies/{name}/keys"] {
        for (name, status, code) in [
            ("B", StatusCode::NOT_FOUND, "copy_not_held"),
            ("a%20b", StatusCode::BAD_REQUEST, "invalid_parameter"),
        ] {
            let uri = template.replace("{name}", name);
            let r = api.get(template, &uri).await;
            assert_eq!(
                (r.status, r.json()["code"].as_str()),
                (status, Some(code)),
                "{uri}"
            );
        }
    }
    let r = api.get("/v1/filter/verify", "/v1/filter/verify").await;
    assert_eq!(r.json()["consistent"], true);
    // A first read of the relay answers at once: no page, and where it ends.
    for (uri, status) in [
        ("/v1/relay?asker=peer", StatusCode::OK),
        ("/v1/relay?asker=peer&relay=x", StatusCode::BAD_REQUEST),
        ("/v1/relay?relay=0", StatusCode::BAD_REQUEST),
    ] {
        let r = api.get("/v1/relay", uri).await;
        assert_eq!(r.status, status, "{uri}");
    }

    // Lookups.
    for (uri, status) in [
        ("/v1/lookup/J-1", StatusCode::OK),
        ("/v1/lookup/J-1?strategy=broadcast", StatusCode::OK),
        ("/v1/lookup/J-9", StatusCode::NOT_FOUND),
        (
            "/v1/lookup/J-1?strategy=everywhere",
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let r = api.get("/v1/lookup/{id}", uri).await;
        assert_eq!(r.status, status, "{uri}");
    }
    let r = api.get("/v1/route/{id}", "/v1/route/J-1").await;
    assert_eq!(r.json()["local"], true);
    api.get("/v1/cluster", "/v1/cluster").await;

    // Searches by key, and their log.
    let r = api.get("/v1/keys", "/v1/keys").await;
    assert_eq!(r.json()["key_types"][0]["name"], "id_card");
    let person = json!({"title": "人事档案", "keys": {"id_card": "11010519491231002x"}});
    let r = api
        .call(
            M::PUT,
            "/v1/archives/{id}",
            "/v1/archives/P-1",
            person.to_string(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // A record read by its ID names its private keys withheld.
    assert_eq!(r.json()["keys_withheld"], json!(["id_card"]));
    for (body, status) in [
        (
            r#"{"key_type": "id_card", "value": "11010519491231002X"}"#,
            StatusCode::OK,
        ),
        (
            r#"{"key_type": "id_card", "value": "110105194912310021"}"#,
            StatusCode::BAD_REQUEST,
        ),
        (r#"{"key_type": "id_card"}"#, StatusCode::BAD_REQUEST),
        ("{not json", StatusCode::BAD_REQUEST),
    ] {
        let r = api
            .call(M::POST, "/v1/search", "/v1/search", body, None)
            .await;
        assert_eq!(r.status, status, "{body}");
    }
    for (uri, status) in [
        ("/v1/audit", StatusCode::OK),
        (
            "/v1/audit?since=2026-01-01T00:00:00Z&limit=1",
            StatusCode::OK,
        ),
        ("/v1/audit?since=yesterday", StatusCode::BAD_REQUEST),
    ] {
        let r = api.get("/v1/audit", uri).await;
        assert_eq!(r.status, status, "{uri}");
    }
    let r = api.get("/v1/audit/verify", "/v1/audit/verify").await;
    assert_eq!(r.json()["intact"], true);
    let r = api.get("/v1/backup", "/v1/backup").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body.starts_with(xarchive_node::backup::MAGIC));

    // Operations and the page.
    for path in [
        "/v1/stats",
        "/metrics",
        "/healthz",
        "/readyz",
        "/v1/openapi.json",
        "/",
    ] {
        let r = api.get(path, path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
    }
    for (uri, status) in [
        ("/assets/app.js", StatusCode::OK),
        ("/assets/style.css", StatusCode::OK),
        ("/assets/favicon.svg", StatusCode::OK),
        ("/assets/nothing.js", StatusCode::NOT_FOUND),
    ] {
        let r = api.get("/assets/{file}", uri).await;
        assert_eq!(r.status, status, "{uri}");
    }

    // A cross-archive request for a record held here, both sides.
    let ask = r#"{"applicant_id": "11010519491231002X", "applicant_name": "张三",
                  "purpose": "贷款", "records": ["J-1"]}"#;
    let r = api
        .call(M::POST, "/v1/requests", "/v1/requests", ask, None)
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let r = api.get("/v1/requests", "/v1/requests").await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api
        .get("/v1/requests/{id}", &format!("/v1/requests/{id}"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api.get("/v1/requests/{id}", "/v1/requests/00").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // Two parts from another archive: one refused, one approved.
    for request_id in ["00ff", "00fe"] {
        let delivery = serde_json::json!({
            "request_id": request_id, "receiving": "elsewhere", "applicant_digest": "00",
            "applicant_name": "张三", "purpose": "贷款", "records": ["J-1"],
        });
        let r = api
            .call(
                M::POST,
                "/v1/peer/requests",
                "/v1/peer/requests",
                delivery.to_string(),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.json()["state"], "in_review");
    }
    let r = api.get("/v1/reviews", "/v1/reviews").await;
    assert_eq!(r.status, StatusCode::OK);
    let refuse = r#"{"approve": false, "reason": "不是本人档案"}"#;
    for (path, status) in [
        ("/v1/reviews/elsewhere/00ff", StatusCode::OK),
        ("/v1/reviews/elsewhere/00ff", StatusCode::CONFLICT),
        ("/v1/reviews/elsewhere/01", StatusCode::NOT_FOUND),
    ] {
        let r = api
            .call(
                M::POST,
                "/v1/reviews/{receiving}/{request}",
                path,
                refuse,
                None,
            )
            .await;
        assert_eq!(r.status, status);
    }

    // Approved: its answer is sealed.
    let r = api
        .call(
            M::POST,
            "/v1/reviews/{receiving}/{request}",
            "/v1/reviews/elsewhere/00fe",
            r#"{"approve": true}"#,
            None,
        )
        .await;
    assert_eq!(r.json()["state"], "released");
    assert!(r.json()["sealed"].as_str().is_some_and(|s| !s.is_empty()));

    // Not yet answered, and unknown.
    for (uri, status) in [
        (
            format!("/v1/requests/{id}/certificate"),
            StatusCode::CONFLICT,
        ),
        ("/v1/requests/00/certificate".into(), StatusCode::NOT_FOUND),
    ] {
        let r = api
            .call(
                M::POST,
                "/v1/requests/{id}/certificate",
                &uri,
                Body::empty(),
                None,
            )
            .await;
        assert_eq!(r.status, status, "{uri}");
    }
    for template in [
        "/v1/requests/{id}/certificate",
        "/v1/requests/{id}/certificate.pdf",
    ] {
        let uri = template.replace("{id}", &id);
        let r = api.get(template, &uri).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{uri} before it is issued");
    }

    // This archive's own request, approved by its own reviewer, is
    // answered and certified; the certificate checks by its code and by
    // its payload.
    let r = api
        .call(
            M::POST,
            "/v1/reviews/{receiving}/{request}",
            &format!("/v1/reviews/A/{id}"),
            r#"{"approve": true}"#,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = api
            .get("/v1/requests/{id}", &format!("/v1/requests/{id}"))
            .await;
        if r.json()["status"] == "answered" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never answered: {}",
            r.json()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r = api
        .call(
            M::POST,
            "/v1/requests/{id}/certificate",
            &format!("/v1/requests/{id}/certificate"),
            Body::empty(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let code = r.json()["code"].as_str().unwrap().to_owned();
    let payload = r.json()["sheets"][0]["payload"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = api
        .get(
            "/v1/requests/{id}/certificate",
            &format!("/v1/requests/{id}/certificate"),
        )
        .await;
    assert_eq!(r.json()["code"], code);
    let r = api
        .get(
            "/v1/requests/{id}/certificate.pdf",
            &format!("/v1/requests/{id}/certificate.pdf"),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body.starts_with(b"%PDF"));
    for (uri, status) in [
        (format!("/v1/certificates/{code}"), StatusCode::OK),
        (
            "/v1/certificates/A.0000-0000-0000-0000-0000".into(),
            StatusCode::NOT_FOUND,
        ),
        (
            "/v1/certificates/0000-0000-0000-0000-0000".into(),
            StatusCode::NOT_FOUND,
        ),
        ("/v1/certificates/x".into(), StatusCode::BAD_REQUEST),
    ] {
        let r = api.get("/v1/certificates/{code}", &uri).await;
        assert_eq!(r.status, status, "{uri}");
    }
    for (body, status) in [
        (json!({ "payload": payload }), StatusCode::OK),
        (
            json!({ "payload": "XA1:NOTAPAYLOAD" }),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!({ "certificate": payload }), StatusCode::BAD_REQUEST),
    ] {
        let r = api
            .call(
                M::POST,
                "/v1/certificates/verify",
                "/v1/certificates/verify",
                body.to_string(),
                None,
            )
            .await;
        assert_eq!(r.status, status, "{body}");
    }
    let r = api.get("/v1/trust-list", "/v1/trust-list").await;
    assert_eq!(r.status, StatusCode::OK);

    let r = api
        .call(
            M::DELETE,
            "/v1/archives/{id}",
            "/v1/archives/J-1",
            Body::empty(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = api
        .call(
            M::DELETE,
            "/v1/archives/{id}",
            "/v1/archives/J-1",
            Body::empty(),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    let missing = api.not_exercised();
    assert!(
        missing.is_empty(),
        "documented but not exercised: {missing:?}"
    );
}

#[tokio::test]
async fn refusals_of_a_domain_with_tokens_match_the_document() {
    use Method as M;
    let reader = "xa_reader-token";
    let mut api = Checked::start(|config| {
        config.auth.tokens = vec![TokenEntry {
            name: "reader".into(),
            role: Role::Read,
            sha256: sha256_hex(reader),
            domain: None,
        }];
        config.auth.rate_per_second = 1;
        config.auth.rate_burst = 1;
    })
    .await;
    let r = api.get("/v1/stats", "/v1/stats").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = api
        .call(
            M::PUT,
            "/v1/archives/{id}",
            "/v1/archives/J-1",
            r#"{"title": "t"}"#,
            Some(reader),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // One request a second, a burst of one: the second in a row waits.
    let r = api
        .call(
            M::GET,
            "/v1/stats",
            "/v1/stats",
            Body::empty(),
            Some(reader),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api
        .call(
            M::GET,
            "/v1/stats",
            "/v1/stats",
            Body::empty(),
            Some(reader),
        )
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    // Open routes need no token.
    let r = api.get("/v1/openapi.json", "/v1/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn the_document_and_the_readme_list_every_error_code() {
    use strum::VariantArray;
    use xarchive_node::wire::ErrorCode;
    let api = Checked::start(|_| {}).await;
    let listed: BTreeSet<&str> = api.doc["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode is an enum of strings in the document")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let codes: BTreeSet<&str> = ErrorCode::VARIANTS.iter().map(|c| c.as_str()).collect();
    assert_eq!(listed, codes);
    let readme = include_str!("../../../README.md");
    let missing: Vec<&str> = codes
        .iter()
        .copied()
        .filter(|code| !readme.contains(&format!("`{code}`")))
        .collect();
    assert!(missing.is_empty(), "README.md lists no {missing:?}");
}
