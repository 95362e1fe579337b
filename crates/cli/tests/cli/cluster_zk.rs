//! Domains as real processes joined through a real ZooKeeper: routing,
//! deletes, a killed domain, a ZooKeeper outage, a lost session, and
//! concurrent writes with lookups.

use crate::common::{bin, http};

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use xarchive_node::wire::{
    ErrorCode, LookupBody, RequestStatus, SearchBody, SearchRequest, Strategy,
};
use xarchive_node::ApiClient;
use xarchive_testkit::{
    free_port, tempdir, Acknowledged, DomainProcess, Spawn, TempDir, ZooKeeperServer,
};

/// Three domains A, B, C in one cluster.
struct Cluster {
    zk: ZooKeeperServer,
    domains: Vec<DomainProcess>,
    dir: TempDir,
}

const SESSION_MS: u64 = 3_000;

impl Cluster {
    /// `connect` turns the server's address into the connect string used.
    async fn start(connect: impl Fn(&ZooKeeperServer) -> String) -> Cluster {
        Cluster::start_named(connect, &["A", "B", "C"], |_, spawn| spawn).await
    }

    /// The domains `names`, each started as `more` adds to its command.
    async fn start_named(
        connect: impl Fn(&ZooKeeperServer) -> String,
        names: &[&str],
        more: impl Fn(&str, Spawn) -> Spawn,
    ) -> Cluster {
        let zk = ZooKeeperServer::start();
        let dir = tempdir().unwrap();
        let domains = names
            .iter()
            .map(|name| {
                let spawn = Spawn::new(bin(), name, &dir.path().join(name))
                    .args(["--zk", &connect(&zk), "--cluster", "test"])
                    .args(["--session-timeout-ms", &SESSION_MS.to_string()])
                    .args(["--expected-items", "20000"]);
                more(name, spawn).start()
            })
            .collect();
        let cluster = Cluster { zk, domains, dir };
        cluster.wait_converged().await;
        cluster
    }

    fn client(&self, i: usize) -> ApiClient {
        ApiClient::new(&self.domains[i].url, Duration::from_secs(30)).unwrap()
    }

    /// Waits until every running domain sees the others up, connected,
    /// with current copies.
    async fn wait_converged(&self) {
        let deadline = Instant::now() + Duration::from_mins(1);
        'polling: loop {
            for i in 0..self.domains.len() {
                let state = self.client(i).cluster().await;
                if !state.is_ok_and(|s| s.converged(self.domains.len())) {
                    assert!(
                        Instant::now() < deadline,
                        "cluster did not converge; A's log:\n{}",
                        self.domains[0].log()
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue 'polling;
                }
            }
            return;
        }
    }
}

async fn lookup(c: &ApiClient, id: &str) -> (u16, LookupBody) {
    c.lookup(id, Strategy::Routed).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_found_across_domains_and_deletes_take_effect() {
    // Two hosts (one dead) and a chroot in the connect string.
    let dead = free_port();
    let cluster =
        Cluster::start(|zk| format!("127.0.0.1:{dead},{}/xa/chroot", zk.connect_string())).await;
    let (a, b, c) = (cluster.client(0), cluster.client(1), cluster.client(2));
    a.put("档案/2024/001", &json!({"title": "会议纪要"}))
        .await
        .unwrap();
    for at in [&b, &c] {
        let (status, answer) = lookup(at, "档案/2024/001").await;
        assert_eq!(status, 200, "{answer:?}");
        assert_eq!(answer.owner.as_deref(), Some("A"));
    }
    cluster.wait_converged().await;
    let (_, answer) = lookup(&b, "档案/2024/001").await;
    assert_eq!(answer.route.remote_calls, 1, "{answer:?}");

    // Until the delete is acknowledged, it is never "not found".
    for _ in 0..20 {
        assert_eq!(lookup(&b, "档案/2024/001").await.0, 200);
    }
    assert!(a.delete("档案/2024/001").await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, answer) = lookup(&b, "档案/2024/001").await;
        if status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still found after the sync delay: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.wait_converged().await;
    for at in [&b, &c] {
        assert_eq!(lookup(at, "档案/2024/001").await.0, 404);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_is_found_in_the_three_domains_holding_their_records_and_only_those_are_asked() {
    let cluster = Cluster::start(|zk| zk.connect_string()).await;
    let (person, other) = ("11010519491231002X", "440524198001010013");
    let search = |at: usize, value: &'static str| {
        let client = cluster.client(at);
        async move {
            let request = SearchRequest {
                key_type: "id_card".into(),
                value: value.into(),
                local: false,
                requester: None,
            };
            client.search(&request).await.unwrap()
        }
    };
    for (at, id) in [(0, "A-婚姻-1"), (1, "B-学籍-1"), (2, "C-工作-1")] {
        let keys = json!({"title": "t", "keys": {"id_card": person}});
        cluster.client(at).put(id, &keys).await.unwrap();
    }
    let (status, found) = search(0, person).await;
    assert_eq!(status, 200, "{found:?}");
    let held: Vec<(&str, &str)> = found
        .records
        .iter()
        .map(|r| (r.domain.as_str(), r.id.as_str()))
        .collect();
    assert_eq!(
        held,
        [("A", "A-婚姻-1"), ("B", "B-学籍-1"), ("C", "C-工作-1")]
    );

    // Replaced with another person's number, and deleted: once the key
    // filters have followed, the search asks only where the person is.
    let keys = json!({"title": "t", "keys": {"id_card": other}});
    cluster.client(1).put("B-学籍-1", &keys).await.unwrap();
    assert!(cluster.client(2).delete("C-工作-1").await.unwrap());
    let only_a = |found: &SearchBody| {
        let ids: Vec<&str> = found.records.iter().map(|r| r.id.as_str()).collect();
        ids == ["A-婚姻-1"]
    };
    let (status, found) = search(0, person).await;
    assert_eq!(status, 200);
    assert!(only_a(&found), "{found:?}");
    cluster.wait_converged().await;
    let (status, found) = search(0, person).await;
    assert!(only_a(&found), "{found:?}");
    assert_eq!((status, found.remote_calls), (200, 0), "{found:?}");
    let (status, found) = search(2, other).await;
    assert_eq!(status, 200);
    assert_eq!(found.asked, ["C", "B"]);
    assert_eq!(found.records.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_domain_is_named_until_it_returns() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    let ids = ["A-1", "B-1", "C-1"];
    for (i, id) in ids.iter().enumerate() {
        cluster
            .client(i)
            .put(id, &json!({"title": "t"}))
            .await
            .unwrap();
    }
    cluster.wait_converged().await;
    cluster.domains[2].kill9();
    let a = cluster.client(0);
    // Before and after C's session expires, C's IDs are "unavailable".
    for wait in [0, SESSION_MS + 1_500] {
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let (status, answer) = lookup(&a, "C-1").await;
        assert_eq!(status, 503, "{answer:?}");
        assert_eq!(answer.unavailable, ["C"]);
        for id in ["A-1", "B-1"] {
            assert_eq!(lookup(&a, id).await.0, 200);
            assert_eq!(lookup(&cluster.client(1), id).await.0, 200);
        }
    }
    cluster.domains[2].restart();
    cluster.wait_converged().await;
    let (status, answer) = lookup(&a, "C-1").await;
    assert_eq!(status, 200, "{answer:?}");
    assert_eq!(answer.owner.as_deref(), Some("C"));
}

/// `up` is ZooKeeper's word, and lags a crash by the session's length;
/// `reachable` is a probe made during the call, so the view never calls
/// a dead domain reachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_killed_with_kill_9_is_not_reachable_in_the_next_cluster_view() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    let view = cluster.client(0).cluster().await.unwrap();
    assert!(
        view.domains.iter().all(|d| d.reachable),
        "{:?}",
        view.domains
    );
    assert!(view.get("C").unwrap().probe_ms.is_some());
    cluster.domains[2].kill9();
    // At once, and past C's session: never "reachable".
    for wait in [0, SESSION_MS + 1_500] {
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let view = cluster.client(0).cluster().await.unwrap();
        let c = view.get("C").unwrap();
        assert!(!c.reachable, "{c:?}");
        assert!(c.probe_error.is_some() && c.probe_ms.is_none(), "{c:?}");
        assert!(view.get("B").unwrap().reachable, "{view:?}");
        // The command line says the same, as JSON and as a table.
        let out =
            crate::common::xarchive(&["--output", "json", "cluster"], &cluster.domains[0].url);
        let printed: xarchive_node::wire::ClusterView = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", crate::common::text(&out)));
        assert!(!printed.get("C").unwrap().reachable);
        let out = crate::common::xarchive(&["cluster"], &cluster.domains[0].url);
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        let row = table
            .lines()
            .find(|l| l.starts_with("C "))
            .unwrap_or_else(|| panic!("{table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[2], "NO", "{table}");
        assert!(table.contains("C: not reachable now"), "{table}");
    }
    let view = cluster.client(0).cluster().await.unwrap();
    assert!(!view.get("C").unwrap().up, "past its session: {view:?}");
    cluster.domains[2].restart();
    cluster.wait_converged().await;
    let view = cluster.client(0).cluster().await.unwrap();
    assert!(view.get("C").unwrap().reachable, "{view:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_started_without_zookeeper_never_answers_not_found() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    for n in 0..20 {
        let id = format!("A-{n}");
        cluster
            .client(0)
            .put(&id, &json!({"title": "t"}))
            .await
            .unwrap();
    }
    cluster.wait_converged().await;
    cluster.zk.stop();
    // B starts again unable to learn of any domain from ZooKeeper: it asks
    // the domains it knew (its peers.json), and finds A's records there,
    // but cannot rule out one it does not know of.
    cluster.domains[1].restart();
    let b = cluster.client(1);
    let refused = b.ready().await;
    assert!(
        matches!(&refused, Err(e) if e.code() == Some(ErrorCode::NotReady)),
        "{refused:?}"
    );
    let (status, answer) = lookup(&b, "A-19").await;
    assert_eq!(
        (status, answer.owner.as_deref()),
        (200, Some("A")),
        "{answer:?}"
    );
    let not_ready = |status: u16, answer: &LookupBody| {
        (status, answer.code, answer.route.unconfirmed.is_some())
            == (503, Some(ErrorCode::NotReady), true)
    };
    let (status, answer) = lookup(&b, "never-written").await;
    assert!(not_ready(status, &answer), "{answer:?}");
    // Knowing no domain at all (its list of peers lost too): never 404.
    cluster.domains[1].kill9();
    std::fs::remove_file(cluster.domains[1].spawn.data.join("peers.json")).unwrap();
    cluster.domains[1].restart();
    let b = cluster.client(1);
    for id in ["A-0", "A-19", "never-written"] {
        let (status, answer) = lookup(&b, id).await;
        assert!(not_ready(status, &answer), "{answer:?}");
    }
    cluster.zk.start_again();
    cluster.wait_converged().await;
    b.ready().await.unwrap();
    assert_eq!(lookup(&b, "A-19").await.0, 200);
    assert_eq!(lookup(&b, "never-written").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_domain_never_answers_not_found_for_records_held_elsewhere() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    let ids: Vec<String> = (0..50).map(|n| format!("A-{n}")).collect();
    for id in &ids {
        cluster
            .client(0)
            .put(id, &json!({"title": "t"}))
            .await
            .unwrap();
    }
    cluster.wait_converged().await;
    for round in 0..3 {
        cluster.domains[1].kill9();
        tokio::time::sleep(Duration::from_millis(500)).await;
        cluster.domains[1].restart();
        // From the moment B listens: found, or "not certain", never absent.
        let b = cluster.client(1);
        for id in ids.iter().cycle().take(200) {
            let (status, answer) = lookup(&b, id).await;
            assert_ne!(status, 404, "round {round}: {answer:?}");
        }
        cluster.wait_converged().await;
        for id in &ids {
            assert_eq!(lookup(&b, id).await.0, 200, "round {round}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_stay_correct_through_a_zookeeper_outage() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    for (i, d) in ["A", "B", "C"].iter().enumerate() {
        for n in 0..50 {
            cluster
                .client(i)
                .put(&format!("{d}-{n}"), &json!({"title": "t"}))
                .await
                .unwrap();
        }
    }
    cluster.wait_converged().await;
    cluster.zk.stop();
    let outage = Instant::now();
    let mut checked = 0;
    while outage.elapsed() < Duration::from_secs(10) {
        for (i, d) in ["A", "B", "C"].iter().enumerate() {
            let at = cluster.client((i + 1) % 3);
            let (status, answer) = lookup(&at, &format!("{d}-{}", checked % 50)).await;
            assert_eq!(status, 200, "during the outage: {answer:?}");
            // Nothing can confirm that no domain joined meanwhile: never
            // "not found" until the membership is read again.
            let (status, answer) = lookup(&at, &format!("absent-{checked}")).await;
            assert_eq!(
                (status, answer.code),
                (503, Some(ErrorCode::NotReady)),
                "during the outage: {answer:?}"
            );
        }
        checked += 1;
    }
    // Writes wait for the coordinator: refused, and nothing changes.
    let refused = cluster
        .client(0)
        .put("OUTAGE-1", &json!({"title": "t"}))
        .await;
    assert!(
        matches!(&refused, Err(e) if e.code() == Some(ErrorCode::CoordinatorUnavailable)),
        "{refused:?}"
    );
    cluster.zk.start_again();
    cluster.wait_converged().await;
    assert_eq!(lookup(&cluster.client(1), "OUTAGE-1").await.0, 404);
    assert_eq!(lookup(&cluster.client(1), "absent-again").await.0, 404);
    cluster
        .client(0)
        .put("AFTER-1", &json!({"title": "t"}))
        .await
        .unwrap();
    cluster.wait_converged().await;
    let (status, answer) = lookup(&cluster.client(2), "AFTER-1").await;
    assert_eq!(
        (status, Some(answer.route.remote_calls)),
        (200, Some(1)),
        "{answer:?}"
    );
    assert!(checked > 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_means_registering_again() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    cluster
        .client(0)
        .put("BEFORE", &json!({"title": "t"}))
        .await
        .unwrap();
    // A fresh ZooKeeper knows no session and no znode.
    cluster.zk.restart_fresh();
    cluster.wait_converged().await;
    for d in &cluster.domains {
        assert!(d.log().contains("registered in ZooKeeper"), "{}", d.log());
    }
    let (status, answer) = lookup(&cluster.client(2), "BEFORE").await;
    assert_eq!(status, 200, "{answer:?}");
    cluster
        .client(1)
        .put("AFTER", &json!({"title": "t"}))
        .await
        .unwrap();
    assert_eq!(lookup(&cluster.client(0), "AFTER").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_never_make_an_acknowledged_record_missing() {
    let cluster = Arc::new(Cluster::start(|zk| zk.connect_string()).await);
    let acknowledged: Arc<Acknowledged> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut tasks = Vec::new();
    for w in 0..3 {
        let (cluster, acknowledged) = (cluster.clone(), acknowledged.clone());
        tasks.push(tokio::spawn(async move {
            let client = cluster.client(w);
            let mut i = 0;
            while Instant::now() < deadline {
                let id = format!("W{w}-{i}");
                client.put(&id, &json!({"title": "t"})).await.unwrap();
                acknowledged.extend([id]);
                i += 1;
            }
        }));
    }
    let (lookups, misses) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    for r in 0..3 {
        let (cluster, acknowledged, lookups, misses) = (
            cluster.clone(),
            acknowledged.clone(),
            lookups.clone(),
            misses.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let client = cluster.client(r);
            let mut n = 0usize;
            while Instant::now() < deadline {
                // Only IDs acknowledged before this lookup starts count.
                let Some(id) = acknowledged.pick(n * 7919) else {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                };
                n += 1;
                let (status, answer) = lookup(&client, &id).await;
                lookups.fetch_add(1, Ordering::Relaxed);
                if status != 200 {
                    eprintln!("{id}: {status} {answer:?}");
                    misses.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let written: HashSet<String> = acknowledged.all().into_iter().collect();
    assert!(written.len() > 50, "{} writes", written.len());
    assert!(lookups.load(Ordering::Relaxed) > 100);
    assert_eq!(misses.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_declaring_other_key_types_refuses_to_join() {
    refuses_to_join_with(
        "[[keys]]\nname = \"id_card\"\nvisibility = \"public\"\nformat = \"id_card\"\n",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_reading_archive_numbers_with_another_separator_refuses_to_join() {
    refuses_to_join_with("[ids]\nseparator = \"-\"\n").await;
}

/// A fourth domain configured with `settings` stays out of a cluster of
/// three at the defaults, and its log says why.
async fn refuses_to_join_with(settings: &str) {
    let cluster = Cluster::start(|zk| zk.connect_string()).await;
    let config = cluster.dir.path().join("other.toml");
    std::fs::write(&config, settings).unwrap();
    let other = Spawn::new(bin(), "D", &cluster.dir.path().join("D"))
        .args(["--config", config.to_str().unwrap()])
        .args(["--zk", &cluster.zk.connect_string(), "--cluster", "test"])
        .start();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !other
        .log()
        .contains("every domain of a cluster must declare the same [[keys]] and the same [ids]")
    {
        assert!(
            Instant::now() < deadline,
            "no refusal in D's log:\n{}",
            other.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Not a member: the others do not see it, and it is not ready.
    let view = cluster.client(0).cluster().await.unwrap();
    assert!(view.get("D").is_none(), "{view:?}");
    let d = ApiClient::new(&other.url, Duration::from_secs(5)).unwrap();
    assert!(d.ready().await.is_err());
    cluster.wait_converged().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_id_costs_zookeeper_a_few_requests_whatever_the_number_of_domains() {
    let cluster = Cluster::start(|zk| zk.connect_string()).await;
    let a = cluster.client(0);
    // Sequential lookups, so none shares another's read: each reads the
    // ledger itself (a sync, a listing, one multi-read). Reading every
    // domain's znodes, as before the ledger, cost 2N + 3 = 9 here.
    let lookups = 100;
    let before = cluster.zk.packets_received();
    for n in 0..lookups {
        let (status, answer) = lookup(&a, &format!("absent-{n}")).await;
        assert_eq!(status, 404, "{answer:?}");
    }
    let requests = cluster.zk.packets_received() - before;
    // Besides: the three sessions' pings and audit anchoring meanwhile.
    let background = 60;
    assert!(
        requests <= 3 * lookups + background,
        "{requests} ZooKeeper requests for {lookups} lookups of absent IDs"
    );
    // Concurrent ones share reads.
    let before = cluster.zk.packets_received();
    let answers = futures::future::join_all((0..lookups).map(|n| {
        let a = a.clone();
        async move { lookup(&a, &format!("absent-x{n}")).await.0 }
    }))
    .await;
    assert!(answers.iter().all(|s| *s == 404), "{answers:?}");
    let shared = cluster.zk.packets_received() - before;
    eprintln!(
        "ZooKeeper requests for {lookups} absent IDs: {requests} one by one, {shared} at once"
    );
    assert!(
        shared * 2 < requests,
        "{shared} requests for {lookups} concurrent lookups, {requests} one by one"
    );
}

/// A write's publication is one ZooKeeper transaction, answered to its
/// writer alone: no other domain is told of it (their watch on the
/// membership fires only at joins and departures), and its change reaches
/// them along the relay tree. With a watch on every registration, each
/// write cost ZooKeeper an event and a read at every other domain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_wakes_no_other_domain_through_zookeeper_and_is_found_everywhere() {
    let cluster = Cluster::start(|zk| zk.connect_string()).await;
    let a = cluster.client(0);
    let writes = 100;
    let before = cluster.zk.packets_sent();
    for n in 0..writes {
        a.put(&format!("W-{n}"), &json!({"title": "t"}))
            .await
            .unwrap();
    }
    let sent = cluster.zk.packets_sent() - before;
    // Each write one publication's answer (they may coalesce), besides
    // the three sessions' pings and audit anchoring meanwhile; five per
    // write before (the answer, and an event and a read at B and C).
    let background = 60;
    eprintln!("ZooKeeper sent {sent} packets for {writes} writes at one of three domains");
    assert!(
        sent <= writes + background,
        "ZooKeeper sent {sent} packets for {writes} writes"
    );
    for d in 1..3 {
        for n in 0..writes {
            let (status, answer) = lookup(&cluster.client(d), &format!("W-{n}")).await;
            assert_eq!(
                (status, answer.owner.as_deref()),
                (200, Some("A")),
                "{answer:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_killed_past_its_session_is_ruled_out_by_copies_covering_its_last_publication() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    for i in 0..3 {
        for n in 0..20 {
            let id = format!("{}-{n}", ["A", "B", "C"][i]);
            cluster
                .client(i)
                .put(&id, &json!({"title": "t"}))
                .await
                .unwrap();
        }
    }
    cluster.wait_converged().await;
    cluster.domains[2].kill9();
    // Past C's session: its registration is gone, its ledger entry holds
    // the last position it published, which A's and B's copies
    // cover. An absent ID is "not found" unless C's copy may hold it (a
    // false positive), then 503 naming C; a record C holds is never "not
    // found".
    tokio::time::sleep(Duration::from_millis(SESSION_MS + 1_500)).await;
    for d in 0..2 {
        let c = cluster.client(d);
        let mut not_found = 0;
        for n in 0..100 {
            let (status, answer) = lookup(&c, &format!("absent-{n}")).await;
            match status {
                404 => not_found += 1,
                503 => {
                    assert!(
                        answer.route.candidates.contains(&"C".to_owned()),
                        "{answer:?}"
                    );
                    assert_eq!(answer.unavailable, ["C"]);
                }
                _ => panic!("{status} {answer:?}"),
            }
        }
        assert!(
            not_found >= 90,
            "only {not_found} of 100 absent IDs answered 404"
        );
        let (status, answer) = lookup(&c, "C-7").await;
        assert_eq!(status, 503, "{answer:?}");
    }
    cluster.domains[2].restart();
    cluster.wait_converged().await;
    assert_eq!(lookup(&cluster.client(0), "C-7").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_domain_forgotten_by_the_operator_no_longer_turns_not_found_into_503() {
    let mut cluster = Cluster::start(|zk| zk.connect_string()).await;
    let c = cluster.client(2);
    for n in 0..20 {
        c.put(&format!("C-{n}"), &json!({"title": "t"}))
            .await
            .unwrap();
    }
    cluster.wait_converged().await;
    let connect = cluster.zk.connect_string();
    let forget = |name: &str| {
        std::process::Command::new(bin())
            .args([
                "cluster",
                "forget",
                name,
                "--zk",
                &connect,
                "--cluster",
                "test",
            ])
            .output()
            .unwrap()
    };
    let refused = forget("C");
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("domain C is registered now"), "{said}");
    let unknown = forget("NOBODY");
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("no domain named NOBODY"),
        "{unknown:?}"
    );

    cluster.domains[2].kill9();
    tokio::time::sleep(Duration::from_millis(SESSION_MS + 1_500)).await;
    let a = cluster.client(0);
    // Dead, not forgotten: what it holds cannot be answered.
    assert_eq!(lookup(&a, "C-7").await.0, 503);
    let done = forget("C");
    assert!(done.status.success(), "{done:?}");
    // Retired: asked no more, by lookups or searches.
    for at in 0..2 {
        let client = cluster.client(at);
        let (status, answer) = lookup(&client, "C-7").await;
        assert_eq!(status, 404, "{answer:?}");
        for n in 0..50 {
            assert_eq!(lookup(&client, &format!("absent-{n}")).await.0, 404);
        }
    }
    // It comes back: it registers again and is asked again.
    cluster.domains[2].restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    while lookup(&a, "C-7").await.0 != 200 {
        assert!(Instant::now() < deadline, "C's records never found again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sixteen real domains in two groups (provinces 11 and 44), so that the
/// relay tree (degree 3) has paths of several hops and the positions
/// ledger two znodes, under writes that never stop: a record acknowledged
/// at one end of the tree is found at once at the other, an absent ID is
/// "not found" (never 503) while every domain is up, and with an interior
/// domain of the tree killed past its session the others still answer
/// "not found" for nearly every absent ID, and never for its records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_domains_in_two_groups_under_continuous_writes_find_every_record_at_the_far_end() {
    let names: Vec<String> = ["11", "44"]
        .iter()
        .flat_map(|group| (1..=8).map(move |i| format!("{group}-{i:02}")))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cluster = Arc::new(
        Cluster::start_named(
            |zk| zk.connect_string(),
            &names,
            |name, spawn| spawn.env("XARCHIVE_CLUSTER__GROUP", &name[..2]),
        )
        .await,
    );
    let n = names.len();
    // Writes at every domain but the one killed, all along.
    const NONE: usize = usize::MAX;
    let (writing, dead) = (
        Arc::new(AtomicUsize::new(1)),
        Arc::new(AtomicUsize::new(NONE)),
    );
    let background = {
        let (cluster, writing, dead) = (cluster.clone(), writing.clone(), dead.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while writing.load(Ordering::SeqCst) == 1 {
                let at = i % n;
                i += 1;
                if at == dead.load(Ordering::SeqCst) {
                    continue;
                }
                let id = format!("{}-bg-{i}", cluster.domains[at].spawn.name);
                let written = cluster.client(at).put(&id, &json!({"title": "t"})).await;
                // A write under way while its domain is killed may fail.
                assert!(
                    written.is_ok() || dead.load(Ordering::SeqCst) == at,
                    "{id}: {written:?}"
                );
            }
            i
        })
    };
    // The heap lays the names out in order: the first is the root, the
    // last a leaf; the far end of a write at domain w is read at n - 1 - w.
    for k in 0..4 * n {
        let (w, r) = (k % n, n - 1 - k % n);
        found_at_once_far_away(&cluster, &names, (w, r), &format!("{}-far-{k}", names[w])).await;
        let (status, answer) = lookup(&cluster.client(r), &format!("absent-{k}")).await;
        assert_eq!(status, 404, "absent-{k} at {}: {answer:?}", names[r]);
    }

    // 11-02 is interior: its children are 11-05, 11-06 and 11-07. Its
    // writes stop a moment before it is killed, so that its copies
    // elsewhere can cover the last position it published (what a copy
    // never received cannot rule it out: those lookups answer 503).
    let victim = 1;
    let pid = cluster.domains[victim].pid().to_string();
    dead.store(victim, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -9 {pid}");
    tokio::time::sleep(Duration::from_millis(SESSION_MS + 1_500)).await;
    let (mut not_found, mut asked) = (0, 0);
    for k in 0..4 * n {
        let (w, r) = (k % n, n - 1 - k % n);
        if w == victim || r == victim {
            continue;
        }
        found_at_once_far_away(&cluster, &names, (w, r), &format!("{}-after-{k}", names[w])).await;
        let (status, answer) = lookup(&cluster.client(r), &format!("gone-{k}")).await;
        asked += 1;
        match status {
            404 => not_found += 1,
            503 => assert_eq!(answer.unavailable, [names[victim]], "{answer:?}"),
            _ => panic!("gone-{k} at {}: {status} {answer:?}", names[r]),
        }
        let (status, answer) = lookup(
            &cluster.client(r),
            &format!("{}-far-{victim}", names[victim]),
        )
        .await;
        assert_eq!(status, 503, "a record of the dead domain: {answer:?}");
    }
    writing.store(0, Ordering::SeqCst);
    let written = background.await.unwrap();
    assert!(written > 0);
    eprintln!(
        "{not_found} of {asked} absent IDs answered 404 with {} killed; {written} writes beside",
        names[victim]
    );
    assert!(
        not_found * 10 >= asked * 9,
        "only {not_found} of {asked} absent IDs answered 404 with {} dead",
        names[victim]
    );
}

/// Writes `id` at domain `w` and looks it up at once at domain `r`: found,
/// and owned by `w`.
async fn found_at_once_far_away(
    cluster: &Cluster,
    names: &[&str],
    (w, r): (usize, usize),
    id: &str,
) {
    cluster
        .client(w)
        .put(id, &json!({"title": "t"}))
        .await
        .unwrap();
    let (status, answer) = lookup(&cluster.client(r), id).await;
    assert_eq!(
        (status, answer.owner.as_deref()),
        (200, Some(names[w])),
        "{id} at {}: {answer:?}",
        names[r]
    );
}

/// Every znode under `path`, with its data, depth first.
async fn znodes(zk: &zookeeper_client::Client, path: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![path.to_owned()];
    while let Some(path) = todo.pop() {
        let Ok((data, _)) = zk.get_data(&path).await else {
            continue;
        };
        out.push((path.clone(), data));
        if let Ok((children, _)) = zk.get_children(&path).await {
            for child in children {
                let sep = if path.ends_with('/') { "" } else { "/" };
                todo.push(format!("{path}{sep}{child}"));
            }
        }
    }
    out
}

/// An applicant's request across archives, from the clerk's submission
/// (a search by the identity number finds the record) to the certificate
/// checked at a third archive: the number is in no domain's log (at
/// debug, which names every route called), metrics, stats, request or
/// audit log, and in no znode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applicant_s_identity_number_reaches_no_log_metric_or_znode_on_its_way_to_a_certificate()
{
    let cluster = Cluster::start_named(
        |zk| zk.connect_string(),
        &["A", "B", "C"],
        |_, spawn| spawn.env("XARCHIVE_LOG", "debug"),
    )
    .await;
    let person = "11010519491231002X";
    let (a, b) = (cluster.client(0), cluster.client(1));
    let record = json!({
        "title": "婚姻登记",
        "metadata": {"category": "marriage", "access": "open"},
        "keys": {"id_card": person},
    });
    b.put("B-婚姻-1", &record).await.unwrap();
    cluster.wait_converged().await;
    let submitted = a
        .submit_request(&json!({
            "applicant_id": person,
            "applicant_name": "张三",
            "purpose": "贷款",
        }))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.request(&submitted.id).await.unwrap().status != RequestStatus::Answered {
        assert!(Instant::now() < deadline, "never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let certified = a.issue_certificate(&submitted.id).await.unwrap();
    let check = cluster
        .client(2)
        .check_certificate(&certified.code)
        .await
        .unwrap();
    assert_eq!(check.copies[0].archive_number, "B-婚姻-1");

    // What would give the number away: its birth date and sequence digits.
    let digits = &person[6..14];
    let mut seen: Vec<(String, String)> = Vec::new();
    let http = http();
    for (i, domain) in cluster.domains.iter().enumerate() {
        let client = cluster.client(i);
        let name = ["A", "B", "C"][i];
        seen.push((format!("{name}'s log"), domain.log()));
        let metrics = http
            .get(format!("{}/metrics", domain.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        seen.push((format!("{name}'s metrics"), metrics));
        let stats = serde_json::to_string(&client.stats().await.unwrap()).unwrap();
        seen.push((format!("{name}'s stats"), stats));
        let audit = serde_json::to_string(&client.audit(None).await.unwrap()).unwrap();
        seen.push((format!("{name}'s audit log"), audit));
    }
    let requests = serde_json::to_string(&a.request(&submitted.id).await.unwrap()).unwrap();
    seen.push(("the request".into(), requests));
    let zk = zookeeper_client::Client::connect(&cluster.zk.connect_string())
        .await
        .unwrap();
    let all = znodes(&zk, "/").await;
    assert!(all.len() > 3, "the cluster wrote no znodes? {all:?}");
    for (path, data) in all {
        seen.push((format!("znode {path}"), path.clone()));
        seen.push((
            format!("znode {path}"),
            String::from_utf8_lossy(&data).into_owned(),
        ));
    }
    // The request went the whole way, so its steps are in the texts read.
    assert!(seen.iter().any(|(_, t)| t.contains("copies_received")));
    for (what, text) in &seen {
        assert!(!text.contains(digits), "the identity number is in {what}");
    }
}
