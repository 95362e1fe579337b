//! `xarchive-bench memory` end to end, at small sizes: it starts and stops
//! its own `xarchive serve` child, and its JSON carries every figure,
//! positive and growing with the number of IDs. No timing is asserted.
//!
//! `xarchive-bench` runs the `xarchive` binary beside it in `target/debug`:
//! `cargo build -p xarchive` first (`cargo test --workspace` builds it).

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use xarchive_testkit::{stdout_of, tempdir};

#[test]
fn bench_memory_reports_every_kind_and_the_process() {
    let dir = tempdir().unwrap();
    let (json, plot) = (dir.path().join("m.json"), dir.path().join("m.svg"));
    let text = stdout_of(
        Command::new(Path::new(env!("CARGO_BIN_EXE_xarchive-bench")))
            .args(["memory", "--sizes", "4000,2000", "--probes", "5000"])
            .arg("--json")
            .arg(&json)
            .arg("--plot")
            .arg(&plot)
            .env_remove("XARCHIVE_ZK"),
    );
    assert!(text.contains("counting MB"), "{text}");
    assert!(text.contains("target not checked"), "{text}");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let ids: Vec<u64> = rows.iter().map(|r| r["ids"].as_u64().unwrap()).collect();
    assert_eq!(ids, [2000, 4000], "sizes are measured in ascending order");
    let figure = |row: &Value, path: &[&str]| {
        let v = path.iter().fold(row, |v, k| &v[*k]);
        v.as_f64()
            .unwrap_or_else(|| panic!("{path:?} is not a number in {row}"))
    };
    let kinds = ["counting", "bit_view", "cuckoo", "bloom"];
    for row in rows {
        for kind in kinds {
            assert!(figure(row, &["filters", kind, "bytes"]) > 0.0);
            let rate = figure(row, &["filters", kind, "measured_fpr"]);
            assert!((0.0..0.05).contains(&rate), "{kind}: {rate}");
        }
        assert_eq!(
            row["process"]["records"].as_u64(),
            row["ids"].as_u64(),
            "the restarted domain holds the store of its row"
        );
        for field in ["vm_rss_bytes", "vm_hwm_bytes"] {
            assert!(figure(row, &["process", "memory", field]) > 0.0);
            assert!(figure(row, &["process", "memory_after_import", field]) > 0.0);
        }
        assert!(figure(row, &["process", "domain_filter_bytes"]) > 0.0);
        assert!(figure(row, &["process", "store_bytes"]) > 0.0);
        assert!(row["paper_mb"].is_null() && row["paper_over_counting"].is_null());
    }
    for kind in kinds {
        let path = ["filters", kind, "bytes"];
        assert!(
            figure(&rows[1], &path) > figure(&rows[0], &path),
            "{kind} grows with the IDs"
        );
    }
    assert!(report["target"].is_null());

    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("counting filter"));
}
