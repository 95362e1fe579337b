//! The seed paper's Table 2 on a local cluster: every call between domains
//! is delayed by a simulated one-way WAN delay, and users (closed loop,
//! each waiting for its answer before asking again) look up existing
//! records at random domains, routed and broadcast in turn.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use serde_json::json;
use xarchive_node::cluster::{Coordinator, Hub};
use xarchive_node::sample;

use super::quantile;
use super::svg::{Chart, Series};
use crate::cmd::local::{LocalCluster, Plan};

/// The seed paper's Table 2: (users, traditional ms, filter ms).
pub const PAPER_TABLE_2: [(u32, f64, f64); 6] = [
    (10, 167.0, 35.0),
    (20, 389.0, 110.0),
    (40, 689.0, 280.0),
    (60, 1028.0, 940.0),
    (80, 1273.0, 1081.0),
    (100, 2093.0, 1198.0),
];

#[derive(clap::Args)]
pub struct LookupBenchArgs {
    #[arg(long, default_value_t = 8)]
    domains: usize,
    /// Concurrent users, one run per value.
    #[arg(long, value_delimiter = ',', default_value = "10,20,40,60,80,100")]
    concurrency: Vec<usize>,
    /// Simulated one-way delay of every call between domains.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    wan_delay: Duration,
    /// Sample records per domain.
    #[arg(long, default_value_t = 2_000)]
    records: u64,
    /// Measuring time per concurrency level and strategy.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "bench-lookup.json")]
    json: PathBuf,
    /// Where to draw latency against users (SVG).
    #[arg(long, default_value = "bench-lookup.svg")]
    plot: PathBuf,
}

/// One concurrency level under one strategy.
#[derive(Clone, Debug, serde::Serialize)]
struct Figures {
    lookups: usize,
    errors: usize,
    p50_ms: f64,
    p99_ms: f64,
    throughput: f64,
    remote_calls_per_lookup: f64,
}

async fn measure(
    http: &reqwest::Client,
    addresses: &[String],
    ids: &Arc<Vec<String>>,
    users: usize,
    strategy: &str,
    duration: Duration,
) -> Figures {
    let warmup = Duration::from_millis(500);
    let start = Instant::now();
    let (measure_from, deadline) = (start + warmup, start + warmup + duration);
    let tasks: Vec<_> = (0..users)
        .map(|u| {
            let (http, ids, addresses) = (http.clone(), ids.clone(), addresses.to_vec());
            let strategy = strategy.to_owned();
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(u as u64);
                let (mut latencies, mut calls, mut errors) = (Vec::new(), 0u64, 0usize);
                while Instant::now() < deadline {
                    let at = &addresses[rng.random_range(0..addresses.len())];
                    let id = &ids[rng.random_range(0..ids.len())];
                    let url = format!(
                        "{at}/v1/lookup/{}?strategy={strategy}",
                        xarchive_node::client::encode_id(id)
                    );
                    let sent = Instant::now();
                    let answer = match http.get(&url).send().await {
                        Ok(r) if r.status().is_success() => {
                            r.json::<serde_json::Value>().await.ok()
                        }
                        _ => None,
                    };
                    let elapsed = sent.elapsed();
                    if sent < measure_from {
                        continue;
                    }
                    match answer {
                        Some(a) => {
                            latencies.push(elapsed.as_secs_f64() * 1e3);
                            calls += a["route"]["remote_calls"].as_u64().unwrap_or(0);
                        }
                        None => errors += 1,
                    }
                }
                (latencies, calls, errors)
            })
        })
        .collect();
    let (mut latencies, mut calls, mut errors) = (Vec::new(), 0u64, 0usize);
    for t in tasks {
        if let Ok((l, c, e)) = t.await {
            latencies.extend(l);
            calls += c;
            errors += e;
        }
    }
    latencies.sort_by(f64::total_cmp);
    Figures {
        lookups: latencies.len(),
        errors,
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: quantile(&latencies, 0.99),
        throughput: latencies.len() as f64 / duration.as_secs_f64(),
        remote_calls_per_lookup: calls as f64 / latencies.len().max(1) as f64,
    }
}

pub async fn run(args: LookupBenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.domains >= 2, "--domains must be at least 2");
    let dir = tempfile::tempdir()?;
    let hub = Hub::new();
    let delay_ms = args.wan_delay.as_millis() as u64;
    let records = args.records;
    eprintln!(
        "starting {} domains with {} records each, {} ms one-way delay between domains",
        args.domains, records, delay_ms
    );
    let cluster = LocalCluster::start(Plan {
        domains: args.domains,
        data: dir.path().to_owned(),
        port: 0,
        records,
        tune: &|c| {
            c.cluster.wan_delay_ms = delay_ms;
            c.filter.expected_items = records.max(1_000) * 2;
        },
        coordinator: &|_| hub.coordinator() as Arc<dyn Coordinator>,
    })
    .await?;
    cluster.converged(Duration::from_secs(60)).await?;
    let addresses = cluster.addresses();
    let ids: Arc<Vec<String>> = Arc::new(
        (0..args.domains)
            .flat_map(|d| (0..records).map(move |i| sample::id(d, i)))
            .collect(),
    );
    xarchive_node::client::install_crypto();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .timeout(Duration::from_secs(60))
        .build()?;
    let bar = ProgressBar::new((args.concurrency.len() * 2) as u64).with_style(
        ProgressStyle::with_template("{msg:>24} [{bar:30}] {pos}/{len} {elapsed}")?
            .progress_chars("=> "),
    );
    let mut levels = Vec::new();
    for &users in &args.concurrency {
        let mut row = Vec::new();
        for strategy in ["routed", "broadcast"] {
            bar.set_message(format!("{users} users, {strategy}"));
            row.push(measure(&http, &addresses, &ids, users, strategy, args.duration).await);
            bar.inc(1);
        }
        levels.push((users, row[0].clone(), row[1].clone()));
    }
    bar.finish_and_clear();
    cluster.stop().await?;

    let rtt = 2.0 * delay_ms as f64;
    println!(
        "\n{} domains, {} ms one-way between domains (round trip {} ms), {} records each, {} s per level\n",
        args.domains,
        delay_ms,
        rtt,
        records,
        args.duration.as_secs_f64()
    );
    println!(
        "{:>5} | {:>9} {:>9} {:>9} {:>6} | {:>9} {:>9} {:>9} {:>6} | {:>8} {:>8} | {:>11} {:>11}",
        "users",
        "routed",
        "p99",
        "req/s",
        "calls",
        "broadcast",
        "p99",
        "req/s",
        "calls",
        "p50 ×",
        "req/s ×",
        "paper trad.",
        "paper filt."
    );
    let mut json_levels = Vec::new();
    for (users, routed, broadcast) in &levels {
        let paper = PAPER_TABLE_2.iter().find(|(u, _, _)| *u as usize == *users);
        println!(
            "{:>5} | {:>7.1}ms {:>7.1}ms {:>9.0} {:>6.2} | {:>7.1}ms {:>7.1}ms {:>9.0} {:>6.2} | {:>8.2} {:>8.2} | {:>11} {:>11}",
            users,
            routed.p50_ms,
            routed.p99_ms,
            routed.throughput,
            routed.remote_calls_per_lookup,
            broadcast.p50_ms,
            broadcast.p99_ms,
            broadcast.throughput,
            broadcast.remote_calls_per_lookup,
            broadcast.p50_ms / routed.p50_ms,
            routed.throughput / broadcast.throughput,
            paper.map_or("—".into(), |p| format!("{} ms", p.1)),
            paper.map_or("—".into(), |p| format!("{} ms", p.2)),
        );
        json_levels.push(json!({
            "concurrency": users,
            "routed": routed,
            "broadcast": broadcast,
            "p50_ratio": broadcast.p50_ms / routed.p50_ms,
            "throughput_ratio": routed.throughput / broadcast.throughput,
            "paper_traditional_ms": paper.map(|p| p.1),
            "paper_filter_ms": paper.map(|p| p.2),
        }));
    }
    let report = json!({
        "domains": args.domains,
        "wan_delay_ms": delay_ms,
        "round_trip_ms": rtt,
        "records_per_domain": records,
        "seconds_per_level": args.duration.as_secs_f64(),
        "levels": json_levels,
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)?;
    let line = |name: &str, colour, dashed, f: &dyn Fn(&(usize, Figures, Figures)) -> f64| Series {
        name: name.into(),
        colour,
        dashed,
        points: levels.iter().map(|l| (l.0 as f64, f(l))).collect(),
    };
    let paper = |name: &str, colour, f: fn(&(u32, f64, f64)) -> f64| Series {
        name: name.into(),
        colour,
        dashed: true,
        points: PAPER_TABLE_2
            .iter()
            .map(|p| (f64::from(p.0), f(p)))
            .collect(),
    };
    let chart = Chart {
        title: format!(
            "Lookup p50 against concurrent users ({} domains, {} ms one-way)",
            args.domains, delay_ms
        ),
        x_label: "concurrent users".into(),
        y_label: "p50 lookup time (ms)".into(),
        series: vec![
            line("routed (filters)", "#1f77b4", false, &|l| l.1.p50_ms),
            line("broadcast", "#d62728", false, &|l| l.2.p50_ms),
            paper("paper: filter", "#1f77b4", |p| p.2),
            paper("paper: traditional", "#d62728", |p| p.1),
        ],
    };
    std::fs::write(&args.plot, chart.render())?;
    println!(
        "\nfigures in {}, chart in {}",
        args.json.display(),
        args.plot.display()
    );
    Ok(ExitCode::SUCCESS)
}
