//! The command line: configuration sources, client commands, exit codes.

use crate::common::{bin, text, xarchive};

use std::process::Command;

use xarchive_node::{FilterKind, Record};
use xarchive_testkit::{tempdir, Spawn};

#[test]
fn config_file_flags_and_environment_combine() {
    let dir = tempdir().unwrap();
    let config = dir.path().join("domain.toml");
    std::fs::write(
        &config,
        "name = \"from-file\"\n[filter]\nkind = \"cuckoo\"\nexpected_items = 5000\n",
    )
    .unwrap();
    // The environment overrides the file's name; the file's filter stays.
    let domain = Spawn::new(bin(), "from-env", &dir.path().join("d"))
        .arg("--config")
        .arg(config.to_str().unwrap())
        .env("XARCHIVE_FPR", "0.001")
        .start();
    let out = xarchive(&["stats"], &domain.url);
    assert!(out.status.success(), "{}", text(&out));
    // The whole of /v1/stats: the domain's figures and its cache's.
    let stats: xarchive_node::wire::Stats = serde_json::from_slice(&out.stdout).unwrap();
    let stats = stats.domain;
    assert_eq!(stats.domain, "from-env");
    assert_eq!(stats.filter.kind, FilterKind::Cuckoo);
    assert_eq!(stats.filter.fingerprint_bits, Some(13));
}

#[test]
fn client_commands_report_and_exit_clearly() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();

    let content = dir.path().join("scan.pdf");
    std::fs::write(&content, b"%PDF-1.7 pretend").unwrap();
    let out = xarchive(
        &[
            "put",
            "档案/2024/001",
            "--title",
            "会议纪要",
            "--metadata",
            r#"{"year":2024}"#,
            "--content-file",
            content.to_str().unwrap(),
        ],
        url,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("created 档案/2024/001 in domain A"));

    let out = xarchive(&["get", "档案/2024/001"], url);
    let record: Record = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record.metadata["year"], 2024);
    assert_eq!(record.content.as_deref(), Some(&b"%PDF-1.7 pretend"[..]));

    let out = xarchive(&["rm", "档案/2024/001"], url);
    assert!(out.status.success());
    let out = xarchive(&["get", "档案/2024/001"], url);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let out = xarchive(&["rm", "档案/2024/001"], url);
    assert_eq!(out.status.code(), Some(3));

    let out = xarchive(&["put", "x", "--title", "t", "--metadata", "[1]"], url);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("--metadata must be a JSON object"));

    let out = xarchive(&["stats"], "http://127.0.0.1:1");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("127.0.0.1:1"), "{}", text(&out));
}

#[test]
fn import_reads_csv_and_ndjson_and_names_bad_lines() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let csv = dir.path().join("records.csv");
    std::fs::write(
        &csv,
        "id,title,fonds,key:id_card\nJ001-WS·2023-Y-0001,\"Minutes, vol. 1\",J001,11010519491231002x\nJ001-WS·2023-Y-0002,Letters,J001,\n",
    )
    .unwrap();
    let out = xarchive(
        &["import", csv.to_str().unwrap(), "--chunk", "1"],
        &domain.url,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("imported 2 records (2 created, 0 replaced)"));
    let out = xarchive(&["get", "J001-WS·2023-Y-0001"], &domain.url);
    let record: Record = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(record.title, "Minutes, vol. 1");
    assert_eq!(record.metadata["fonds"], "J001");
    // A key column becomes a key (read by its ID, a private key's value
    // is withheld: a search finds it, normalised); an empty cell, no key.
    assert!(record.keys.is_empty());
    assert_eq!(record.keys_withheld, ["id_card"]);
    assert!(!record.metadata.contains_key("key:id_card"));
    let out = xarchive(
        &["search", "--key", "id_card=11010519491231002X", "--json"],
        &domain.url,
    );
    assert!(out.status.success(), "{}", text(&out));
    let found: xarchive_node::wire::SearchBody = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found.records.len(), 1);
    assert_eq!(found.records[0].keys["id_card"], "11010519491231002X");
    let out = xarchive(&["get", "J001-WS·2023-Y-0002"], &domain.url);
    let record: Record = serde_json::from_slice(&out.stdout).unwrap();
    assert!(record.keys.is_empty() && record.keys_withheld.is_empty());

    let ndjson = dir.path().join("records.ndjson");
    std::fs::write(
        &ndjson,
        "{\"id\":\"N-1\",\"title\":\"a\"}\n\n{\"id\":\"N-2\"}\n{\"id\":\"N-3\",\"title\":\"c\"}\n",
    )
    .unwrap();
    let out = xarchive(&["import", ndjson.to_str().unwrap()], &domain.url);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("imported 2 records"), "{t}");
    assert!(t.contains("line 3: invalid_record"), "{t}");

    let out = xarchive(&["import", "/nonexistent.csv"], &domain.url);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("/nonexistent.csv"));
}

#[test]
fn serve_refuses_bad_configuration_with_a_reason() {
    let dir = tempdir().unwrap();
    let out = Command::new(bin())
        .args(["serve", "--name", "bad name", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("must be 1..=64 of"), "{}", text(&out));

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let out = Command::new(bin())
        .args(["serve", "--name", "A", "--listen", &addr, "--data"])
        .arg(dir.path().join("A"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(&format!("cannot listen on {addr}")),
        "{}",
        text(&out)
    );
}

#[test]
fn only_the_apis_not_found_makes_exit_3_and_every_other_failure_says_what_went_wrong() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let id = "J1-WS·2020-Y-1";
    let out = xarchive(&["put", id, "--title", "t"], url);
    assert!(out.status.success(), "{}", text(&out));

    // Addresses as people write them: with /v1, without a scheme.
    let port = url.rsplit(':').next().unwrap();
    for server in [format!("{url}/v1"), format!("127.0.0.1:{port}")] {
        let out = xarchive(&["lookup", id], &server);
        assert_eq!(out.status.code(), Some(0), "{server}: {}", text(&out));
    }
    // A wrong path is an error, never "not found".
    for command in [&["lookup", id][..], &["get", id], &["rm", "absent"]] {
        let out = xarchive(command, &format!("{url}/api"));
        assert_eq!(out.status.code(), Some(1), "{command:?}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("route_not_found") && said.contains("hint:"),
            "{said}"
        );
        assert!(
            !said.contains("not found:") && !said.contains("not found in any"),
            "{said}"
        );
    }
    // An invalid ID is bad usage (2), said as the server says it.
    for bad in [".", ""] {
        let out = xarchive(&["get", bad], url);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out));
        assert!(text(&out).contains("invalid"), "{}", text(&out));
    }
    // Absent, as the API says: 3.
    for command in [
        &["get", "absent"][..],
        &["lookup", "absent"],
        &["rm", "absent"],
    ] {
        let out = xarchive(command, url);
        assert_eq!(out.status.code(), Some(3), "{command:?}: {}", text(&out));
    }
    // Nobody there: the address once, the cause, and a hint.
    let nobody = format!("http://127.0.0.1:{}", xarchive_testkit::free_port());
    let out = xarchive(&["stats"], &nobody);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert_eq!(said.matches(&nobody).count(), 1, "{said}");
    assert!(
        said.contains("refused") && said.contains("xarchive up"),
        "{said}"
    );
}

#[test]
fn completions_a_manual_page_json_logs_and_the_cluster_table_are_there_for_operators() {
    let out = xarchive(&["completions", "bash"], "");
    assert!(
        out.status.success() && text(&out).contains("_xarchive"),
        "{}",
        text(&out)
    );
    let out = xarchive(&["man"], "");
    assert!(
        out.status.success() && text(&out).contains(".TH xarchive 1"),
        "{}",
        text(&out)
    );

    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A"))
        .args(["--log-format", "json"])
        .start();
    // Every log line is one JSON object, the start's included.
    let log = domain.log();
    assert!(log.contains("listening on http://"), "{log}");
    for line in log.lines() {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(parsed["level"].is_string(), "{line}");
    }
    let out = xarchive(&["cluster"], &domain.url);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("membership confirmed") && table.contains("A *"),
        "{table}"
    );
}

#[test]
fn serve_tells_systemd_it_is_ready_once_it_has_read_the_membership() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_mins(1)))
        .unwrap();
    let _domain = Spawn::new(bin(), "A", &dir.path().join("A"))
        .env("NOTIFY_SOCKET", socket_path.to_str().unwrap())
        .start();
    let mut message = [0u8; 256];
    let n = socket
        .recv(&mut message)
        .expect("no readiness sent within a minute");
    let message = String::from_utf8_lossy(&message[..n]);
    assert!(message.contains("READY=1"), "{message}");
}

#[test]
fn a_token_bound_to_a_name_no_domain_could_have_is_refused_and_nothing_is_written() {
    let dir = tempdir().unwrap();
    let config = dir.path().join("tokens.toml");
    for bad in ["a/b", "", &"x".repeat(65)] {
        let out = Command::new(bin())
            .args(["token", "create", "--role", "read", "--name", "n"])
            .args(["--domain", bad])
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?}: {}", text(&out));
        assert!(
            text(&out).contains("--domain must be a domain's name"),
            "{}",
            text(&out)
        );
        assert!(!config.exists(), "{bad:?}: nothing is written");
    }
}

#[test]
fn tokens_are_listed_revoked_and_taken_again_on_sighup_without_a_restart() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let dir = tempdir().unwrap();
    let config = dir.path().join("A.toml");
    std::fs::write(&config, "[limits]\nmax_bulk_lines = 5000  # ours\n").unwrap();
    let create = |name: &str| {
        let out = Command::new(bin())
            .args(["token", "create", "--role", "read", "--name", name])
            .args(["--config", config.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let first = create("first");
    let domain = Spawn::new(bin(), "A", &dir.path().join("A"))
        .args(["--config", config.to_str().unwrap()])
        .start();
    let status = |token: &str| {
        Command::new(bin())
            .args(["stats", "--token", token])
            .env("XARCHIVE_SERVER", &domain.url)
            .output()
            .unwrap()
            .status
            .code()
    };
    let hup = || {
        kill(
            Pid::from_raw(i32::try_from(domain.pid()).unwrap()),
            Signal::SIGHUP,
        )
        .unwrap();
    };
    let eventually = |token: &str, code: i32| {
        for _ in 0..300 {
            if status(token) == Some(code) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!(
            "the token never gave exit {code}; the log:\n{}",
            domain.log()
        );
    };
    assert_eq!(status(&first), Some(0));
    let second = create("second");
    assert_eq!(status(&second), Some(1), "not taken before the reload");
    hup();
    eventually(&second, 0);
    let out = Command::new(bin())
        .args([
            "token",
            "revoke",
            "first",
            "--config",
            config.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    hup();
    eventually(&first, 1);
    assert_eq!(status(&second), Some(0));
    let listed = Command::new(bin())
        .args(["token", "list", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("second") && !listed.contains("first"),
        "{listed}"
    );
    let kept = std::fs::read_to_string(&config).unwrap();
    assert!(
        kept.starts_with("[limits]\nmax_bulk_lines = 5000  # ours\n"),
        "{kept}"
    );
}

#[test]
fn every_client_command_prints_json_with_output_json() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        let out = xarchive(&all, url);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out)))
    };
    assert_eq!(json(&["put", "J-1", "--title", "t"])["created"], true);
    assert_eq!(json(&["get", "J-1"])["title"], "t");
    assert_eq!(json(&["lookup", "J-1"])["owner"], "A");
    assert_eq!(json(&["stats"])["records"], 1);
    assert!(json(&["cluster"])["domains"].is_array());
    let lines = dir.path().join("two.ndjson");
    std::fs::write(
        &lines,
        "{\"id\":\"J-2\",\"title\":\"a\"}\n{\"id\":\"J-3\",\"title\":\"b\"}\n",
    )
    .unwrap();
    assert_eq!(json(&["import", lines.to_str().unwrap()])["committed"], 2);
    assert_eq!(json(&["rm", "J-1"])["deleted"], "J-1");
    let config = dir.path().join("A.toml");
    let config = config.to_str().unwrap();
    let made = json(&[
        "token", "create", "--role", "read", "--name", "clerk", "--config", config,
    ]);
    assert!(made["token"].as_str().unwrap().starts_with("xa_"));
    assert_eq!(
        json(&["token", "list", "--config", config])[0]["name"],
        "clerk"
    );
}
