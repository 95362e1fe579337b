//! Security with real processes: tokens and roles, cluster membership
//! (the secret and ZooKeeper's ACL), TLS on and off, rate limits, who may
//! search people and read the log of it; every refused request leaves the
//! store and the filter byte-identical.

use crate::common::{bin, create_token};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;
use xarchive_node::cluster::client::http_client;
use xarchive_node::security::auth::{AuthConfig, Authority};
use xarchive_node::security::tls::LoopbackCa;
use xarchive_node::wire::{AuditPage, ClusterView, ErrorBody, ErrorCode, SearchBody};
use xarchive_testkit::{digest, tempdir, DomainProcess, Spawn, TempDir, ZooKeeperServer};
use zookeeper_client as zk;

const CLUSTER: &str = "sec";

struct Secured {
    zk: ZooKeeperServer,
    a: DomainProcess,
    b: DomainProcess,
    read: String,
    write: String,
    search: String,
    audit: String,
    /// A write token of another cluster.
    foreign: String,
    /// What members present (derived from the secret).
    member: String,
    ca: Option<LoopbackCa>,
    secret: PathBuf,
    dir: TempDir,
}

impl Secured {
    async fn start(tls: bool) -> Secured {
        let zk = ZooKeeperServer::start();
        let dir = tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "correct horse battery staple 2024\n").unwrap();
        let config = dir.path().join("domain.toml");
        std::fs::write(
            &config,
            "[auth]\nrate_per_second = 1000\nrate_burst = 2000\n",
        )
        .unwrap();
        let read = create_token(&config, "read", "clerk", None);
        let write = create_token(&config, "write", "archivist", None);
        let search = create_token(&config, "search", "counter-3", None);
        let audit = create_token(&config, "audit", "inspector", None);
        let other = dir.path().join("other.toml");
        let foreign = create_token(&other, "write", "archivist", None);
        let ca = tls.then(|| LoopbackCa::create(dir.path()).unwrap());
        let member = credential_of_a(secret.clone());
        let spawn = |name: &str| {
            let mut s = Spawn::new(bin(), name, &dir.path().join(name))
                .args([
                    "--config",
                    config.to_str().unwrap(),
                    "--zk",
                    &zk.connect_string(),
                ])
                .args(["--cluster", CLUSTER, "--session-timeout-ms", "3000"])
                .args(["--cluster-secret-file", secret.to_str().unwrap()])
                .args(["--expected-items", "10000"]);
            if let Some(ca) = &ca {
                s = s
                    .args([
                        "--tls-cert",
                        ca.cert.to_str().unwrap(),
                        "--tls-key",
                        ca.key.to_str().unwrap(),
                    ])
                    .args(["--tls-ca", ca.ca.to_str().unwrap()]);
            }
            s.start()
        };
        let (a, b) = (spawn("A"), spawn("B"));
        let s = Secured {
            zk,
            a,
            b,
            read,
            write,
            search,
            audit,
            foreign,
            member,
            ca,
            secret,
            dir,
        };
        s.wait_converged().await;
        s
    }

    /// `d`'s address: the log says `https://` with TLS on.
    fn url(&self, d: &DomainProcess) -> String {
        let scheme = if self.ca.is_some() {
            "https://"
        } else {
            "http://"
        };
        assert!(
            d.url.starts_with(scheme),
            "{} with TLS {}",
            d.url,
            self.ca.is_some()
        );
        d.url.clone()
    }

    /// A client sending `token`, trusting the test CA when TLS is on.
    fn client(&self, token: Option<&str>) -> reqwest::Client {
        let trust = self.ca.as_ref().map(|ca| {
            reqwest::Certificate::from_pem_bundle(&std::fs::read(&ca.ca).unwrap()).unwrap()
        });
        http_client(Duration::from_secs(10), token, trust).unwrap()
    }

    async fn wait_converged(&self) {
        let client = self.client(Some(&self.read));
        let deadline = Instant::now() + Duration::from_secs(30);
        for d in [&self.a, &self.b] {
            loop {
                let state: Option<ClusterView> = async {
                    client
                        .get(format!("{}/v1/cluster", self.url(d)))
                        .send()
                        .await
                        .ok()?
                        .json()
                        .await
                        .ok()
                }
                .await;
                if state.is_some_and(|s| s.converged(2)) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "no convergence; A's log:\n{}",
                    self.a.log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The store file and the published filter of A, as digests.
    async fn state(&self) -> (u64, u64) {
        let store = std::fs::read(self.dir.path().join("A").join("records.redb")).unwrap();
        let filter = self.a_filter(&self.read, "/v1/filter").await;
        (digest(&store), digest(&filter))
    }

    /// A filter of A (`path`: the filter, or the key filter), fetched
    /// with `token`.
    async fn a_filter(&self, token: &str, path: &str) -> Vec<u8> {
        self.client(Some(token))
            .get(format!("{}{path}", self.url(&self.a)))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec()
    }
}

/// Every route, with a body where it takes one.
fn endpoints() -> Vec<(Method, &'static str, Option<&'static str>)> {
    vec![
        (Method::GET, "/v1/archives/X-1", None),
        (Method::PUT, "/v1/archives/X-1", Some(r#"{"title":"t"}"#)),
        (Method::DELETE, "/v1/archives/KEPT", None),
        (Method::GET, "/v1/archives", None),
        (
            Method::POST,
            "/v1/archives/_bulk",
            Some("{\"id\":\"X-2\",\"title\":\"t\"}\n"),
        ),
        (Method::GET, "/v1/lookup/KEPT", None),
        (Method::GET, "/v1/route/KEPT", None),
        (Method::GET, "/v1/cluster", None),
        (Method::GET, "/v1/contains/KEPT", None),
        (Method::POST, "/v1/contains", Some(r#"["KEPT"]"#)),
        (Method::GET, "/v1/filter", None),
        (Method::GET, "/v1/filter/delta?epoch=1&since=0", None),
        (Method::GET, "/v1/filter/keys", None),
        (Method::GET, "/v1/filter/keys/delta?epoch=1&since=0", None),
        (Method::GET, "/v1/filter/verify", None),
        (Method::GET, "/v1/relay?asker=B", None),
        (Method::GET, "/v1/stats", None),
        (Method::GET, "/metrics", None),
        (Method::GET, "/v1/no-such-route", None),
    ]
}

fn is_write(method: &Method, path: &str) -> bool {
    *method == Method::PUT || *method == Method::DELETE || path.ends_with("_bulk")
}

/// Sends one request; returns its status and JSON code.
async fn send(
    client: &reqwest::Client,
    base: &str,
    (method, path, body): &(Method, &str, Option<&str>),
) -> (StatusCode, String) {
    let mut request = client.request(method.clone(), format!("{base}{path}"));
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let reply = request.send().await.unwrap();
    let status = reply.status();
    let body: Option<ErrorBody> = reply.json().await.ok();
    (status, body.map(|b| b.code.to_string()).unwrap_or_default())
}

async fn tokens_and_roles(tls: bool) {
    let s = Secured::start(tls).await;
    let base = s.url(&s.a);
    let writer = s.client(Some(&s.write));
    let put = writer
        .put(format!("{base}/v1/archives/KEPT"))
        .header("content-type", "application/json")
        .body(r#"{"title":"kept"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let before = s.state().await;

    let anonymous = s.client(None);
    let foreign = s.client(Some(&s.foreign));
    let reader = s.client(Some(&s.read));
    let member = s.client(Some(&s.member));
    for e in endpoints() {
        let unauthorized = (StatusCode::UNAUTHORIZED, "unauthorized");
        let mut refused = vec![
            ("no token", &anonymous, unauthorized),
            ("foreign", &foreign, unauthorized),
        ];
        let members_only = e.1.starts_with("/v1/filter/keys") || e.1.starts_with("/v1/relay");
        if is_write(&e.0, e.1) || members_only {
            refused.push(("read token", &reader, (StatusCode::FORBIDDEN, "forbidden")));
        }
        for (who, client, expected) in refused {
            let (status, code) = send(client, &base, &e).await;
            assert_eq!((status, code.as_str()), expected, "{who}: {} {}", e.0, e.1);
        }
        let (status, _) = send(&member, &base, &e).await;
        let member_may = e.0 == Method::GET
            && (e.1.starts_with("/v1/archives/")
                || e.1.starts_with("/v1/filter?")
                || e.1 == "/v1/filter"
                || e.1.starts_with("/v1/filter/delta")
                || members_only
                || e.1.starts_with("/v1/contains/"));
        assert_eq!(
            status != StatusCode::FORBIDDEN,
            member_may,
            "member: {} {} → {status}",
            e.0,
            e.1
        );
        assert_eq!(
            s.state().await,
            before,
            "refused {} {} changed the state",
            e.0,
            e.1
        );
    }
    // Open without a token: health and the page.
    for path in ["/healthz", "/"] {
        let status = anonymous
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    // The right tokens work, across domains too.
    let (status, _) = send(
        &reader,
        &s.url(&s.b),
        &(Method::GET, "/v1/lookup/KEPT", None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(&writer, &base, &(Method::DELETE, "/v1/archives/KEPT", None)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_roles_over_plain_http() {
    tokens_and_roles(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_roles_over_tls() {
    tokens_and_roles(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_domains_refuse_plain_http_and_untrusted_clients() {
    let s = Secured::start(true).await;
    let https = s.url(&s.a);
    let http = https.replacen("https", "http", 1);
    let plain = http_client(Duration::from_secs(5), Some(&s.read), None).unwrap();
    let result = plain.get(format!("{http}/v1/stats")).send().await;
    assert!(
        result.is_err() || !result.unwrap().status().is_success(),
        "plain HTTP must not be served"
    );
    // Without the cluster's CA the server's certificate is not trusted.
    let untrusting = plain.get(format!("{https}/v1/stats")).send().await;
    assert!(untrusting.is_err(), "an untrusted certificate was accepted");
    // The command line with the CA and a token.
    let out = Command::new(bin())
        .args([
            "stats",
            "--server",
            &https,
            "--tls-ca",
            s.ca.as_ref().unwrap().ca.to_str().unwrap(),
        ])
        .env("XARCHIVE_TOKEN", &s.read)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outsiders_cannot_join_list_or_pull() {
    let s = Secured::start(false).await;
    // ZooKeeper: without the digest credentials nothing can be listed or
    // registered under the cluster's folder.
    let outsider = zk::Client::connect(&s.zk.connect_string()).await.unwrap();
    let folder = format!("/xarchive/{CLUSTER}/domains");
    let listed = outsider.list_children(&folder).await;
    assert!(matches!(listed, Err(zk::Error::NoAuth)), "{listed:?}");
    let created = outsider
        .create(
            &format!("{folder}/evil"),
            br#"{"address":"http://127.0.0.1:1","kind":"counting","epoch":1,"version":1}"#,
            &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
        )
        .await;
    assert!(matches!(created, Err(zk::Error::NoAuth)), "{created:?}");

    // A domain with another secret cannot register, and is not let in.
    let wrong = s.dir.path().join("wrong");
    std::fs::write(&wrong, "not the cluster's secret at all\n").unwrap();
    let evil = Spawn::new(bin(), "EVIL", &s.dir.path().join("EVIL"))
        .args(["--zk", &s.zk.connect_string(), "--cluster", CLUSTER])
        .args(["--cluster-secret-file", wrong.to_str().unwrap()])
        .start();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !evil.log().contains("cluster secret is not the cluster's") {
        assert!(
            Instant::now() < deadline,
            "no refusal in EVIL's log:\n{}",
            evil.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let members: ClusterView = s
        .client(Some(&s.read))
        .get(format!("{}/v1/cluster", s.url(&s.a)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(members.domains.len(), 2, "{members:?}");
    // Its member token is not the cluster's: it cannot pull filters.
    let evil_member = credential_of_a(wrong);
    let pulled = s
        .client(Some(&evil_member))
        .get(format!("{}/v1/filter", s.url(&s.a)))
        .send()
        .await
        .unwrap();
    assert_eq!(pulled.status(), StatusCode::UNAUTHORIZED);
    assert!(s.secret.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_token_has_its_own_rate() {
    let dir = tempdir().unwrap();
    let config = dir.path().join("domain.toml");
    std::fs::write(&config, "[auth]\nrate_per_second = 1\nrate_burst = 3\n").unwrap();
    let first = create_token(&config, "read", "first", None);
    let second = create_token(&config, "read", "second", None);
    let d = Spawn::new(bin(), "A", &dir.path().join("A"))
        .args(["--config", config.to_str().unwrap()])
        .start();
    let client = http_client(Duration::from_secs(5), Some(&first), None).unwrap();
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let reply = client
            .get(format!("{}/v1/stats", d.url))
            .send()
            .await
            .unwrap();
        if reply.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(reply.headers().contains_key("retry-after"));
            let body: ErrorBody = reply.json().await.unwrap();
            assert_eq!(body.code, ErrorCode::RateLimited);
            statuses.push(429);
        } else {
            statuses.push(reply.status().as_u16());
        }
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    let other = http_client(Duration::from_secs(5), Some(&second), None).unwrap();
    assert_eq!(
        other
            .get(format!("{}/v1/stats", d.url))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
}

/// POSTs a search for `value` to `base` with `client`.
async fn search_at(client: &reqwest::Client, base: &str, value: &str) -> (StatusCode, SearchBody) {
    let reply = client
        .post(format!("{base}/v1/search"))
        .json(&json!({"key_type": "id_card", "value": value}))
        .send()
        .await
        .unwrap();
    (reply.status(), reply.json().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_search_role_searches_and_only_the_audit_role_sees_every_search() {
    let s = Secured::start(false).await;
    let person = "11010519491231002X";
    let writer = s.client(Some(&s.write));
    for (d, id) in [(&s.a, "A-1"), (&s.b, "B-1")] {
        let put = writer
            .put(format!("{}/v1/archives/{id}", s.url(d)))
            .json(&json!({"title": "t", "keys": {"id_card": person}}))
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), StatusCode::CREATED);
    }
    // read and write tokens may not search people; a search token may,
    // and the member domains pass it on to each other.
    for token in [&s.read, &s.write, &s.audit] {
        let (status, _) = search_at(&s.client(Some(token)), &s.url(&s.a), person).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let searcher = s.client(Some(&s.search));
    let (status, found) = search_at(&searcher, &s.url(&s.a), person).await;
    assert_eq!(status, StatusCode::OK, "{found:?}");
    let mut where_found: Vec<&str> = found.records.iter().map(|r| r.domain.as_str()).collect();
    where_found.sort_unstable();
    assert_eq!(where_found, ["A", "B"]);
    // A client cannot pass itself off as someone else in the log.
    let forged = searcher
        .post(format!("{}/v1/search", s.url(&s.a)))
        .json(&json!({"key_type": "id_card", "value": person,
                      "requester": {"token": "x", "role": "search", "domain": "A"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::BAD_REQUEST);

    // The log: only the audit role reads it; it names the searcher at
    // every domain the search reached, and never holds the number.
    for token in [&s.read, &s.write, &s.search] {
        let reply = s
            .client(Some(token))
            .get(format!("{}/v1/audit", s.url(&s.b)))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), StatusCode::FORBIDDEN);
    }
    for d in [&s.a, &s.b] {
        let reply = s
            .client(Some(&s.audit))
            .get(format!("{}/v1/audit", s.url(d)))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), StatusCode::OK);
        let text = reply.text().await.unwrap();
        let page: AuditPage = serde_json::from_str(&text).unwrap();
        assert_eq!(page.entries.len(), 1, "{text}");
        let who = &page.entries[0].requester;
        assert_eq!(
            (who.token.as_str(), who.role.as_str(), who.domain.as_str()),
            ("counter-3", "search", "A")
        );
        assert!(!text.contains(&person[6..14]), "{text}");
        // Nor does the domain's log or its metrics.
        assert!(!d.log().contains(&person[6..14]));
        let metrics = s
            .client(Some(&s.read))
            .get(format!("{}/metrics", s.url(d)))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!metrics.contains(&person[6..14]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_and_a_write_token_listing_records_and_reading_each_get_no_identity_number() {
    use xarchive_node::wire::{ArchiveList, LookupBody};
    use xarchive_node::Record;
    let s = Secured::start(false).await;
    let writer = s.client(Some(&s.write));
    let people: Vec<String> = (0..5)
        .map(|p| {
            xarchive_node::sample::person_keys(p)["id_card"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    // What would give a number away: its birth date and sequence digits.
    let leaks = |text: &str| people.iter().find(|n| text.contains(&n[6..17])).cloned();
    for (d, prefix) in [(&s.a, "A"), (&s.b, "B")] {
        for (i, number) in people.iter().enumerate() {
            let put = writer
                .put(format!("{}/v1/archives/{prefix}-人事-{i}", s.url(d)))
                // Open, of a category the policy releases: read whole
                // from the other domain too (the private keys withheld).
                .json(&json!({
                    "title": "人事档案",
                    "metadata": {"category": "work", "access": "open"},
                    "keys": {"id_card": number},
                }))
                .send()
                .await
                .unwrap();
            assert_eq!(put.status(), StatusCode::CREATED);
            let text = put.text().await.unwrap();
            assert_eq!(leaks(&text), None, "the PUT's answer: {text}");
        }
    }
    s.wait_converged().await;
    for (role, token) in [("read", &s.read), ("write", &s.write), ("audit", &s.audit)] {
        let client = s.client(Some(token));
        for d in [&s.a, &s.b] {
            let list = client
                .get(format!("{}/v1/archives?limit=10000", s.url(d)))
                .send()
                .await
                .unwrap();
            let list: ArchiveList = list.json().await.unwrap();
            assert_eq!(list.ids.len(), people.len(), "{role}");
            for id in &list.ids {
                let id = xarchive_node::cluster::client::encode_id(id);
                // Read where it is, and looked up from the other domain
                // (three times: the cache admits it on the second, and
                // answers the third).
                let mut answers = vec![format!("{}/v1/archives/{id}", s.url(d))];
                let other = if std::ptr::eq(d, &raw const s.a) {
                    &s.b
                } else {
                    &s.a
                };
                answers.extend(vec![format!("{}/v1/lookup/{id}", s.url(other)); 3]);
                for url in answers {
                    let reply = client.get(&url).send().await.unwrap();
                    assert_eq!(reply.status(), StatusCode::OK, "{role}: {url}");
                    let text = reply.text().await.unwrap();
                    assert_eq!(leaks(&text), None, "{role}: {url}: {text}");
                    let record: Record = if url.contains("/v1/lookup/") {
                        let found: LookupBody = serde_json::from_str(&text).unwrap();
                        found.record.unwrap()
                    } else {
                        serde_json::from_str(&text).unwrap()
                    };
                    assert_eq!(record.keys_withheld, ["id_card"], "{role}: {url}");
                }
            }
        }
    }
    // Nothing was searched, so nothing is on record; a search, the one
    // door to the numbers, is.
    let audit = |d: &DomainProcess| {
        let (client, url) = (s.client(Some(&s.audit)), format!("{}/v1/audit", s.url(d)));
        async move {
            let page: AuditPage = client.get(url).send().await.unwrap().json().await.unwrap();
            page.entries.len()
        }
    };
    assert_eq!((audit(&s.a).await, audit(&s.b).await), (0, 0));
    let (status, found) = search_at(&s.client(Some(&s.search)), &s.url(&s.a), &people[0]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(found.records.len(), 2);
    // The number of A's own record; B's gives another archive's search
    // a summary, the number only by request.
    for record in &found.records {
        match record.domain.as_str() {
            "A" => assert_eq!(record.keys["id_card"], people[0]),
            _ => assert!(record.keys.is_empty(), "{record:?}"),
        }
    }
    assert_eq!((audit(&s.a).await, audit(&s.b).await), (1, 1));
}

#[test]
fn data_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir().unwrap();
    let data = dir.path().join("A");
    let mut d = Spawn::new(bin(), "A", &data).start();
    let client = http_client(Duration::from_secs(5), None, None).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let put = client
            .put(format!("{}/v1/archives/P-1", d.url))
            .json(&json!({"title": "t", "keys": {"id_card": "11010519491231002X"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), StatusCode::CREATED);
    });
    // A clean stop writes the filter snapshots too.
    assert!(d.terminate().success());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700, "{}", data.display());
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        let expected = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), expected, "{}", path.display());
        files.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    files.sort();
    for file in [
        "records.redb",
        "filter.snapshot",
        "keys.snapshot",
        "filter.json",
    ] {
        assert!(files.iter().any(|f| f == file), "{file} not in {files:?}");
    }
}

/// How many of `values` the stolen `filter` marks when each is hashed as
/// `element` makes it.
fn marked(
    filter: &xarchive_filter::BloomFilter,
    values: &[String],
    element: impl Fn(&str) -> Vec<u8>,
) -> usize {
    values
        .iter()
        .filter(|v| filter.contains(element(v)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_key_filter_marks_real_identity_numbers_no_more_often_than_any_others() {
    use xarchive_node::{id_card_number, sample, KeyFormat, KeyHasher, KeyType, Visibility};
    let s = Secured::start(false).await;
    // 5,000 people, each with an identity number and a name and birth
    // date, fill A's key filter to about its target false-positive rate.
    let people = sample::PEOPLE;
    let lines: String = (0..people)
        .map(|p| {
            let line =
                json!({"id": format!("P-{p}"), "title": "t", "keys": sample::person_keys(p)});
            format!("{line}\n")
        })
        .collect();
    let bulk = s
        .client(Some(&s.write))
        .post(format!("{}/v1/archives/_bulk", s.url(&s.a)))
        .body(lines)
        .send()
        .await
        .unwrap();
    assert_eq!(
        bulk.status(),
        StatusCode::OK,
        "{}",
        bulk.text().await.unwrap()
    );

    // What a thief gets: the key filter as a member receives it.
    let stolen = s.a_filter(&s.member, "/v1/filter/keys").await;
    let filter = xarchive_filter::BloomFilter::decode(&stolen).unwrap();

    // 10^6 valid identity numbers: the 5,000 real ones and others.
    let real: Vec<String> = (0..people)
        .map(|p| {
            sample::person_keys(p)["id_card"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let known: std::collections::HashSet<&String> = real.iter().collect();
    let mut others = Vec::new();
    let mut n = 0u64;
    while others.len() + real.len() < 1_000_000 {
        let region = [110101, 310104, 440305, 510107, 330106, 420102][(n % 6) as usize];
        let (year, month, day) = (
            1940 + (n / 6 % 70) as i32,
            1 + (n / 420 % 12) as u8,
            1 + (n / 5040 % 28) as u8,
        );
        let candidate = id_card_number(region, year, month, day, (n / 141_120 % 1000) as u16);
        if !known.contains(&candidate) {
            others.push(candidate);
        }
        n += 1;
    }

    // Every way to hash a value without the secret: the public form of a
    // key, the derivation used when there is no secret, the bare value.
    let private = KeyType {
        name: "id_card".into(),
        visibility: Visibility::Private,
        format: KeyFormat::default(),
    };
    let public = KeyType {
        visibility: Visibility::Public,
        ..private.clone()
    };
    let unkeyed = KeyHasher::new(None);
    type Hashing<'a> = Box<dyn Fn(&str) -> Vec<u8> + 'a>;
    let guesses: [(&str, Hashing); 3] = [
        (
            "as a public key",
            Box::new(|v| unkeyed.filter_element(&public, v)),
        ),
        (
            "keyed without a secret",
            Box::new(|v| unkeyed.filter_element(&private, v)),
        ),
        ("bare", Box::new(|v: &str| v.as_bytes().to_vec())),
    ];
    for (how, element) in guesses {
        let (hits_real, hits_other) = (
            marked(&filter, &real, &element),
            marked(&filter, &others, &element),
        );
        let rate = hits_other as f64 / others.len() as f64;
        // Within the filter's false-positive rate (1 %, with room for
        // the fill), and the real ones no more often than the others
        // beyond chance (five standard deviations of the binomial).
        let expected = rate * real.len() as f64;
        eprintln!(
            "{how}: {hits_real} of {} real, {hits_other} of {} others ({:.4} %)",
            real.len(),
            others.len(),
            rate * 100.0
        );
        assert!(rate < 0.02, "{how}: {rate}");
        assert!(
            (hits_real as f64) <= expected + 5.0 * expected.max(1.0).sqrt() + 1.0,
            "{how}: {hits_real} real marked, {expected:.1} expected"
        );
    }

    // With the secret the same test finds every real one: the test can fail.
    let secret = std::fs::read_to_string(&s.secret).unwrap();
    let keyed = KeyHasher::new(Some(secret.trim()));
    assert_eq!(
        marked(&filter, &real, |v| keyed.filter_element(&private, v)),
        real.len()
    );
    // And the public filter holds no key at all.
    let public_filter = s.a_filter(&s.read, "/v1/filter").await;
    let public_filter = xarchive_filter::BloomFilter::decode(&public_filter).unwrap();
    assert!(marked(&public_filter, &real, |v| keyed.filter_element(&private, v)) < real.len() / 20);
}

/// Domain A's member credential under the cluster secret in `secret_file`.
fn credential_of_a(secret_file: PathBuf) -> String {
    Authority::new(
        &AuthConfig {
            cluster_secret_file: Some(secret_file),
            ..AuthConfig::default()
        },
        CLUSTER,
    )
    .unwrap()
    .member_key()
    .unwrap()
    .credential("A")
}
