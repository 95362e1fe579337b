//! Who may do what where, tried against real domain processes joined
//! through a real ZooKeeper with a cluster secret, each domain listing the
//! same tokens (as the docs advise), every one bound to archive A or C:
//! a token's role acts only at its home, elsewhere it only reads; the
//! holding archive's release policy decides what another archive's reader
//! gets of a record (and what the cache keeps); a member's search is
//! logged as the member who asked; a clerk's requests spend its searches
//! and name no holding archive before it answers; one token cannot take
//! every request slot of a domain.

use crate::common::{bin, create_token, http};

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use xarchive_node::security::auth::{AuthConfig, Authority};
use xarchive_testkit::{tempdir, DomainProcess, RedisServer, Spawn, TempDir, ZooKeeperServer};

/// The person every record here is about. Never printed.
const APPLICANT: &str = "11010519491231002X";

const ROLES: [&str; 7] = [
    "read", "write", "search", "audit", "backup", "clerk", "reviewer",
];

/// Archives A and C of one cluster, a token of every role bound to each
/// (`tokens["clerk-A"]`), and C holding a record its policy releases by
/// itself (`C-open`: an open marriage record) and one it keeps for review
/// (`C-kept`: a court record), both about [`APPLICANT`].
struct Cluster {
    a: DomainProcess,
    c: DomainProcess,
    tokens: BTreeMap<String, String>,
    secret: PathBuf,
    redis: Option<RedisServer>,
    _zk: ZooKeeperServer,
    _dir: TempDir,
}

impl Cluster {
    /// `auth` is added to each domain's `[auth]`; A caches other
    /// archives' records in a real Redis when `redis` is set.
    async fn start(auth: &str, redis: bool) -> Cluster {
        let zk = ZooKeeperServer::start();
        let dir = tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "a secret the archives of the cluster share\n").unwrap();
        let config = dir.path().join("domain.toml");
        std::fs::write(
            &config,
            format!("[auth]\nrate_per_second = 1000\nrate_burst = 2000\n{auth}\n"),
        )
        .unwrap();
        let mut tokens = BTreeMap::new();
        for role in ROLES {
            for home in ["A", "C"] {
                let name = format!("{role}-{home}");
                tokens.insert(name.clone(), create_token(&config, role, &name, Some(home)));
            }
        }
        let redis = redis.then(RedisServer::start);
        let spawn = |name: &str| {
            let mut spawn = Spawn::new(bin(), name, &dir.path().join(name))
                .args(["--config", config.to_str().unwrap()])
                .args(["--zk", &zk.connect_string(), "--cluster", "authority"])
                .args(["--session-timeout-ms", "3000"])
                .args(["--cluster-secret-file", secret.to_str().unwrap()])
                .args(["--expected-items", "10000"]);
            if let (Some(redis), "A") = (&redis, name) {
                spawn = spawn.args(["--cache", &redis.url()]);
            }
            spawn.start()
        };
        let (a, c) = (spawn("A"), spawn("C"));
        let cluster = Cluster {
            a,
            c,
            tokens,
            secret,
            redis,
            _zk: zk,
            _dir: dir,
        };
        cluster.wait_converged().await;
        for (id, category, content) in [
            ("C-open", "marriage", "结婚登记"),
            ("C-kept", "court", "配偶李四"),
        ] {
            let record = json!({
                "title": format!("{id} 的档案"),
                "metadata": {"category": category, "access": "open", "spouse": "李四"},
                "content": base64(content),
                "keys": {"id_card": APPLICANT},
            });
            let (status, body) = cluster
                .call(
                    &cluster.c,
                    "write-C",
                    Method::PUT,
                    &format!("/v1/archives/{id}"),
                    Some(record),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
        // A routes to C by its copy of C's filter.
        cluster
            .until(&cluster.a, "read-A", "/v1/route/C-kept", |b| {
                b["candidates"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|d| d == "C"))
            })
            .await;
        cluster
    }

    /// `method path` at `d` with token `name`: the status and the JSON
    /// answer (`null` when it is not JSON).
    async fn call(
        &self,
        d: &DomainProcess,
        name: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let token = self.tokens.get(name).map_or(name, String::as_str);
        send(d, token, method, path, body).await
    }

    /// `GET path` at `d` until `done` holds of its answer.
    async fn until(
        &self,
        d: &DomainProcess,
        name: &str,
        path: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = self.call(d, name, Method::GET, path, None).await;
            if status.is_success() && done(&body) {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "{path} at {}: {status} {body}",
                d.url
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until each archive sees the other up with a current copy.
    async fn wait_converged(&self) {
        let deadline = Instant::now() + Duration::from_mins(1);
        for d in [&self.a, &self.c] {
            let client = xarchive_node::ApiClient::with_options(
                &d.url,
                Duration::from_secs(30),
                Some(&self.tokens["read-A"]),
                None,
            )
            .unwrap();
            loop {
                let view = client.cluster().await;
                if view.as_ref().is_ok_and(|v| v.converged(2)) {
                    break;
                }
                assert!(Instant::now() < deadline, "never converged: {view:#?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Every entry of `d`'s audit log, read with its own audit token.
    async fn audit(&self, d: &DomainProcess, audit_token: &str) -> Vec<Value> {
        let (status, page) = self
            .call(d, audit_token, Method::GET, "/v1/audit", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        page["entries"].as_array().cloned().unwrap_or_default()
    }

    /// A's credential as a member of the cluster, made from the secret.
    fn credential_of_a(&self) -> String {
        let config = AuthConfig {
            cluster_secret_file: Some(self.secret.clone()),
            ..AuthConfig::default()
        };
        Authority::new(&config, "authority")
            .unwrap()
            .member_key()
            .unwrap()
            .credential("A")
    }
}

async fn send(
    d: &DomainProcess,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = http()
        .request(method, format!("{}{path}", d.url))
        .bearer_auth(token)
        .timeout(Duration::from_secs(30));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let reply = request.send().await.unwrap();
    let status = reply.status();
    let bytes = reply.bytes().await.unwrap();
    assert!(
        !String::from_utf8_lossy(&bytes).contains(APPLICANT),
        "{path} answered with the identity number"
    );
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Every route a token may be refused, with a body where it takes one and
/// the role it needs beyond reading (`None`: any role reads it).
fn routes(token: &str) -> Vec<(Method, String, Option<Value>, Option<&'static str>)> {
    let request = json!({
        "applicant_id": APPLICANT,
        "applicant_name": "张三",
        "purpose": "贷款",
        "records": ["C-open"],
    });
    vec![
        (Method::GET, "/v1/archives/C-open".into(), None, None),
        (Method::GET, "/v1/lookup/C-open".into(), None, None),
        (Method::GET, "/v1/route/C-open".into(), None, None),
        (Method::GET, "/v1/cluster".into(), None, None),
        (Method::GET, "/v1/stats".into(), None, None),
        (Method::GET, "/v1/filter".into(), None, None),
        (Method::GET, "/metrics".into(), None, None),
        (
            Method::PUT,
            format!("/v1/archives/new-by-{token}"),
            Some(json!({"title": "t"})),
            Some("write"),
        ),
        (
            Method::DELETE,
            "/v1/archives/A-none".into(),
            None,
            Some("write"),
        ),
        (
            Method::POST,
            "/v1/search".into(),
            Some(json!({"key_type": "id_card", "value": APPLICANT})),
            Some("search"),
        ),
        (Method::GET, "/v1/audit".into(), None, Some("audit")),
        (Method::GET, "/v1/audit/verify".into(), None, Some("audit")),
        (Method::GET, "/v1/backup".into(), None, Some("backup")),
        (Method::GET, "/v1/requests".into(), None, Some("clerk")),
        (
            Method::POST,
            "/v1/requests".into(),
            Some(request),
            Some("clerk"),
        ),
        (Method::GET, "/v1/requests/0abc".into(), None, Some("clerk")),
        (Method::GET, "/v1/reviews".into(), None, Some("reviewer")),
        (
            Method::POST,
            "/v1/reviews/C/0abc".into(),
            Some(json!({"approve": true, "reason": ""})),
            Some("reviewer"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_every_role_uses_its_role_only_at_its_home_archive_and_elsewhere_only_reads() {
    let s = Cluster::start("", false).await;
    for role in ROLES {
        for home in ["A", "C"] {
            let token = format!("{role}-{home}");
            for (method, path, body, needs) in routes(&token) {
                let (status, answer) = s.call(&s.a, &token, method.clone(), &path, body).await;
                let what = format!("{token} at A: {method} {path} → {status} {answer}");
                assert_ne!(status, StatusCode::UNAUTHORIZED, "{what}");
                match needs {
                    None => assert_ne!(status, StatusCode::FORBIDDEN, "{what}"),
                    Some(needed) if needed == role && home == "A" => {
                        assert_ne!(status, StatusCode::FORBIDDEN, "{what}");
                    }
                    Some(needed) => {
                        assert_eq!(status, StatusCode::FORBIDDEN, "{what}");
                        if needed == role {
                            let message = answer["message"].as_str().unwrap_or_default();
                            assert!(message.contains("belongs to archive C"), "{what}");
                        }
                    }
                }
            }
        }
    }
    // The refused writes changed nothing: only A's own writer wrote at A.
    let (_, ids) = s
        .call(&s.a, "read-A", Method::GET, "/v1/archives", None)
        .await;
    assert_eq!(ids["ids"], json!(["new-by-write-A"]), "{ids}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_archives_reader_gets_a_record_kept_for_review_only_as_its_catalogue_entry_and_the_cache_keeps_none(
) {
    let s = Cluster::start("", true).await;
    let whole = |r: &Value, id: &str| {
        r["id"] == id
            && r["metadata"]["spouse"] == "李四"
            && r["content"].is_string()
            && r.get("catalogue_only").is_none()
    };
    let entry = |r: &Value, id: &str| {
        r["id"] == id
            && r["title"] == format!("{id} 的档案")
            && r["domain"] == "C"
            && r["catalogue_only"] == true
            && r["metadata"] == json!({})
            && r.get("content").is_none()
    };
    // C's own tokens read both whole at C, by ID and by lookup.
    for role in ROLES {
        let token = format!("{role}-C");
        for id in ["C-open", "C-kept"] {
            let (_, r) = s
                .call(
                    &s.c,
                    &token,
                    Method::GET,
                    &format!("/v1/archives/{id}"),
                    None,
                )
                .await;
            assert!(whole(&r, id), "{token} at C: {r}");
            let (_, l) = s
                .call(&s.c, &token, Method::GET, &format!("/v1/lookup/{id}"), None)
                .await;
            assert!(whole(&l["record"], id), "{token} looking up at C: {l}");
        }
    }
    // A's tokens, at C or through A (a lookup passing through a peer),
    // read the released record whole and of the kept one its entry only;
    // three times each, so that the cache takes what it would keep.
    for role in ROLES {
        let token = format!("{role}-A");
        let (_, r) = s
            .call(&s.c, &token, Method::GET, "/v1/archives/C-kept", None)
            .await;
        assert!(entry(&r, "C-kept"), "{token} at C: {r}");
        let (_, r) = s
            .call(&s.c, &token, Method::GET, "/v1/archives/C-open", None)
            .await;
        assert!(whole(&r, "C-open"), "{token} at C: {r}");
        for _ in 0..3 {
            let (status, l) = s
                .call(&s.a, &token, Method::GET, "/v1/lookup/C-kept", None)
                .await;
            assert_eq!(status, StatusCode::OK, "{l}");
            assert!(
                entry(&l["record"], "C-kept"),
                "{token} looking up at A: {l}"
            );
            let (_, l) = s
                .call(&s.a, &token, Method::GET, "/v1/lookup/C-open", None)
                .await;
            assert!(
                whole(&l["record"], "C-open"),
                "{token} looking up at A: {l}"
            );
        }
    }
    // A search from A gets catalogue entries of C's records.
    let (status, found) = s
        .call(
            &s.a,
            "search-A",
            Method::POST,
            "/v1/search",
            Some(json!({"key_type": "id_card", "value": APPLICANT})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let records = found["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{found}");
    assert!(
        records.iter().all(|r| r["catalogue_only"] == true),
        "{found}"
    );
    // The cache at A holds C's released record and nothing of the kept one.
    let redis = s.redis.as_ref().unwrap();
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut connection)
        .await
        .unwrap();
    let mut values = Vec::new();
    for key in &keys {
        let value: Option<Vec<u8>> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut connection)
            .await
            .unwrap_or(None);
        values.extend(value);
    }
    let holds = |needle: &str| values.iter().any(|v| contains(v, needle.as_bytes()));
    assert!(
        holds("C-open 的档案") && holds("结婚登记"),
        "C-open is not cached"
    );
    assert!(
        !holds("C-kept") && !holds("配偶李四"),
        "the kept record is cached"
    );
    // The search reached C as A's: its log names A and A's token.
    let logged = s.audit(&s.c, "audit-C").await;
    assert!(
        logged
            .iter()
            .any(|e| e["requester"]["domain"] == "A" && e["requester"]["token"] == "search-A"),
        "{logged:#?}"
    );
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_own_search_is_logged_at_the_answering_archive_as_the_member_that_asked() {
    let s = Cluster::start("", false).await;
    let credential = s.credential_of_a();
    let (status, found) = send(
        &s.c,
        &credential,
        Method::POST,
        "/v1/search",
        Some(json!({"key_type": "id_card", "value": APPLICANT, "local": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    // Answered as to another archive: catalogue entries.
    let records = found["records"].as_array().unwrap();
    assert!(
        !records.is_empty() && records.iter().all(|r| r["catalogue_only"] == true),
        "{found}"
    );
    let logged = s.audit(&s.c, "audit-C").await;
    let member: Vec<&Value> = logged
        .iter()
        .filter(|e| e["requester"]["role"] == "member" && e["action"].is_null())
        .collect();
    assert_eq!(member.len(), 1, "{logged:#?}");
    assert_eq!(member[0]["requester"]["domain"], "A", "{logged:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clerks_requests_spend_its_searches_are_counted_as_its_own_and_name_no_holding_archive_before_it_answers(
) {
    let s = Cluster::start("search_rate_per_minute = 1\nsearch_burst = 2\n", false).await;
    let request = json!({
        "applicant_id": APPLICANT,
        "applicant_name": "张三",
        "purpose": "贷款",
    });
    let submit = || {
        s.call(
            &s.a,
            "clerk-A",
            Method::POST,
            "/v1/requests",
            Some(request.clone()),
        )
    };
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, view) = submit().await;
        assert_eq!(status, StatusCode::CREATED, "{view}");
        // Neither C nor its records are named before C answers.
        assert_eq!(view["holdings"], json!([]), "{view}");
        assert_eq!(view["awaiting"]["archives"], 1, "{view}");
        let shown = view.to_string();
        assert!(
            !shown.contains("\"C\"") && !shown.contains("C-open"),
            "{view}"
        );
        ids.push(view["id"].as_str().unwrap().to_owned());
    }
    // The third within the minute is over the clerk's rate, and nothing
    // is registered.
    let (status, refused) = submit().await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    let (_, list) = s
        .call(&s.a, "clerk-A", Method::GET, "/v1/requests", None)
        .await;
    assert_eq!(list["requests"].as_array().map(Vec::len), Some(2), "{list}");
    // C released the open record and keeps the court one for review: the
    // clerk learns that one archive reviews, not which.
    let view = s
        .until(&s.a, "clerk-A", &format!("/v1/requests/{}", ids[0]), |v| {
            v["awaiting"]["in_review"] == 1
        })
        .await;
    assert_eq!(view["holdings"], json!([]), "{view}");
    // Counted as the clerk's searches, for the alert on bursts.
    let (_, _) = s.call(&s.a, "read-A", Method::GET, "/v1/stats", None).await;
    let metrics = http()
        .get(format!("{}/metrics", s.a.url))
        .bearer_auth(&s.tokens["read-A"])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("xarchive_searches_total{token=\"clerk-A\",role=\"clerk\"} 2"),
        "{metrics}"
    );
    // A's log names the clerk that attested the applicant's identity, for
    // the search and for the request; C's names the clerk and A.
    let at_a = s.audit(&s.a, "audit-A").await;
    for action in [Value::Null, json!("request_submitted")] {
        assert_eq!(
            at_a.iter()
                .filter(|e| e["action"] == action && e["requester"]["token"] == "clerk-A")
                .count(),
            2,
            "{action}: {at_a:#?}"
        );
    }
    let at_c = s.audit(&s.c, "audit-C").await;
    assert!(
        at_c.iter().any(|e| e["requester"]["token"] == "clerk-A"
            && e["requester"]["domain"] == "A"
            && e["action"].is_null()),
        "{at_c:#?}"
    );
}

/// Opens a `POST /v1/search` at `url` with `token` whose body never
/// comes: a request in flight until the stream is dropped.
fn slow_search(url: &str, token: &str) -> std::net::TcpStream {
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST /v1/search HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{"
    )
    .unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_with_its_limit_of_requests_in_flight_is_refused_more_and_keeps_no_one_else_waiting(
) {
    let dir = tempdir().unwrap();
    let config = dir.path().join("A.toml");
    // Searches limited by the requests in flight alone: with the default
    // search rate (30 at once), the asking below would spend it on a
    // loaded machine before the domain had counted the four, and refuse
    // one of them for its rate.
    std::fs::write(
        &config,
        "[auth]\nmax_in_flight_per_token = 4\nsearch_rate_per_minute = 60000\nsearch_burst = 10000\n",
    )
    .unwrap();
    let busy = create_token(&config, "search", "busy", Some("A"));
    let other = create_token(&config, "search", "other", Some("A"));
    let a = Spawn::new(bin(), "A", &dir.path().join("A"))
        .args(["--config", config.to_str().unwrap()])
        .start();
    let search = json!({"key_type": "id_card", "value": APPLICANT});
    let held: Vec<_> = (0..4).map(|_| slow_search(&a.url, &busy)).collect();
    // The four are in flight once a fifth is refused for it (each is
    // counted when the domain reads its head).
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let (status, body) =
            send(&a, &busy, Method::POST, "/v1/search", Some(search.clone())).await;
        let message = body["message"].as_str().unwrap_or_default();
        if status == StatusCode::TOO_MANY_REQUESTS && message.contains("in flight") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "never refused for the requests in flight: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused["code"], "rate_limited", "{refused}");
    // Anyone else searches meanwhile.
    let (status, body) = send(&a, &other, Method::POST, "/v1/search", Some(search.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Once they end, the token searches again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) =
            send(&a, &busy, Method::POST, "/v1/search", Some(search.clone())).await;
        if status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
