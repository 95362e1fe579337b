//! A Jepsen-style fault test for xarchive: a real ZooKeeper and three real
//! `xarchive serve` processes, a workload whose every operation is recorded
//! in a history, a nemesis that kills, pauses and restarts them (and
//! ZooKeeper) at random from a seed, and a checker that reads the history
//! afterwards and names every answer no correct cluster could have given.
//!
//! The parts:
//! - [`history`]: operations and faults with start and end times, kept in
//!   memory and written as NDJSON;
//! - [`checker`]: the rules over a history (testable on hand-made ones);
//! - [`requests`]: the checker's rule over cross-archive requests (every
//!   acknowledged one answered exactly once, none lost);
//! - [`cluster`]: the processes, on ports picked once so that restarts
//!   come back where clients and peers look for them;
//! - [`nemesis`]: the faults;
//! - [`netns`]: network namespaces, for partitions made by the kernel
//!   (a node's whole link, or exactly one pair by blackhole routes);
//! - [`ensemble`]: a three-server ZooKeeper ensemble, its leader found
//!   with `srvr`;
//! - [`workload`]: the client threads (records, lookups, searches and
//!   cross-archive requests);
//! - [`run`]: one whole run, with the final checks once everything healed;
//! - [`report`]: the summary tables.
//!
//! Running it: `cargo build -p xarchive` first (`cargo test --workspace`
//! does), then `cargo run -p xarchive-faults -- --duration 30m --seed N`
//! (add `--netns` for cut links and pairwise partitions, as root;
//! `--ensemble` for three ZooKeeper servers and leader kills; `--cache
//! memory` for the domains' in-process cache, with the checker allowing a
//! 200 up to `cache.max_lag_ms` + 1 s after a delete; `--bin PATH` for
//! another `xarchive`). A run that finds violations keeps its directory:
//! `history.ndjson` (one line per operation, fault start and heal, and
//! per request and request step the final checks found) and each
//! domain's log. The tests `randomized_faults_never_lose_an_acknowledged_record`
//! (120 s, loopback, ensemble) and
//! `partitions_leader_kills_and_the_cache_never_lose_an_acknowledged_record`
//! (75 s: namespaces, ensemble, cache) run the same thing with fixed
//! seeds.

pub mod checker;
pub mod cluster;
pub mod ensemble;
pub mod history;
pub mod http;
pub mod nemesis;
pub mod netns;
pub mod report;
pub mod requests;
pub mod run;
pub mod violation;
pub mod workload;

use std::path::PathBuf;

pub use checker::{check_history, check_history_with, Rules, StaleReads, Violation, ViolationKind};
pub use history::{
    CertificateSeen, Fault, FaultKind, History, Op, OpKind, Outcome, PartSeen, Recorder,
    RequestSeen, StepSeen,
};
pub use requests::{request_counts, RequestCounts};
pub use run::{run, RunConfig, RunReport};

/// Why a run could not be carried out (as opposed to a run that found
/// violations, which is a [`RunReport`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot write the history to {path}: {source}")]
    History {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create the run directory {path}: {source}")]
    RunDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot build an HTTP client: {0}")]
    HttpClient(#[from] reqwest::Error),
    #[error("the xarchive binary is not at {0} (build it first: `cargo build -p xarchive`, or pass its path)")]
    BinaryMissing(PathBuf),
    #[error("the cluster did not converge within {0} s of starting")]
    NeverConverged(u64),
    #[error("cannot send signal {signal} to process {pid}: {source}")]
    Signal {
        signal: &'static str,
        pid: u32,
        source: nix::errno::Errno,
    },
    #[error("network: `{command}` failed: {message}")]
    Net { command: String, message: String },
    #[error("a domain's data directory: {0}")]
    Disk(String),
    #[error("a {0} thread panicked: {1}")]
    Panicked(&'static str, String),
}

/// Where the `xarchive` binary built by cargo is: `XARCHIVE_BIN` if set;
/// else next to this executable (`target/debug/xarchive` for the
/// `xarchive-faults` binary, one folder up for a test in `deps/`); else in
/// `CARGO_TARGET_DIR` or the workspace's `target`, under `debug`. Fails,
/// naming where it looked, if there is no file there.
pub fn xarchive_binary() -> Result<PathBuf, Error> {
    if let Some(bin) = std::env::var_os("XARCHIVE_BIN") {
        let path = PathBuf::from(bin);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::BinaryMissing(path))
        };
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join("xarchive"));
            if let Some(up) = dir.parent() {
                candidates.push(up.join("xarchive"));
            }
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("..")
                .join("target")
        },
        PathBuf::from,
    );
    let fallback = target.join("debug").join("xarchive");
    candidates.push(fallback.clone());
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or(Error::BinaryMissing(fallback))
}

/// The message of a thread's panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}
