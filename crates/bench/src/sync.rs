//! How fast a write becomes routable elsewhere: two domains in this
//! process, each with its own ZooKeeper session; a write is acknowledged
//! at A, then B's replicas are watched until they route the ID to A.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use xarchive_node::cluster::{ClusterConfig, Coordinator, ZkSettings, ZooKeeperCoordinator};
use xarchive_node::ApiClient;

use crate::quantile;
use xarchive::local::{LocalCluster, Plan};

#[derive(clap::Args)]
pub struct SyncBenchArgs {
    /// ZooKeeper: host:port[,host:port…][/chroot].
    #[arg(long, env = "XARCHIVE_ZK")]
    zk: String,
    /// Writes measured.
    #[arg(long, default_value_t = 200)]
    samples: usize,
}

pub async fn run(args: SyncBenchArgs) -> anyhow::Result<ExitCode> {
    let dir = tempfile::tempdir()?;
    let cluster_name = format!("bench-sync-{}", std::process::id());
    let coordinator = |_: usize| -> Arc<dyn Coordinator> {
        ZooKeeperCoordinator::new(ZkSettings {
            connect: args.zk.clone(),
            cluster: cluster_name.clone(),
            group: ClusterConfig::default().group,
            session_timeout: Duration::from_secs(6),
            publish_interval: Duration::from_millis(10),
            admission: xarchive_node::security::member::Admission::default(),
            credentials: None,
            ledger: ClusterConfig::default().ledger,
        })
    };
    let cluster = LocalCluster::start(Plan {
        domains: 2,
        data: dir.path().to_owned(),
        port: 0,
        records: 1_000,
        tune: &|c| c.filter.expected_items = 100_000,
        coordinator: &coordinator,
    })
    .await?;
    cluster.converged(Duration::from_secs(30)).await?;
    let a = ApiClient::new(cluster.nodes[0].address(), Duration::from_secs(10))?;
    let b = cluster.nodes[1].clone();
    let bar = ProgressBar::new(args.samples as u64);
    let mut from_ack = Vec::new();
    let mut from_request = Vec::new();
    for i in 0..args.samples {
        let id = format!("SYNC-{}-{i}", std::process::id());
        let sent = Instant::now();
        a.put(&id, &serde_json::json!({"title": "sync"})).await?;
        let acked = Instant::now();
        let deadline = acked + Duration::from_secs(10);
        while !b.cluster().candidates(&id).iter().any(|n| n == "A") {
            anyhow::ensure!(Instant::now() < deadline, "B never routed {id} to A");
            tokio::task::yield_now().await;
        }
        let routed = Instant::now();
        from_ack.push((routed - acked).as_secs_f64() * 1e3);
        from_request.push((routed - sent).as_secs_f64() * 1e3);
        bar.inc(1);
        // Let the writes be independent of each other's publication.
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    bar.finish_and_clear();
    cluster.stop().await?;
    from_ack.sort_by(f64::total_cmp);
    from_request.sort_by(f64::total_cmp);
    println!("{} writes at A, ZooKeeper {}:", args.samples, args.zk);
    println!("  from acknowledgement until B routes the ID to A: median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        quantile(&from_ack, 0.5), quantile(&from_ack, 0.99), from_ack.last().copied().unwrap_or(f64::NAN));
    println!(
        "  from sending the PUT until B routes it:           median {:.2} ms, p99 {:.2} ms",
        quantile(&from_request, 0.5),
        quantile(&from_request, 0.99)
    );
    println!(
        "{}",
        serde_json::json!({
            "samples": args.samples,
            "ack_to_routed_ms": {"median": quantile(&from_ack, 0.5), "p99": quantile(&from_ack, 0.99)},
            "request_to_routed_ms": {"median": quantile(&from_request, 0.5), "p99": quantile(&from_request, 0.99)},
        })
    );
    Ok(ExitCode::SUCCESS)
}
