//! What every command prints for scripts and pipes: with `--output json`,
//! one JSON document on standard output, a failure's included
//! (`{"error": {"code", "message", "hint"}}`, the exit code unchanged); on
//! a pipe its reader closed (`| head -1`), a quiet end with exit 0; bad
//! usage exits 2 naming the flag.

use crate::common::{bin, run, text, xarchive};

use std::process::{Command, Output, Stdio};

use xarchive_testkit::{tempdir, Spawn};

/// `xarchive --output json args` against `server`, with `stdin`.
fn json_run(args: &[&str], server: &str, stdin: Option<&[u8]>) -> (Output, serde_json::Value) {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let out = run(&all, server, None, stdin);
    let document = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: standard output is not one JSON document ({e}):\n{}",
            text(&out)
        )
    });
    (out, document)
}

/// The failure's document, checked against the exit code expected.
fn failed(args: &[&str], server: &str, exit: i32, code: &str) -> serde_json::Value {
    let (out, document) = json_run(args, server, None);
    assert_eq!(out.status.code(), Some(exit), "{args:?}: {}", text(&out));
    let error = &document["error"];
    assert_eq!(error["code"], code, "{args:?}: {document}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{args:?}: {document}"
    );
    assert!(
        error.get("hint").is_some(),
        "{args:?}: the hint is there, null or not: {document}"
    );
    document
}

#[test]
fn with_output_json_every_subcommand_prints_one_document_and_its_failures_an_error_envelope() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let ok = |args: &[&str]| -> serde_json::Value {
        let (out, document) = json_run(args, url, None);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert!(document.get("error").is_none(), "{args:?}: {document}");
        document
    };

    // Records, lookups, searches, the log.
    assert_eq!(ok(&["put", "J-1", "--title", "t"])["created"], true);
    assert_eq!(ok(&["get", "J-1"])["title"], "t");
    assert_eq!(ok(&["lookup", "J-1"])["owner"], "A");
    assert!(ok(&["search", "--key", "id_card=11010519491231002X"])["records"].is_array());
    assert!(ok(&["audit"])["entries"].is_array());
    assert!(ok(&["audit", "verify"])["intact"].is_boolean());
    assert!(ok(&["stats"])["records"].is_number());
    assert!(ok(&["cluster"])["domains"].is_array());
    failed(&["rm", "absent"], url, 3, "not_found");
    failed(&["get", "absent"], url, 3, "not_found");
    failed(
        &["put", "J-2", "--title", "t", "--metadata", "[1]"],
        url,
        1,
        "error",
    );
    failed(&["get", "."], url, 2, "usage");
    failed(&["cluster", "forget", "B"], url, 1, "error");

    // Import and export: the summary is the document.
    std::fs::write(path("in.ndjson"), "{\"id\":\"J-3\",\"title\":\"a\"}\n").unwrap();
    assert_eq!(ok(&["import", &path("in.ndjson")])["committed"], 1);
    failed(&["import", &path("absent.csv")], url, 1, "error");
    let summary = ok(&["export", &path("out.ndjson")]);
    assert_eq!(summary["exported"], 2, "{summary}");
    assert_eq!(
        std::fs::read_to_string(path("out.ndjson"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    failed(
        &["export", &path("out.ndjson"), "--encoding", "gb18030"],
        url,
        1,
        "error",
    );

    // Backup, restore, sample, the manual's pages written.
    assert!(ok(&["backup", "--to", &path("A.backup")])["records"].is_number());
    assert!(ok(&["restore", &path("A.backup"), "--check"])["records"].is_number());
    failed(&["restore", &path("in.ndjson"), "--check"], url, 1, "error");
    assert_eq!(
        ok(&["sample", "--count", "3", "--out", &path("s.ndjson")])["written"],
        3
    );
    assert!(ok(&["man", "--dir", &path("man")])["pages"].is_array());
    failed(&["man", "nosuch"], url, 2, "usage");
    failed(&["completions", "nosuch"], url, 2, "usage");

    // Requests, reviews, certificates (clerk and reviewer roles: this
    // domain has no tokens, so every role is granted).
    assert!(ok(&["request", "list"])["requests"].is_array());
    assert!(ok(&["review", "list"])["reviews"].is_array());
    failed(&["request", "show", "absent"], url, 3, "request_not_found");
    failed(
        &["request", "certify", "absent"],
        url,
        3,
        "request_not_found",
    );
    failed(
        &["review", "approve", "B", "absent"],
        url,
        3,
        "review_not_found",
    );
    failed(
        &["review", "refuse", "B", "absent", "--reason", "no"],
        url,
        3,
        "review_not_found",
    );
    failed(
        &["certificate", "check", "AAAA-AAAA-AAAA-AAAA-AAAA"],
        url,
        3,
        "certificate_not_found",
    );
    let (out, document) = json_run(
        &["request", "submit", "--name", "张三", "--purpose", "贷款"],
        url,
        Some(b"11010519491231002X\n"),
    );
    assert!(
        document.get("id").is_some() || document["error"]["code"].is_string(),
        "{}",
        text(&out)
    );

    // Tokens.
    let config = path("A.toml");
    let made = ok(&[
        "token", "create", "--role", "reviewer", "--name", "r", "--config", &config,
    ]);
    assert!(made["token"].as_str().unwrap().starts_with("xa_"));
    assert_eq!(
        ok(&["token", "list", "--config", &config])[0]["role"],
        "reviewer"
    );
    assert_eq!(
        ok(&["token", "revoke", "r", "--config", &config])["revoked"],
        "r"
    );
    failed(
        &["token", "revoke", "r", "--config", &config],
        url,
        1,
        "error",
    );

    // Serving: a configuration that cannot be used is told the same way.
    failed(
        &["serve", "--config", &path("absent.toml")],
        url,
        1,
        "error",
    );
    failed(&["up", "--domains", "0"], url, 1, "error");

    // Nobody there, and a flag clap refuses.
    let nobody = format!("http://127.0.0.1:{}", xarchive_testkit::free_port());
    let document = failed(&["stats"], &nobody, 1, "unreachable");
    assert!(document["error"]["hint"].is_string(), "{document}");
    failed(&["stats", "--timeout", "soon"], url, 2, "usage");
}

#[test]
fn bad_usage_exits_2_naming_the_flag_and_other_mistakes_say_what_is_wrong() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();

    let out = xarchive(&["stats", "--server", "htp:/bad url"], "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--server"), "{}", text(&out));

    // An empty token is a mistake, not "no token".
    let out = Command::new(bin())
        .arg("stats")
        .env("XARCHIVE_SERVER", &domain.url)
        .env("XARCHIVE_TOKEN", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--token") && text(&out).contains("empty"),
        "{}",
        text(&out)
    );

    // https to a server that speaks http.
    let plain = domain.url.replace("http://", "https://");
    let out = xarchive(&["stats"], &plain);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("plain HTTP") && text(&out).contains("http://"),
        "{}",
        text(&out)
    );

    // Optional flags are not shown as required.
    let out = xarchive(&["review", "refuse", "--help"], "");
    let help = String::from_utf8_lossy(&out.stdout);
    let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap();
    assert!(
        !usage.contains("--server") && !usage.contains("--token"),
        "{usage}"
    );

    // Every role, each with what it allows.
    let out = xarchive(&["token", "create", "--help"], "");
    let help = String::from_utf8_lossy(&out.stdout);
    for role in [
        "read", "write", "search", "audit", "backup", "clerk", "reviewer",
    ] {
        assert!(help.contains(&format!("{role}:")), "{role}: {help}");
    }
}

#[test]
fn token_list_keeps_its_columns_straight_whatever_the_names_and_roles() {
    let dir = tempdir().unwrap();
    let config = dir.path().join("A.toml");
    let config = config.to_str().unwrap();
    for (name, role) in [("档案员", "read"), ("r", "reviewer"), ("clerk", "clerk")] {
        let out = xarchive(
            &[
                "token", "create", "--role", role, "--name", name, "--config", config,
            ],
            "",
        );
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = xarchive(&["token", "list", "--config", config], "");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    // Each column starts at the same display column on every line (a
    // cell looked for after the line's first, the name).
    let column_of = |line: &str, cell: &str| {
        let name = line.split(' ').next().unwrap_or_default().len();
        let at = line[name..]
            .find(cell)
            .unwrap_or_else(|| panic!("{cell}: {table}"));
        unicode_width::UnicodeWidthStr::width(&line[..name + at])
    };
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    let role = column_of(lines[0], "role");
    let domain = column_of(lines[0], "domain");
    for (line, role_cell) in lines[1..].iter().zip(["read", "reviewer", "clerk"]) {
        assert_eq!(column_of(line, role_cell), role, "{table}");
        assert_eq!(column_of(line, "any"), domain, "{table}");
    }
}

/// `xarchive args | head -1`, in a shell whose pipefail gives xarchive's
/// exit status: what it exited with and said on standard error.
fn piped_to_head(args: &str, server: &str) -> (Option<i32>, String) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; '{}' {args} | head -1 >/dev/null",
            bin().display()
        ))
        .env("XARCHIVE_SERVER", server)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_ends_quietly_with_exit_0_when_its_reader_closes_the_pipe() {
    let dir = tempdir().unwrap();
    let domain = Spawn::new(bin(), "A", &dir.path().join("A")).start();
    let url = domain.url.as_str();
    // Enough records that the export outgrows a pipe's buffer.
    let records = dir.path().join("records.ndjson");
    let out = xarchive(
        &[
            "sample",
            "--count",
            "3000",
            "--out",
            records.to_str().unwrap(),
        ],
        url,
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = xarchive(&["import", records.to_str().unwrap()], url);
    assert!(out.status.success(), "{}", text(&out));
    let out = xarchive(&["put", "J-1", "--title", "会议纪要"], url);
    assert!(out.status.success(), "{}", text(&out));
    let config = dir.path().join("A.toml");
    for name in ["a", "b"] {
        let out = xarchive(
            &[
                "token",
                "create",
                "--role",
                "read",
                "--name",
                name,
                "--config",
                config.to_str().unwrap(),
            ],
            url,
        );
        assert!(out.status.success(), "{}", text(&out));
    }
    let config = config.display();
    for args in [
        "export -".to_owned(),
        "export - --format csv".to_owned(),
        "sample --count 100000".to_owned(),
        "man".to_owned(),
        "man import".to_owned(),
        "completions bash".to_owned(),
        "completions zsh".to_owned(),
        "--help".to_owned(),
        "get J-1".to_owned(),
        "lookup J-1".to_owned(),
        "stats".to_owned(),
        "cluster".to_owned(),
        "cluster --json".to_owned(),
        "--output json stats".to_owned(),
        "request list".to_owned(),
        "review list".to_owned(),
        "audit".to_owned(),
        "audit verify".to_owned(),
        format!("token list --config {config}"),
        "request show absent".to_owned(),
    ] {
        let (status, said) = piped_to_head(&args, url);
        let expected = if args == "request show absent" { 3 } else { 0 };
        assert_eq!(status, Some(expected), "xarchive {args} | head -1: {said}");
        assert!(
            !said.contains("panicked") && !said.contains("Broken pipe"),
            "xarchive {args} | head -1: {said}"
        );
    }
}

#[test]
fn the_manual_has_a_page_for_every_page_it_names_and_says_how_a_command_ends() {
    let dir = tempdir().unwrap();
    let out = xarchive(&["man", "--dir", dir.path().to_str().unwrap()], "");
    assert!(out.status.success(), "{}", text(&out));
    let pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(pages.len() > 20, "{pages:?}");
    for page in &pages {
        let roff = std::fs::read_to_string(dir.path().join(page)).unwrap();
        for named in roff.split("xarchive\\-").skip(1) {
            let name: String = named
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '\\' || *c == '-')
                .collect();
            if !named[name.len()..].starts_with("(1)") {
                continue;
            }
            let file = format!("xarchive-{}.1", name.replace("\\-", "-"));
            assert!(
                pages.contains(&file),
                "{page} names {file}, which is not there"
            );
        }
    }
    // Each page also printed alone, by its command's words.
    let out = xarchive(&["man", "request", "submit"], "");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(".TH xarchive-request-submit 1"),
        "{}",
        text(&out)
    );
    let main = String::from_utf8_lossy(&xarchive(&["man"], "").stdout).into_owned();
    for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH FILES"] {
        assert!(main.contains(section), "{section}");
    }
    for variable in ["XARCHIVE_SERVER", "XARCHIVE_TOKEN", "XARCHIVE_OUTPUT"] {
        assert!(main.contains(variable), "{variable}");
    }
}
