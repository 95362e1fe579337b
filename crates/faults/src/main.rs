//! `xarchive-faults`: the fault test as a command, for long runs by hand
//! (`cargo run -p xarchive-faults -- --duration 30m --seed N`). Prints the
//! seed, progress and a summary; exits 1 on any violation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use xarchive_faults::{
    check_history_with, request_counts, run, xarchive_binary, FaultKind, History, Rules, RunConfig,
};

fn parse_kind(s: &str) -> Result<FaultKind, String> {
    serde_json::from_value(serde_json::Value::String(s.trim().to_owned()))
        .map_err(|_| format!("not a fault kind: {s}"))
}

/// Randomized faults (kill -9, SIGSTOP, ZooKeeper crashes and fresh
/// restarts; with --ensemble, leader kills; with --netns, cut links and
/// pairwise partitions) against real `xarchive serve` domains (three, or
/// --domains in --groups) and real ZooKeeper, with a workload (records,
/// lookups, searches, cross-archive requests) recorded as a history and
/// checked at the end.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// How long faults keep coming: `90s`, `30m`, `1h`.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// The seed of the faults and the workload (random if not given; it is
    /// printed either way, to replay a failure).
    #[arg(long)]
    seed: Option<u64>,
    /// The `xarchive` binary (default: target/debug/xarchive of this
    /// workspace, or `XARCHIVE_BIN`).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Where the domains' data and logs and history.ndjson go (default: a
    /// new directory under the system temp dir, removed after a run
    /// without violations unless --keep).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the run directory even when nothing was found.
    #[arg(long)]
    keep: bool,
    /// Client threads.
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// How often a second fault overlaps the first (0 to 1).
    #[arg(long, default_value_t = 0.3)]
    overlap: f64,
    /// Only check a history.ndjson left by an earlier run, print its
    /// violations, and exit (1 if any).
    #[arg(long, value_name = "HISTORY")]
    check: Option<PathBuf>,
    /// Phase 2: run ZooKeeper and each domain in a network namespace of
    /// its own (198.18.0.0/15 addresses, removed at the end) with cut
    /// links and partitions of one pair (domain|domain, domain|zk,
    /// domain|clients) among the faults. Needs root.
    #[arg(long)]
    netns: bool,
    /// Run a three-server ZooKeeper ensemble (on loopback, or each server
    /// in a namespace with --netns) and kill its leader among the faults.
    #[arg(long)]
    ensemble: bool,
    /// The domains' cache of other domains' records: `none`, or `memory`
    /// (the in-process cache, `cache.max_lag_ms` 1000; the checker then
    /// allows a 200 up to `max_lag_ms` + 1 s after a delete).
    #[arg(long, default_value = "none", value_parser = ["none", "memory"])]
    cache: String,
    /// Only these fault kinds, comma-separated, as the history names them
    /// (`kill_domain`, `pause_domain`, `kill_zoo_keeper`, `fresh_zoo_keeper`,
    /// `fill_disk`, `kill_leader`, `cut_link`, `partition_domains`,
    /// `partition_zoo_keeper`, `partition_clients`), in this order unless
    /// given otherwise (the order is part of what a seed replays);
    /// default: every kind the mode allows.
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    kinds: Vec<FaultKind>,
    /// How many domains (3: A, B and C; more, or more than one group:
    /// named by group and number, `11-01`, `12-01`, …).
    #[arg(long, default_value_t = 3)]
    domains: usize,
    /// How many groups (provinces) the domains are in, taking turns; each
    /// group's positions are one znode of the ledger.
    #[arg(long, default_value_t = 1)]
    groups: usize,
    /// With --check: the `cache.max_lag_ms` the run had (its domains'
    /// cache on).
    #[arg(long, requires = "check")]
    cache_max_lag_ms: Option<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = &args.check {
        let rules = args
            .cache_max_lag_ms
            .map_or_else(Rules::default, Rules::with_cache);
        return check_only(path, &rules);
    }
    // A seed from the clock: any 64 bits of it will do.
    #[allow(clippy::cast_possible_truncation)]
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let bin = match args.bin.map_or_else(xarchive_binary, Ok) {
        Ok(bin) => bin,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (dir, chosen) = match args.dir {
        Some(d) => (d, true),
        None => (
            std::env::temp_dir().join(format!("xarchive-faults-{seed}-{}", std::process::id())),
            false,
        ),
    };
    let mut config = RunConfig::new(bin, dir.clone(), args.duration, seed)
        .with_domains(args.domains.max(2), args.groups.max(1));
    config.clients = args.clients.max(1);
    config.overlap = args.overlap;
    if args.netns {
        config = config.with_network();
    }
    if args.ensemble {
        config = config.with_ensemble();
    }
    if args.cache == "memory" {
        config = config.with_memory_cache();
    }
    if !args.kinds.is_empty() {
        config.kinds = args.kinds.clone();
    }
    let say = |line: &str| println!("{line}");
    match run(&config, &say) {
        Ok(report) => {
            println!("\n{report}");
            if report.passed() {
                if !chosen && !args.keep {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                ExitCode::SUCCESS
            } else {
                println!(
                    "kept {} for study (replay with --seed {seed})",
                    dir.display()
                );
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e} (seed = {seed}; logs in {})", dir.display());
            ExitCode::from(2)
        }
    }
}

/// `--check HISTORY`: the checker alone over a saved history.
fn check_only(path: &std::path::Path, rules: &Rules) -> ExitCode {
    let history = match History::load(path) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (violations, stale) = check_history_with(&history, rules);
    println!(
        "{}: {} operations, {} faults, {} violations (final filter checks are not in the history)",
        path.display(),
        history.ops.len(),
        history.faults.len(),
        violations.len()
    );
    println!(
        "200 after an acknowledged delete: {} within the allowed window (largest delay {:.3} s), {} beyond (largest {:.3} s)",
        stale.within,
        stale.max_within_us as f64 / 1e6,
        stale.beyond,
        stale.max_beyond_us as f64 / 1e6
    );
    let r = request_counts(&history);
    println!(
        "requests: {} submitted, {} acknowledged, {} refused 503, {} without an answer; {} listed at the end, {} answered",
        r.submitted, r.acknowledged, r.refused_503, r.unknown, r.listed, r.answered
    );
    for v in &violations {
        println!("  {v}");
    }
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
