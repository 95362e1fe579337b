//! What someone who reaches ZooKeeper but holds no cluster secret sees and
//! does, against a real server and domains in this process talking HTTP:
//! the audit anchors' stat (read with `exists`, which ZooKeeper answers to
//! anyone) moves one version a tick whether or not searches reach the
//! domain; a folder they made is not used for anchors; a parent they
//! locked is refused naming its ACL; a parent a domain made cannot be
//! locked. The anchor's cadence is driven tick by tick
//! (`Node::anchor_audit_now`, the `testsuite` feature), so what is compared
//! is ticks, not times.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use xarchive_node::cluster::{LedgerWrites, ZkSettings, ZooKeeperCoordinator};
use xarchive_node::security::auth::{sha256_hex, AuthConfig, Authority, Role, TokenEntry};
use xarchive_node::security::member::Admission;
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::wire::{AuditHead, SearchRequest};
use xarchive_node::{ApiClient, Node, NodeConfig};
use xarchive_testkit::ZooKeeperServer;
use zookeeper_client as zk;

const SECRET: &str = "a cluster secret long enough to use";
const WRITER: &str = "xa_writer-token-of-these-tests";
const SEARCHER: &str = "xa_searcher-token-of-these-tests";
const PERSON: &str = "11010519491231002X";

/// A domain served over loopback, with its coordinator at hand.
struct Domain {
    node: Arc<Node>,
    coordinator: Arc<ZooKeeperCoordinator>,
    writer: ApiClient,
    searcher: ApiClient,
    _stop: StopOnDrop,
}

/// Stops a domain's server and background work when the test ends.
struct StopOnDrop(CancellationToken);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

struct Setup {
    zk: ZooKeeperServer,
    dir: tempfile::TempDir,
    secret: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let secret = dir.path().join("cluster.secret");
        std::fs::write(&secret, SECRET).expect("the secret written");
        Setup {
            zk: ZooKeeperServer::start(),
            dir,
            secret,
        }
    }

    /// Domain `name` of `cluster`, started, its anchor's cadence an hour
    /// (so only the test's ticks write it).
    async fn domain(&self, name: &str, cluster: &str) -> Domain {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let address = format!("http://{}", listener.local_addr().expect("an address"));
        let mut config = NodeConfig {
            name: name.parse().unwrap(),
            data: self.dir.path().join(name),
            ..NodeConfig::default()
        };
        config.filter.expected_items = 1_000;
        config.cluster.zk = Some(self.zk.connect_string());
        config.cluster.name = cluster.to_owned();
        config.cluster.peer_timeout_ms = 2_000;
        config.cluster.audit_anchor_ms = 3_600_000;
        config.auth = AuthConfig {
            cluster_secret_file: Some(self.secret.clone()),
            tokens: vec![
                token("writer", Role::Write, WRITER),
                token("searcher", Role::Search, SEARCHER),
            ],
            ..AuthConfig::default()
        };
        let coordinator = ZooKeeperCoordinator::new(self.settings(cluster));
        let node = Node::open_in(config, coordinator.clone(), &address).expect("the domain opens");
        let stop = CancellationToken::new();
        let shutdown = stop.child_token();
        tokio::spawn({
            let node = node.clone();
            async move {
                // Its end may come after the test removed the data
                // directory: what closing it says then is no finding.
                let _ = xarchive_node::server::serve(node, listener, async move {
                    shutdown.cancelled().await;
                })
                .await;
            }
        });
        let client = |token: &str| {
            ApiClient::with_options(&address, Duration::from_secs(10), Some(token), None)
                .expect("a client")
        };
        Domain {
            node,
            coordinator,
            writer: client(WRITER),
            searcher: client(SEARCHER),
            _stop: StopOnDrop(stop),
        }
    }

    /// What `Node::coordinator_for` makes of a domain of `cluster` with
    /// the secret, kept concrete so that the test reads its refusals.
    fn settings(&self, cluster: &str) -> ZkSettings {
        let auth = authority(&self.secret, cluster);
        ZkSettings {
            connect: self.zk.connect_string(),
            cluster: cluster.into(),
            group: "00".into(),
            session_timeout: Duration::from_secs(6),
            publish_interval: Duration::from_millis(10),
            credentials: auth.zookeeper_credentials(),
            admission: Admission {
                key: auth.member_key().cloned(),
                https_only: false,
            },
            ledger: LedgerWrites::Auto,
        }
    }

    /// A ZooKeeper client without any credential: the outsider.
    async fn outsider(&self) -> zk::Client {
        zk::Client::connect(&self.zk.connect_string())
            .await
            .expect("the outsider connects")
    }

    /// A ZooKeeper client with `cluster`'s digest credentials, as only
    /// its members have them.
    async fn insider(&self, cluster: &str) -> zk::Client {
        let (user, password) = authority(&self.secret, cluster)
            .zookeeper_credentials()
            .expect("credentials from the secret");
        zk::Client::connector()
            .with_auth("digest", format!("{user}:{password}").as_bytes())
            .connect(&self.zk.connect_string())
            .await
            .expect("the insider connects")
    }
}

fn authority(secret: &Path, cluster: &str) -> Authority {
    let config = AuthConfig {
        cluster_secret_file: Some(secret.to_owned()),
        ..AuthConfig::default()
    };
    Authority::new(&config, cluster).expect("the secret is read")
}

fn token(name: &str, role: Role, token: &str) -> TokenEntry {
    TokenEntry {
        name: name.into(),
        role,
        sha256: sha256_hex(token),
        domain: None,
    }
}

/// Waits until `d` is registered and sees `members` members.
async fn until_member(d: &Domain, members: usize) {
    let mut view = d.node.cluster().coordinator().view();
    tokio::time::timeout(
        Duration::from_mins(1),
        view.wait_for(|v| v.connected && v.members.len() == members),
    )
    .await
    .expect("registered within a minute")
    .expect("the coordinator runs");
}

/// One tick of `d`'s anchoring that wrote its head, as soon as one does
/// (the first needs the log checked against the coordinator).
async fn first_anchor(d: &Domain) {
    for _ in 0..600 {
        if d.node.anchor_audit_now().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} never anchored its audit head", d.node.config().name);
}

/// A tick at every domain of `ds`, each writing its head.
async fn tick(ds: &[&Domain]) {
    for d in ds {
        assert!(
            d.node.anchor_audit_now().await,
            "{} did not anchor at a tick",
            d.node.config().name
        );
    }
}

/// What anyone sees of a znode: its stat (`exists`).
async fn stat(outsider: &zk::Client, path: &str) -> zk::Stat {
    outsider
        .check_stat(path)
        .await
        .expect("exists is answered")
        .unwrap_or_else(|| panic!("{path} exists"))
}

async fn search_at(d: &Domain) -> Vec<String> {
    let request = SearchRequest {
        key_type: "id_card".into(),
        value: PERSON.into(),
        local: false,
        requester: None,
    };
    let (status, body) = d.searcher.search(&request).await.expect("a search");
    assert_eq!(status, 200, "{body:?}");
    body.records.iter().map(|r| r.domain.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outsider_sees_the_audit_anchor_move_one_version_a_tick_whether_or_not_searches_reach_its_domain(
) {
    let s = Setup::new();
    let b = s.domain("B", "anchors").await;
    let c = s.domain("C", "anchors").await;
    until_member(&b, 2).await;
    until_member(&c, 2).await;
    c.writer
        .put(
            "C-婚姻-1",
            &json!({"title": "t", "keys": {"id_card": PERSON}}),
        )
        .await
        .expect("C holds the person");
    first_anchor(&b).await;
    first_anchor(&c).await;
    let outsider = s.outsider().await;
    let path = "/xarchive/anchors/audit/C";
    // The outsider cannot read it (the folder is sealed), only its stat.
    assert!(matches!(
        outsider.get_data(path).await,
        Err(zk::Error::NoAuth)
    ));
    let ticks = 5;
    let quiet_from = stat(&outsider, path).await;
    let head_before = c.node.verify_audit().await.expect("a check").head;
    for _ in 0..ticks {
        tick(&[&b, &c]).await;
    }
    let quiet_to = stat(&outsider, path).await;
    for _ in 0..ticks {
        // A search at B that C answers: it logs it, its head moves.
        assert_eq!(search_at(&b).await, ["C"]);
        tick(&[&b, &c]).await;
    }
    let busy_to = stat(&outsider, path).await;
    let head_after = c.node.verify_audit().await.expect("a check").head;
    assert_eq!(
        head_after.entries,
        head_before.entries + u64::try_from(ticks).unwrap()
    );

    let quiet = quiet_to.version - quiet_from.version;
    let busy = busy_to.version - quiet_to.version;
    assert_eq!(
        (quiet, busy),
        (ticks, ticks),
        "versions moved by {quiet} quiet, {busy} busy"
    );
    assert_eq!(
        (quiet_from.data_length, quiet_to.data_length),
        (busy_to.data_length, busy_to.data_length),
        "the anchor's size follows the log"
    );
    // It still anchors the head as it is, for the tamper check.
    let (data, _) = s
        .insider("anchors")
        .await
        .get_data(path)
        .await
        .expect("members read it");
    let anchored: AuditHead = serde_json::from_slice(&data).expect("an audit head");
    assert_eq!(anchored, head_after);
    let found = c.node.verify_audit().await.expect("a check");
    assert!(found.intact && found.unanchored.is_none(), "{found:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_never_writes_over_an_anchor_ahead_of_the_log_and_says_the_log_is_not_intact() {
    let s = Setup::new();
    let c = s.domain("C", "ahead").await;
    until_member(&c, 1).await;
    first_anchor(&c).await;
    // As if the log had been rolled back under a running domain: the
    // anchor holds more entries than the log.
    let insider = s.insider("ahead").await;
    let path = "/xarchive/ahead/audit/C";
    let ahead = json!({"entries": 7, "hash": "ab".repeat(32)}).to_string();
    insider
        .set_data(path, ahead.as_bytes(), None)
        .await
        .expect("members write it");
    assert!(!c.node.anchor_audit_now().await);
    let (data, _) = insider.get_data(path).await.expect("members read it");
    assert_eq!(data, ahead.as_bytes(), "the tick wrote over the anchor");
    let found = c.node.verify_audit().await.expect("a check");
    assert!(!found.intact, "{found:?}");
    assert!(
        found.problems.iter().any(|p| p.contains("cut short")),
        "{found:?}"
    );
    // And it stops anchoring until someone looks.
    assert!(!c.node.anchor_audit_now().await);
}

/// Waits until `coordinator` refuses to join, and says why.
async fn refusal(coordinator: &ZooKeeperCoordinator) -> String {
    let mut refusal: watch::Receiver<Option<String>> = coordinator.refusal();
    let said = tokio::time::timeout(Duration::from_mins(1), refusal.wait_for(Option::is_some))
        .await
        .expect("refused within a minute")
        .expect("the coordinator runs");
    said.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_refusing_a_squatted_folder_neither_reads_nor_writes_its_audit_anchor_there() {
    let s = Setup::new();
    // Before the cluster's first start, an outsider makes its folders
    // open and plants an anchor far ahead of any log.
    let outsider = s.outsider().await;
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for folder in ["domains", "positions", "audit", "seals"] {
        outsider
            .mkdir(&format!("/xarchive/squat/{folder}"), &open)
            .await
            .expect("the outsider makes the folders");
    }
    let planted = json!({"entries": 1000, "hash": "ab".repeat(32)}).to_string();
    let path = "/xarchive/squat/audit/A";
    outsider
        .create(path, planted.as_bytes(), &open)
        .await
        .expect("the outsider plants an anchor");
    let before = stat(&outsider, path).await;

    let a = s.domain("A", "squat").await;
    let said = refusal(&a.coordinator).await;
    assert!(
        said.contains("not protected by the cluster's ACL"),
        "{said}"
    );
    // A search here (not a member, it cannot vouch for the cluster: 503),
    // logged all the same: the log moves, as it would before a tick.
    let request = SearchRequest {
        key_type: "id_card".into(),
        value: PERSON.into(),
        local: false,
        requester: None,
    };
    let (status, _) = a.searcher.search(&request).await.expect("a search");
    assert_eq!(status, 503);
    let head = a.node.verify_audit().await.expect("a check").head;
    assert_eq!(head.entries, 1);
    for _ in 0..3 {
        assert!(
            !a.node.anchor_audit_now().await,
            "anchored in a squatted folder"
        );
    }
    // Not read: no false alarm from the planted anchor.
    let found = a.node.verify_audit().await.expect("a check");
    assert!(found.intact && found.problems.is_empty(), "{found:?}");
    assert!(
        found.anchor.is_none() && found.unanchored.is_some(),
        "{found:?}"
    );
    // Not written: the planted znode is as the outsider left it.
    let after = stat(&outsider, path).await;
    assert_eq!((after.version, after.mzxid), (before.version, before.mzxid));
    let (data, _) = outsider.get_data(path).await.expect("open to all");
    assert_eq!(data, planted.as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_someone_else_locked_is_refused_naming_its_acl_not_the_cluster_secret() {
    let s = Setup::new();
    // The outsider makes `/xarchive` before any cluster, readable by all
    // and writable by nobody else.
    let outsider = s.outsider().await;
    outsider
        .create(
            "/xarchive",
            b"",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_read()),
        )
        .await
        .expect("the outsider makes the parent");
    let a = s.domain("A", "locked").await;
    let said = refusal(&a.coordinator).await;
    for part in [
        "/xarchive/locked",
        "/xarchive, whose ACL is world:anyone:r",
        "CREATE",
        "setAcl /xarchive world:anyone:crd",
        "not about the cluster secret",
    ] {
        assert!(said.contains(part), "{part:?} not in: {said}");
    }
    assert!(outsider
        .check_stat("/xarchive/locked")
        .await
        .expect("exists is answered")
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_a_domain_made_cannot_be_locked_by_an_outsider() {
    let s = Setup::new();
    let a = s.domain("A", "first").await;
    until_member(&a, 1).await;
    let outsider = s.outsider().await;
    let (acl, _) = outsider
        .get_acl("/xarchive")
        .await
        .expect("anyone reads the parent's ACL");
    assert_eq!(
        acl,
        [zk::Acl::new(
            zk::Permission::CREATE | zk::Permission::READ | zk::Permission::DELETE,
            zk::AuthId::anyone(),
        )]
    );
    let lock = [zk::Acl::new(zk::Permission::READ, zk::AuthId::anyone())];
    assert!(matches!(
        outsider.set_acl("/xarchive", &lock, None).await,
        Err(zk::Error::NoAuth)
    ));
    // Another cluster still makes its folder there.
    let b = s.domain("B", "second").await;
    until_member(&b, 1).await;
    drop(a);
}
