//! `xarchive-bench nation`'s cluster part end to end, at a small size: a
//! real ZooKeeper, light publishers, and a measured `xarchive serve` that
//! joins, follows steady writes and an import, and answers lookups, then
//! again with a light domain killed. Its JSON must show every write
//! reached the measured domain and every lookup answered right (held IDs
//! found, absent ones 404, or 503 naming only the killed domain). No
//! timing is asserted.
//!
//! `xarchive-bench` runs the `xarchive` binary beside it in `target/debug`:
//! `cargo build -p xarchive` first (`cargo test --workspace` builds it).

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use xarchive_testkit::{stdout_of, tempdir, ZooKeeperServer};

#[test]
// The figures compared exactly are counts, whole numbers in JSON.
#[allow(clippy::float_cmp)]
fn bench_nation_measures_a_domain_joining_syncing_and_looking_up_among_light_publishers() {
    let zk = ZooKeeperServer::start();
    let dir = tempdir().unwrap();
    let (json, plot) = (dir.path().join("n.json"), dir.path().join("n.svg"));
    let text = stdout_of(
        Command::new(Path::new(env!("CARGO_BIN_EXE_xarchive-bench")))
            .args(["nation", "--parts", "cluster", "--domains", "4,8"])
            // 3 301 000 IDs at 3 301 domains: 1 000 per domain on average.
            .args([
                "--ids",
                "3301000",
                "--write-rate",
                "50",
                "--steady-seconds",
                "2",
            ])
            .args([
                "--import",
                "3000",
                "--cluster-lookups",
                "20",
                "--watchers",
                "2",
            ])
            .args(["--zk", &zk.connect_string()])
            .arg("--json")
            .arg(&json)
            .arg("--plot")
            .arg(&plot)
            .current_dir(dir.path()),
    );
    assert!(text.contains("The measured domain among N"), "{text}");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["cluster"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let number = |row: &Value, name: &str| {
        row[name]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} is not a number in {row}"))
    };
    for row in rows {
        assert!(number(row, "join_bytes") > 0.0, "{row}");
        assert!(number(row, "writes_acknowledged") > 0.0, "{row}");
        assert_eq!(number(row, "writes_never_sent"), 0.0, "{row}");
        assert_eq!(number(row, "lookups_wrong"), 0.0, "{row}");
        assert_eq!(number(row, "lookups_unanswered"), 0.0, "{row}");
        assert!(number(row, "import_bytes_to_one_peer") > 0.0, "{row}");
        assert!(number(row, "import_one_copy_bytes") > 0.0, "{row}");
        assert!(
            number(row, "znodes") >= 2.0 * number(row, "domains"),
            "{row}"
        );
        // The watchers follow the membership as domains do: no
        // publication wakes them.
        assert_eq!(number(row, "watch_events_per_second"), 0.0, "{row}");
        // One light domain killed (1 %, at least one): every absent ID
        // is then 404 or 503 naming it, nothing else (counted as wrong).
        assert_eq!(number(row, "killed"), 1.0, "{row}");
        assert_eq!(
            number(row, "killed_absent_404") + number(row, "killed_absent_503"),
            20.0,
            "{row}"
        );
        // A held ID costs at least the call that finds it.
        assert!(number(row, "calls_per_found") >= 1.0, "{row}");
    }
    for chart in ["join", "sync"] {
        let svg = std::fs::read_to_string(dir.path().join(format!("n-{chart}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{chart}");
    }
}
