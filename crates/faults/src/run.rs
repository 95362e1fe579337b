//! One whole run: start the cluster, run the clients and the nemesis for
//! the duration, heal, wait for convergence, read back every acknowledged
//! record, wait for every request to be answered and read the requests
//! and audit logs back, verify every filter, and check the history.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use xarchive_node::VerifyReport;

use crate::checker::{check_history_with, Rules, StaleReads, Violation, ViolationKind};
use crate::cluster::{domain_names, wait_converged, Cluster, ClusterConfig};
use crate::history::{FaultKind, History, Recorder};
use crate::nemesis::{self, NemesisConfig};
use crate::requests::{request_counts, RequestCounts};
use crate::workload::{Pool, Workload, REQUESTS_PATIENCE};
use crate::{http, panic_message, Error};

/// How long the cluster may take to converge at the start, after each
/// fault, and at the end.
pub const CONVERGE_PATIENCE: Duration = Duration::from_mins(1);

/// What to run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The `xarchive` binary.
    pub bin: PathBuf,
    /// How long faults keep coming (the run takes longer: start, heal,
    /// final checks).
    pub duration: Duration,
    pub seed: u64,
    /// Client threads.
    pub clients: usize,
    /// Where the domains' data and logs and the history go (created).
    pub dir: PathBuf,
    pub session_timeout_ms: u64,
    pub expected_items: u64,
    pub kinds: Vec<FaultKind>,
    /// How often a second fault overlaps the first.
    pub overlap: f64,
    /// Phase 2: every process in a network namespace of its own, and
    /// links cut among the faults (needs root).
    pub netns: bool,
    /// A three-server ZooKeeper ensemble, its leader killed among the
    /// faults.
    pub ensemble: bool,
    /// The domains' in-process cache on, with this `cache.max_lag_ms`
    /// (none: `XARCHIVE_CACHE=none`).
    pub cache_max_lag_ms: Option<u64>,
    /// How many domains, in how many groups (provinces): see
    /// [`domain_names`].
    pub domains: usize,
    pub groups: usize,
}

impl RunConfig {
    /// The defaults: three domains' worth of clients, a 3 s session, every
    /// fault kind.
    pub fn new(bin: PathBuf, dir: PathBuf, duration: Duration, seed: u64) -> RunConfig {
        RunConfig {
            bin,
            duration,
            seed,
            clients: 6,
            dir,
            session_timeout_ms: 3_000,
            expected_items: 20_000,
            kinds: FaultKind::PROCESS.to_vec(),
            overlap: 0.3,
            netns: false,
            ensemble: false,
            cache_max_lag_ms: None,
            domains: 3,
            groups: 1,
        }
    }

    /// The checker's rules for this run.
    pub fn rules(&self) -> Rules {
        self.cache_max_lag_ms
            .map_or_else(Rules::default, Rules::with_cache)
    }
}

impl RunConfig {
    /// Phase 2: namespaces, with cut links and partitions (domain|domain,
    /// domain|ZooKeeper, domain|clients) among the faults.
    #[must_use]
    pub fn with_network(mut self) -> RunConfig {
        self.netns = true;
        for kind in FaultKind::NETWORK {
            if !self.kinds.contains(&kind) {
                self.kinds.push(kind);
            }
        }
        self
    }

    /// `domains` domains in `groups` groups ([`domain_names`]).
    #[must_use]
    pub fn with_domains(mut self, domains: usize, groups: usize) -> RunConfig {
        self.domains = domains;
        self.groups = groups;
        self
    }

    /// A three-server ZooKeeper ensemble, with leader kills among the
    /// faults.
    #[must_use]
    pub fn with_ensemble(mut self) -> RunConfig {
        self.ensemble = true;
        if !self.kinds.contains(&FaultKind::KillLeader) {
            self.kinds.push(FaultKind::KillLeader);
        }
        self
    }

    /// The domains' in-process cache, with the default `cache.max_lag_ms`
    /// (1000); the workload then looks up hot and recently deleted IDs
    /// again and again.
    #[must_use]
    pub fn with_memory_cache(mut self) -> RunConfig {
        self.cache_max_lag_ms = Some(DEFAULT_MAX_LAG_MS);
        self
    }
}

/// `cache.max_lag_ms`'s documented default.
pub const DEFAULT_MAX_LAG_MS: u64 = 1_000;

/// What a domain's `/v1/filter/verify` said at the end.
#[derive(Clone, Debug)]
pub struct Verified {
    pub domain: String,
    pub answer: Result<VerifyReport, String>,
}

/// What a run found.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub seed: u64,
    pub duration: Duration,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    pub dir: PathBuf,
    pub history_path: PathBuf,
    pub history: History,
    /// Sorted by time.
    pub violations: Vec<Violation>,
    /// How long the cluster took to converge after the last heal, or why
    /// it did not.
    pub final_convergence: Result<Duration, String>,
    /// IDs read back at the end (acknowledged, never deleted).
    pub final_ids: usize,
    /// How long after the records were read back every part of every
    /// request was answered, or what was not.
    pub requests_answered: Result<Duration, String>,
    /// The requests submitted, acknowledged, refused, answered.
    pub requests: RequestCounts,
    pub verified: Vec<Verified>,
    /// The checker's rules (the cache's window, if any).
    pub rules: Rules,
    /// Lookups answered 200 after an acknowledged delete.
    pub stale: StaleReads,
    pub netns: bool,
    pub ensemble: bool,
}

impl RunReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many violations of `kind`.
    pub fn count(&self, kind: ViolationKind) -> usize {
        self.violations.iter().filter(|v| v.kind == kind).count()
    }
}

/// Runs the test. `say` gets progress lines. Panics (like the testkit) if
/// a process cannot be started at all.
pub fn run(config: &RunConfig, say: &(dyn Fn(&str) + Sync)) -> Result<RunReport, Error> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.dir).map_err(|source| Error::RunDir {
        path: config.dir.clone(),
        source,
    })?;
    let history_path = config.dir.join("history.ndjson");
    let rec = Recorder::new(Some(&history_path))?;
    say(&format!("seed = {}", config.seed));
    say(&format!(
        "run dir {} (history.ndjson, domain logs)",
        config.dir.display()
    ));

    let names = domain_names(config.domains, config.groups);
    let cluster_config = ClusterConfig {
        bin: config.bin.clone(),
        dir: config.dir.clone(),
        names: names.clone(),
        cluster: "faults".to_owned(),
        session_timeout_ms: config.session_timeout_ms,
        expected_items: config.expected_items,
        ensemble: config.ensemble,
        cache_max_lag_ms: config.cache_max_lag_ms,
        disk_bytes: crate::cluster::DISK_BYTES,
    };
    say(&format!(
        "mode: {}, ZooKeeper {}, cache {}; fault kinds: {}",
        if config.netns {
            "network namespaces"
        } else {
            "loopback"
        },
        if config.ensemble {
            "ensemble of 3"
        } else {
            "single server"
        },
        config
            .cache_max_lag_ms
            .map_or_else(|| "none".to_owned(), |l| format!("memory (max_lag_ms {l})")),
        config
            .kinds
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut cluster = if config.netns {
        Cluster::start_namespaced(&cluster_config)?
    } else {
        Cluster::start(&cluster_config)?
    };
    let urls = cluster.urls.clone();
    say(&format!(
        "ZooKeeper at {}, domains {}",
        cluster.zk.connect_string(),
        names
            .iter()
            .zip(&urls)
            .map(|(n, u)| format!("{n}={u}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let probe = http::client(Duration::from_secs(2))?;
    if let Err(why) = wait_converged(&probe, &urls, CONVERGE_PATIENCE) {
        say(&format!("never converged: {why}"));
        return Err(Error::NeverConverged(CONVERGE_PATIENCE.as_secs()));
    }
    rec.note("converged at the start; clients and nemesis begin");

    let stop = AtomicBool::new(false);
    let pool = Pool::default();
    let workload = Workload {
        names: &names,
        urls: &urls,
        rec: &rec,
        pool: &pool,
        stop: &stop,
        seed: config.seed,
        cache: config.cache_max_lag_ms.is_some(),
    };
    let nemesis_config = NemesisConfig {
        seed: config.seed,
        deadline: Instant::now() + config.duration,
        kinds: config.kinds.clone(),
        overlap: config.overlap,
        converge_patience: CONVERGE_PATIENCE,
        session_timeout: Duration::from_millis(config.session_timeout_ms),
    };

    let outcome: Result<(), Error> = std::thread::scope(|s| {
        let clients: Vec<_> = (1..=config.clients)
            .map(|w| {
                let workload = &workload;
                s.spawn(move || workload.client(w))
            })
            .collect();
        let (cluster, rec, stop) = (&mut cluster, &rec, &stop);
        let nemesis = s.spawn(move || nemesis::run(cluster, rec, &nemesis_config, stop, say));
        let mut last = Instant::now();
        while !nemesis.is_finished() {
            std::thread::sleep(Duration::from_millis(200));
            if last.elapsed() >= Duration::from_secs(10) {
                last = Instant::now();
                say(&format!(
                    "{:>6.1} s: {} operations, {} records acknowledged and not deleted",
                    started.elapsed().as_secs_f64(),
                    rec.len(),
                    pool.acknowledged()
                ));
            }
        }
        let nemesis = nemesis
            .join()
            .map_err(|p| Error::Panicked("nemesis", panic_message(p.as_ref())))
            .and_then(|r| r);
        stop.store(true, Ordering::Relaxed);
        let mut result = nemesis;
        for c in clients {
            let joined = c
                .join()
                .map_err(|p| Error::Panicked("client", panic_message(p.as_ref())))
                .and_then(|r| r);
            result = result.and(joined);
        }
        result
    });
    outcome?;
    say(&format!(
        "{:.1} s: faults over, {} operations; waiting for the cluster to converge",
        started.elapsed().as_secs_f64(),
        rec.len()
    ));
    rec.note("faults over; final checks");

    let mut extra = Vec::new();
    let heal_done = Instant::now();
    let final_convergence = wait_converged(&probe, &urls, CONVERGE_PATIENCE)
        .map(|at| at.saturating_duration_since(heal_done));
    if let Err(why) = &final_convergence {
        extra.push(Violation {
            kind: ViolationKind::NotConverged,
            id: "all".to_owned(),
            at_us: rec.now_us(),
            message: format!("after the last fault healed: {why}"),
        });
    }
    let ids = pool.acknowledged_ids();
    say(&format!(
        "reading back {} acknowledged, never deleted records at their owners and at every domain",
        ids.len()
    ));
    workload.final_reads(&ids, 4)?;

    say("waiting for every request to be answered; reading the requests and audit logs back");
    let reads_done = Instant::now();
    let finals = workload.final_requests(REQUESTS_PATIENCE)?;
    let requests_answered = finals
        .answered
        .map(|at| at.saturating_duration_since(reads_done));
    for what in finals.unread {
        extra.push(Violation {
            kind: ViolationKind::RequestLost,
            id: what.clone(),
            at_us: rec.now_us(),
            message: format!("after healing, the final checks could not read {what}"),
        });
    }

    let mut verified = Vec::new();
    for (name, url) in names.iter().zip(&urls) {
        let answer: Result<VerifyReport, String> =
            http::get_typed(&probe, url, "/v1/filter/verify");
        let consistent = answer
            .as_ref()
            .is_ok_and(|v| v.consistent && v.missing == 0);
        if !consistent {
            extra.push(Violation {
                kind: ViolationKind::FilterInconsistent,
                id: name.clone(),
                at_us: rec.now_us(),
                message: format!(
                    "domain {name}: /v1/filter/verify: {}",
                    match &answer {
                        Ok(v) => format!("{v:?}"),
                        Err(e) => e.clone(),
                    }
                ),
            });
        }
        verified.push(Verified {
            domain: name.clone(),
            answer,
        });
    }
    let (compared, differing) = copies_differing(&probe, &names, &urls, rec.now_us());
    say(&format!(
        "{compared} copies compared bit for bit with their origins' filters at the same position"
    ));
    extra.extend(differing);
    rec.finish()?;
    drop(cluster);

    let history = rec.history();
    let rules = config.rules();
    let (mut violations, stale) = check_history_with(&history, &rules);
    let requests = request_counts(&history);
    violations.extend(extra);
    violations.sort_by_key(|a| (a.at_us, a.kind));
    Ok(RunReport {
        seed: config.seed,
        duration: config.duration,
        elapsed: started.elapsed(),
        dir: config.dir.clone(),
        history_path,
        history,
        violations,
        final_convergence,
        final_ids: ids.len(),
        requests_answered,
        requests,
        verified,
        rules,
        stale,
        netns: config.netns,
        ensemble: config.ensemble,
    })
}

/// A bounded run as the tests make it: the workspace's `xarchive`, a run
/// directory named after `label` and `seed` (kept on a failure, removed
/// otherwise), `adjust` for the modes, the summary printed; panics with
/// the seed when the nemesis injected nothing or the checker found a
/// violation. `hint` goes with a setup failure.
pub fn run_as_test(
    label: &str,
    duration: std::time::Duration,
    seed: u64,
    hint: &str,
    adjust: impl FnOnce(RunConfig) -> RunConfig,
) -> RunReport {
    let bin = crate::xarchive_binary().unwrap_or_else(|e| {
        panic!("{e}; `cargo test --workspace` builds it along with the cli crate's tests")
    });
    let dir = std::env::temp_dir().join(format!(
        "xarchive-{label}-test-{seed}-{}",
        std::process::id()
    ));
    let config = adjust(RunConfig::new(bin, dir.clone(), duration, seed));
    eprintln!("seed = {seed}");
    let say = |line: &str| eprintln!("{line}");
    let report = run(&config, &say).unwrap_or_else(|e| panic!("seed = {seed}: {e}{hint}"));
    eprintln!("\n{report}");
    assert!(
        !report.history.faults.is_empty(),
        "the nemesis injected no fault"
    );
    assert!(
        report.passed(),
        "seed = {seed}: {} violations (summary above; history and domain logs kept in {})",
        report.violations.len(),
        dir.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
    report
}

/// Each copy a domain holds of another, where it is at the position that
/// domain's filter is at, compared with that filter bit for bit. The final
/// reads find a copy that claims more than it holds only through a record
/// it lacks; this finds it by every bit, and before a restart of its
/// holder wipes it.
fn copies_differing(
    probe: &Client,
    names: &[String],
    urls: &[String],
    at_us: u64,
) -> (usize, Vec<Violation>) {
    let (mut compared, mut found) = (0, Vec::new());
    for (origin, origin_url) in names.iter().zip(urls) {
        let Ok((published, filter)) = http::filter_at(probe, origin_url, "/v1/filter") else {
            continue;
        };
        for (holder, holder_url) in names.iter().zip(urls).filter(|(n, _)| *n != origin) {
            let path = format!("/v1/copies/{origin}");
            let Ok((held, copy)) = http::filter_at(probe, holder_url, &path) else {
                continue;
            };
            if held != published {
                continue;
            }
            compared += 1;
            if copy != filter {
                let differing = copy.iter().zip(&filter).filter(|(a, b)| a != b).count();
                found.push(Violation {
                    kind: ViolationKind::CopyDiffers,
                    id: format!("{holder}/{origin}"),
                    at_us,
                    message: format!(
                        "{holder}'s copy of {origin} at {origin}'s position {held:?} differs from its filter: {} against {} bytes, {differing} bytes differ",
                        copy.len(),
                        filter.len()
                    ),
                });
            }
        }
    }
    (compared, found)
}
