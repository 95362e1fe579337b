//! Several domains in one process (in-process coordinator), talking HTTP
//! over loopback: routing, deletes, a departed domain, concurrent writes
//! and lookups.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use xarchive_node::cluster::Hub;
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::wire::{LookupBody, SearchBody, SearchRequest};
use xarchive_node::Client;
use xarchive_node::{Node, NodeConfig};

struct Domain {
    node: Arc<Node>,
    client: Client,
    stop: CancellationToken,
    server: Option<tokio::task::JoinHandle<()>>,
}

struct Cluster {
    domains: Vec<Domain>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    async fn start(n: usize) -> Cluster {
        Cluster::start_with(n, |_| {}).await
    }

    /// `n` domains, each config changed by `tweak` before it opens.
    async fn start_with(n: usize, tweak: impl Fn(&mut NodeConfig)) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::new();
        let mut domains = Vec::new();
        for i in 0..n {
            let name = ["A", "B", "C", "D"][i].to_string();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = format!("http://{}", listener.local_addr().unwrap());
            let mut config = NodeConfig {
                name: name.clone(),
                data: dir.path().join(&name),
                ..NodeConfig::default()
            };
            config.filter.expected_items = 10_000;
            config.cluster.peer_timeout_ms = 1_000;
            tweak(&mut config);
            let node = Node::open_in(config, hub.coordinator(), &address).unwrap();
            let stop = CancellationToken::new();
            let shutdown = stop.child_token();
            let server = tokio::spawn({
                let node = node.clone();
                async move {
                    xarchive_node::server::serve(node, listener, async move {
                        shutdown.cancelled().await
                    })
                    .await
                    .unwrap();
                }
            });
            domains.push(Domain {
                client: Client::new(&address, Duration::from_secs(10)).unwrap(),
                node,
                stop,
                server: Some(server),
            });
        }
        Cluster { domains, _dir: dir }
    }

    /// Waits until every domain's copies (of filters and key filters)
    /// include every other running domain's present position.
    async fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let running: Vec<&Domain> = self.domains.iter().filter(|d| d.server.is_some()).collect();
        loop {
            let mut all = true;
            for d in &running {
                let view = d.node.cluster_view();
                for other in running
                    .iter()
                    .filter(|o| o.node.config().name != d.node.config().name)
                {
                    let at = other.node.domain().position();
                    all &= view.domains.iter().any(|p| {
                        p.name == other.node.config().name
                            && (p.epoch, p.version) == (Some(at.epoch), Some(at.version))
                            && p.current == Some(true)
                            && p.keys_current == Some(true)
                    });
                }
            }
            if all {
                return;
            }
            if Instant::now() >= deadline {
                for d in &running {
                    eprintln!("{}", serde_json::to_string(&d.node.cluster_view()).unwrap());
                }
            }
            assert!(Instant::now() < deadline, "replicas did not converge");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(&mut self, i: usize) {
        self.domains[i].stop.cancel();
        if let Some(server) = self.domains[i].server.take() {
            server.await.unwrap();
        }
    }
}

async fn lookup(d: &Domain, id: &str) -> (u16, LookupBody) {
    d.client.lookup(id, false).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_put_anywhere_is_found_everywhere_with_one_call() {
    let c = Cluster::start(3).await;
    let (a, b, cc) = (&c.domains[0], &c.domains[1], &c.domains[2]);
    a.client
        .put("档案/2024/001", &json!({"title": "会议纪要"}))
        .await
        .unwrap();
    cc.client
        .put("J201-WS·2023-Y-0001", &json!({"title": "t"}))
        .await
        .unwrap();
    // Found at once, even before the replicas catch up.
    let (status, answer) = lookup(b, "档案/2024/001").await;
    assert_eq!(
        (status, answer.owner.as_deref()),
        (200, Some("A")),
        "{answer:?}"
    );

    c.settle().await;
    for (at, id, owner) in [
        (b, "档案/2024/001", "A"),
        (cc, "档案/2024/001", "A"),
        (a, "J201-WS·2023-Y-0001", "C"),
    ] {
        let (status, answer) = lookup(at, id).await;
        assert_eq!(status, 200, "{answer:?}");
        assert_eq!(answer.owner.as_deref(), Some(owner));
        assert_eq!(answer.route.remote_calls, 1, "{answer:?}");
        assert!(!answer.route.broadcast);
        assert!(answer.record.is_some());
    }
    // Absent everywhere: answered from the replicas, no remote call.
    let (status, answer) = lookup(b, "J999-none").await;
    assert_eq!(status, 404, "{answer:?}");
    assert_eq!(answer.code.as_deref(), Some("not_found"));
    assert_eq!(answer.route.remote_calls, 0);

    // The seed paper's way asks everyone.
    let (status, answer) = b.client.lookup("档案/2024/001", true).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer.route.probed.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_record_is_gone_everywhere_and_never_missing_before() {
    let c = Cluster::start(3).await;
    let (a, b) = (&c.domains[0], &c.domains[1]);
    a.client.put("DEL-1", &json!({"title": "t"})).await.unwrap();
    for _ in 0..20 {
        let (status, answer) = lookup(b, "DEL-1").await;
        assert_eq!(status, 200, "{answer:?}");
    }
    assert!(a.client.delete("DEL-1").await.unwrap());
    // Acknowledged: A answers 404 at once; the others once their
    // replicas (and the cached copies they evict) catch up.
    assert_eq!(lookup(a, "DEL-1").await.0, 404);
    c.settle().await;
    for d in &c.domains {
        let (status, answer) = lookup(d, "DEL-1").await;
        assert_eq!(status, 404, "{answer:?}");
    }
    // No domain even routes to A for it any more.
    assert!(b.node.cluster().candidates("DEL-1").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_departed_domain_is_named_not_reported_empty() {
    let mut c = Cluster::start(3).await;
    c.domains[2]
        .client
        .put("C-ONLY", &json!({"title": "t"}))
        .await
        .unwrap();
    c.domains[0]
        .client
        .put("A-ONLY", &json!({"title": "t"}))
        .await
        .unwrap();
    c.settle().await;
    c.stop(2).await;
    let (status, answer) = lookup(&c.domains[0], "C-ONLY").await;
    assert_eq!(status, 503, "{answer:?}");
    assert_eq!(answer.code.as_deref(), Some("unavailable"));
    assert_eq!(answer.unavailable, ["C"]);
    let (status, _) = lookup(&c.domains[1], "A-ONLY").await;
    assert_eq!(status, 200);
    // C left cleanly after publishing everything: its copy says "not here"
    // for IDs it never had, so they are still a plain 404.
    let (status, answer) = lookup(&c.domains[1], "NOWHERE-1").await;
    assert_eq!(status, 404, "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_never_miss_a_record_acknowledged_before_they_began() {
    let c = Arc::new(Cluster::start(3).await);
    let acknowledged: Arc<parking_lot::Mutex<Vec<(String, Instant)>>> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut tasks = Vec::new();
    for w in 0..3 {
        let (c, acknowledged) = (c.clone(), acknowledged.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() < deadline {
                let id = format!("S{w}-{i}");
                c.domains[w]
                    .client
                    .put(&id, &json!({"title": "t"}))
                    .await
                    .unwrap();
                acknowledged.lock().push((id, Instant::now()));
                i += 1;
            }
        }));
    }
    let misses = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for r in 0..3 {
        let (c, acknowledged, misses) = (c.clone(), acknowledged.clone(), misses.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let started = Instant::now();
                let pick = {
                    let acked = acknowledged.lock();
                    (!acked.is_empty()).then(|| acked[(n as usize * 7919) % acked.len()].clone())
                };
                n += 1;
                let Some((id, acked_at)) = pick else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                let (status, answer) = lookup(&c.domains[r], &id).await;
                if acked_at < started && status != 200 {
                    eprintln!("{id} acknowledged before the lookup, answered {status}: {answer:?}");
                    misses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(acknowledged.lock().len() > 100);
    assert_eq!(misses.load(std::sync::atomic::Ordering::Relaxed), 0);
}

async fn search(d: &Domain, key_type: &str, value: &str) -> (u16, SearchBody) {
    let request = SearchRequest {
        key_type: key_type.into(),
        value: value.into(),
        local: false,
        requester: None,
    };
    d.client.search(&request).await.unwrap()
}

/// Puts record `id` at `d`, about the person with identity number `card`.
async fn put_person(d: &Domain, id: &str, card: &str) {
    d.client
        .put(id, &json!({"title": "t", "keys": {"id_card": card}}))
        .await
        .unwrap();
}

fn ids(body: &SearchBody) -> Vec<(String, String)> {
    body.records
        .iter()
        .map(|r| (r.domain.clone(), r.id.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_with_records_in_three_domains_is_found_in_all_three_in_one_search() {
    let c = Cluster::start(3).await;
    let person = "11010519491231002X";
    // As people type it: a lower-case check letter, full-width digits.
    for (d, id, typed) in [
        (0, "A-婚姻-1", "11010519491231002x"),
        (1, "B-学籍-1", "１１０１０５１９４９１２３１００２Ｘ"),
        (2, "C-工作-1", person),
    ] {
        put_person(&c.domains[d], id, typed).await;
    }
    put_person(&c.domains[2], "C-other", "440524198001010013").await;
    let (status, found) = search(&c.domains[1], "id_card", person).await;
    assert_eq!(status, 200, "{found:?}");
    assert_eq!(
        ids(&found),
        [
            ("A".into(), "A-婚姻-1".into()),
            ("B".into(), "B-学籍-1".into()),
            ("C".into(), "C-工作-1".into())
        ]
    );
    assert_eq!(found.asked, ["B", "A", "C"]);
    assert_eq!(found.records[0].keys["id_card"], person);

    // Replaced with another person's number, and deleted: the key follows.
    put_person(&c.domains[0], "A-婚姻-1", "440524198001010013").await;
    assert!(c.domains[1].client.delete("B-学籍-1").await.unwrap());
    let (status, found) = search(&c.domains[0], "id_card", person).await;
    assert_eq!(status, 200);
    assert_eq!(ids(&found), [("C".into(), "C-工作-1".into())]);
    let (_, found) = search(&c.domains[0], "id_card", "440524198001010013").await;
    assert_eq!(found.records.len(), 2, "{found:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_asks_only_the_domains_whose_key_filters_may_hold_the_key() {
    let c = Cluster::start(3).await;
    let person = "11010519491231002X";
    put_person(&c.domains[0], "A-1", person).await;
    put_person(&c.domains[2], "C-1", "440524198001010013").await;
    c.settle().await;
    let (status, found) = search(&c.domains[1], "id_card", person).await;
    assert_eq!(status, 200, "{found:?}");
    assert_eq!(ids(&found), [("A".into(), "A-1".into())]);
    // C's key filter copy rules the number out: one remote call.
    assert_eq!(
        (found.asked.as_slice(), found.remote_calls),
        (&["B".to_string(), "A".to_string()][..], 1)
    );
    // Nobody holds this one: no remote call, and still a complete answer.
    let (status, found) = search(&c.domains[1], "id_card", "110101199003071233").await;
    assert_eq!((status, found.remote_calls), (200, 0), "{found:?}");
    assert!(found.records.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_that_could_not_reach_a_domain_says_so_with_what_it_found() {
    let mut c = Cluster::start(3).await;
    let person = "11010519491231002X";
    for (d, id) in [(0, "A-1"), (2, "C-1")] {
        put_person(&c.domains[d], id, person).await;
    }
    c.settle().await;
    c.stop(2).await;
    let (status, found) = search(&c.domains[1], "id_card", person).await;
    assert_eq!(status, 503, "{found:?}");
    assert_eq!(found.code.as_deref(), Some("unavailable"));
    assert_eq!(found.unreachable, ["C"]);
    assert_eq!(ids(&found), [("A".into(), "A-1".into())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_domain_logs_the_private_searches_that_reached_it_without_the_value() {
    let c = Cluster::start(3).await;
    let person = "11010519491231002X";
    put_person(&c.domains[0], "A-1", person).await;
    let (status, found) = search(&c.domains[1], "id_card", person).await;
    assert_eq!(status, 200);
    // B (where it was made) and A (which holds the record) at least; C
    // only if its key filter copy could not rule the number out.
    assert!(found.asked.starts_with(&["B".to_string(), "A".to_string()]));
    let mut digests = std::collections::BTreeSet::new();
    for d in &c.domains {
        let name = d.node.config().name.clone();
        let page = d.client.audit(None).await.unwrap();
        let reached = usize::from(found.asked.contains(&name));
        assert_eq!(page.entries.len(), reached, "{page:?}");
        let Some(entry) = page.entries.first() else {
            continue;
        };
        // Made at B for B's caller, wherever it is logged.
        assert_eq!(
            (entry.requester.domain.as_str(), entry.key_type.as_str()),
            ("B", "id_card")
        );
        let expected: &[&str] = if name == "A" { &["A-1"] } else { &[] };
        assert_eq!(entry.records, expected);
        let text = serde_json::to_string(&page).unwrap();
        assert!(!text.contains(&person[..6]), "{text}");
        digests.insert(entry.value_digest.clone());
    }
    // The same value gives the same digest everywhere: one person's
    // searches can be followed across domains without the number.
    assert_eq!(digests.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_travels_along_the_relay_tree_to_domains_that_never_pull_it_from_its_origin() {
    // Degree 1: the tree is the chain A - B - C - D, and no copy is ever
    // pulled from its origin again once held (the grace outlasts the test).
    let c = Cluster::start_with(4, |config| {
        config.cluster.relay_fanout = 1;
        config.cluster.relay_grace_ms = 3_600_000;
    })
    .await;
    c.settle().await;
    let (a, d) = (&c.domains[0], &c.domains[3]);
    a.client
        .put("RELAYED-1", &json!({"title": "t"}))
        .await
        .unwrap();
    a.client.delete("RELAYED-1").await.unwrap();
    a.client
        .put("RELAYED-2", &json!({"title": "t"}))
        .await
        .unwrap();
    // D's copies of A's filter and key filter reach A's position through
    // B and C, and D routes by them.
    c.settle().await;
    assert_eq!(d.node.cluster().candidates("RELAYED-2"), ["A"]);
    assert!(d.node.cluster().candidates("RELAYED-1").is_empty());
    let (status, answer) = lookup(d, "RELAYED-2").await;
    assert_eq!((status, answer.route.remote_calls), (200, 1), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_the_relay_cannot_bring_is_pulled_from_its_origin_after_the_grace() {
    let mut c = Cluster::start_with(4, |config| {
        config.cluster.relay_fanout = 1;
        config.cluster.relay_grace_ms = 200;
    })
    .await;
    c.settle().await;
    // B, between A and the rest of the chain, is gone: nothing of A's
    // travels along the tree to C and D any more.
    c.stop(1).await;
    c.domains[0]
        .client
        .put("CUT-OFF-1", &json!({"title": "t"}))
        .await
        .unwrap();
    c.settle().await;
    for d in &c.domains[2..] {
        assert_eq!(d.node.cluster().candidates("CUT-OFF-1"), ["A"]);
        let (status, answer) = lookup(d, "CUT-OFF-1").await;
        assert_eq!(status, 200, "{answer:?}");
    }
}
