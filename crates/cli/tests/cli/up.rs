//! `xarchive up`: the README's first command, as a real process.

use crate::common::bin;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use xarchive_testkit::tempdir;

/// Runs `xarchive up` until it has printed its lookup command, checks
/// that command against the running domains, then stops it with SIGINT
/// (Ctrl-C). Returns everything it printed. `--port 0` lets it pick free
/// ports: three fixed consecutive ones could be taken by parallel tests.
fn run_up(data: &Path) -> String {
    let log = data.with_extension("stderr");
    let mut child = Command::new(bin())
        .args(["up", "--records", "300", "--port", "0", "--data"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut printed = String::new();
    let mut lookup = None;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if let Some(cmd) = line.trim().strip_prefix("xarchive lookup ") {
            lookup = Some(cmd.to_owned());
        }
        if line.starts_with("Ctrl-C stops") {
            break;
        }
    }
    // Keep reading what it prints while it stops.
    let rest =
        std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
    let lookup = lookup.unwrap_or_else(|| {
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        panic!("no lookup command printed:\n{printed}\nstderr:\n{err}")
    });
    // "'ID' --server URL": run it as printed.
    let (id, server) = lookup.split_once(" --server ").unwrap();
    let out = Command::new(bin())
        .args(["lookup", id.trim_matches('\''), "--server", server])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("found in domain C"), "{err}");

    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let mut waited = Duration::ZERO;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            waited < Duration::from_secs(30),
            "up did not stop on Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
        waited += Duration::from_millis(50);
    };
    assert!(status.success(), "exit status {status}");
    let rest = rest.join().unwrap();
    assert!(rest.contains("all domains stopped"), "{rest}");
    printed
}

#[test]
fn up_serves_three_domains_and_keeps_their_data() {
    let dir = tempdir().unwrap();
    let data = dir.path().join("xarchive-data");
    let first = run_up(&data);
    assert!(first.contains("3 domains up"), "{first}");
    assert!(first.contains("plain HTTP on loopback"), "{first}");
    assert_eq!(first.matches("    300 records").count(), 3, "{first}");
    for name in ["A", "B", "C"] {
        assert!(
            data.join(name).join("filter.snapshot").exists(),
            "{name} saved no snapshot"
        );
    }
    // The second run finds the records and loads nothing more.
    let second = run_up(&data);
    assert_eq!(second.matches("    300 records").count(), 3, "{second}");
}
