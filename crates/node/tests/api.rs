//! Handlers tested in-process with `tower::ServiceExt::oneshot`.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use xarchive_node::{Node, NodeConfig};
use xarchive_testkit::digest;

struct App {
    node: Arc<Node>,
    /// Keeps the node's background work (its coordinator) running.
    _background: xarchive_node::shutdown::CancellationToken,
    _dir: tempfile::TempDir,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }
}

fn app_with(f: impl FnOnce(&mut NodeConfig)) -> App {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig {
        name: "A".parse().unwrap(),
        data: dir.path().join("A"),
        ..NodeConfig::default()
    };
    config.filter.expected_items = 10_000;
    f(&mut config);
    let node = Node::open(config, "http://127.0.0.1:1").unwrap();
    let background = xarchive_node::shutdown::CancellationToken::new();
    node.start(&background);
    App {
        node,
        _background: background,
        _dir: dir,
    }
}

fn app() -> App {
    app_with(|_| {})
}

/// Percent-encodes an ID for a path segment.
fn enc(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC).to_string()
}

impl App {
    async fn call(&self, method: Method, uri: &str, body: impl Into<Body>) -> Reply {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(body.into())
            .unwrap();
        let response = xarchive_node::router(self.node.clone())
            .oneshot(request)
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn put(&self, id: &str, body: Value) -> Reply {
        self.call(
            Method::PUT,
            &format!("/v1/archives/{}", enc(id)),
            body.to_string(),
        )
        .await
    }

    /// Everything a bad request must leave untouched: the store's file,
    /// the published filter, and the filter's position (as digests, to
    /// keep failure messages short).
    async fn state(&self) -> (u64, u64, String) {
        let store = std::fs::read(self.node.config().data.join("records.redb")).unwrap();
        let filter = self.call(Method::GET, "/v1/filter", Body::empty()).await;
        let position = format!("{:?}", self.node.domain().position());
        (digest(&store), digest(&filter.body), position)
    }
}

#[tokio::test]
async fn records_round_trip_with_chinese_and_symbol_ids() {
    let app = app();
    for id in ["J001-WS·2023-Y-0001", "档案/2024/001", "a b?c#d%e"] {
        let r = app
            .put(
                id,
                json!({"title": "会议纪要", "metadata": {"year": 2023}, "content": "aGVsbG8="}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json());
        assert_eq!(r.json()["id"], id);
        assert_eq!(r.json()["domain"], "A");

        let r = app.put(id, json!({"title": "v2"})).await;
        assert_eq!(r.status, StatusCode::OK);

        let r = app
            .call(
                Method::GET,
                &format!("/v1/archives/{}", enc(id)),
                Body::empty(),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let record = r.json();
        assert_eq!(record["title"], "v2");
        assert!(record["created_at"].as_str().unwrap() <= record["updated_at"].as_str().unwrap());

        let r = app
            .call(
                Method::GET,
                &format!("/v1/contains/{}", enc(id)),
                Body::empty(),
            )
            .await;
        assert_eq!(r.json()["maybe"], true);
    }
    let r = app
        .call(
            Method::DELETE,
            &format!("/v1/archives/{}", enc("档案/2024/001")),
            Body::empty(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = app
        .call(
            Method::GET,
            &format!("/v1/archives/{}", enc("档案/2024/001")),
            Body::empty(),
        )
        .await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let r = app.call(Method::GET, "/v1/archives", Body::empty()).await;
    assert_eq!(r.json()["ids"], json!(["J001-WS·2023-Y-0001", "a b?c#d%e"]));
    assert!(app
        .call(Method::GET, "/v1/filter/verify", Body::empty())
        .await
        .json()["consistent"]
        .as_bool()
        .unwrap());
}

#[tokio::test]
async fn bad_requests_get_their_code_and_change_nothing() {
    let app = app_with(|c| c.limits.max_content_bytes = 1024);
    app.put("kept", json!({"title": "t"})).await;
    let before = app.state().await;
    let long_id = "x".repeat(257);
    let cases: Vec<(Method, String, Body, StatusCode, &str)> = vec![
        (
            Method::PUT,
            "/v1/archives/a".into(),
            "{not json".into(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            Method::PUT,
            "/v1/archives/a".into(),
            "[1,2]".into(),
            StatusCode::BAD_REQUEST,
            "invalid_record",
        ),
        (
            Method::PUT,
            "/v1/archives/a".into(),
            r#"{"title":"t","metadata":[1]}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_record",
        ),
        (
            Method::PUT,
            "/v1/archives/a".into(),
            r#"{"title":"t","colour":1}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_record",
        ),
        (
            Method::PUT,
            "/v1/archives/a".into(),
            r#"{"title":"t","content":"***"}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_record",
        ),
        (
            Method::PUT,
            "/v1/archives/a".into(),
            format!(r#"{{"title":"t","content":"{}"}}"#, "A".repeat(2000)).into(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "content_too_large",
        ),
        (
            Method::PUT,
            "/v1/archives/a".into(),
            vec![b' '; 200_000].into(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
        ),
        (
            Method::PUT,
            format!("/v1/archives/{long_id}"),
            r#"{"title":"t"}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_id",
        ),
        (
            Method::PUT,
            "/v1/archives/a%0Ab".into(),
            r#"{"title":"t"}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_id",
        ),
        (
            Method::PUT,
            "/v1/archives/%FF".into(),
            r#"{"title":"t"}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_id",
        ),
        (
            Method::DELETE,
            "/v1/archives/absent".into(),
            Body::empty(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::GET,
            "/v1/filter/delta?epoch=x&since=1".into(),
            Body::empty(),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            Method::GET,
            "/v1/filter/delta?since=1".into(),
            Body::empty(),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            Method::GET,
            "/v1/filter/delta?epoch=1&since=0".into(),
            Body::empty(),
            StatusCode::CONFLICT,
            "snapshot_required",
        ),
        (
            Method::POST,
            "/v1/contains".into(),
            r#"{"ids":1}"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_record",
        ),
        (
            Method::POST,
            "/v1/contains".into(),
            r#"["ok","a\u0001"]"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_id",
        ),
        (
            Method::GET,
            "/v1/archives?limit=0".into(),
            Body::empty(),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            Method::GET,
            "/v1/nothing".into(),
            Body::empty(),
            StatusCode::NOT_FOUND,
            "route_not_found",
        ),
        (
            Method::PATCH,
            "/v1/archives/a".into(),
            Body::empty(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
    ];
    for (method, uri, body, status, code) in cases {
        let r = app.call(method.clone(), &uri, body).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (status, code),
            "{method} {uri}: {}",
            r.json()
        );
        assert!(!r.json()["message"].as_str().unwrap().is_empty());
        assert_eq!(
            app.state().await,
            before,
            "{method} {uri} changed the state"
        );
    }
}

#[tokio::test]
async fn bulk_reports_each_line_and_commits_the_good_ones() {
    let app = app();
    let body = [
        r#"{"id":"B-1","title":"one"}"#,
        "",
        r#"{"id":"B-2","title":"two","metadata":{"k":"v"}}"#,
        r#"{"id":"","title":"empty id"}"#,
        "{broken",
        r#"{"id":"B-1","title":"one again"}"#,
    ]
    .join("\n");
    let r = app.call(Method::POST, "/v1/archives/_bulk", body).await;
    assert_eq!(r.status, StatusCode::OK);
    let report = r.json();
    assert_eq!(
        report["summary"],
        json!({"lines": 5, "created": 2, "replaced": 1, "failed": 2, "beyond_limit": 0})
    );
    let statuses: Vec<(u64, u64)> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["line"].as_u64().unwrap(), r["status"].as_u64().unwrap()))
        .collect();
    assert_eq!(statuses, [(1, 201), (2, 201), (3, 400), (4, 400), (5, 200)]);
    assert_eq!(report["results"][2]["code"], "invalid_id");
    assert_eq!(report["results"][3]["code"], "invalid_json");
    let stats = app
        .call(Method::GET, "/v1/stats", Body::empty())
        .await
        .json();
    assert_eq!(stats["records"], 2);
    assert_eq!(stats["filter"]["items"], 2);
}

#[tokio::test]
async fn bulk_skips_lines_past_the_limit() {
    let app = app_with(|c| c.limits.max_bulk_lines = 3);
    let body: String = (0..5)
        .map(|i| format!("{{\"id\":\"L-{i}\",\"title\":\"t\"}}\n"))
        .collect();
    let report = app
        .call(Method::POST, "/v1/archives/_bulk", body)
        .await
        .json();
    assert_eq!(report["summary"]["created"], 3);
    assert_eq!(report["summary"]["beyond_limit"], 2);
}

#[tokio::test]
async fn filter_snapshot_and_delta_track_writes() {
    let app = app();
    app.put("D-1", json!({"title": "t"})).await;
    let snap = app.call(Method::GET, "/v1/filter", Body::empty()).await;
    assert_eq!(snap.headers["x-xarchive-filter-kind"], "counting");
    let epoch: u64 = snap.headers["x-xarchive-epoch"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let version: u64 = snap.headers["x-xarchive-version"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut replica = xarchive_filter::BloomFilter::decode(&snap.body).unwrap();
    assert!(replica.contains("D-1"));

    app.put("D-2", json!({"title": "t"})).await;
    app.put("D-1", json!({"title": "changed"})).await;
    app.call(Method::DELETE, "/v1/archives/D-2", Body::empty())
        .await;
    let r = app
        .call(
            Method::GET,
            &format!("/v1/filter/delta?epoch={epoch}&since={version}"),
            Body::empty(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    replica
        .apply(&xarchive_filter::Delta::decode(&r.body).unwrap())
        .unwrap();
    let now = app.call(Method::GET, "/v1/filter", Body::empty()).await;
    assert_eq!(replica.encode(), now.body.to_vec());

    let r = app
        .call(
            Method::GET,
            &format!("/v1/filter/delta?epoch={epoch}&since={version}&ids=true"),
            Body::empty(),
        )
        .await;
    assert_eq!(
        r.headers["content-type"],
        "application/x-xarchive-delta-ids"
    );
    let len = u32::from_le_bytes(r.body[..4].try_into().unwrap()) as usize;
    let ids = std::str::from_utf8(&r.body[4 + len..]).unwrap();
    assert_eq!(ids, "D-1\nD-2\n");

    let r = app
        .call(
            Method::POST,
            "/v1/contains",
            json!(["D-1", "D-2", "档案"]).to_string(),
        )
        .await;
    assert_eq!(r.json()["results"][0]["maybe"], true);
}

#[tokio::test]
async fn metrics_and_health_answer() {
    let app = app();
    app.put("M-1", json!({"title": "t"})).await;
    let r = app.call(Method::GET, "/metrics", Body::empty()).await;
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.contains("xarchive_records 1"), "{text}");
    assert!(text.contains("route=\"/v1/archives/{id}\""), "{text}");
    assert!(
        text.contains("xarchive_writes_total{outcome=\"created\"} 1"),
        "{text}"
    );
    let r = app.call(Method::GET, "/healthz", Body::empty()).await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn cuckoo_domains_publish_their_table() {
    let app = app_with(|c| c.filter.kind = xarchive_node::FilterKind::Cuckoo);
    app.put("C-1", json!({"title": "t"})).await;
    let snap = app.call(Method::GET, "/v1/filter", Body::empty()).await;
    assert_eq!(snap.headers["x-xarchive-filter-kind"], "cuckoo");
    assert!(xarchive_filter::CuckooFilter::decode(&snap.body)
        .unwrap()
        .contains("C-1"));
}

/// A domain sized for a million records but holding a few ships a filter
/// of mostly zeros: compressed by what the caller accepts, whole otherwise.
#[tokio::test]
async fn filters_are_compressed_as_the_caller_accepts() {
    let app = app_with(|c| c.filter.expected_items = 1_000_000);
    for n in 0..100 {
        let reply = app
            .call(
                Method::PUT,
                &format!("/v1/archives/C-{n}"),
                json!({"title": "t"}).to_string(),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED);
    }
    let fetch = |encoding: &'static str| {
        let router = xarchive_node::router(app.node.clone());
        async move {
            let request = Request::builder()
                .uri("/v1/filter")
                .header("accept-encoding", encoding)
                .body(Body::empty())
                .unwrap();
            let response = router.oneshot(request).await.unwrap();
            let encoding = response
                .headers()
                .get("content-encoding")
                .map(|v| v.to_str().unwrap().to_owned());
            let epoch = response.headers().get("x-xarchive-epoch").cloned();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (encoding, epoch.is_some(), body.len())
        }
    };
    let (none, has_epoch, raw) = fetch("identity").await;
    assert_eq!((none, has_epoch), (None, true));
    assert!(raw > 1_000_000, "{raw}");
    for accepted in ["zstd", "br", "gzip"] {
        let (encoding, has_epoch, len) = fetch(accepted).await;
        assert_eq!(encoding.as_deref(), Some(accepted));
        assert!(has_epoch, "the position headers stay");
        assert!(len * 10 < raw, "{accepted}: {len} bytes of {raw}");
    }
}

#[tokio::test]
async fn a_record_read_by_its_id_or_looked_up_names_its_identity_number_withheld_and_only_a_search_returns_it(
) {
    let app = app_with(|c| {
        c.keys.push(xarchive_node::KeyType {
            name: "cert".into(),
            visibility: xarchive_node::Visibility::Public,
            format: xarchive_node::KeyFormat::Text,
        });
    });
    let number = "11010519491231002X";
    let digits = &number[6..14];
    let withheld = |record: &Value, what: &str| {
        assert_eq!(
            record["keys_withheld"],
            json!(["id_card"]),
            "{what}: {record}"
        );
        // A public key type keeps its value.
        assert_eq!(record["keys"], json!({"cert": "C-7"}), "{what}: {record}");
        assert!(!record.to_string().contains(digits), "{what}: {record}");
    };
    let person =
        json!({"title": "人事档案", "keys": {"id_card": "11010519491231002x", "cert": "C-7"}});
    let r = app.put("P-1", person).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json());
    withheld(&r.json(), "the PUT's answer");
    app.put("P-2", json!({"title": "no keys"})).await;

    // Every ID listed, each read and looked up.
    let list = app
        .call(Method::GET, "/v1/archives?limit=10000", Body::empty())
        .await
        .json();
    assert_eq!(list["ids"], json!(["P-1", "P-2"]));
    for (path, field) in [("/v1/archives", None), ("/v1/lookup", Some("record"))] {
        for id in ["P-1", "P-2"] {
            let r = app
                .call(Method::GET, &format!("{path}/{id}"), Body::empty())
                .await;
            assert_eq!(r.status, StatusCode::OK, "{path}/{id}");
            let body = r.json();
            let record = field.map_or(&body, |f| &body[f]);
            if id == "P-1" {
                withheld(record, path);
            } else {
                assert!(record.get("keys_withheld").is_none(), "{record}");
            }
        }
    }

    // The search, audited, returns the number.
    let r = app
        .call(
            Method::POST,
            "/v1/search",
            json!({"key_type": "id_card", "value": number}).to_string(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    let found = &r.json()["records"][0];
    assert_eq!(found["keys"], json!({"cert": "C-7", "id_card": number}));
    assert!(found.get("keys_withheld").is_none(), "{found}");
}

#[tokio::test]
async fn bad_keys_in_a_put_or_a_bulk_line_are_refused_without_echoing_the_value() {
    let app = app();
    let before = app.state().await;
    let number = "11010519491231002X";
    let bad_keys = [
        (format!(r#""{number}""#), "keys must be an object"),
        ("110105194912310021".to_owned(), "keys must be an object"),
        (format!(r#"["{number}"]"#), "keys must be an object"),
        (
            "{\"id_card\": 110105194912310021}".to_owned(),
            "key id_card must be a string",
        ),
        (
            "{\"id_card\": 1.10105194912310021e17}".to_owned(),
            "key id_card must be a string",
        ),
        (
            format!(r#"{{"id_card": ["{number}"]}}"#),
            "key id_card must be a string",
        ),
        (
            format!(r#"{{"id_card": "{number}", "id_card": "110101199003071234"}}"#),
            r#"key type "id_card" given twice"#,
        ),
        (
            // A wrong check digit: refused after parsing, by what is wrong.
            r#"{"id_card": "110105194912310021"}"#.to_owned(),
            "wrong check digit",
        ),
    ];
    for (keys, why) in &bad_keys {
        let r = app
            .call(
                Method::PUT,
                "/v1/archives/P-1",
                format!(r#"{{"title":"t","keys":{keys}}}"#),
            )
            .await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (StatusCode::BAD_REQUEST, "invalid_record"),
            "{keys}"
        );
        let message = r.json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains(why), "{keys}: {message}");
        assert!(
            !r.json().to_string().contains("1101051949"),
            "{keys}: {message}"
        );
    }
    let body: String = bad_keys
        .iter()
        .map(|(keys, _)| format!("{{\"id\":\"B-1\",\"title\":\"t\",\"keys\":{keys}}}\n"))
        .collect();
    let r = app.call(Method::POST, "/v1/archives/_bulk", body).await;
    assert_eq!(r.status, StatusCode::OK);
    let report = r.json();
    assert_eq!(report["summary"]["failed"], bad_keys.len(), "{report}");
    for (result, (keys, why)) in report["results"].as_array().unwrap().iter().zip(&bad_keys) {
        assert_eq!(result["code"], "invalid_record", "{keys}: {result}");
        assert!(
            result["message"].as_str().unwrap().contains(why),
            "{keys}: {result}"
        );
    }
    assert!(!report.to_string().contains("1101051949"), "{report}");
    assert_eq!(app.state().await, before, "a refused key changed the state");
}

#[tokio::test]
async fn searches_and_contains_take_small_bodies_of_their_own() {
    let app = app_with(|c| c.limits.max_contains_ids = 10);
    // A search: 64 KiB, far below a record's limit.
    let padded = format!(
        r#"{{"key_type": "id_card", "value": "11010519491231002X"{}}}"#,
        " ".repeat(64 * 1024)
    );
    let r = app.call(Method::POST, "/v1/search", padded).await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
    );
    // contains: as many IDs as allowed, each of the longest, fit…
    let longest = "档".repeat(85);
    let ids = vec![longest.as_str(); 10];
    let r = app
        .call(Method::POST, "/v1/contains", json!(ids).to_string())
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    // …and a body much longer than they need is refused unread.
    let r = app
        .call(
            Method::POST,
            "/v1/contains",
            format!("[\"a\"{}]", " ".repeat(64 * 1024)),
        )
        .await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
    );
}

#[tokio::test]
async fn readyz_tells_anyone_only_that_the_domain_is_ready_and_stats_show_no_key_filter() {
    let app = app();
    let mut body = Value::Null;
    for _ in 0..100 {
        let r = app.call(Method::GET, "/readyz", Body::empty()).await;
        if r.status == StatusCode::OK {
            body = r.json();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Whether this domain is in the view read yet or not: no more fields.
    let fields: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(fields, ["domains", "ready"], "{body}");
    assert_eq!(body["ready"], true);
    let stats = app
        .call(Method::GET, "/v1/stats", Body::empty())
        .await
        .json();
    assert!(stats.get("filter").is_some(), "{stats}");
    assert!(stats.get("key_filter").is_none(), "{stats}");
}
