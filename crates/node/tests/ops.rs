//! The operators' side of `/metrics`: the cluster's gauges; the metrics
//! that the alert rules (`ops/prometheus/alerts.yml`, their tests) and the
//! Grafana dashboard (`ops/grafana/xarchive.json`) name, each of which a
//! domain must export; the dashboard's data source. scripts/check-ops.sh
//! runs these beside promtool's checks. Two domains share an in-process
//! hub; B's address refuses connections, so A's copy of B's filter stays
//! behind.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;
use xarchive_node::cluster::Hub;
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::{Node, NodeConfig};

/// Nothing listens there: connections are refused at once.
const UNREACHABLE: &str = "http://127.0.0.1:1";

struct Pair {
    a: Arc<Node>,
    /// Dropping B's node would end its registration.
    _b: Arc<Node>,
    b_stop: CancellationToken,
    _a_stop: CancellationToken,
    _dir: tempfile::TempDir,
}

fn open(hub: &Arc<Hub>, dir: &Path, name: &str) -> (Arc<Node>, CancellationToken) {
    let mut config = NodeConfig {
        name: name.parse().unwrap(),
        data: dir.join(name),
        ..NodeConfig::default()
    };
    config.filter.expected_items = 10_000;
    config.filter.fpr = 0.02;
    config.cluster.peer_timeout_ms = 500;
    let node = Node::open_in(config, hub.coordinator(), UNREACHABLE).unwrap();
    let stop = CancellationToken::new();
    node.start(&stop);
    (node, stop)
}

/// A and B registered on one hub; A has heard of B.
async fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::new();
    let (a, a_stop) = open(&hub, dir.path(), "A");
    let (b, b_stop) = open(&hub, dir.path(), "B");
    let pair = Pair {
        a,
        _b: b,
        b_stop,
        _a_stop: a_stop,
        _dir: dir,
    };
    pair.metrics_until(|m| m.contains("xarchive_peer_up{peer=\"B\"} 1"))
        .await;
    pair
}

impl Pair {
    async fn call(&self, method: Method, uri: &str, body: &str) -> (StatusCode, String) {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        let response = xarchive_node::router(self.a.clone())
            .oneshot(request)
            .await
            .unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    async fn metrics(&self) -> String {
        let (status, text) = self.call(Method::GET, "/metrics", "").await;
        assert_eq!(status, StatusCode::OK, "{text}");
        text
    }

    /// A's `/metrics` once `done` holds of it (within 10 s).
    async fn metrics_until(&self, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.metrics().await;
            if done(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "never came:\n{text}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The value of the sample `series` (name and labels, as written).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

/// Every series name `/metrics` shows, or would show once a family has a
/// sample: `# TYPE` lines give the names of their samples too.
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut parts = declared.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

/// Every `xarchive_…` name in `text`.
fn referenced(text: &str) -> BTreeSet<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("xarchive_") {
        if text[..at].ends_with(word) {
            continue;
        }
        let rest = &text[at..];
        let end = rest.find(|c: char| !word(c)).unwrap_or(rest.len());
        names.insert(rest[..end].to_owned());
    }
    names
}

fn ops_file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn every_metric_the_alerts_and_the_dashboard_name_is_exported() {
    let pair = pair().await;
    // A write and lookups, so that every family has a sample.
    let (status, body) = pair
        .call(Method::PUT, "/v1/archives/OPS-1", r#"{"title": "t"}"#)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    pair.call(Method::GET, "/v1/lookup/OPS-1", "").await;
    pair.call(Method::GET, "/v1/lookup/OPS-absent", "").await;
    let search = r#"{"key_type": "id_card", "value": "11010519491231002X"}"#;
    pair.call(Method::POST, "/v1/search", search).await;
    let exported = exported(&pair.metrics().await);

    for file in ["ops/prometheus/alerts.yml", "ops/grafana/xarchive.json"] {
        let named = referenced(&ops_file(file));
        assert!(named.len() >= 7, "{file} names only {named:?}");
        let missing: Vec<_> = named.difference(&exported).collect();
        assert!(
            missing.is_empty(),
            "{file} names metrics a domain does not export: {missing:?}\nexported: {exported:?}"
        );
    }
    // The alert tests feed only series that exist.
    let tested = referenced(&ops_file("ops/prometheus/alerts.test.yml"));
    let missing: Vec<_> = tested.difference(&exported).collect();
    assert!(missing.is_empty(), "alerts.test.yml feeds {missing:?}");
}

#[tokio::test]
async fn a_copy_that_cannot_be_pulled_shows_a_growing_lag_while_its_peer_is_registered() {
    let pair = pair().await;
    let lag = "xarchive_replica_lag_seconds{peer=\"B\"}";
    let first = sample(&pair.metrics().await, lag).expect("a lag for B");
    let text = pair
        .metrics_until(|m| sample(m, lag).is_some_and(|later| later >= first + 0.2))
        .await;
    assert_eq!(sample(&text, "xarchive_coordinator_connected"), Some(1.0));
    assert_eq!(sample(&text, "xarchive_peer_up{peer=\"B\"}"), Some(1.0));
    assert_eq!(
        sample(&text, "xarchive_filter_target_false_positive_rate"),
        Some(0.02)
    );
    // Behind for the relay's grace period (1 s): pulled from B itself,
    // again and again, and counted.
    let grace = "xarchive_replica_grace_pulls_total{peer=\"B\"}";
    pair.metrics_until(|m| sample(m, grace).is_some_and(|n| n >= 2.0))
        .await;

    // B leaves: A keeps it, marked down, still behind.
    pair.b_stop.cancel();
    let text = pair
        .metrics_until(|m| m.contains("xarchive_peer_up{peer=\"B\"} 0"))
        .await;
    assert!(sample(&text, lag).is_some_and(|l| l > 0.0), "{text}");
}

/// Every object under `value` that has a `key`, with its value there.
fn every<'a>(value: &'a serde_json::Value, key: &str, found: &mut Vec<&'a serde_json::Value>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(v) = map.get(key) {
                found.push(v);
            }
            map.values().for_each(|v| every(v, key, found));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| every(v, key, found)),
        _ => {}
    }
}

#[test]
fn the_dashboard_imports_anywhere_taking_its_prometheus_from_a_variable() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&ops_file("ops/grafana/xarchive.json")).expect("JSON");
    assert!(dashboard["uid"].as_str().is_some_and(|u| !u.is_empty()));
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    let source = variables
        .iter()
        .find(|v| v["type"] == "datasource" && v["query"] == "prometheus")
        .expect("a Prometheus datasource variable");
    let uid = format!("${{{}}}", source["name"].as_str().expect("its name"));

    let mut sources = Vec::new();
    every(&dashboard, "datasource", &mut sources);
    assert!(sources.len() > 10, "{sources:?}");
    for s in sources {
        assert_eq!(s["type"], "prometheus", "{s}");
        assert_eq!(s["uid"], uid.as_str(), "{s}");
    }
    let mut panels = Vec::new();
    every(&dashboard, "panels", &mut panels);
    let panels: Vec<_> = panels
        .iter()
        .filter_map(|p| p.as_array())
        .flatten()
        .collect();
    let ids: BTreeSet<u64> = panels.iter().filter_map(|p| p["id"].as_u64()).collect();
    assert_eq!(
        ids.len(),
        panels.len(),
        "panel ids repeat or are not numbers"
    );
}

#[test]
fn every_alert_has_a_runbook_url_pointing_to_its_runbook_in_operations_md() {
    let rules = ops_file("ops/prometheus/alerts.yml");
    let operations = ops_file("docs/OPERATIONS.md");
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    for alert in alerts {
        let url = format!(
            "runbook_url: \"https://github.com/xarchive/xarchive/blob/main/docs/OPERATIONS.md#{}\"",
            alert.to_lowercase()
        );
        assert!(
            rules.contains(&url),
            "{alert} has no runbook_url to its runbook"
        );
        assert!(
            operations.contains(&format!("\n#### {alert}\n")),
            "docs/OPERATIONS.md has no runbook for {alert}"
        );
    }
}

#[tokio::test]
async fn the_process_figures_and_the_build_are_exported_in_one_exposition() {
    let pair = pair().await;
    let text = pair.metrics().await;
    for series in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        let value = sample(&text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"));
        assert!(value > 0.0, "{series} {value}");
    }
    let build = format!(
        "xarchive_build_info{{version=\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(sample(&text, &build), Some(1.0), "{text}");
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.ends_with("# EOF\n"));
}
