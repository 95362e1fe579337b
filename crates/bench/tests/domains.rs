//! `xarchive-bench domains` end to end, at a small size: real `xarchive
//! serve` domains in two groups on a real ZooKeeper under steady writes.
//! Its JSON must count every write, each routed at the far end of the
//! relay tree, and ZooKeeper's packets. No timing is asserted.
//!
//! `xarchive-bench` runs the `xarchive` binary beside it in `target/debug`:
//! `cargo build -p xarchive` first (`cargo test --workspace` builds it).

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use xarchive_testkit::{stdout_of, tempdir, ZooKeeperServer};

/// Runs `xarchive-bench domains ARGS` on a ZooKeeper of its own: what it
/// printed, and its JSON report.
fn bench_domains(args: &[&str]) -> (String, Value) {
    let zk = ZooKeeperServer::start();
    let dir = tempdir().unwrap();
    let json = dir.path().join("d.json");
    let text = stdout_of(
        Command::new(Path::new(env!("CARGO_BIN_EXE_xarchive-bench")))
            .arg("domains")
            .args(args)
            .args(["--zk", &zk.connect_string()])
            .arg("--json")
            .arg(&json)
            .current_dir(dir.path()),
    );
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (text, report)
}

#[test]
fn bench_domains_routes_every_write_at_the_far_end_of_real_domains_in_two_groups() {
    let (text, report) = bench_domains(&[
        "--domains",
        "4",
        "--groups",
        "2",
        "--rate",
        "20",
        "--duration",
        "1s",
    ]);
    assert!(text.contains("4 domains in 2 groups, 20 writes"), "{text}");
    assert_eq!(report["writes"], 20, "{report}");
    assert_eq!(report["not_routed_within_10_s"], 0, "{report}");
    for figure in ["ack_ms", "far_end_lag_ms"] {
        assert!(
            report[figure]["p99"].as_f64().is_some_and(|ms| ms >= 0.0),
            "{report}"
        );
    }
    assert!(
        report["zk_packets_sent_per_write_per_domain"]
            .as_f64()
            .is_some_and(|p| p > 0.0),
        "{report}"
    );
}

#[test]
fn bench_domains_finds_every_write_at_the_other_end_of_the_longest_path_while_domains_are_killed() {
    let (text, report) = bench_domains(&[
        "--domains",
        "5",
        "--groups",
        "2",
        "--rate",
        "20",
        "--duration",
        "4s",
        "--longest-path",
        "--faults",
        "--light",
        "20",
        "--light-ids",
        "20000",
    ]);
    assert!(text.contains("among 25 (20 light publishers"), "{text}");
    let lookups = &report["far_end_lookups"];
    assert_eq!(lookups["not_found"], 0, "{report}");
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    let answered =
        count(&lookups["found"]) + count(&lookups["unavailable"]) + count(&lookups["failed"]);
    assert_eq!(
        answered + count(&report["unacknowledged"]),
        80,
        "every write is acknowledged and looked up, or counted as not acknowledged: {report}"
    );
    // The first fault starts within 3 s, while writes go on for 4 s.
    let faults = count(&report["faults"]["kills"]) + count(&report["faults"]["pauses"]);
    assert!(faults >= 1, "{report}");
    assert_eq!(report["longest_path_hops"], 3, "{report}");
}
