//! `xarchive-bench domains`: real `xarchive serve` domains in groups on
//! one ZooKeeper, under steady writes: what a write's acknowledgement
//! takes, how long until the domain at the far end of the relay tree
//! routes it, whether a lookup there right after the acknowledgement ever
//! says "not found" (with domains on the way killed and paused, if
//! asked), what ZooKeeper sends per write and domain, and each domain's
//! CPU. These are full domains, each following all the others; with
//! `--light`, light publishers (`nation`'s) make up the rest of a
//! nation's N: registered, in the ledger, with filters to copy, idle.
//! With `--lookers`, clients look IDs up at the tree's leaves meanwhile
//! (`lookers.rs`).

mod lookers;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use xarchive_node::wire::{RouteBody, Strategy};
use xarchive_node::{ApiClient, FilterSettings};

use crate::child::ServeChild;
use crate::nation::cluster::{cpu_seconds, figure, mntr};
use crate::nation::light::Nation;
use crate::quantile;

/// How long a write may take to be routed at the far end before the
/// benchmark counts it as never routed (and fails).
const GIVE_UP: Duration = Duration::from_secs(10);

/// The relay tree's degree the domains are given (`cluster.relay_fanout`,
/// its default), from which the benchmark finds the tree's longest path.
const FANOUT: usize = 3;

/// How many writes a second are followed until routed at the far end (the
/// others are only looked up there): each is polled every 2 ms.
const LAG_SAMPLES_PER_SECOND: u32 = 50;

#[derive(clap::Args)]
pub struct DomainsBenchArgs {
    /// ZooKeeper (`host:port`); scripts/zookeeper.sh sets `XARCHIVE_ZK`.
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
    /// Every write at one end of the relay tree's longest path, looked up
    /// at the other end (else the domains write in turn, each looked up at
    /// its far end in name order).
    #[arg(long)]
    longest_path: bool,
    /// Meanwhile, every few seconds, kill -9 (and start again) or pause for
    /// a while a domain other than the two ends being measured (without
    /// `--longest-path`: an interior domain or the root, the leaves writing
    /// and being read).
    #[arg(long)]
    faults: bool,
    /// Light publishers registered beside the real domains (`nation`'s:
    /// each with a ZooKeeper session, a ledger entry and a filter every
    /// real domain copies), to make up N; they do not write.
    #[arg(long, default_value_t = 0)]
    light: usize,
    /// IDs the light publishers hold in all, shared evenly; every filter
    /// is sized for them (`filter.cluster_ids`), as `nation` sizes its
    /// own, so that a lookup has about one vain candidate among them.
    #[arg(long, default_value_t = 10_000_000)]
    light_ids: u64,
    /// The light publishers write whole entries in the positions ledger,
    /// as domains of earlier releases do (`nation --whole-entries`).
    #[arg(long)]
    whole_entries: bool,
    /// Clients looking IDs up meanwhile, each at one leaf of the relay
    /// tree (deepest first), in turn an ID nobody holds and one
    /// acknowledged before; with `--faults` those leaves are never
    /// faulted (the interior domains and the root are).
    #[arg(long, default_value_t = 0)]
    lookers: usize,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "bench-domains.json")]
    json: PathBuf,
}

pub async fn run(args: DomainsBenchArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::ensure!(
        args.domains >= 2 && args.groups >= 1,
        "--domains ≥ 2, --groups ≥ 1"
    );
    anyhow::ensure!(
        !args.faults || args.domains >= 3,
        "--faults needs a domain besides the two measured: --domains ≥ 3"
    );
    let dir = tempfile::tempdir()?;
    let cluster = format!("bench-domains-{}", rand::random::<u32>());
    let names: Vec<String> = (0..args.domains)
        .map(|i| format!("{}-{:02}", 11 + i % args.groups, 1 + i / args.groups))
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    let mut starts = Vec::new();
    for name in &names {
        let config = dir.path().join(format!("{name}.toml"));
        let sizing = if args.light > 0 {
            format!("[filter]\ncluster_ids = {}\n", args.light_ids)
        } else {
            String::new()
        };
        std::fs::write(
            &config,
            format!(
                "[cluster]\ngroup = \"{}\"\nrelay_fanout = {FANOUT}\n{sizing}",
                &name[..2]
            ),
        )?;
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
        starts.push(Start {
            name: name.clone(),
            data: dir.path().join(name),
            args: serve_args,
            log: dir.path().join(format!("{name}.log")),
        });
    }
    let light = if args.light > 0 {
        let spinner = ProgressBar::new_spinner()
            .with_message(format!("registering {} light publishers", args.light));
        spinner.enable_steady_tick(Duration::from_millis(200));
        let sizes = vec![args.light_ids / args.light as u64; args.light];
        let filters = FilterSettings {
            cluster_ids: args.light_ids,
            ..FilterSettings::default()
        };
        let nation = Nation::new(&sizes, filters, cluster.clone(), &|_| {})?;
        nation
            .whole_entries
            .store(args.whole_entries, std::sync::atomic::Ordering::Relaxed);
        let server = nation.serve().await?;
        nation.register(&args.zk, 64, &|| {}).await?;
        spinner.finish_and_clear();
        Some((nation, server))
    } else {
        None
    };
    let everyone = names.len() + args.light;
    let joining = Instant::now();
    let mut domains = Vec::new();
    for start in &starts {
        domains.push(start.start().await?);
    }
    let urls: Vec<String> = domains.iter().map(|d| d.url.clone()).collect();
    let clients: Vec<ApiClient> = urls
        .iter()
        .map(|url| ApiClient::new(url, Duration::from_secs(10)))
        .collect::<Result<_, _>>()?;
    let deadline = Instant::now() + Duration::from_mins(10);
    for c in &clients {
        while !c.cluster().await.is_ok_and(|v| v.converged(everyone)) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the domains did not converge in 10 minutes"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let join_seconds = joining.elapsed().as_secs_f64();
    // The relay tree lays the names out in name order (`relay/tree.rs`);
    // light publishers' names (`n0000`…) sort after these, so the real
    // domains are its top and the path between two runs through real ones.
    let at = |name: &str| names.iter().position(|n| n == name).unwrap_or(0);
    let (a, b, hops) = longest_path(&sorted, FANOUT);
    let ends = args.longest_path.then(|| (at(&sorted[a]), at(&sorted[b])));

    let http = reqwest::Client::new();
    let zk_before = mntr(&args.zk).await?;
    let pids: Vec<u32> = domains.iter().map(ServeChild::pid).collect();
    let cpu_before: Vec<f64> = pids
        .iter()
        .map(|&pid| cpu_seconds(pid))
        .collect::<Result<_, _>>()?;
    let domains = std::sync::Arc::new(std::sync::Mutex::new(
        domains.into_iter().map(Some).collect::<Vec<_>>(),
    ));
    let stop_faults = tokio_util::sync::CancellationToken::new();
    let leaf_domains: Vec<usize> = leaves(&sorted, FANOUT)
        .into_iter()
        .map(|i| at(&sorted[i]))
        .collect();
    let looking_at: Vec<usize> = leaf_domains.iter().copied().take(args.lookers).collect();
    // With faults and no path to measure, the leaves write and are read,
    // and the interior domains and the root are faulted: the relays
    // between them.
    let writing: Vec<usize> = if args.faults && ends.is_none() {
        leaf_domains.clone()
    } else {
        (0..names.len()).collect()
    };
    let acknowledged = lookers::Acknowledged::default();
    let lookers_task = (args.lookers > 0)
        .then(|| {
            let urls: Vec<String> = looking_at.iter().map(|&i| urls[i].clone()).collect();
            lookers::start(args.lookers, &urls, &acknowledged, &stop_faults)
        })
        .transpose()?;
    let fault_task = args.faults.then(|| {
        let mut measured: Vec<usize> = match ends {
            Some((w, r)) => vec![w, r],
            None => writing.clone(),
        };
        measured.extend(&looking_at);
        let targets: Vec<usize> = (0..names.len()).filter(|i| !measured.contains(i)).collect();
        tokio::spawn(faults(
            domains.clone(),
            starts,
            targets,
            stop_faults.clone(),
        ))
    });
    let started = Instant::now();
    // A whole, non-negative number of writes, far below 2^53.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let total = (args.duration.as_secs_f64() * f64::from(args.rate)) as u64;
    let bar = ProgressBar::new(total).with_style(ProgressStyle::with_template(
        "{msg} {wide_bar} {pos}/{len} writes",
    )?);
    bar.set_message(format!("{} domains, {} writes/s", names.len(), args.rate));
    let mut tally = Tally::default();
    let mut pairs = tokio::task::JoinSet::new();
    let every = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    let follow_every = u64::from((args.rate / LAG_SAMPLES_PER_SECOND).max(1));
    for k in 0..total {
        tokio::time::sleep_until((started + every * u32::try_from(k)?).into()).await;
        // Without --longest-path each writing domain writes in turn, looked
        // up at the one that many places from the end.
        let turn = usize::try_from(k)? % writing.len();
        let (w, r) = ends.unwrap_or((writing[turn], writing[writing.len() - 1 - turn]));
        let pair = Pair {
            acknowledged: acknowledged.clone(),
            id: format!("{}-d{k}", names[w]),
            owner: names[w].clone(),
            writer: clients[w].clone(),
            reader: clients[r].clone(),
            route: (k % follow_every == 0)
                .then(|| (http.clone(), format!("{}/v1/route/", urls[r]))),
        };
        pairs.spawn(pair.run());
        while let Some(done) = pairs.try_join_next() {
            tally.add(done.context("a write-then-lookup pair failed")?);
        }
        bar.inc(1);
    }
    let writing = started.elapsed().as_secs_f64();
    while let Some(done) = pairs.join_next().await {
        tally.add(done.context("a write-then-lookup pair failed")?);
    }
    bar.finish_and_clear();
    stop_faults.cancel();
    let looked = match lookers_task {
        Some(task) => task.await.context("the lookers failed")?,
        None => lookers::Looked::default(),
    };
    let faulted = match fault_task {
        Some(task) => task.await.context("the fault task failed")??,
        None => Faulted::default(),
    };
    let zk_after = mntr(&args.zk).await?;
    // Only the domains never restarted: a restarted one's figures start
    // again from zero.
    let domains: Vec<ServeChild> = std::mem::take(&mut *lock(&domains))
        .into_iter()
        .flatten()
        .collect();
    let mut cpus: Vec<f64> = domains
        .iter()
        .filter_map(|d| {
            let i = pids.iter().position(|&p| p == d.pid())?;
            Some(cpu_seconds(d.pid()).map(|now| (now - cpu_before[i]) / writing * 100.0))
        })
        .collect::<Result<_, _>>()?;
    for d in domains {
        d.stop().await?;
    }
    if let Some((nation, _server)) = light {
        nation.close();
    }
    let Tally {
        mut acks,
        mut lags,
        never,
        unacknowledged,
        found,
        not_found,
        unavailable,
        failed,
    } = tally;
    acks.sort_by(f64::total_cmp);
    lags.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    let per = |name: &str| {
        (figure(&zk_after, name) - figure(&zk_before, name)) as f64
            / total as f64
            / names.len() as f64
    };
    let report = json!({
        "domains": names.len(), "light_publishers": args.light, "light_ids": args.light_ids,
        "join_seconds": join_seconds, "groups": args.groups, "rate": args.rate, "writes": total,
        "longest_path": args.longest_path, "longest_path_hops": hops,
        "unacknowledged": unacknowledged, "not_routed_within_10_s": never,
        "ack_ms": {"p50": quantile(&acks, 0.5), "p99": quantile(&acks, 0.99)},
        "far_end_lag_ms": {"samples": lags.len(), "p50": quantile(&lags, 0.5), "p99": quantile(&lags, 0.99), "max": quantile(&lags, 1.0)},
        "far_end_lookups": {"found": found, "not_found": not_found, "unavailable": unavailable, "failed": failed},
        "faults": {"kills": faulted.kills, "pauses": faulted.pauses},
        "lookers": args.lookers,
        "lookups_of_absent_ids": looked.absent.json(),
        "lookups_of_held_ids": looked.held.json(),
        "zk_packets_sent_per_write_per_domain": per("zk_packets_sent"),
        "zk_packets_received_per_write_per_domain": per("zk_packets_received"),
        "cpu_percent_of_a_core": {"domains": cpus.len(), "median": quantile(&cpus, 0.5), "max": quantile(&cpus, 1.0)},
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&report)?)?;
    println!(
        "{} domains in {} groups{}, {total} writes at {}/s{}{}:",
        names.len(),
        args.groups,
        if args.light > 0 {
            format!(
                " among {everyone} ({} light publishers; all converged {join_seconds:.1} s after the first start)",
                args.light
            )
        } else {
            String::new()
        },
        args.rate,
        if args.longest_path {
            format!(", at one end of the longest path ({hops} hops), looked up at the other")
        } else {
            String::new()
        },
        if args.faults {
            format!(
                ", {} domains killed and {} paused meanwhile",
                faulted.kills, faulted.pauses
            )
        } else {
            String::new()
        }
    );
    println!("| | p50 | p99 | max |\n|---|---|---|---|");
    println!(
        "| acknowledgement | {:.1} ms | {:.1} ms | {:.1} ms |",
        quantile(&acks, 0.5),
        quantile(&acks, 0.99),
        quantile(&acks, 1.0)
    );
    println!(
        "| routed at the far end, after the acknowledgement ({} followed) | {:.1} ms | {:.1} ms | {:.1} ms |",
        lags.len(),
        quantile(&lags, 0.5),
        quantile(&lags, 0.99),
        quantile(&lags, 1.0)
    );
    println!(
        "looked up at the far end as acknowledged: {found} found, {not_found} not found, {unavailable} unavailable, {failed} failed; {unacknowledged} writes not acknowledged"
    );
    println!(
        "ZooKeeper per write and domain: {:.2} packets sent, {:.2} received; CPU per domain ({} never restarted): median {:.1} %, max {:.1} % of a core",
        per("zk_packets_sent"),
        per("zk_packets_received"),
        cpus.len(),
        quantile(&cpus, 0.5),
        quantile(&cpus, 1.0)
    );
    if args.lookers > 0 {
        println!(
            "{} lookers at leaves meanwhile: | | p50 | p99 | max | remote calls per lookup | 200 / 404 / 503 / failed |",
            args.lookers
        );
        for (what, answers) in [("absent ID", &looked.absent), ("held ID", &looked.held)] {
            let (p50, p99, max, calls) = answers.figures();
            println!(
                "| lookup of an {what} | {p50:.1} ms | {p99:.1} ms | {max:.1} ms | {calls:.2} | {} / {} / {} / {} |",
                answers.found, answers.not_found, answers.unavailable, answers.failed
            );
        }
    }
    println!("figures in {}", args.json.display());
    anyhow::ensure!(
        looked.held.not_found == 0,
        "{} acknowledged records were answered \"not found\" by a looker",
        looked.held.not_found
    );
    anyhow::ensure!(
        looked.absent.found == 0,
        "{} IDs nobody holds were found",
        looked.absent.found
    );
    anyhow::ensure!(
        not_found == 0,
        "{not_found} acknowledged writes were answered \"not found\" at the far end"
    );
    anyhow::ensure!(
        never == 0,
        "{never} writes were not routed at the far end within {GIVE_UP:?}"
    );
    Ok(std::process::ExitCode::SUCCESS)
}

/// How to start one domain (again).
struct Start {
    name: String,
    data: PathBuf,
    args: Vec<String>,
    log: PathBuf,
}

impl Start {
    async fn start(&self) -> anyhow::Result<ServeChild> {
        ServeChild::start(&self.name, &self.data, &self.args, &self.log).await
    }
}

/// One write and its lookup at the far end as soon as it is acknowledged;
/// with `route`, then followed until the far end routes it.
struct Pair {
    /// Where the ID goes once acknowledged, for the lookers.
    acknowledged: lookers::Acknowledged,
    id: String,
    owner: String,
    writer: ApiClient,
    reader: ApiClient,
    route: Option<(reqwest::Client, String)>,
}

/// What became of a [`Pair`].
enum Outcome {
    Unacknowledged,
    Acknowledged {
        ack_ms: f64,
        /// The far end's answer (0: none).
        status: u16,
        /// Until routed at the far end, if followed: None if not within
        /// [`GIVE_UP`].
        #[allow(clippy::option_option)] // not followed, and not routed in time, differ
        lag_ms: Option<Option<f64>>,
    },
}

impl Pair {
    async fn run(self) -> Outcome {
        let sent = Instant::now();
        if self
            .writer
            .put(&self.id, &json!({"title": "t"}))
            .await
            .is_err()
        {
            return Outcome::Unacknowledged;
        }
        let acked = Instant::now();
        self.acknowledged.add(self.id.clone());
        let status = match self.reader.lookup(&self.id, Strategy::Routed).await {
            Ok((status, _)) => status,
            Err(_) => 0,
        };
        let lag_ms = match self.route {
            Some((http, route)) => {
                Some(routed(&http, &format!("{route}{}", self.id), &self.owner, acked).await)
            }
            None => None,
        };
        Outcome::Acknowledged {
            ack_ms: (acked - sent).as_secs_f64() * 1e3,
            status,
            lag_ms,
        }
    }
}

/// Milliseconds from `acked` until `url` (a route at the far end) names
/// `owner` among the candidates; None if not within [`GIVE_UP`].
async fn routed(http: &reqwest::Client, url: &str, owner: &str, acked: Instant) -> Option<f64> {
    while acked.elapsed() < GIVE_UP {
        let route: Option<RouteBody> = match http.get(url).send().await {
            Ok(answer) => answer.json().await.ok(),
            Err(_) => None,
        };
        if route.is_some_and(|r| r.candidates.iter().any(|c| c == owner)) {
            return Some(acked.elapsed().as_secs_f64() * 1e3);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

/// The pairs' outcomes so far.
#[derive(Default)]
struct Tally {
    acks: Vec<f64>,
    lags: Vec<f64>,
    never: u64,
    unacknowledged: u64,
    found: u64,
    /// Acknowledged, then answered 404 at the far end: must be 0.
    not_found: u64,
    unavailable: u64,
    failed: u64,
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        let Outcome::Acknowledged {
            ack_ms,
            status,
            lag_ms,
        } = outcome
        else {
            self.unacknowledged += 1;
            return;
        };
        self.acks.push(ack_ms);
        match status {
            200 => self.found += 1,
            404 => self.not_found += 1,
            503 => self.unavailable += 1,
            _ => self.failed += 1,
        }
        match lag_ms {
            Some(Some(lag)) => self.lags.push(lag),
            Some(None) => self.never += 1,
            None => {}
        }
    }
}

#[derive(Default)]
struct Faulted {
    kills: u64,
    pauses: u64,
}

type Domains = std::sync::Arc<std::sync::Mutex<Vec<Option<ServeChild>>>>;

fn lock(domains: &Domains) -> std::sync::MutexGuard<'_, Vec<Option<ServeChild>>> {
    domains
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Until `stop`: every 1–3 s one of `targets` is killed with SIGKILL and
/// started again 0.5–2 s later on its data, or paused (SIGSTOP) for
/// 0.5–3 s, at times past its ZooKeeper session.
async fn faults(
    domains: Domains,
    starts: Vec<Start>,
    targets: Vec<usize>,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<Faulted> {
    use rand::seq::IndexedRandom;
    use rand::{Rng, SeedableRng};
    let mut faulted = Faulted::default();
    let mut rng = rand::rngs::StdRng::from_os_rng();
    loop {
        let wait = Duration::from_millis(rng.random_range(1_000..3_000));
        if stop
            .run_until_cancelled(tokio::time::sleep(wait))
            .await
            .is_none()
        {
            return Ok(faulted);
        }
        let Some(&i) = targets.choose(&mut rng) else {
            return Ok(faulted);
        };
        let down = Duration::from_millis(rng.random_range(500..3_000));
        if rng.random_bool(0.5) {
            // Dropped: SIGKILL, and reaped.
            drop(lock(&domains)[i].take());
            tokio::time::sleep(down).await;
            let again = starts[i].start().await?;
            lock(&domains)[i] = Some(again);
            faulted.kills += 1;
        } else {
            let pid = lock(&domains)[i].as_ref().map(ServeChild::pid);
            let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
                continue;
            };
            let pid = nix::unistd::Pid::from_raw(pid);
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP)?;
            tokio::time::sleep(down).await;
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT)?;
            faulted.pauses += 1;
        }
    }
}

/// The two ends of the longest path in the relay tree over `sorted` (the
/// members in name order, as `xarchive_node::cluster::neighbours` lays
/// them out), as indices into it, and its length in hops: the farthest
/// name from the first, and the farthest from that.
fn longest_path(sorted: &[String], fanout: usize) -> (usize, usize, usize) {
    let index: std::collections::HashMap<&str, usize> = sorted
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    let neighbours = |i: usize| -> Vec<usize> {
        xarchive_node::cluster::neighbours(sorted.iter().map(String::as_str), &sorted[i], fanout)
            .into_iter()
            .filter_map(|name| index.get(name).copied())
            .collect()
    };
    let farthest = |from: usize| {
        let mut hops = vec![usize::MAX; sorted.len()];
        hops[from] = 0;
        let mut queue = std::collections::VecDeque::from([from]);
        let mut last = from;
        while let Some(i) = queue.pop_front() {
            last = i;
            for j in neighbours(i) {
                if hops[j] == usize::MAX {
                    hops[j] = hops[i] + 1;
                    queue.push_back(j);
                }
            }
        }
        (last, hops[last])
    };
    let (a, _) = farthest(0);
    let (b, hops) = farthest(a);
    (a, b, hops)
}

/// The leaves of the relay tree over `sorted` (domains with one
/// neighbour), as indices into it, the deepest first.
fn leaves(sorted: &[String], fanout: usize) -> Vec<usize> {
    let names = || sorted.iter().map(String::as_str);
    let mut leaves: Vec<usize> = (0..sorted.len())
        .filter(|&i| xarchive_node::cluster::neighbours(names(), &sorted[i], fanout).len() == 1)
        .collect();
    leaves.reverse();
    leaves
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leaves_of_a_heap_are_those_without_children_the_deepest_first() {
        let names: Vec<String> = (0..16).map(|i| format!("d{i:02}")).collect();
        // Degree 3: 4 has children 13–15; 5–12 and 13–15 have none.
        assert_eq!(leaves(&names, 3), [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5]);
    }

    #[test]
    fn the_longest_path_of_a_heap_joins_two_deepest_leaves_through_the_root() {
        // Degree 3: 0; 1–3; 4–12; 13–15 (children of 4). The deepest
        // leaves are under 1 (via 4); the farthest from them is 12, under 3.
        let names = |n: usize| (0..n).map(|i| format!("d{i:02}")).collect::<Vec<_>>();
        let (a, b, hops) = longest_path(&names(16), 3);
        assert_eq!(hops, 5);
        let ends = [a.min(b), a.max(b)];
        assert!((13..=15).contains(&ends[1]), "{ends:?}");
        assert!((7..=12).contains(&ends[0]), "{ends:?}");
        assert_eq!(longest_path(&names(2), 3).2, 1);
        assert_eq!(longest_path(&names(40), 3).2, 6);
    }
}
