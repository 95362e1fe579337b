//! `xarchive-bench domains`: real `xarchive serve` domains in groups on
//! one ZooKeeper, under steady writes: what a write's acknowledgement
//! takes, how long until the domain at the far end of the relay tree
//! routes it, what ZooKeeper sends per write and domain, and
//! each domain's CPU. Light publishers (`nation`) stand in for a nation;
//! these are full domains, each following all the others.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use xarchive_node::wire::RouteBody;
use xarchive_node::Client;

use crate::child::ServeChild;
use crate::nation::cluster::{cpu_seconds, figure, mntr};
use crate::quantile;

/// How long a write may take to be routed at the far end before the
/// benchmark counts it as never routed (and fails).
const GIVE_UP: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct DomainsBenchArgs {
    /// ZooKeeper (`host:port`); scripts/zookeeper.sh sets XARCHIVE_ZK.
    #[arg(long, env = "XARCHIVE_ZK")]
    zk: String,
    /// How many domains.
    #[arg(long, default_value_t = 16)]
    domains: usize,
    /// In how many groups (provinces 11, 12, …), taking turns.
    #[arg(long, default_value_t = 2)]
    groups: usize,
    /// Writes a second, in all, spread over the domains.
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// How long the writes go on.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "bench-domains.json")]
    json: PathBuf,
}

pub async fn run(args: DomainsBenchArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::ensure!(
        args.domains >= 2 && args.groups >= 1,
        "--domains ≥ 2, --groups ≥ 1"
    );
    let dir = tempfile::tempdir()?;
    let cluster = format!("bench-domains-{}", rand::random::<u32>());
    let names: Vec<String> = (0..args.domains)
        .map(|i| format!("{}-{:02}", 11 + i % args.groups, 1 + i / args.groups))
        .collect();
    let mut domains = Vec::new();
    for name in &names {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, format!("[cluster]\ngroup = \"{}\"\n", &name[..2]))?;
        let serve_args = [
            "--zk",
            &args.zk,
            "--cluster",
            &cluster,
            "--expected-items",
            "100000",
            "--config",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([config.display().to_string()])
        .collect::<Vec<_>>();
        let log = dir.path().join(format!("{name}.log"));
        domains.push(ServeChild::start(name, &dir.path().join(name), &serve_args, &log).await?);
    }
    let clients: Vec<Client> = domains
        .iter()
        .map(|d| Client::new(&d.url, Duration::from_secs(10)))
        .collect::<Result<_, _>>()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    for c in &clients {
        while !c.cluster().await.is_ok_and(|v| v.converged(names.len())) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the domains did not converge in 2 minutes"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let http = reqwest::Client::new();
    let zk_before = mntr(&args.zk).await?;
    let cpu_before: Vec<f64> = domains
        .iter()
        .map(|d| cpu_seconds(d.pid()))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    let total = (args.duration.as_secs_f64() * f64::from(args.rate)) as u64;
    let bar = ProgressBar::new(total).with_style(ProgressStyle::with_template(
        "{msg} {wide_bar} {pos}/{len} writes",
    )?);
    bar.set_message(format!("{} domains, {} writes/s", names.len(), args.rate));
    let (mut acks, mut lags) = (Vec::new(), Vec::new());
    let mut watching = tokio::task::JoinSet::new();
    let every = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    for k in 0..total {
        tokio::time::sleep_until((started + every * k as u32).into()).await;
        // The heap lays the names out in order: the far end of the first
        // is the last.
        let (w, r) = (
            k as usize % names.len(),
            names.len() - 1 - k as usize % names.len(),
        );
        let id = format!("{}-d{k}", names[w]);
        let sent = Instant::now();
        clients[w].put(&id, &json!({"title": "t"})).await?;
        let acked = Instant::now();
        acks.push((acked - sent).as_secs_f64() * 1e3);
        let (url, owner, http) = (
            format!("{}/v1/route/{id}", domains[r].url),
            names[w].clone(),
            http.clone(),
        );
        watching.spawn(async move {
            while acked.elapsed() < GIVE_UP {
                let route: Option<RouteBody> = match http.get(&url).send().await {
                    Ok(answer) => answer.json().await.ok(),
                    Err(_) => None,
                };
                if route.is_some_and(|r| r.candidates.contains(&owner)) {
                    return Some((Instant::now() - acked).as_secs_f64() * 1e3);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            None
        });
        bar.inc(1);
    }
    let writing = started.elapsed().as_secs_f64();
    let mut never = 0;
    while let Some(lag) = watching.join_next().await {
        match lag.context("a lag watcher failed")? {
            Some(lag) => lags.push(lag),
            None => never += 1,
        }
    }
    bar.finish_and_clear();
    let zk_after = mntr(&args.zk).await?;
    let mut cpus: Vec<f64> = domains
        .iter()
        .zip(&cpu_before)
        .map(|(d, before)| cpu_seconds(d.pid()).map(|now| (now - before) / writing * 100.0))
        .collect::<Result<_, _>>()?;
    for d in domains {
        d.stop().await?;
    }
    acks.sort_by(f64::total_cmp);
    lags.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    let per = |name: &str| {
        (figure(&zk_after, name) - figure(&zk_before, name)) as f64
            / total as f64
            / names.len() as f64
    };
    let report = json!({
        "domains": names.len(), "groups": args.groups, "rate": args.rate, "writes": total, "not_routed_within_10_s": never,
        "ack_ms": {"p50": quantile(&acks, 0.5), "p99": quantile(&acks, 0.99)},
        "far_end_lag_ms": {"p50": quantile(&lags, 0.5), "p99": quantile(&lags, 0.99)},
        "zk_packets_sent_per_write_per_domain": per("zk_packets_sent"),
        "zk_packets_received_per_write_per_domain": per("zk_packets_received"),
        "cpu_percent_of_a_core": {"median": quantile(&cpus, 0.5), "max": quantile(&cpus, 1.0)},
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)?;
    println!(
        "{} domains in {} groups, {total} writes at {}/s:",
        names.len(),
        args.groups,
        args.rate
    );
    println!("| | p50 | p99 |\n|---|---|---|");
    println!(
        "| acknowledgement | {:.1} ms | {:.1} ms |",
        quantile(&acks, 0.5),
        quantile(&acks, 0.99)
    );
    println!(
        "| routed at the far end, after the acknowledgement | {:.1} ms | {:.1} ms |",
        quantile(&lags, 0.5),
        quantile(&lags, 0.99)
    );
    println!(
        "ZooKeeper per write and domain: {:.2} packets sent, {:.2} received; CPU per domain: median {:.1} %, max {:.1} % of a core",
        per("zk_packets_sent"),
        per("zk_packets_received"),
        quantile(&cpus, 0.5),
        quantile(&cpus, 1.0)
    );
    println!("figures in {}", args.json.display());
    anyhow::ensure!(
        never == 0,
        "{never} writes were not routed at the far end within {GIVE_UP:?}"
    );
    Ok(std::process::ExitCode::SUCCESS)
}
