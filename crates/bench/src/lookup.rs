//! The seed paper's Table 2 on a local cluster: every call between domains
//! is delayed by a simulated one-way WAN delay, and users (closed loop,
//! each waiting for its answer before asking again) look up existing
//! records at random domains — routed and broadcast, with and without a
//! cache, over a uniform or a Zipf workload.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_distr::Distribution;
use serde_json::json;
use xarchive_node::cluster::{Coordinator, Hub};
use xarchive_node::sample;
use xarchive_node::wire::CacheRoute;

use crate::quantile;
use crate::svg::{Chart, Series};
use xarchive::local::{LocalCluster, Plan};

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
    /// Domains to start (in this process).
    #[arg(long, default_value_t = 8)]
    domains: usize,
    /// Concurrent users, one run per value.
    #[arg(long, value_delimiter = ',', default_value = "10,20,40,60,80,100")]
    concurrency: Vec<usize>,
    /// Simulated one-way delay of every call between domains.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    wan_delay: Duration,
    /// Records over all domains (spread evenly).
    #[arg(long, default_value_t = 16_000)]
    records: u64,
    /// `uniform` over all records, `zipf` (s = --zipf-s) by rank, or
    /// `keys`: uniform lookups beside searches by key.
    #[arg(long, value_enum, default_value_t = WorkloadKind::Uniform)]
    workload: WorkloadKind,
    /// The Zipf workload's exponent: higher, fewer records looked up more.
    #[arg(long, default_value_t = 1.0)]
    zipf_s: f64,
    /// What to compare: lookups by archive number `routed` or by
    /// `broadcast`, and `search`es by identity number (of sample people,
    /// each with records in one or a few domains). `--workload keys` compares
    /// `routed` with `search`.
    #[arg(long, value_delimiter = ',', default_value = "routed,broadcast")]
    strategies: Vec<Compared>,
    /// Caches to compare: none, memory, redis (needs --redis).
    #[arg(long, value_delimiter = ',', default_value = "none")]
    cache: Vec<CacheKind>,
    /// Redis for `--cache redis`.
    #[arg(long, env = "XARCHIVE_REDIS")]
    redis: Option<String>,
    /// Stop Redis (this process id, by SIGTERM) this long into each Redis
    /// run, to show that lookups do not fail.
    #[arg(long, requires = "redis_pid", value_parser = humantime::parse_duration)]
    stop_redis_after: Option<Duration>,
    /// The process id of the Redis server `--stop-redis-after` stops.
    #[arg(long)]
    redis_pid: Option<u32>,
    /// Measuring time per run.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Unmeasured load before each run (caches fill, connections open).
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Run the domains over HTTPS (a throwaway loopback certificate),
    /// users and peers trusting only its authority.
    #[arg(long)]
    tls: bool,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "bench-lookup.json")]
    json: PathBuf,
    /// Where to draw p50 against users (SVG).
    #[arg(long, default_value = "bench-lookup.svg")]
    plot: PathBuf,
}

/// What a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Compared {
    /// Lookups by archive number, routed by the replicas.
    Routed,
    /// Lookups by archive number, asking every domain.
    Broadcast,
    /// Searches by identity number.
    Search,
}

/// The cache of remote records the domains run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum CacheKind {
    None,
    Memory,
    Redis,
}

/// Shows a command-line value as it is typed (`routed`, `redis`).
macro_rules! display_as_typed {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match clap::ValueEnum::to_possible_value(self) {
                    Some(value) => f.write_str(value.get_name()),
                    None => Ok(()),
                }
            }
        }
    )*};
}
display_as_typed!(Compared, CacheKind, WorkloadKind);

/// One run: a cache, a number of users, a strategy.
#[derive(Clone, Debug, serde::Serialize)]
struct Run {
    cache: CacheKind,
    users: usize,
    strategy: Compared,
    lookups: usize,
    failed: usize,
    p50_ms: f64,
    p99_ms: f64,
    throughput: f64,
    remote_calls_per_lookup: f64,
    /// Searches only: of the remote calls, those a router that knew where
    /// every record is would make (other domains holding the person's).
    holder_calls_per_lookup: f64,
    cache_hit_rate: f64,
}

/// Which record a user asks for next.
/// The IDs looked up.
#[derive(Clone, Copy, Debug, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum WorkloadKind {
    Uniform,
    Zipf,
    Keys,
}

enum Workload {
    Uniform(u64),
    Zipf(rand_distr::Zipf<f64>),
}

impl Workload {
    /// A record index; Zipf ranks are spread over the domains round-robin
    /// so every domain owns hot and cold records.
    fn pick(&self, rng: &mut impl Rng, domains: usize, per_domain: u64) -> String {
        let index = match self {
            Workload::Uniform(n) => rng.random_range(0..*n),
            // A Zipf rank: a whole number from 1 to the records' count.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Workload::Zipf(z) => (z.sample(rng) as u64).saturating_sub(1),
        };
        let domain = usize::try_from(index % domains as u64).expect("below `domains`, a usize");
        sample::id(domain, (index / domains as u64).min(per_domain - 1))
    }
}

/// One search at domain `at` of `domains` by the identity number of a
/// sample person with a record in some domain: its remote calls, and
/// those to other domains holding the person's records, if it succeeded.
async fn search(
    http: &reqwest::Client,
    (at, domains): (usize, &[String]),
    rng: &mut impl Rng,
    per_domain: u64,
) -> Option<(usize, usize)> {
    let personnel = per_domain / 4;
    if personnel == 0 {
        return None;
    }
    let holder = rng.random_range(0..domains.len());
    let p = sample::person_of(holder, 4 * rng.random_range(0..personnel) + 3)?;
    let needed = (0..domains.len())
        .filter(|&d| d != at && sample::records_of(p, d, per_domain).next().is_some())
        .count();
    let person = sample::person_keys(p);
    let at = &domains[at];
    let request = json!({"key_type": "id_card", "value": person["id_card"]});
    match http
        .post(format!("{at}/v1/search"))
        .json(&request)
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => r
            .json::<xarchive_node::wire::SearchBody>()
            .await
            .ok()
            .map(|b| (b.remote_calls, needed)),
        _ => None,
    }
}

struct Target<'a> {
    http: &'a reqwest::Client,
    addresses: &'a [String],
    workload: &'a Arc<Workload>,
    per_domain: u64,
}

async fn measure(
    t: &Target<'_>,
    cache: CacheKind,
    users: usize,
    strategy: Compared,
    warmup: Duration,
    duration: Duration,
) -> Run {
    let start = Instant::now();
    let (measure_from, deadline) = (start + warmup, start + warmup + duration);
    let tasks: Vec<_> = (0..users)
        .map(|u| {
            let (http, addresses, workload) =
                (t.http.clone(), t.addresses.to_vec(), t.workload.clone());
            let per_domain = t.per_domain;
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(u as u64 + 1);
                let (mut latencies, mut calls, mut needed, mut failed, mut hits) =
                    (Vec::new(), 0u64, 0u64, 0usize, 0usize);
                while Instant::now() < deadline {
                    let asker = rng.random_range(0..addresses.len());
                    let at = &addresses[asker];
                    let sent = Instant::now();
                    // (remote calls, of them to domains holding what is
                    // sought (searches only), cache hit) of an answer that
                    // succeeded.
                    let answer = if strategy == Compared::Search {
                        search(&http, (asker, &addresses), &mut rng, per_domain)
                            .await
                            .map(|(calls, needed)| (calls, needed, false))
                    } else {
                        let id = workload.pick(&mut rng, addresses.len(), per_domain);
                        let url = format!(
                            "{at}/v1/lookup/{}?strategy={strategy}",
                            xarchive_node::cluster::client::encode_id(&id)
                        );
                        match http.get(&url).send().await {
                            Ok(r) if r.status().is_success() => r
                                .json::<xarchive_node::wire::LookupBody>()
                                .await
                                .ok()
                                .map(|a| {
                                    (
                                        a.route.remote_calls,
                                        0,
                                        a.route.cache == Some(CacheRoute::Hit),
                                    )
                                }),
                            _ => None,
                        }
                    };
                    let elapsed = sent.elapsed();
                    if sent < measure_from {
                        continue;
                    }
                    match answer {
                        Some((remote_calls, to_holders, hit)) => {
                            latencies.push(elapsed.as_secs_f64() * 1e3);
                            calls += remote_calls as u64;
                            needed += to_holders as u64;
                            hits += usize::from(hit);
                        }
                        None => failed += 1,
                    }
                }
                (latencies, calls, needed, failed, hits)
            })
        })
        .collect();
    let (mut latencies, mut calls, mut needed, mut failed, mut hits) =
        (Vec::new(), 0u64, 0u64, 0usize, 0usize);
    for task in tasks {
        if let Ok((l, c, nd, f, h)) = task.await {
            latencies.extend(l);
            calls += c;
            needed += nd;
            failed += f;
            hits += h;
        }
    }
    latencies.sort_by(f64::total_cmp);
    let n = latencies.len().max(1) as f64;
    Run {
        cache,
        users,
        strategy,
        lookups: latencies.len(),
        failed,
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: quantile(&latencies, 0.99),
        throughput: latencies.len() as f64 / duration.as_secs_f64(),
        remote_calls_per_lookup: calls as f64 / n,
        holder_calls_per_lookup: needed as f64 / n,
        cache_hit_rate: hits as f64 / n,
    }
}

pub async fn run(args: LookupBenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.domains >= 2, "--domains must be at least 2");
    let per_domain = args.records.div_ceil(args.domains as u64).max(1);
    let total = per_domain * args.domains as u64;
    let workload = Arc::new(match args.workload {
        WorkloadKind::Uniform | WorkloadKind::Keys => Workload::Uniform(total),
        WorkloadKind::Zipf => Workload::Zipf(rand_distr::Zipf::new(total as f64, args.zipf_s)?),
    });
    let mut args = args;
    if matches!(args.workload, WorkloadKind::Keys) {
        args.strategies = vec![Compared::Routed, Compared::Search];
    }
    let delay_ms = u64::try_from(args.wan_delay.as_millis())?;
    let certs = tempfile::tempdir()?;
    let tls = if args.tls {
        xarchive_node::security::tls::LoopbackCa::create(certs.path())?.config()
    } else {
        xarchive_node::security::tls::TlsConfig::default()
    };
    let http =
        xarchive_node::cluster::client::http_client(Duration::from_mins(1), None, tls.trust()?)
            .map_err(|e| anyhow::anyhow!(e))?;
    let runs_total = args.cache.len() * args.concurrency.len() * args.strategies.len();
    let bar = ProgressBar::new(runs_total as u64).with_style(
        ProgressStyle::with_template("{msg:>32} [{bar:30}] {pos}/{len} {elapsed}")?
            .progress_chars("=> "),
    );
    let mut runs = Vec::new();
    for &cache in &args.cache {
        let url = match cache {
            CacheKind::Redis => args
                .redis
                .clone()
                .ok_or_else(|| anyhow::anyhow!("--cache redis needs --redis URL"))?,
            CacheKind::None | CacheKind::Memory => cache.to_string(),
        };
        bar.set_message(format!("starting {} domains, cache {cache}", args.domains));
        let dir = tempfile::tempdir()?;
        let hub = Hub::new();
        let cluster = LocalCluster::start(Plan {
            domains: args.domains,
            data: dir.path().to_owned(),
            port: 0,
            records: per_domain,
            tune: &|c| {
                c.cluster.wan_delay_ms = delay_ms;
                c.filter.expected_items = per_domain.max(1_000) * 2;
                c.cache.url = url.clone();
                c.tls = tls.clone();
            },
            coordinator: &|_| hub.coordinator() as Arc<dyn Coordinator>,
        })
        .await?;
        cluster.converged(Duration::from_mins(2)).await?;
        let addresses = cluster.addresses();
        let target = Target {
            http: &http,
            addresses: &addresses,
            workload: &workload,
            per_domain,
        };
        if let (true, Some(after), Some(pid)) = (
            cache == CacheKind::Redis,
            args.stop_redis_after,
            args.redis_pid,
        ) {
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                use nix::sys::signal::{kill, Signal};
                match i32::try_from(pid) {
                    Ok(raw) => match kill(nix::unistd::Pid::from_raw(raw), Signal::SIGTERM) {
                        Ok(()) => eprintln!("(stopped Redis, pid {pid})"),
                        Err(e) => eprintln!("(could not stop Redis, pid {pid}: {e})"),
                    },
                    Err(_) => eprintln!("(no such process id {pid})"),
                }
            });
        }
        for &users in &args.concurrency {
            for &strategy in &args.strategies {
                bar.set_message(format!("cache {cache}, {users} users, {strategy}"));
                runs.push(
                    measure(&target, cache, users, strategy, args.warmup, args.duration).await,
                );
                bar.inc(1);
            }
        }
        cluster.stop().await?;
    }
    bar.finish_and_clear();
    report(&args, &runs, per_domain)?;
    Ok(ExitCode::SUCCESS)
}

fn report(args: &LookupBenchArgs, runs: &[Run], per_domain: u64) -> anyhow::Result<()> {
    let delay_ms = args.wan_delay.as_millis() as f64;
    println!(
        "\n{} domains × {per_domain} records, {} workload, {}, {delay_ms} ms one-way between domains (round trip {} ms), {} s per run\n",
        args.domains,
        args.workload,
        if args.tls { "HTTPS" } else { "plain HTTP" },
        2.0 * delay_ms,
        args.duration.as_secs_f64()
    );
    println!(
        "{:<7} {:>5} {:<10} {:>9} {:>9} {:>9} {:>7} {:>6} {:>7}",
        "cache", "users", "strategy", "p50", "p99", "req/s", "calls", "hits", "failed"
    );
    for r in runs {
        println!(
            "{:<7} {:>5} {:<10} {:>7.1}ms {:>7.1}ms {:>9.0} {:>7.2} {:>5.0}% {:>7}",
            r.cache,
            r.users,
            r.strategy,
            r.p50_ms,
            r.p99_ms,
            r.throughput,
            r.remote_calls_per_lookup,
            r.cache_hit_rate * 100.0,
            r.failed
        );
    }
    let find = |cache: CacheKind, users: usize, strategy: Compared| {
        runs.iter()
            .find(|r| r.cache == cache && r.users == users && r.strategy == strategy)
    };
    let mut ratios = Vec::new();
    println!();
    for &cache in &args.cache {
        for &users in &args.concurrency {
            if let (Some(r), Some(b)) = (
                find(cache, users, Compared::Routed),
                find(cache, users, Compared::Broadcast),
            ) {
                let paper = PAPER_TABLE_2.iter().find(|p| p.0 as usize == users);
                println!(
                    "cache {cache}, {users:>3} users: broadcast p50 / routed p50 = {:.2}, routed / broadcast throughput = {:.2}{}",
                    b.p50_ms / r.p50_ms,
                    r.throughput / b.throughput,
                    paper.map_or(String::new(), |p| format!(
                        "   (paper: traditional {} ms, filter {} ms)",
                        p.1, p.2
                    ))
                );
                ratios.push(json!({"cache": cache, "users": users,
                    "p50_broadcast_over_routed": b.p50_ms / r.p50_ms,
                    "throughput_routed_over_broadcast": r.throughput / b.throughput}));
            }
            if let (Some(r), Some(s)) = (
                find(cache, users, Compared::Routed),
                find(cache, users, Compared::Search),
            ) {
                println!(
                    "cache {cache}, {users:>3} users: search p50 / routed lookup p50 = {:.2}; remote calls per search {:.2}, {:.2} of them to domains holding the person's records, {:.3} beyond (lookup: {:.2})",
                    s.p50_ms / r.p50_ms,
                    s.remote_calls_per_lookup,
                    s.holder_calls_per_lookup,
                    s.remote_calls_per_lookup - s.holder_calls_per_lookup,
                    r.remote_calls_per_lookup
                );
                ratios.push(json!({"cache": cache, "users": users,
                    "p50_search_over_routed": s.p50_ms / r.p50_ms}));
            }
            if cache != CacheKind::None {
                if let (Some(c), Some(n)) = (
                    find(cache, users, Compared::Routed),
                    find(CacheKind::None, users, Compared::Routed),
                ) {
                    println!(
                        "cache {cache}, {users:>3} users: routed p50 with cache / without = {:.3}",
                        c.p50_ms / n.p50_ms
                    );
                    ratios.push(json!({"cache": cache, "users": users, "p50_cache_over_none": c.p50_ms / n.p50_ms}));
                }
            }
        }
    }
    let report = json!({
        "domains": args.domains,
        "records_per_domain": per_domain,
        "workload": args.workload,
        "tls": args.tls,
        "zipf_s": args.zipf_s,
        "wan_delay_ms": delay_ms,
        "seconds_per_run": args.duration.as_secs_f64(),
        "warmup_seconds": args.warmup.as_secs_f64(),
        "runs": runs,
        "ratios": ratios,
        "paper_table_2": PAPER_TABLE_2.iter().map(|p| json!({"users": p.0, "traditional_ms": p.1, "filter_ms": p.2})).collect::<Vec<_>>(),
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)?;
    let colours = [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    ];
    let mut series: Vec<Series> = Vec::new();
    for cache in &args.cache {
        for strategy in &args.strategies {
            series.push(Series {
                name: format!("{strategy}, cache {cache}"),
                colour: colours[series.len() % colours.len()],
                dashed: false,
                points: runs
                    .iter()
                    .filter(|r| r.cache == *cache && r.strategy == *strategy)
                    .map(|r| (r.users as f64, r.p50_ms))
                    .collect(),
            });
        }
    }
    if args.strategies.contains(&Compared::Broadcast) {
        series.push(Series {
            name: "paper: filter".into(),
            colour: "#1f77b4",
            dashed: true,
            points: PAPER_TABLE_2
                .iter()
                .map(|p| (f64::from(p.0), p.2))
                .collect(),
        });
        series.push(Series {
            name: "paper: traditional".into(),
            colour: "#d62728",
            dashed: true,
            points: PAPER_TABLE_2
                .iter()
                .map(|p| (f64::from(p.0), p.1))
                .collect(),
        });
    }
    let chart = Chart {
        title: format!(
            "Lookup p50 against concurrent users ({} domains, {delay_ms} ms one-way, {})",
            args.domains, args.workload
        ),
        x_label: "concurrent users".into(),
        y_label: "p50 lookup time (ms)".into(),
        series,
    };
    std::fs::write(&args.plot, chart.render())?;
    println!(
        "\nfigures in {}, chart in {}",
        args.json.display(),
        args.plot.display()
    );
    Ok(())
}
