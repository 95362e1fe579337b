//! Archive numbers as people type them, at the API: a lookup reads what
//! was typed by the cluster's ID profile, finds IDs stored before the
//! profile by the form typed, suggests the nearest numbers held when it
//! finds nothing, and never says back an identity number typed instead.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;
use xarchive_node::wire::{KeyTypesBody, LookupBody};
use xarchive_node::{Node, NodeConfig};

struct App {
    node: Arc<Node>,
    _background: xarchive_node::shutdown::CancellationToken,
    _dir: tempfile::TempDir,
}

fn app() -> App {
    let dir = tempfile::tempdir().unwrap();
    let config = NodeConfig {
        name: "A".parse().unwrap(),
        data: dir.path().join("A"),
        ..NodeConfig::default()
    };
    let node = Node::open(config, "http://127.0.0.1:1").unwrap();
    let background = xarchive_node::shutdown::CancellationToken::new();
    node.start(&background);
    App {
        node,
        _background: background,
        _dir: dir,
    }
}

fn enc(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC).to_string()
}

impl App {
    async fn call(&self, method: Method, uri: &str, body: Value) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = xarchive_node::router(self.node.clone())
            .oneshot(request)
            .await
            .unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn put(&self, id: &str) {
        let (status, body) = self
            .call(
                Method::PUT,
                &format!("/v1/archives/{}", enc(id)),
                json!({"title": format!("title of {id}")}),
            )
            .await;
        assert!(status.is_success(), "{id}: {body}");
    }

    async fn lookup(&self, typed: &str) -> (StatusCode, Value) {
        // The lookup waits for the membership to be confirmed.
        for _ in 0..500 {
            let answer = self
                .call(
                    Method::GET,
                    &format!("/v1/lookup/{}", enc(typed)),
                    json!(null),
                )
                .await;
            if answer.1["code"] != "not_ready" {
                return answer;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the domain never became ready");
    }
}

#[tokio::test]
async fn a_number_typed_with_an_ascii_dot_spaces_or_full_width_digits_is_found() {
    let app = app();
    app.put("J201-CW·2010-Y-00042").await;
    for typed in [
        "J201-CW.2010-Y-00042",
        " J201-CW·2010-Y-00042",
        "\u{3000}J201-CW・2010-Y-00042 ",
        "J201-CW．２０１０-Y-00042",
    ] {
        let (status, body) = app.lookup(typed).await;
        assert_eq!(status, StatusCode::OK, "{typed:?}: {body}");
        let answer: LookupBody = serde_json::from_value(body).unwrap();
        assert_eq!(answer.record.unwrap().id.as_str(), "J201-CW·2010-Y-00042");
    }
}

#[tokio::test]
async fn an_id_stored_before_the_profile_is_found_as_typed_and_suggested_for_its_normalised_form() {
    let app = app();
    // Stored with an ASCII dot, as it was written before the profile.
    app.put("J201-CW.2010-Y-00099").await;
    let (status, body) = app.lookup("J201-CW.2010-Y-00099").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["record"]["id"], "J201-CW.2010-Y-00099");
    let (status, body) = app.lookup("J201-CW·2010-Y-00099").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["suggestions"], json!(["J201-CW.2010-Y-00099"]));
}

#[tokio::test]
async fn a_lookup_that_finds_nothing_suggests_the_nearest_numbers_this_domain_holds() {
    let app = app();
    for year in [2009, 2010, 2011] {
        for item in (0..300).step_by(7) {
            app.put(&format!("J201-CW·{year}-Y-{item:05}")).await;
        }
    }
    app.put("J305-WS·2020-D30-00001").await;

    // A slip in the item number: the numbers beside it.
    let (status, body) = app.lookup("J201-CW.2010-Y-00043").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["code"], "not_found");
    let answer: LookupBody = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(
        answer.suggestions.first().map(String::as_str),
        Some("J201-CW·2010-Y-00042"),
        "{body}"
    );
    assert!(answer.suggestions.len() <= 5);
    assert!(
        answer.message.unwrap().contains("J201-CW·2010-Y-00042"),
        "the message names them too"
    );

    // A slip in the year: found among the numbers sharing the fonds.
    let (_, body) = app.lookup("J201-CW·2012-Y-00287").await;
    let suggestions = body["suggestions"].as_array().cloned().unwrap_or_default();
    assert!(
        suggestions.contains(&json!("J201-CW·2011-Y-00287")),
        "{body}"
    );

    // Nothing near: no suggestions at all.
    let (status, body) = app.lookup("档案/1999/777").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.get("suggestions").is_none(), "{body}");
}

#[tokio::test]
async fn an_identity_number_typed_for_an_archive_number_is_neither_said_back_nor_suggested_from() {
    let app = app();
    // An archive number one edit from a valid identity number.
    app.put("11010519491231002Y").await;
    let number = "11010519491231002X";
    let (status, body) = app.lookup(number).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let text = body.to_string();
    assert!(!text.contains(number), "the number is said back: {text}");
    assert!(!text.contains("11010519491231002Y"), "{text}");
    assert_eq!(body["reads_as_key"], true);
    assert!(body["message"].as_str().unwrap().contains("search by key"));
}

#[tokio::test]
async fn the_key_types_answer_carries_the_id_profile_the_page_reads_with() {
    let app = app();
    let (status, body) = app.call(Method::GET, "/v1/keys", json!(null)).await;
    assert_eq!(status, StatusCode::OK);
    let answer: KeyTypesBody = serde_json::from_value(body).unwrap();
    assert_eq!(answer.id_profile.separator, "·");
}
