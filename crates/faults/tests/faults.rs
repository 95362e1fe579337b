//! The fault test, bounded for CI: two minutes of randomized kills,
//! pauses, ZooKeeper outages and kills of the leader of a three-server
//! ZooKeeper ensemble (on loopback, no cache) against real processes,
//! then the checker over the whole history. Longer runs:
//! `cargo run -p xarchive-faults`.

use std::time::Duration;

use xarchive_faults::{run, xarchive_binary, RunConfig};

/// Fixed, so that a failure in CI replays with
/// `cargo run -p xarchive-faults -- --ensemble --duration 120s --seed 20261124`.
const SEED: u64 = 20_261_124;

#[test]
fn randomized_faults_never_lose_an_acknowledged_record() {
    let bin = xarchive_binary().unwrap_or_else(|e| {
        panic!("{e}; `cargo test --workspace` builds it along with the cli crate's tests")
    });
    let dir = std::env::temp_dir().join(format!(
        "xarchive-faults-test-{SEED}-{}",
        std::process::id()
    ));
    let config = RunConfig::new(bin, dir.clone(), Duration::from_secs(120), SEED).with_ensemble();
    eprintln!("seed = {SEED}");
    let say = |line: &str| eprintln!("{line}");
    let report = run(&config, &say).unwrap_or_else(|e| panic!("seed = {SEED}: {e}"));
    eprintln!("\n{report}");
    assert!(
        !report.history.faults.is_empty(),
        "the nemesis injected no fault"
    );
    assert!(
        report.passed(),
        "seed = {SEED}: {} violations (summary above; history and domain logs kept in {})",
        report.violations.len(),
        dir.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
