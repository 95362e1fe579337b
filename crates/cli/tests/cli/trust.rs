//! What the cluster trusts, tried as an attacker would, against real
//! domains and a real ZooKeeper: a cluster folder created open by someone
//! else, a shared parent someone else locked, a registration written without the cluster's seal or with an
//! `http://` address under TLS, a member credential naming a requester of
//! another domain, a search token outside its home domain or over its
//! rate, and an audit log rolled back to an older copy.

use crate::common::bin;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use xarchive_node::security::auth::{sha256_hex, AuthConfig, Authority};
use xarchive_node::security::member::MemberKey;
use xarchive_node::security::tls::LoopbackCa;
use xarchive_testkit::{tempdir, DomainProcess, Spawn, TempDir, ZooKeeperServer};
use zookeeper_client as zk;

const SECRET: &str = "a cluster secret long enough to use";

struct Setup {
    zk: ZooKeeperServer,
    dir: TempDir,
    secret: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempdir().unwrap();
        let secret = dir.path().join("cluster.secret");
        std::fs::write(&secret, SECRET).unwrap();
        Setup {
            zk: ZooKeeperServer::start(),
            dir,
            secret,
        }
    }

    fn spawn(&self, name: &str, cluster: &str) -> Spawn {
        Spawn::new(bin(), name, &self.dir.path().join(name))
            .args(["--zk", &self.zk.connect_string(), "--cluster", cluster])
            .args(["--cluster-secret-file", self.secret.to_str().unwrap()])
            .args(["--session-timeout-ms", "3000"])
    }

    /// A ZooKeeper client: an outsider's, or with the cluster's digest
    /// credentials (what only members, who hold the secret, have).
    async fn zk_client(&self, cluster: Option<&str>) -> zk::Client {
        let mut connector = zk::Client::connector();
        if let Some(cluster) = cluster {
            let (user, password) = authority(&self.secret, cluster)
                .zookeeper_credentials()
                .unwrap();
            connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
        }
        connector.connect(&self.zk.connect_string()).await.unwrap()
    }
}

fn authority(secret: &Path, cluster: &str) -> Authority {
    let config = AuthConfig {
        cluster_secret_file: Some(secret.to_owned()),
        ..AuthConfig::default()
    };
    Authority::new(&config, cluster).unwrap()
}

/// A new token of `role` named `name` (bound to `domain`, if given),
/// added to `config`.
fn token(config: &Path, role: &str, name: &str, domain: Option<&str>) -> String {
    let mut command = std::process::Command::new(bin());
    command.args(["token", "create", "--role", role, "--name", name]);
    command.args(["--config", config.to_str().unwrap()]);
    if let Some(domain) = domain {
        command.args(["--domain", domain]);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Waits (at most a minute) until `d`'s log holds `text`.
async fn logged(d: &DomainProcess, text: &str) -> String {
    for _ in 0..600 {
        let log = d.log();
        if log.contains(text) {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "not logged within a minute: {text:?}; the log:\n{}",
        d.log()
    );
}

/// `d`'s `/metrics`, read with `token`.
async fn metrics(d: &DomainProcess, token: &str) -> String {
    http(None)
        .get(format!("{}/metrics", d.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn http(ca: Option<&LoopbackCa>) -> reqwest::Client {
    xarchive_node::security::tls::install_crypto();
    let mut builder = reqwest::Client::builder();
    if let Some(ca) = ca {
        let pem = std::fs::read(&ca.ca).unwrap();
        builder = builder.tls_certs_only(vec![reqwest::Certificate::from_pem(&pem).unwrap()]);
    }
    builder.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_refuses_a_cluster_folder_someone_else_created_open_and_says_why() {
    let s = Setup::new();
    // Before the cluster's first start, someone who can reach ZooKeeper
    // creates its folder with open permissions, and a domain of theirs.
    let outsider = s.zk_client(None).await;
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    outsider
        .mkdir("/xarchive/squat/domains", &open)
        .await
        .unwrap();
    outsider
        .mkdir("/xarchive/squat/known", &open)
        .await
        .unwrap();
    let fake =
        json!({"address": "http://127.0.0.1:9", "kind": "counting", "epoch": 1, "version": 0});
    outsider
        .create(
            "/xarchive/squat/domains/EVIL",
            fake.to_string().as_bytes(),
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let a = s.spawn("A", "squat").start();
    let log = logged(&a, "refusing to join: the cluster's folder /xarchive/squat").await;
    assert!(log.contains("not protected by the cluster's ACL"), "{log}");
    // Not a member: "not found" is never answered, nor is it registered.
    let ready = http(None)
        .get(format!("{}/readyz", a.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    assert!(outsider
        .list_children("/xarchive/squat/domains")
        .await
        .unwrap()
        .iter()
        .all(|n| n != "A"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_someone_else_locked_is_refused_at_start_naming_its_acl_not_the_secret() {
    let s = Setup::new();
    // Before any cluster, someone makes `/xarchive` readable by all and
    // open to nobody else.
    let outsider = s.zk_client(None).await;
    outsider
        .create(
            "/xarchive",
            b"",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_read()),
        )
        .await
        .unwrap();
    let a = s.spawn("A", "locked").start();
    let log = logged(&a, "cannot create the cluster's folder /xarchive/locked").await;
    for said in [
        "/xarchive, whose ACL is world:anyone:r",
        "not about the cluster secret",
        "setAcl /xarchive world:anyone:crd",
    ] {
        assert!(log.contains(said), "{said:?} not in: {log}");
    }
    assert!(!log.contains("secret is not the cluster's"), "{log}");
    let ready = http(None)
        .get(format!("{}/readyz", a.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_without_the_clusters_seal_or_in_clear_under_tls_are_ignored_and_never_called(
) {
    let s = Setup::new();
    let ca = LoopbackCa::create(s.dir.path()).unwrap();
    let tls = |spawn: Spawn| {
        spawn
            .args(["--tls-cert", ca.cert.to_str().unwrap()])
            .args(["--tls-key", ca.key.to_str().unwrap()])
            .args(["--tls-ca", ca.ca.to_str().unwrap()])
    };
    let config = s.dir.path().join("A.toml");
    let read = token(&config, "read", "clerk", None);
    let a = tls(s.spawn("A", "sealed"))
        .args(["--config", config.to_str().unwrap()])
        .start();
    let url = a.url.replacen("http://", "https://", 1);
    let client = http(Some(&ca));
    let ready = || async {
        for _ in 0..600 {
            if client
                .get(format!("{url}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("A never ready: {}", a.log());
    };
    ready().await;
    // A listener that would receive whatever a domain sends the fakes.
    let trap = TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let trap_at = trap.local_addr().unwrap();
    // Someone with write access to the folder (a stolen ZooKeeper
    // credential) registers two domains: one unsealed, one sealed with the
    // secret but at an http:// address.
    let insider = s.zk_client(Some("sealed")).await;
    let acl = insider.get_acl("/xarchive/sealed/domains").await.unwrap().0;
    let create = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&acl));
    let unsealed = json!({"address": format!("https://{trap_at}"), "kind": "counting", "epoch": 1, "version": 0});
    insider
        .create(
            "/xarchive/sealed/domains/EVIL",
            unsealed.to_string().as_bytes(),
            &create,
        )
        .await
        .unwrap();
    // Sealed as a domain seals its registration: the JSON of its fields,
    // in their order.
    let clear =
        format!(r#"{{"address":"http://{trap_at}","kind":"counting","epoch":"1","version":0}}"#);
    let key = MemberKey::derive("sealed", SECRET);
    let mut sealed: serde_json::Value = serde_json::from_str(&clear).unwrap();
    sealed["proof"] = key.seal("PLAIN", clear.as_bytes()).into();
    insider
        .create(
            "/xarchive/sealed/domains/PLAIN",
            sealed.to_string().as_bytes(),
            &create,
        )
        .await
        .unwrap();
    let log = logged(&a, "it is not sealed with the cluster secret").await;
    assert!(log.contains("EVIL"), "{log}");
    logged(&a, "its address is not https:// in a cluster that uses TLS").await;
    // Neither is a member: an absent ID is "not found", not a 503 naming
    // them, and nothing was sent to their address.
    let cluster: serde_json::Value = client
        .get(format!("{url}/v1/cluster"))
        .bearer_auth(&read)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap_or_default();
    let text = cluster.to_string();
    assert!(!text.contains("EVIL") && !text.contains("PLAIN"), "{text}");
    assert!(
        matches!(trap.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a domain called a registration it should have ignored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_passes_on_only_its_own_clients_searches_and_old_or_foreign_credentials_fail() {
    let s = Setup::new();
    let a = s.spawn("A", "members").start();
    let key = authority(&s.secret, "members");
    let key = key.member_key().unwrap();
    let search = |requester_domain: &str| {
        json!({"key_type": "id_card", "value": "11010519491231002X", "local": true,
               "requester": {"token": "counter-3", "role": "search", "domain": requester_domain}})
    };
    let post = |token: String, body: serde_json::Value| {
        let url = format!("{}/v1/search", a.url);
        async move {
            http(None)
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    // As member B: its own client's search goes through; naming a client
    // of another domain is refused, and says why.
    assert_eq!(post(key.credential("B"), search("B")).await.status(), 200);
    let forged = post(key.credential("B"), search("C")).await;
    assert_eq!(forged.status(), 403);
    let body: serde_json::Value = forged.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("only its own clients"),
        "{body}"
    );
    // The shared member token of before, and another cluster's credential.
    let old = format!(
        "xam_{}",
        sha256_hex(&format!("xarchive member\0members\0{SECRET}"))
    );
    assert_eq!(post(old, search("B")).await.status(), 401);
    let foreign = MemberKey::derive("members", "another secret, also long");
    assert_eq!(
        post(foreign.credential("B"), search("B")).await.status(),
        401
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_token_searches_only_at_its_home_domain_and_at_a_persons_pace() {
    let s = Setup::new();
    let config = s.dir.path().join("A.toml");
    std::fs::write(
        &config,
        "[auth]\nsearch_rate_per_minute = 1\nsearch_burst = 2\n",
    )
    .unwrap();
    let home = token(&config, "search", "counter-a", Some("A"));
    let elsewhere = token(&config, "search", "counter-b", Some("B"));
    let a = s
        .spawn("A", "pace")
        .args(["--config", config.to_str().unwrap()])
        .start();
    let search = json!({"key_type": "id_card", "value": "11010519491231002X"});
    let post = |token: &str| {
        let (url, token) = (format!("{}/v1/search", a.url), token.to_owned());
        let search = search.clone();
        async move {
            http(None)
                .post(url)
                .bearer_auth(token)
                .json(&search)
                .send()
                .await
                .unwrap()
        }
    };
    let away = post(&elsewhere).await;
    assert_eq!(away.status(), 403);
    let body: serde_json::Value = away.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("belongs to archive B"),
        "{body}"
    );
    // Two searches (the burst), then the third waits about a minute.
    for _ in 0..2 {
        let status = post(&home).await.status();
        assert!(status == 200 || status == 503, "{status}");
    }
    let over = post(&home).await;
    assert_eq!(over.status(), 429);
    assert!(
        over.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 20
    );
    // Counted by token, for the alert on bursts.
    let metrics = metrics(&a, &home).await;
    assert!(
        metrics.contains("xarchive_searches_total{token=\"counter-a\",role=\"search\"} 2"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_log_rolled_back_to_an_older_copy_is_caught_at_start_and_by_audit_verify() {
    let s = Setup::new();
    let config = s.dir.path().join("A.toml");
    let searcher = token(&config, "search", "counter-a", Some("A"));
    let auditor = token(&config, "audit", "inspector", None);
    let mut a = s
        .spawn("A", "audited")
        .args(["--config", config.to_str().unwrap()])
        .start();
    let search = || {
        let (url, token) = (format!("{}/v1/search", a.url), searcher.clone());
        async move {
            let body = json!({"key_type": "id_card", "value": "11010519491231002X"});
            let r = http(None)
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(r.status() == 200 || r.status() == 503, "{}", r.status());
        }
    };
    let verify = |url: &str| {
        std::process::Command::new(bin())
            .args(["audit", "verify", "--server", url])
            .env("XARCHIVE_TOKEN", &auditor)
            .output()
            .unwrap()
    };
    let insider = s.zk_client(Some("audited")).await;
    let anchored = |entries: u64| {
        let insider = insider.clone();
        async move {
            for _ in 0..600 {
                if let Ok((data, _)) = insider.get_data("/xarchive/audited/audit/A").await {
                    let head: serde_json::Value = serde_json::from_slice(&data).unwrap();
                    if head["entries"] == entries {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("the audit head of {entries} entries was never anchored");
        }
    };
    search().await;
    anchored(1).await;
    let log = s.dir.path().join("A").join("audit.redb");
    let older = s.dir.path().join("audit.redb.older");
    std::fs::copy(&log, &older).unwrap();
    search().await;
    search().await;
    anchored(3).await;
    let out = verify(&a.url);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("intact"));

    // The operator rolls the log back to the copy of one entry.
    assert!(a.terminate().success());
    std::fs::copy(&older, &log).unwrap();
    a.restart();
    let said = logged(&a, "the audit log is not what was anchored").await;
    assert!(said.contains("cut short"), "{said}");
    let out = verify(&a.url);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("NOT INTACT") && printed.contains("rolled back"),
        "{printed}"
    );
    let metrics = metrics(&a, &auditor).await;
    assert!(metrics.contains("xarchive_audit_log_intact 0"), "{metrics}");
    // And it does not anchor the rolled-back head over the true one.
    let (data, _) = insider.get_data("/xarchive/audited/audit/A").await.unwrap();
    let head: serde_json::Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(head["entries"], 3);
}
