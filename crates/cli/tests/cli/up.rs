//! `xarchive up`: the README's first command, as a real process.

use crate::common::{bin, text, xarchive};

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
    run_up_with(data, |_| {}, |_| {})
}

/// [`run_up`], the command first changed by `configure`, and `while_up`
/// called with the first domain's address once it has printed its lookup.
fn run_up_with(
    data: &Path,
    configure: impl FnOnce(&mut Command),
    while_up: impl FnOnce(&str),
) -> String {
    let log = data.with_extension("stderr");
    let mut up = Command::new(bin());
    up.args(["up", "--records", "300", "--port", "0", "--data"])
        .arg(data);
    configure(&mut up);
    let mut child = up
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut printed = String::new();
    let mut lookup = None;
    let (mut search, mut identity) = (None, None);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if let Some(cmd) = line.trim().strip_prefix("xarchive lookup ") {
            lookup = Some(cmd.to_owned());
        }
        if let Some(cmd) = line.trim().strip_prefix("xarchive search ") {
            search = Some(cmd.to_owned());
        }
        if let Some(number) = line.split("on standard input: ").nth(1) {
            identity = Some(number.trim().to_owned());
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
    // The search as printed: the identity number on standard input, as
    // README says, never an argument.
    let search = search.unwrap_or_else(|| panic!("no search command printed:\n{printed}"));
    let identity = identity.unwrap_or_else(|| panic!("no identity number printed:\n{printed}"));
    assert!(
        search.starts_with("--key id_card=- --server ") && !search.contains(&identity),
        "{search}"
    );
    let out = crate::common::run(
        &["search", "--key", "id_card=-"],
        server,
        None,
        Some(identity.as_bytes()),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(" records in "),
        "{}",
        text(&out)
    );
    while_up(server);

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

/// The page's budget (`[page]`) comes from the file `--config` names,
/// a variable `XARCHIVE_PAGE__…` over it, as `serve` reads them: every
/// domain started tells its page the same budget.
#[test]
fn up_gives_every_domain_the_settings_of_its_config_file_and_the_environment() {
    let dir = tempdir().unwrap();
    let config = dir.path().join("shared.toml");
    std::fs::write(
        &config,
        "name = \"ignored\"\n[page]\nfilter_bytes = 6000\nfilter_requests = 2\n",
    )
    .unwrap();
    let printed = run_up_with(
        &dir.path().join("xarchive-data"),
        |up| {
            up.arg("--config")
                .arg(&config)
                .env("XARCHIVE_PAGE__FILTER_REQUESTS", "3");
        },
        |first| {
            let out = xarchive(&["cluster", "--json"], first);
            assert!(out.status.success(), "{}", text(&out));
            let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let addresses: Vec<String> = view["domains"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["address"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(addresses.len(), 3, "{view}");
            for address in addresses {
                let out = xarchive(&["cluster", "--json"], &address);
                let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(
                    view["page"],
                    serde_json::json!({"filter_bytes": 6000, "filter_requests": 3}),
                    "{address}"
                );
            }
        },
    );
    assert!(printed.contains("3 domains up"), "{printed}");
    assert!(
        printed.contains("  A "),
        "each domain keeps its own name: {printed}"
    );
}

/// With `--output json`, `up` prints one document once its domains serve,
/// and nothing more when it stops.
#[test]
fn up_with_output_json_prints_its_domains_as_one_document() {
    let dir = tempdir().unwrap();
    let mut child = Command::new(bin())
        .args(["--output", "json", "up", "--records", "0", "--port", "0"])
        .arg("--data")
        .arg(dir.path().join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    // The document ends with its closing brace alone on a line.
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "{printed}");
        printed.push_str(&line);
        if line == "}\n" {
            break;
        }
    }
    let document: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let domains = document["domains"].as_array().unwrap();
    assert_eq!(domains.len(), 3, "{document}");
    let first = domains[0]["address"].as_str().unwrap();
    let out = xarchive(&["stats"], first);
    assert!(out.status.success(), "{}", text(&out));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(rest, "", "nothing after the document");
}
