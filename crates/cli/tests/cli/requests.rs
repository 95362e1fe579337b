//! Cross-archive requests (异地查档、跨馆出证) through the command line,
//! against real domain processes joined through a real ZooKeeper: answered
//! by the release policy, by a reviewer's approval or refusal, through a
//! holding archive killed mid-way, and who may do which step.

use crate::common::{bin, run, text};

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use xarchive_node::wire::AuditEntry;
use xarchive_node::Client;
use xarchive_testkit::{tempdir, DomainProcess, Spawn, TempDir, ZooKeeperServer};

/// The applicant's identity number: it must never appear in anything the
/// command line prints.
const APPLICANT: &str = "11010519491231002X";

/// `xarchive token create`, appending to `config`; returns the token.
fn create_token(config: &Path, role: &str, name: &str) -> String {
    let out = Command::new(bin())
        .args(["token", "create", "--role", role, "--name", name])
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Two archives, A (receiving) and B (holding), with a token of each role
/// the requests use and of those they refuse.
struct Archives {
    a: DomainProcess,
    b: DomainProcess,
    clerk: String,
    reviewer: String,
    read: String,
    search: String,
    write: String,
    audit: String,
    _zk: ZooKeeperServer,
    _dir: TempDir,
}

impl Archives {
    async fn start() -> Archives {
        let zk = ZooKeeperServer::start();
        let dir = tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "requests travel between members only\n").unwrap();
        let config = dir.path().join("domain.toml");
        std::fs::write(
            &config,
            "[auth]\nrate_per_second = 1000\nrate_burst = 2000\n",
        )
        .unwrap();
        let clerk = create_token(&config, "clerk", "window-1");
        let reviewer = create_token(&config, "reviewer", "reviewer-1");
        let read = create_token(&config, "read", "reader");
        let search = create_token(&config, "search", "counter-3");
        let write = create_token(&config, "write", "archivist");
        let audit = create_token(&config, "audit", "inspector");
        let spawn = |name: &str| {
            Spawn::new(bin(), name, &dir.path().join(name))
                .args(["--config", config.to_str().unwrap()])
                .args(["--zk", &zk.connect_string(), "--cluster", "requests"])
                .args(["--session-timeout-ms", "3000"])
                .args(["--cluster-secret-file", secret.to_str().unwrap()])
                .args(["--expected-items", "10000"])
                .start()
        };
        let (a, b) = (spawn("A"), spawn("B"));
        let archives = Archives {
            a,
            b,
            clerk,
            reviewer,
            read,
            search,
            write,
            audit,
            _zk: zk,
            _dir: dir,
        };
        archives.wait_converged().await;
        archives
    }

    fn client(&self, d: &DomainProcess, token: &str) -> Client {
        Client::with_options(&d.url, Duration::from_secs(30), Some(token), None).unwrap()
    }

    /// Waits until each archive sees the other up with a current copy.
    async fn wait_converged(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        for d in [&self.a, &self.b] {
            loop {
                let state = self.client(d, &self.read).cluster().await;
                if state.is_ok_and(|s| s.converged(2)) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the archives did not converge; A's log:\n{}",
                    self.a.log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Puts record `id` at B: of `category`, open, about the applicant.
    async fn put_at_b(&self, id: &str, category: &str) {
        let record = json!({
            "title": "婚姻登记",
            "metadata": {"category": category, "access": "open"},
            "content": "5ama5ae75LmL6K6w",
            "keys": {"id_card": APPLICANT},
        });
        self.client(&self.b, &self.write)
            .put(id, &record)
            .await
            .unwrap();
    }

    /// `xarchive args` at `d` with `token`, the identity number kept out
    /// of what it printed.
    fn cli(&self, d: &DomainProcess, token: Option<&str>, args: &[&str]) -> Output {
        cli_with(d, token, args, None)
    }

    /// `xarchive request submit` at A by the clerk, the identity number
    /// on standard input; returns the new request's ID.
    fn submit(&self, records: &[&str], purpose: &str) -> String {
        let mut args = vec![
            "request",
            "submit",
            "--name",
            "张三",
            "--purpose",
            purpose,
            "--json",
        ];
        for r in records {
            args.extend(["--record", r]);
        }
        let out = cli_with(
            &self.a,
            Some(&self.clerk),
            &args,
            Some(format!("{APPLICANT}\n").as_bytes()),
        );
        assert!(out.status.success(), "{}", text(&out));
        let view: Value = serde_json::from_slice(&out.stdout).unwrap();
        view["id"].as_str().unwrap().to_owned()
    }

    /// `xarchive request show ID --json` at A until `done` holds of it.
    async fn request_until(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.cli(
                &self.a,
                Some(&self.clerk),
                &["request", "show", id, "--json"],
            );
            assert!(out.status.success(), "{}", text(&out));
            let view: Value = serde_json::from_slice(&out.stdout).unwrap();
            if done(&view) {
                return view;
            }
            assert!(
                Instant::now() < deadline,
                "the request never got there: {view:#}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every entry of `d`'s audit log.
    async fn audit(&self, d: &DomainProcess) -> Vec<AuditEntry> {
        let client = self.client(d, &self.audit);
        let mut since: Option<String> = None;
        let mut entries = Vec::new();
        loop {
            let page = client.audit(since.as_deref()).await.unwrap();
            entries.extend(page.entries);
            match page.next {
                Some(next) => since = Some(next),
                None => return entries,
            }
        }
    }

    /// How many `action` entries of request `id` `d`'s audit log has.
    async fn steps(&self, d: &DomainProcess, action: &str, id: &str) -> usize {
        self.audit(d)
            .await
            .iter()
            .filter(|e| e.action.as_deref() == Some(action) && e.request.as_deref() == Some(id))
            .count()
    }
}

/// `xarchive args` at `d` with `token` and `stdin`; asserts that nothing
/// it printed holds the identity number.
fn cli_with(d: &DomainProcess, token: Option<&str>, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let out = run(args, &d.url, token, stdin);
    assert!(
        !text(&out).contains(APPLICANT),
        "`xarchive {}` printed the identity number:\n{}",
        args.join(" "),
        text(&out)
    );
    out
}

fn status(view: &Value) -> &str {
    view["status"].as_str().unwrap_or_default()
}

fn state(view: &Value) -> &str {
    view["holdings"][0]["state"].as_str().unwrap_or_default()
}

/// The verification codes of the copies in a request as JSON.
fn codes(view: &Value) -> Vec<String> {
    view["holdings"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|h| h["copies"].as_array().into_iter().flatten())
        .map(|c| c["code"].as_str().unwrap().to_owned())
        .collect()
}

/// `xarchive request certify ID` at A: succeeds, and prints each copy's
/// holding archive, archive number, title, request ID and code.
fn certify(s: &Archives, id: &str, number: &str) -> String {
    let out = s.cli(&s.a, Some(&s.clerk), &["request", "certify", id]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    for expected in [id, number, "婚姻登记", "张三", " B "] {
        assert!(printed.contains(expected), "no {expected:?} in:\n{printed}");
    }
    printed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_the_applicant_s_own_open_record_is_answered_without_review_certified_and_its_code_checks_at_both_archives(
) {
    let s = Archives::start().await;
    s.put_at_b("M-1", "marriage").await;
    let id = s.submit(&[], "贷款");
    let answered = s.request_until(&id, |v| status(v) == "answered").await;
    assert_eq!(answered["holdings"][0]["domain"], "B");
    let codes = codes(&answered);
    assert_eq!(codes.len(), 1, "{answered:#}");

    let printed = certify(&s, &id, "M-1");
    assert!(printed.contains(&codes[0]), "{printed}");
    let shown = s.cli(&s.a, Some(&s.clerk), &["request", "show", &id]);
    assert!(text(&shown).contains("certified"), "{}", text(&shown));
    let listed = s.cli(&s.a, Some(&s.clerk), &["request", "list"]);
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(text(&listed).contains(&id), "{}", text(&listed));

    // Anyone checks the code, at the archive that issued the certificate
    // and at the one that signed the copy: no token needed.
    for (d, at) in [(&s.a, "A"), (&s.b, "B")] {
        let out = s.cli(d, None, &["certificate", "check", &codes[0]]);
        assert!(out.status.success(), "{}", text(&out));
        let said = text(&out);
        for expected in ["valid", "M-1", "婚姻登记", id.as_str(), "B", "A"] {
            assert!(said.contains(expected), "no {expected:?} at {at}:\n{said}");
        }
        let out = s.cli(d, None, &["certificate", "check", &codes[0], "--json"]);
        let check: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (&check["holding"], &check["receiving"], &check["checked_by"]),
            (&json!("B"), &json!("A"), &json!(at))
        );
    }
    // A code never issued is "not found" (exit 3).
    let out = s.cli(
        &s.a,
        None,
        &["certificate", "check", "0000-0000-0000-0000-0000"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_policy_does_not_release_is_approved_by_the_reviewer_and_certified() {
    let s = Archives::start().await;
    s.put_at_b("C-1", "court").await;
    let id = s.submit(&["C-1"], "诉讼");
    s.request_until(&id, |v| state(v) == "in_review").await;

    let out = s.cli(&s.b, Some(&s.reviewer), &["review", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = text(&out);
    for expected in [id.as_str(), "C-1", "court", "张三", "诉讼"] {
        assert!(listed.contains(expected), "no {expected:?} in:\n{listed}");
    }
    let out = s.cli(
        &s.b,
        Some(&s.reviewer),
        &["review", "approve", "A", &id, "--reason", "本人申请"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("released"), "{}", text(&out));

    let answered = s.request_until(&id, |v| status(v) == "answered").await;
    let codes = codes(&answered);
    assert_eq!(codes.len(), 1, "{answered:#}");
    let printed = certify(&s, &id, "C-1");
    assert!(printed.contains(&codes[0]), "{printed}");
    let out = s.cli(&s.b, Some(&s.reviewer), &["review", "list", "--json"]);
    let queue: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(queue["reviews"], json!([]), "{queue:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_shows_its_reason_and_gets_no_certificate() {
    let s = Archives::start().await;
    s.put_at_b("C-2", "court").await;
    let id = s.submit(&["C-2"], "诉讼");
    s.request_until(&id, |v| state(v) == "in_review").await;

    // A refusal needs its reason.
    let out = s.cli(&s.b, Some(&s.reviewer), &["review", "refuse", "A", &id]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = s.cli(
        &s.b,
        Some(&s.reviewer),
        &["review", "refuse", "A", &id, "--reason", "涉及第三人隐私"],
    );
    assert!(out.status.success(), "{}", text(&out));
    // Decided once.
    let again = s.cli(&s.b, Some(&s.reviewer), &["review", "approve", "A", &id]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(text(&again).contains("already_decided"), "{}", text(&again));

    let refused = s.request_until(&id, |v| status(v) == "refused").await;
    assert_eq!(refused["holdings"][0]["reason"], "涉及第三人隐私");
    let shown = s.cli(&s.a, Some(&s.clerk), &["request", "show", &id]);
    assert!(shown.status.success(), "{}", text(&shown));
    for expected in ["refused", "涉及第三人隐私"] {
        assert!(text(&shown).contains(expected), "{}", text(&shown));
    }
    let out = s.cli(&s.a, Some(&s.clerk), &["request", "certify", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("409 not_answered"), "{said}");
    assert!(said.contains("hint:"), "{said}");
    // A request that is not there is "not found" (exit 3).
    let out = s.cli(&s.a, Some(&s.clerk), &["request", "show", "00ff"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
}

/// Changes one byte of the title in the first copy A keeps for request
/// `id`, in A's request book on disk (A stopped): what an insider editing
/// the file would do.
fn tamper_with_the_copy_kept_at_a(data: &Path, id: &str) {
    use base64::Engine;
    use redb::{ReadableDatabase, TableDefinition};
    let table: TableDefinition<&str, &[u8]> = TableDefinition::new("outgoing");
    let db = redb::Database::open(data.join("requests.redb")).unwrap();
    let stored = {
        let txn = db.begin_read().unwrap();
        let value = txn.open_table(table).unwrap().get(id).unwrap().unwrap();
        value.value().to_vec()
    };
    let mut request: Value = serde_json::from_slice(&stored).unwrap();
    let copy = &mut request["parts"]["B"]["copies"][0];
    let engine = base64::engine::general_purpose::STANDARD;
    let payload = engine.decode(copy["payload"].as_str().unwrap()).unwrap();
    let changed = String::from_utf8(payload)
        .unwrap()
        .replace("婚姻登记", "婚姻登記");
    copy["payload"] = json!(engine.encode(changed));
    let txn = db.begin_write().unwrap();
    txn.open_table(table)
        .unwrap()
        .insert(id, serde_json::to_vec(&request).unwrap().as_slice())
        .unwrap();
    txn.commit().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certified_copy_changed_on_disk_fails_its_check_where_it_was_changed_and_not_at_the_archive_that_signed_it(
) {
    let mut s = Archives::start().await;
    s.put_at_b("M-2", "marriage").await;
    let id = s.submit(&["M-2"], "贷款");
    let answered = s.request_until(&id, |v| status(v) == "answered").await;
    let code = codes(&answered).remove(0);
    certify(&s, &id, "M-2");

    s.a.terminate();
    tamper_with_the_copy_kept_at_a(&s._dir.path().join("A"), &id);
    s.a.restart();
    s.wait_converged().await;
    let out = s.cli(&s.a, None, &["certificate", "check", &code]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("certificate_invalid"), "{}", text(&out));
    // B still holds what it signed.
    let out = s.cli(&s.b, None, &["certificate", "check", &code]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("婚姻登记"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holding_archive_killed_while_a_request_is_in_flight_answers_it_exactly_once_after_restarting(
) {
    let mut s = Archives::start().await;
    s.put_at_b("M-7", "marriage").await;
    // Submitted by the client (no process start between it and the
    // kill), then B killed at once: before or after it took the part in.
    let submitted = s
        .client(&s.a, &s.clerk)
        .submit_request(&json!({
            "applicant_id": APPLICANT,
            "applicant_name": "张三",
            "purpose": "贷款",
        }))
        .await
        .unwrap();
    let pid = s.b.pid();
    s.b.kill9();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "B ({pid}) still runs"
    );
    let while_down = s.request_until(&submitted.id, |_| true).await;
    eprintln!("while B was down the request was {}", status(&while_down));

    s.b.restart();
    s.wait_converged().await;
    let answered = s
        .request_until(&submitted.id, |v| status(v) == "answered")
        .await;
    assert_eq!(codes(&answered).len(), 1, "{answered:#}");
    certify(&s, &submitted.id, "M-7");

    // Exactly once: A goes on asking until it has the answer, B answers a
    // repeat with what it kept. Given a moment for any repeat in flight.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        s.steps(&s.b, "request_released", &submitted.id).await,
        1,
        "{:#?}",
        s.audit(&s.b).await
    );
    assert_eq!(
        s.steps(&s.a, "copies_received", &submitted.id).await,
        1,
        "{:#?}",
        s.audit(&s.a).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_clerk_submits_and_only_a_reviewer_reviews_and_no_token_is_unauthenticated() {
    let s = Archives::start().await;
    s.put_at_b("C-3", "court").await;
    let id = s.submit(&["C-3"], "诉讼");
    s.request_until(&id, |v| state(v) == "in_review").await;

    let refused = |out: Output, status: &str, what: &str| {
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(&out));
        assert!(text(&out).contains(status), "{what}: {}", text(&out));
    };
    let submit = |token: Option<&str>| {
        cli_with(
            &s.a,
            token,
            &["request", "submit", "--name", "张三", "--purpose", "贷款"],
            Some(format!("{APPLICANT}\n").as_bytes()),
        )
    };
    let reviews = |token: Option<&str>| s.cli(&s.b, token, &["review", "list"]);
    let approve = |token: Option<&str>| s.cli(&s.b, token, &["review", "approve", "A", &id]);

    refused(reviews(Some(&s.clerk)), "403", "a clerk listing reviews");
    refused(approve(Some(&s.clerk)), "403", "a clerk deciding");
    refused(submit(Some(&s.reviewer)), "403", "a reviewer submitting");
    for (token, role) in [(&s.read, "read"), (&s.search, "search")] {
        refused(submit(Some(token)), "403", &format!("{role} submitting"));
        refused(
            reviews(Some(token)),
            "403",
            &format!("{role} listing reviews"),
        );
        refused(approve(Some(token)), "403", &format!("{role} deciding"));
    }
    refused(submit(None), "401", "no token submitting");
    refused(reviews(None), "401", "no token listing reviews");
    refused(approve(None), "401", "no token deciding");
    let listing = s.cli(&s.a, None, &["request", "list"]);
    refused(listing, "401", "no token listing requests");

    // None of that decided anything: the reviewer still can.
    let out = s.cli(&s.b, Some(&s.reviewer), &["review", "list", "--json"]);
    let queue: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(queue["reviews"][0]["request_id"], json!(id), "{queue:#}");
    let out = approve(Some(&s.reviewer));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn the_identity_number_is_read_from_a_file_or_standard_input_and_never_from_an_argument() {
    let dir = tempdir().unwrap();
    // No domain is needed to refuse these: each fails before any request.
    let nowhere = "http://127.0.0.1:9";
    let out = run(
        &["request", "submit", "--name", "张三", "--purpose", "贷款"],
        nowhere,
        None,
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("standard input"), "{}", text(&out));
    let out = run(
        &[
            "request",
            "submit",
            "--name",
            "张三",
            "--purpose",
            "贷款",
            "--applicant-id",
            APPLICANT,
        ],
        nowhere,
        None,
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let help = run(&["request", "submit", "--help"], nowhere, None, None);
    assert!(text(&help).contains("ps"), "{}", text(&help));
    // From a file, the number is read and sent (here: to no server).
    let file = dir.path().join("id");
    std::fs::write(&file, format!("{APPLICANT}\n")).unwrap();
    let out = run(
        &[
            "request",
            "submit",
            "--name",
            "张三",
            "--purpose",
            "贷款",
            "--applicant-id-file",
            file.to_str().unwrap(),
        ],
        nowhere,
        None,
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("cannot reach"), "{}", text(&out));
    assert!(!text(&out).contains(APPLICANT), "{}", text(&out));
}
