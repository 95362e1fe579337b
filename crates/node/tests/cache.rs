//! The cache of other domains' records, in-process and in a real Redis:
//! hits without remote calls, admission, eviction on change, Redis
//! failures that users never see, one fetch for many concurrent lookups.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use xarchive_node::cluster::Hub;
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::wire::{CacheRoute, LookupBody, Strategy};
use xarchive_node::ApiClient;
use xarchive_node::{Node, NodeConfig};
use xarchive_testkit::{LoopbackLink, RedisServer};

/// Two domains, A (asks) and B (owns), with the given cache at A. A
/// reaches B through `link` (which a test may cut); clients reach both
/// directly.
struct Pair {
    a: Arc<Node>,
    b: Arc<Node>,
    at_a: ApiClient,
    at_b: ApiClient,
    link: LoopbackLink,
    _stop: CancellationToken,
    _dir: tempfile::TempDir,
}

/// How long a cached copy may be served while its owner's filter copy
/// lags (`cache.max_lag_ms`), in these tests.
const MAX_LAG_MS: u64 = 300;

impl Pair {
    async fn start(cache_url: &str) -> Pair {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::new();
        let stop = CancellationToken::new();
        let mut nodes = Vec::new();
        let mut clients = Vec::new();
        let mut link = None;
        for name in ["A", "B"] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let direct = listener.local_addr().unwrap().to_string();
            let advertised = if name == "B" {
                let to_b = LoopbackLink::to(&direct).unwrap();
                let address = format!("http://{}", to_b.address());
                link = Some(to_b);
                address
            } else {
                format!("http://{direct}")
            };
            let mut config = NodeConfig {
                name: name.parse().unwrap(),
                data: dir.path().join(name),
                ..NodeConfig::default()
            };
            config.filter.expected_items = 10_000;
            config.cache.url = cache_url.into();
            config.cluster.peer_timeout_ms = 2_000;
            config.cache.max_lag_ms = MAX_LAG_MS;
            let node = Node::open_in(config, hub.coordinator(), &advertised).unwrap();
            let shutdown = stop.child_token();
            tokio::spawn(xarchive_node::server::serve(
                node.clone(),
                listener,
                async move { shutdown.cancelled().await },
            ));
            clients.push(
                ApiClient::new(&format!("http://{direct}"), Duration::from_secs(10)).unwrap(),
            );
            nodes.push(node);
        }
        let pair = Pair {
            b: nodes.pop().unwrap(),
            a: nodes.pop().unwrap(),
            at_b: clients.pop().unwrap(),
            at_a: clients.pop().unwrap(),
            link: link.expect("B is reached through the link"),
            _stop: stop,
            _dir: dir,
        };
        pair.settle().await;
        pair
    }

    /// Waits until A's copy of B is current.
    /// Waits until A's copy of B covers B's present position (not only
    /// the position A last heard of, which may be older).
    async fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let caught_up = || async {
            let at = self.b.domain().position();
            self.a.cluster_view().await.get("B").is_some_and(|p| {
                (p.epoch, p.version) == (Some(at.epoch), Some(at.version))
                    && p.current == Some(true)
            })
        };
        while !caught_up().await {
            assert!(
                Instant::now() < deadline,
                "A's replica of B did not converge"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn lookup(&self, id: &str) -> (u16, LookupBody) {
        self.at_a.lookup(id, Strategy::Routed).await.unwrap()
    }

    /// Times B served the record itself (GET /v1/archives/{id}).
    fn fetches_at_b(&self) -> u64 {
        let stats = self.b.domain().stats().unwrap();
        let text = self.b.metrics().render(&stats, true);
        text.lines()
            .filter(|l| {
                l.contains("route=\"/v1/archives/{id}\"")
                    && l.contains("method=\"GET\"")
                    && l.starts_with("xarchive_http_requests_total")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

async fn hits_after_admission(cache: &str) {
    let p = Pair::start(cache).await;
    p.at_b
        .put("档案/2024/001", &json!({"title": "v1"}))
        .await
        .unwrap();
    p.settle().await;
    // First lookup: remote, and not yet admitted (seen once).
    let (status, answer) = p.lookup("档案/2024/001").await;
    assert_eq!(status, 200, "{answer:?}");
    assert_eq!(answer.route.cache, Some(CacheRoute::Miss));
    assert_eq!(answer.route.remote_calls, 1);
    // Second: seen twice, fetched and admitted.
    let (_, answer) = p.lookup("档案/2024/001").await;
    assert_eq!(answer.route.cache, Some(CacheRoute::Miss));
    // Third: from the cache, no remote call.
    let (status, answer) = p.lookup("档案/2024/001").await;
    assert_eq!(status, 200);
    assert_eq!(answer.route.cache, Some(CacheRoute::Hit), "{answer:?}");
    assert_eq!(answer.route.remote_calls, 0);
    assert_eq!(answer.record.as_ref().map(|r| r.title.as_str()), Some("v1"));
    assert_eq!(answer.owner.as_deref(), Some("B"));

    // An update at B evicts A's copy within the sync delay.
    p.at_b
        .put("档案/2024/001", &json!({"title": "v2"}))
        .await
        .unwrap();
    p.settle().await;
    let (_, answer) = p.lookup("档案/2024/001").await;
    assert_eq!(
        answer.record.as_ref().map(|r| r.title.as_str()),
        Some("v2"),
        "{answer:?}"
    );
    // So does a delete.
    for _ in 0..2 {
        p.lookup("档案/2024/001").await;
    }
    assert!(p.at_b.delete("档案/2024/001").await.unwrap());
    p.settle().await;
    let (status, answer) = p.lookup("档案/2024/001").await;
    assert_eq!(status, 404, "{answer:?}");

    let stats = p.a.cluster().cache().stats();
    assert!(stats.hits >= 1, "{stats:?}");
    assert!(stats.admissions >= 1, "{stats:?}");
    assert!(stats.evictions >= 1, "{stats:?}");
    assert_eq!(stats.errors, 0, "{stats:?}");
}

/// A and B cut apart (both still in the cluster): once A's copy of B's
/// filter has lagged longer than the bound, A no longer serves B's
/// cached records, so a record B deleted is not served from A's cache.
async fn a_cut_off_owner_s_cached_records_are_refused_past_the_lag_bound(cache_url: &str) {
    let p = Pair::start(cache_url).await;
    p.at_b
        .put("档案/2024/CUT", &json!({"title": "v1"}))
        .await
        .unwrap();
    p.settle().await;
    for _ in 0..2 {
        p.lookup("档案/2024/CUT").await;
    }
    let (_, answer) = p.lookup("档案/2024/CUT").await;
    assert_eq!(answer.route.cache, Some(CacheRoute::Hit), "{answer:?}");

    p.link.cut();
    assert!(p.at_b.delete("档案/2024/CUT").await.unwrap());
    // Within the bound a cached copy may still be served; past it, never:
    // the lookup goes to B, which cannot be reached from A.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, answer) = p.lookup("档案/2024/CUT").await;
        if answer.route.cache == Some(CacheRoute::Stale) {
            assert_eq!(
                (status, answer.unavailable.clone()),
                (503, vec!["B".to_owned()])
            );
            break;
        }
        assert_eq!(answer.route.cache, Some(CacheRoute::Hit), "{answer:?}");
        assert!(
            Instant::now() < deadline,
            "the cached copy was never refused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..5 {
        let (status, answer) = p.lookup("档案/2024/CUT").await;
        assert_ne!(
            status, 200,
            "a deleted record served after the bound: {answer:?}"
        );
    }
    assert!(p.a.cluster().cache().stats().stale_refusals >= 1);

    p.link.heal();
    p.settle().await;
    assert_eq!(p.lookup("档案/2024/CUT").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_cache_refuses_a_cut_off_owner_s_records_past_the_lag_bound() {
    a_cut_off_owner_s_cached_records_are_refused_past_the_lag_bound("memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cache_refuses_a_cut_off_owner_s_records_past_the_lag_bound() {
    let redis = RedisServer::start();
    a_cut_off_owner_s_cached_records_are_refused_past_the_lag_bound(&redis.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_cache_serves_hot_records_and_drops_changed_ones() {
    hits_after_admission("memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cache_serves_hot_records_and_drops_changed_ones() {
    let redis = RedisServer::start();
    hits_after_admission(&redis.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_redis_costs_no_lookup_and_is_used_again_when_back() {
    let mut redis = RedisServer::start();
    let p = Pair::start(&redis.url()).await;
    for i in 0..20 {
        p.at_b
            .put(&format!("R-{i}"), &json!({"title": "t"}))
            .await
            .unwrap();
    }
    p.settle().await;
    for _ in 0..3 {
        for i in 0..20 {
            assert_eq!(p.lookup(&format!("R-{i}")).await.0, 200);
        }
    }
    let hits_before = p.a.cluster().cache().stats().hits;
    assert!(hits_before >= 20);

    redis.stop();
    for _ in 0..3 {
        for i in 0..20 {
            let (status, answer) = p.lookup(&format!("R-{i}")).await;
            assert_eq!(status, 200, "with Redis down: {answer:?}");
        }
    }
    let errors = p.a.cluster().cache().stats().errors;
    assert!(errors > 0, "cache errors are counted");
    let text = p.a.metrics().render(&p.a.domain().stats().unwrap(), true);
    assert!(text.contains("xarchive_cache_errors_total"), "{text}");

    // Back (empty): filled and used again, without a restart.
    redis.start_again();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for i in 0..20 {
            assert_eq!(p.lookup(&format!("R-{i}")).await.0, 200);
        }
        if p.a.cluster().cache().stats().hits > hits_before + 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cache was not used again: {:?}",
            p.a.cluster().cache().stats()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Lookups of an ID under way at the same time share one fetch, and the
/// record is cached before that fetch leaves the table of those under way
/// once the ID has been looked up twice (the cache's admission). So 100
/// lookups make one fetch, or two when the first ended before a second
/// one arrived (it was not yet admitted then): never one each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_lookups_of_one_cold_id_make_at_most_two_fetches() {
    let p = Arc::new(Pair::start("memory").await);
    p.at_b.put("COLD-1", &json!({"title": "t"})).await.unwrap();
    p.settle().await;
    let before = p.fetches_at_b();
    let lookups: Vec<_> = (0..100)
        .map(|_| {
            let p = p.clone();
            tokio::spawn(async move { p.lookup("COLD-1").await })
        })
        .collect();
    for l in lookups {
        let (status, answer) = l.await.unwrap();
        assert_eq!(status, 200, "{answer:?}");
    }
    let fetches = p.fetches_at_b() - before;
    assert!(
        (1..=2).contains(&fetches),
        "{fetches} remote fetches for 100 lookups"
    );
}

/// Records with an identity number among their keys, looked up (so
/// cached in Redis) and searched for by it: the number is in no Redis
/// key, no metric and no `/v1/stats` of either domain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_identity_number_reaches_a_redis_key_a_metric_or_the_stats() {
    let redis = RedisServer::start();
    let p = Pair::start(&redis.url()).await;
    let number = "11010519491231002X";
    for i in 0..5 {
        p.at_b
            .put(
                &format!("B-人事-{i}"),
                &json!({"title": "人事档案", "keys": {"id_card": number}}),
            )
            .await
            .unwrap();
    }
    p.settle().await;
    for _ in 0..3 {
        for i in 0..5 {
            assert_eq!(p.lookup(&format!("B-人事-{i}")).await.0, 200);
        }
    }
    let search = xarchive_node::wire::SearchRequest {
        key_type: "id_card".into(),
        value: number.into(),
        local: false,
        requester: None,
    };
    let (status, found) = p.at_a.search(&search).await.unwrap();
    assert_eq!((status, found.records.len()), (200, 5));
    assert!(p.a.cluster().cache().stats().admissions >= 1);

    let mut redis_keys = Vec::new();
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut connection)
            .await
            .unwrap();
        redis_keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert!(!redis_keys.is_empty(), "nothing was cached");
    let digits = &number[6..14];
    for key in &redis_keys {
        assert!(!key.contains(digits), "{key}");
    }
    for (node, client) in [(&p.a, &p.at_a), (&p.b, &p.at_b)] {
        let metrics = node.metrics().render(&node.domain().stats().unwrap(), true);
        assert!(!metrics.contains(digits));
        let served = client.stats().await.unwrap();
        assert!(!serde_json::to_string(&served).unwrap().contains(digits));
    }
}
