//! Several domains in one process (in-process coordinator), talking HTTP
//! over loopback: routing, deletes, a departed domain, concurrent writes
//! and lookups.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::json;
use tokio::sync::watch;
use xarchive_node::cluster::{
    AuditAnchor, CoordError, Coordinator, Hub, InProcessCoordinator, Member, Roster, View,
};
use xarchive_node::config::RemoteSearch;
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::wire::{
    AuditHead, CacheRoute, Decision, Delivery, ErrorCode, HoldingState, LookupBody, PageBudget,
    RequestStatus, RequestView, SearchBody, SearchRequest, Strategy,
};
use xarchive_node::ApiClient;
use xarchive_node::Position;
use xarchive_node::{FilterKind, Node, NodeConfig};

struct Domain {
    node: Arc<Node>,
    client: ApiClient,
    stop: CancellationToken,
    server: Option<tokio::task::JoinHandle<()>>,
}

struct Cluster {
    domains: Vec<Domain>,
    dir: tempfile::TempDir,
}

impl Cluster {
    async fn start(n: usize) -> Cluster {
        Cluster::start_with(n, |_| {}).await
    }

    /// `n` domains, each config changed by `tweak` before it opens.
    async fn start_with(n: usize, tweak: impl Fn(&mut NodeConfig)) -> Cluster {
        let hub = Hub::new();
        Cluster::start_on(n, tweak, |_| hub.coordinator()).await
    }

    /// `n` domains, each config changed by `tweak` before it opens, each
    /// joined through the coordinator `coordinator` gives for its name.
    async fn start_on<C: Coordinator>(
        n: usize,
        tweak: impl Fn(&mut NodeConfig),
        coordinator: impl Fn(&str) -> Arc<C>,
    ) -> Cluster {
        let mut cluster = Cluster {
            domains: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        for name in &["A", "B", "C", "D"][..n] {
            cluster.join(name, &tweak, coordinator(name)).await;
        }
        cluster
    }

    /// Starts domain `name`, its config changed by `tweak`, joined
    /// through `coordinator`.
    async fn join<C: Coordinator>(
        &mut self,
        name: &str,
        tweak: impl Fn(&mut NodeConfig),
        coordinator: Arc<C>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let mut config = NodeConfig {
            name: name.parse().unwrap(),
            data: self.dir.path().join(name),
            ..NodeConfig::default()
        };
        config.filter.expected_items = 10_000;
        config.cluster.peer_timeout_ms = 1_000;
        tweak(&mut config);
        let node = Node::open_in(config, coordinator, &address).unwrap();
        let stop = CancellationToken::new();
        let shutdown = stop.child_token();
        let server = tokio::spawn({
            let node = node.clone();
            async move {
                xarchive_node::server::serve(node, listener, async move {
                    shutdown.cancelled().await;
                })
                .await
                .unwrap();
            }
        });
        self.domains.push(Domain {
            client: ApiClient::new(&address, Duration::from_secs(10)).unwrap(),
            node,
            stop,
            server: Some(server),
        });
    }

    /// Waits until every domain's copies (of filters and key filters)
    /// include every other running domain's present position.
    async fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let running: Vec<&Domain> = self.domains.iter().filter(|d| d.server.is_some()).collect();
        loop {
            let mut all = true;
            for d in &running {
                let view = d.node.cluster_view().await;
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
                    eprintln!(
                        "{}",
                        serde_json::to_string(&d.node.cluster_view().await).unwrap()
                    );
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
    d.client.lookup(id, Strategy::Routed).await.unwrap()
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
    assert_eq!(answer.code, Some(ErrorCode::NotFound));
    assert_eq!(answer.route.remote_calls, 0);

    // The seed paper's way asks everyone.
    let (status, answer) = b
        .client
        .lookup("档案/2024/001", Strategy::Broadcast)
        .await
        .unwrap();
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
    assert_eq!(answer.code, Some(ErrorCode::Unavailable));
    assert_eq!(answer.unavailable, ["C"]);
    let (status, _) = lookup(&c.domains[1], "A-ONLY").await;
    assert_eq!(status, 200);
    // C left cleanly after publishing everything: its copy says "not here"
    // for IDs it never had, so they are still a plain 404.
    let (status, answer) = lookup(&c.domains[1], "NOWHERE-1").await;
    assert_eq!(status, 404, "{answer:?}");
}

/// The page reads one `/v1/cluster` from the domain serving it and learns
/// what it may hold in the browser (that domain's `[page]`) and how large
/// every domain's filter is there, before it fetches any filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_view_tells_the_page_its_budget_and_every_filter_s_size_before_it_fetches_one()
{
    let c = Cluster::start_with(3, |config| {
        if config.name == "A" {
            config.page.filter_bytes = 6_000;
            config.page.filter_requests = 2;
        }
        if config.name == "C" {
            config.filter.kind = FilterKind::Cuckoo;
        }
    })
    .await;
    c.settle().await;
    let a = c.domains[0].client.cluster().await.unwrap();
    assert_eq!(
        a.page,
        Some(PageBudget {
            filter_bytes: 6_000,
            filter_requests: 2
        })
    );
    let defaults = NodeConfig::default().page;
    let b = c.domains[1].client.cluster().await.unwrap();
    assert_eq!(
        b.page,
        Some(PageBudget {
            filter_bytes: defaults.filter_bytes,
            filter_requests: defaults.filter_requests
        })
    );

    // What each domain's /v1/filter holds once read: its bits or its
    // table, the published bytes less their envelope (docs/FORMAT.md).
    let mut held = BTreeMap::new();
    for d in &c.domains {
        let filter = d.client.peer().filter().await.unwrap();
        let envelope = if filter.kind == FilterKind::Cuckoo {
            60
        } else {
            52
        };
        held.insert(
            d.node.config().name.clone(),
            filter.bytes.len() as u64 - envelope,
        );
    }
    for d in &c.domains {
        let view = d.client.cluster().await.unwrap();
        assert_eq!(view.domains.len(), 3);
        for shown in &view.domains {
            assert_eq!(
                shown.filter_bytes,
                Some(held[shown.name.as_str()]),
                "{} as seen by {}",
                shown.name,
                view.domain
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_never_miss_a_record_acknowledged_before_they_began() {
    let c = Arc::new(Cluster::start(3).await);
    let acknowledged: Arc<parking_lot::Mutex<Vec<(String, Instant)>>> = Arc::default();
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
                    (!acked.is_empty())
                        .then(|| acked[(usize::try_from(n).unwrap() * 7919) % acked.len()].clone())
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
    // Its own record in full; the others' as their policy gives another
    // archive's search: where they are and what they are called.
    for record in &found.records {
        if record.domain == "B" {
            assert_eq!(record.keys["id_card"], person);
        } else {
            assert!(
                record.keys.is_empty() && record.metadata.is_empty(),
                "{record:?}"
            );
            assert!(!record.title.is_empty());
        }
    }

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
async fn a_person_recorded_with_a_fifteen_digit_number_in_one_domain_and_eighteen_in_another_is_found_in_both(
) {
    // Whole records, keys included, to another archive's search (of
    // records the policy releases by itself: open ones of its categories).
    let c = Cluster::start_with(3, |config| {
        config.requests.remote_search = RemoteSearch::Full;
    })
    .await;
    // One person: the first-generation number of an old record, and the
    // second-generation number of a newer one, with a name and birth date
    // spelt two ways.
    for (d, id, card, name_birth) in [
        (0, "A-户籍-1987", "110105491231002", "王芳|1949年12月31日"),
        (2, "C-人事-2003", "11010519491231002X", "王芳|1949.12.31"),
    ] {
        let keys = json!({"id_card": card, "name_birth": name_birth});
        let metadata = json!({"category": "work", "access": "open"});
        c.domains[d]
            .client
            .put(
                id,
                &json!({"title": "t", "metadata": metadata, "keys": keys}),
            )
            .await
            .unwrap();
    }
    c.settle().await;
    for typed in ["110105491231002", "11010519491231002x"] {
        let (status, found) = search(&c.domains[1], "id_card", typed).await;
        assert_eq!(status, 200, "{found:?}");
        assert_eq!(
            ids(&found),
            [
                ("A".into(), "A-户籍-1987".into()),
                ("C".into(), "C-人事-2003".into())
            ]
        );
        // Stored as the one normalised value, whichever form was given.
        assert!(found
            .records
            .iter()
            .all(|r| r.keys["id_card"] == "11010519491231002X"));
    }
    let (status, found) = search(&c.domains[1], "name_birth", "王芳|19491231").await;
    assert_eq!(status, 200, "{found:?}");
    assert_eq!(found.records.len(), 2, "{found:?}");
    assert!(found
        .records
        .iter()
        .all(|r| r.keys["name_birth"] == "王芳|1949-12-31"));
    // The audit entries of the two spellings carry one digest.
    let page = c.domains[0].client.audit(None).await.unwrap();
    let digests: BTreeSet<_> = page
        .entries
        .iter()
        .filter(|e| e.key_type == "id_card")
        .map(|e| e.value_digest.clone())
        .collect();
    assert_eq!(digests.len(), 1, "{page:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_looked_up_from_another_domain_or_its_cached_copy_names_its_identity_number_withheld(
) {
    // Cached on first sight, so that the second lookup is the cache's.
    let c = Cluster::start_with(2, |config| config.cache.admission_min_hits = 1).await;
    let person = "11010519491231002X";
    put_person(&c.domains[1], "B-人事-1", person).await;
    c.settle().await;
    let mut routes = Vec::new();
    for _ in 0..2 {
        let (status, found) = lookup(&c.domains[0], "B-人事-1").await;
        assert_eq!(status, 200, "{found:?}");
        let record = found.record.unwrap();
        assert!(record.keys.is_empty(), "{record:?}");
        assert_eq!(record.keys_withheld, ["id_card"]);
        routes.push((found.route.local, found.route.cache));
    }
    assert_eq!(
        routes,
        [
            (false, Some(CacheRoute::Miss)),
            (false, Some(CacheRoute::Hit))
        ]
    );
    // Nor does a search from here get it: B's policy gives another
    // archive's search a summary (the number only by request).
    let (status, found) = search(&c.domains[0], "id_card", person).await;
    assert_eq!(status, 200);
    assert_eq!(found.records[0].id.as_str(), "B-人事-1");
    assert!(found.records[0].keys.is_empty() && found.records[0].content.is_none());
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
    assert_eq!(found.code, Some(ErrorCode::Unavailable));
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
        let name = d.node.config().name.to_string();
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
async fn a_domain_joining_takes_its_first_copies_from_its_relay_tree_neighbour_not_from_each_origin(
) {
    // Degree 1: the tree is the chain A - B - C - D, so D, joining last,
    // has C alone for a neighbour.
    let hub = Hub::new();
    let chain = |config: &mut NodeConfig| {
        config.cluster.relay_fanout = 1;
        config.cluster.relay_grace_ms = 3_600_000;
    };
    let mut c = Cluster::start_on(3, chain, |_| hub.coordinator()).await;
    let person = |i: u16| xarchive_node::id_card_number(110105, 1949, 12, 31, i);
    for (i, d) in (0..).zip(&c.domains) {
        put_person(d, &format!("NEARBY-{i}"), &person(i)).await;
    }
    c.settle().await;
    c.join("D", chain, hub.coordinator()).await;
    c.settle().await;

    let d = &c.domains[3];
    let view = d.node.cluster_view().await;
    let from = |name: &str| {
        let peer = view.domains.iter().find(|p| p.name == name);
        peer.and_then(|p| p.first_copy_from.clone())
    };
    assert_eq!(
        [from("A"), from("B"), from("C")],
        [Some("C".into()), Some("C".into()), Some("C".into())],
        "{view:?}"
    );
    // The copies taken from C route as those from A and B would.
    for i in 0..3 {
        let (status, answer) = lookup(d, &format!("NEARBY-{i}")).await;
        assert_eq!((status, answer.route.remote_calls), (200, 1), "{answer:?}");
    }
    assert_eq!(lookup(d, "NEARBY-9").await.0, 404);
    let (status, found) = search(d, "id_card", &person(0)).await;
    assert_eq!(
        (status, ids(&found)),
        (200, vec![("A".into(), "NEARBY-0".into())])
    );
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

/// A hub's coordinator whose view can lose members and find them again,
/// as a ZooKeeper view does when a peer's znode is deleted and created
/// again (the peer lost its session and registered in a new one): the
/// member removed from the view, then put back, the two taken in apart.
struct Blinkered {
    inner: Arc<InProcessCoordinator>,
    hidden: watch::Sender<BTreeSet<String>>,
    view: watch::Sender<View>,
}

impl Blinkered {
    fn new(hub: &Arc<Hub>) -> Arc<Blinkered> {
        Arc::new(Blinkered {
            inner: hub.coordinator(),
            hidden: watch::Sender::new(BTreeSet::new()),
            view: watch::Sender::new(View::default()),
        })
    }

    fn hide(&self, name: &str) {
        self.hidden.send_modify(|h| {
            h.insert(name.to_owned());
        });
    }

    fn show(&self, name: &str) {
        self.hidden.send_modify(|h| {
            h.remove(name);
        });
    }
}

impl Coordinator for Blinkered {
    fn run(
        self: Arc<Self>,
        name: xarchive_node::DomainName,
        member: Member,
        positions: watch::Receiver<Position>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        async move {
            let registered = self
                .inner
                .clone()
                .run(name, member, positions, shutdown.clone());
            // The hub's view, less the members hidden, changing only
            // what differs (as the ZooKeeper coordinator's does).
            let follow = async {
                let (mut hub, mut hidden) = (self.inner.view(), self.hidden.subscribe());
                loop {
                    let hide = hidden.borrow_and_update().clone();
                    let now = hub.borrow_and_update().clone();
                    let members = now
                        .members
                        .into_iter()
                        .filter(|(n, _)| !hide.contains(n.as_str()))
                        .collect();
                    self.view.send_modify(|v| {
                        v.replace_members(members);
                        v.connected = now.connected;
                    });
                    tokio::select! {
                        changed = hub.changed() => if changed.is_err() { break },
                        changed = hidden.changed() => if changed.is_err() { break },
                        () = shutdown.cancelled() => break,
                    }
                }
            };
            tokio::join!(registered, follow);
        }
        .boxed()
    }

    fn view(&self) -> watch::Receiver<View> {
        self.view.subscribe()
    }

    fn published(&self) -> watch::Receiver<Option<Position>> {
        self.inner.published()
    }

    fn read_current(&self) -> BoxFuture<'_, Result<std::sync::Arc<Roster>, CoordError>> {
        self.inner.read_current()
    }

    fn describe(&self) -> String {
        "in-process, with members hidden at will".into()
    }

    fn forget<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CoordError>> {
        self.inner.forget(name)
    }

    fn set_trust_entry(&self, entry: xarchive_seal::ArchiveEntry) {
        self.inner.set_trust_entry(entry);
    }

    fn trust_entries(&self) -> BoxFuture<'_, Result<Vec<xarchive_seal::ArchiveEntry>, CoordError>> {
        self.inner.trust_entries()
    }
}

impl AuditAnchor for Blinkered {
    fn anchor_audit<'a>(
        &'a self,
        name: &'a str,
        head: &'a AuditHead,
    ) -> BoxFuture<'a, Result<(), CoordError>> {
        self.inner.anchor_audit(name, head)
    }

    fn audit_anchor<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<AuditHead>, CoordError>> {
        self.inner.audit_anchor(name)
    }
}

impl Cluster {
    /// Waits until every running domain's copy of every other one has
    /// reached the position that one had when this was called (writes
    /// may go on meanwhile), within `bound`.
    async fn reach_positions_of_now(&self, bound: Duration) {
        let targets: Vec<(String, Position)> = self
            .domains
            .iter()
            .map(|d| (d.node.config().name.to_string(), d.node.domain().position()))
            .collect();
        let deadline = Instant::now() + bound;
        loop {
            let mut behind = Vec::new();
            for d in &self.domains {
                let view = d.node.cluster_view().await;
                for (origin, at) in targets.iter().filter(|(o, _)| *o != view.domain) {
                    let reached = view.get(origin).is_some_and(|copy| {
                        copy.replica_epoch == Some(at.epoch)
                            && copy.replica_version.is_some_and(|v| v >= at.version)
                    });
                    if !reached {
                        behind.push(format!("{}'s copy of {origin}", view.domain));
                    }
                }
            }
            if behind.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                for d in &self.domains {
                    eprintln!(
                        "{}",
                        serde_json::to_string(&d.node.cluster_view().await).unwrap()
                    );
                }
                panic!("still behind after {bound:?}: {behind:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (10 s at most) until `at` shows `peer` registered or not.
    async fn sees_up(&self, at: usize, peer: &str, up: bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let shown = self.domains[at]
                .node
                .cluster_view()
                .await
                .get(peer)
                .map(|p| p.up);
            if shown == Some(up) {
                return;
            }
            assert!(Instant::now() < deadline, "{peer} never showed up = {up}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A domain cut from ZooKeeper while ZooKeeper's leader is killed
/// registers again in a new session, and the other domains' views lose
/// its member and find it again. Were their relay trees not laid out
/// again once it is back, its tree neighbour would no longer pull at its
/// publications: that copy, and the copies relayed from it, would follow
/// it only at the pace of the grace sweep, behind for as long as it
/// writes (the fault test's `not-converged`; `sync.rs` `Layout`). Here the
/// sweep is off (its grace outlasts the test),
/// so a copy left to it would never catch up; every copy must reach, within
/// 5 s, where its origin stood, while all three keep writing, and be
/// current within 10 s once they stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_registers_again_is_followed_at_its_publications_again_while_everyone_writes() {
    let hub = Hub::new();
    let coordinators: BTreeMap<String, Arc<Blinkered>> = ["A", "B", "C"]
        .iter()
        .map(|n| (n.to_string(), Blinkered::new(&hub)))
        .collect();
    // Degree 3: A is the root, B and C its children; A alone pulls C's
    // changes from C, and B has them from A's relay.
    let c = Cluster::start_on(
        3,
        |config| config.cluster.relay_grace_ms = 3_600_000,
        |name| coordinators[name].clone(),
    )
    .await;
    c.settle().await;

    // Every domain writes, and deletes what it wrote (a few IDs again and
    // again, so that no filter grows into a new epoch).
    let writing = CancellationToken::new();
    let writers: Vec<_> = c
        .domains
        .iter()
        .map(|d| {
            let (client, stop) = (d.client.clone(), writing.clone());
            let name = d.node.config().name.clone();
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.is_cancelled() {
                    let id = format!("{name}-W-{}", i % 8);
                    client.put(&id, &json!({"title": "t"})).await.unwrap();
                    client.delete(&id).await.unwrap();
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                i
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while c
        .domains
        .iter()
        .any(|d| d.node.domain().position().version < 20)
    {
        assert!(Instant::now() < deadline, "the writes do not go through");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.reach_positions_of_now(Duration::from_secs(5)).await;

    // C's registration goes and comes back in A's and B's views.
    for at in ["A", "B"] {
        coordinators[at].hide("C");
    }
    c.sees_up(0, "C", false).await;
    c.sees_up(1, "C", false).await;
    for at in ["A", "B"] {
        coordinators[at].show("C");
    }
    c.sees_up(0, "C", true).await;
    c.sees_up(1, "C", true).await;

    for _ in 0..5 {
        c.reach_positions_of_now(Duration::from_secs(5)).await;
    }
    writing.cancel();
    for writer in writers {
        assert!(writer.await.unwrap() > 0);
    }
    c.settle().await;
}

/// Puts record `id` at `d`: of `category`, open, about the person `card`.
async fn put_file(d: &Domain, id: &str, category: &str, card: &str) {
    let record = json!({
        "title": "婚姻登记",
        "metadata": {"category": category, "access": "open"},
        "content": "5ama5ae75LmL6K6w",
        "keys": {"id_card": card},
    });
    d.client.put(id, &record).await.unwrap();
}

/// Asks `d` about request `id` until `done` holds of it.
async fn request_until(d: &Domain, id: &str, done: impl Fn(&RequestView) -> bool) -> RequestView {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let view = d.client.request(id).await.unwrap();
        if done(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "request never got there: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const APPLICANT: &str = "11010519491231002X";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_the_applicant_s_own_open_marriage_record_comes_back_signed_without_review() {
    let c = Cluster::start(2).await;
    let (a, b) = (&c.domains[0], &c.domains[1]);
    put_file(b, "M-1", "marriage", APPLICANT).await;
    c.settle().await;
    let submitted = a
        .client
        .submit_request(&json!({
            "applicant_id": APPLICANT,
            "applicant_name": "张三",
            "purpose": "贷款",
        }))
        .await
        .unwrap();
    // B is named once it answers, not before.
    assert!(
        submitted.holdings.is_empty() && submitted.awaiting.archives == 1,
        "{submitted:?}"
    );
    let done = request_until(a, &submitted.id, |r| r.status == RequestStatus::Answered).await;
    assert_eq!(done.holdings[0].domain, "B");
    let copy = &done.holdings[0].copies[0];
    assert_eq!(
        (
            copy.archive_number.as_str(),
            copy.holding.as_str(),
            copy.valid
        ),
        ("M-1", "B", true)
    );
    assert_eq!(copy.content.as_deref(), Some("5ama5ae75LmL6K6w"));
    // The certificate: its code checks at the archive that issued it and
    // at the other, which asks it; its payload checks at both.
    let certified = a.client.issue_certificate(&submitted.id).await.unwrap();
    assert_eq!(certified.request.status, RequestStatus::Certified);
    for d in [a, b] {
        let check = d.client.check_certificate(&certified.code).await.unwrap();
        assert_eq!(
            (
                check.issuer.domain.as_str(),
                check.copies[0].holding.domain.as_str()
            ),
            ("A", "B")
        );
        assert_eq!(check.copies[0].archive_number, "M-1");
        let check = d
            .client
            .verify_certificate(&certified.sheets[0].payload)
            .await
            .unwrap();
        assert_eq!(check.request_id, submitted.id);
    }
    // Both archives logged their steps, with the applicant as a digest.
    for d in [a, b] {
        let page = d.client.audit(None).await.unwrap();
        let steps: Vec<&str> = page
            .entries
            .iter()
            .filter(|e| e.request.as_deref() == Some(submitted.id.as_str()))
            .filter_map(|e| e.action.as_deref())
            .collect();
        assert!(!steps.is_empty(), "no step of the request logged");
        let text = serde_json::to_string(&page).unwrap();
        assert!(
            !text.contains(APPLICANT),
            "the identity number is in the log"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_policy_does_not_release_waits_for_a_reviewer_who_approves_or_refuses_it() {
    let c = Cluster::start(2).await;
    let (a, b) = (&c.domains[0], &c.domains[1]);
    put_file(b, "C-1", "court", APPLICANT).await;
    put_file(b, "C-2", "court", APPLICANT).await;
    c.settle().await;
    let ask = |record: &str| {
        json!({
            "applicant_id": APPLICANT,
            "applicant_name": "张三",
            "purpose": "诉讼",
            "records": [record],
        })
    };
    let first = a.client.submit_request(&ask("C-1")).await.unwrap();
    let second = a.client.submit_request(&ask("C-2")).await.unwrap();
    for id in [&first.id, &second.id] {
        request_until(a, id, |r| r.awaiting.in_review == 1).await;
    }
    let queue = b.client.reviews().await.unwrap().reviews;
    assert_eq!(queue.len(), 2);
    assert!(queue.iter().all(|r| r.reason.contains("court")));
    let approve = Decision {
        approve: true,
        reason: String::new(),
    };
    b.client.decide("A", &first.id, &approve).await.unwrap();
    let refuse = Decision {
        approve: false,
        reason: "涉及第三人隐私".into(),
    };
    b.client.decide("A", &second.id, &refuse).await.unwrap();
    // Decided once: a second decision is refused.
    let again = b
        .client
        .decide("A", &second.id, &approve)
        .await
        .unwrap_err();
    assert_eq!(again.code(), Some(ErrorCode::AlreadyDecided));
    let approved = request_until(a, &first.id, |r| r.status == RequestStatus::Answered).await;
    assert_eq!(approved.holdings[0].copies[0].archive_number, "C-1");
    let refused = request_until(a, &second.id, |r| r.status == RequestStatus::Refused).await;
    let nothing_to_certify = a.client.issue_certificate(&second.id).await.unwrap_err();
    assert_eq!(nothing_to_certify.code(), Some(ErrorCode::NotAnswered));
    assert_eq!(
        refused.holdings[0].reason.as_deref(),
        Some("涉及第三人隐私")
    );
    assert!(b.client.reviews().await.unwrap().reviews.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_delivered_twice_is_taken_in_once_and_answered_the_same() {
    let c = Cluster::start(2).await;
    let b = &c.domains[1];
    put_file(b, "M-1", "marriage", APPLICANT).await;
    let digest = b
        .node
        .auth()
        .key_hasher()
        .audit_digest("id_card", APPLICANT);
    let delivery = Delivery {
        request_id: "00ff".into(),
        receiving: "A".into(),
        applicant_digest: digest,
        applicant_name: "张三".into(),
        purpose: "贷款".into(),
        records: vec!["M-1".into(), "M-404".into()],
    };
    let once = b.client.peer().deliver_request(&delivery).await.unwrap();
    let twice = b.client.peer().deliver_request(&delivery).await.unwrap();
    assert_eq!(once.state, HoldingState::Released);
    assert_eq!(once.missing, vec!["M-404".to_owned()]);
    // The same answer, sealed afresh.
    let unsealed = |a: &xarchive_node::wire::Answer| xarchive_node::wire::Answer {
        sealed: String::new(),
        ..a.clone()
    };
    assert_eq!(unsealed(&once), unsealed(&twice));
    assert!(!twice.sealed.is_empty());
    let released = b
        .client
        .audit(None)
        .await
        .unwrap()
        .entries
        .iter()
        .filter(|e| e.action.as_deref() == Some("request_released"))
        .count();
    assert_eq!(released, 1);
}
