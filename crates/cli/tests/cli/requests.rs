//! Cross-archive requests (异地查档、跨馆出证) through the command line,
//! against real domain processes (A receiving, B holding, C a third
//! archive) joined through a real ZooKeeper with a cluster secret: answered
//! by the release policy or a reviewer, certified, the certificate checked
//! at every archive and offline from its PDF and QR code by tools nobody
//! here wrote; never `refused` unless the holding archive refused, whether
//! it was down before or after the submission or a party on the wire
//! rewrote its answers; a copy changed at rest marked and never certified;
//! keys rotated and revoked.

use crate::common::{bin, create_token, run, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use xarchive_node::wire::{AuditEntry, ErrorCode};
use xarchive_node::ApiClient;
use xarchive_testkit::{tempdir, DomainProcess, Spawn, TempDir, ZooKeeperServer};

/// The applicant's identity number: it must never appear in anything the
/// command line prints.
const APPLICANT: &str = "11010519491231002X";

/// The archives' names, as their configurations give them.
const NAMES: [(&str, &str); 3] = [
    ("A", "兴义市档案馆"),
    ("B", "黔西南州档案馆"),
    ("C", "贵州省档案馆"),
];

/// Three archives with a token of each role the requests use and of
/// those they refuse.
struct Archives {
    a: DomainProcess,
    b: DomainProcess,
    c: DomainProcess,
    clerk: String,
    reviewer: String,
    read: String,
    search: String,
    write: String,
    audit: String,
    zk: ZooKeeperServer,
    dir: TempDir,
}

impl Archives {
    async fn start() -> Archives {
        Archives::start_with(|_, spawn| spawn).await
    }

    /// As [`start`](Self::start), each domain's start changed by `tune`.
    async fn start_with(tune: impl Fn(&str, Spawn) -> Spawn) -> Archives {
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
        let clerk = create_token(&config, "clerk", "window-1", None);
        let reviewer = create_token(&config, "reviewer", "reviewer-1", None);
        let read = create_token(&config, "read", "reader", None);
        let search = create_token(&config, "search", "counter-3", None);
        let write = create_token(&config, "write", "archivist", None);
        let audit = create_token(&config, "audit", "inspector", None);
        let spawn = |(name, display): (&str, &str)| {
            let spawn = Spawn::new(bin(), name, &dir.path().join(name))
                .args(["--config", config.to_str().unwrap()])
                .args(["--zk", &zk.connect_string(), "--cluster", "requests"])
                .args(["--session-timeout-ms", "3000"])
                .args(["--cluster-secret-file", secret.to_str().unwrap()])
                .args(["--expected-items", "10000"])
                .env("XARCHIVE_ARCHIVE__DISPLAY_NAME", display)
                .env("XARCHIVE_ARCHIVE__ADDRESS", "贵州省兴义市桔山大道 1 号");
            tune(name, spawn).start()
        };
        let (a, b, c) = (spawn(NAMES[0]), spawn(NAMES[1]), spawn(NAMES[2]));
        let archives = Archives {
            a,
            b,
            c,
            clerk,
            reviewer,
            read,
            search,
            write,
            audit,
            zk,
            dir,
        };
        archives.wait_converged().await;
        archives
    }

    // A method like the fixture's others, though it needs nothing of it.
    #[allow(clippy::unused_self)]
    fn client(&self, d: &DomainProcess, token: &str) -> ApiClient {
        ApiClient::with_options(&d.url, Duration::from_secs(30), Some(token), None).unwrap()
    }

    /// Waits until each archive sees the others up with a current copy.
    async fn wait_converged(&self) {
        let deadline = Instant::now() + Duration::from_mins(1);
        for d in [&self.a, &self.b, &self.c] {
            loop {
                let state = self.client(d, &self.read).cluster().await;
                if state.as_ref().is_ok_and(|s| s.converged(3)) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the archives did not converge: {state:#?}; A's log:\n{}",
                    self.a.log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Waits until A sees `name` gone from the membership (its session
    /// expired).
    async fn wait_gone(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            let view = self.client(&self.a, &self.read).cluster().await.unwrap();
            if view.get(name).is_none_or(|d| !d.up) {
                return;
            }
            assert!(Instant::now() < deadline, "{name} never left: {view:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Puts record `id` at B: of `category`, open, about the applicant.
    async fn put_at_b(&self, id: &str, category: &str) {
        let record = json!({
            "title": "婚姻登记",
            "metadata": {"category": category, "access": "open", "形成日期": "2007-05-01"},
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
    // A method like the fixture's others, though it needs nothing of it.
    #[allow(clippy::unused_self)]
    fn cli(&self, d: &DomainProcess, token: Option<&str>, args: &[&str]) -> Output {
        cli_with(d, token, args, None)
    }

    /// `xarchive request submit` at A by the clerk for `person`, the
    /// identity number on standard input.
    fn submit_for(&self, person: &str, records: &[&str], purpose: &str) -> Output {
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
        cli_with(
            &self.a,
            Some(&self.clerk),
            &args,
            Some(format!("{person}\n").as_bytes()),
        )
    }

    /// [`submit_for`](Self::submit_for) the applicant, which must succeed;
    /// returns the new request's ID.
    fn submit(&self, records: &[&str], purpose: &str) -> String {
        let out = self.submit_for(APPLICANT, records, purpose);
        assert!(out.status.success(), "{}", text(&out));
        let view: Value = serde_json::from_slice(&out.stdout).unwrap();
        view["id"].as_str().unwrap().to_owned()
    }

    /// `xarchive request show ID --json` at A until `done` holds of it;
    /// every view on the way is handed to `each` (it must never be
    /// refused, say).
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
            assert_ne!(status(&view), "refused", "a false refusal: {view:#}");
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

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Certifies `id` at A with its PDF saved; returns the code and the
    /// PDF's path.
    fn certify(&self, id: &str) -> (String, PathBuf) {
        let pdf = self.path(&format!("{id}.pdf"));
        let out = self.cli(
            &self.a,
            Some(&self.clerk),
            &["request", "certify", id, "--pdf", pdf.to_str().unwrap()],
        );
        assert!(out.status.success(), "{}", text(&out));
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        for expected in [id, "张三", "兴义市档案馆", "A."] {
            assert!(printed.contains(expected), "no {expected:?} in:\n{printed}");
        }
        let code = printed
            .lines()
            .find_map(|l| l.trim().strip_prefix("code"))
            .unwrap()
            .trim()
            .to_owned();
        (code, pdf)
    }

    /// Saves the trust list from C and checks `pdf` offline with it, until
    /// the check exits `code` (an archive publishes its keys within moments
    /// of starting); what the check said.
    async fn offline_until(&self, pdf: &Path, code: i32) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (trust, _) = self.trust_list();
            let out = verify_offline(pdf, &trust, None);
            if out.status.code() == Some(code) {
                return text(&out);
            }
            assert!(Instant::now() < deadline, "never {code}: {}", text(&out));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The trust list, saved from C, and the anchor's fingerprint.
    fn trust_list(&self) -> (PathBuf, String) {
        let file = self.path("trust.json");
        let out = self.cli(
            &self.c,
            None,
            &["certificate", "trust-list", "--out", file.to_str().unwrap()],
        );
        assert!(out.status.success(), "{}", text(&out));
        let anchor = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("anchor: ").map(str::to_owned))
            .unwrap();
        (file, anchor)
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

/// `xarchive certificate verify FILE --trust-list TRUST` with no server.
fn verify_offline(file: &Path, trust: &Path, anchor: Option<&str>) -> Output {
    let mut args = vec![
        "certificate",
        "verify",
        file.to_str().unwrap(),
        "--trust-list",
        trust.to_str().unwrap(),
    ];
    if let Some(anchor) = anchor {
        args.extend(["--anchor", anchor]);
    }
    run(&args, "http://127.0.0.1:9", None, None)
}

fn status(view: &Value) -> &str {
    view["status"].as_str().unwrap_or_default()
}

/// The state of the request's one holding archive: as named once it has
/// answered for good, else as counted (`pending` or `in_review`), when
/// neither it nor its records may be named.
fn state(view: &Value) -> &str {
    let awaiting = &view["awaiting"];
    if awaiting["archives"].as_u64().unwrap_or_default() > 0 {
        assert_eq!(
            view["holdings"],
            json!([]),
            "an archive named before it answered: {view:#}"
        );
        return if awaiting["in_review"].as_u64().unwrap_or_default() > 0 {
            "in_review"
        } else {
            "pending"
        };
    }
    view["holdings"][0]["state"].as_str().unwrap_or_default()
}

/// Runs a tool nobody here wrote; its standard output.
fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_issued_at_one_archive_checks_at_every_archive_and_offline_from_its_pdf_and_qr_code(
) {
    let s = Archives::start().await;
    s.put_at_b("M-1", "marriage").await;
    let id = s.submit(&[], "贷款");
    let answered = s.request_until(&id, |v| status(v) == "answered").await;
    let copy = &answered["holdings"][0]["copies"][0];
    assert_eq!(
        (&copy["valid"], &copy["record_date"]),
        (&json!(true), &json!("2007-05-01"))
    );
    assert_eq!(answered["holdings"][0]["name"], "黔西南州档案馆");
    let (code, pdf) = s.certify(&id);

    // Online at every archive, no token: C and B ask A, which issued it.
    for d in [&s.a, &s.b, &s.c] {
        let out = s.cli(d, None, &["certificate", "check", &code, "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let check: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(check["applicant_name"], "张三");
        assert_eq!(check["copies"][0]["archive_number"], "M-1");
        assert_eq!(check["copies"][0]["holding"]["name"], "黔西南州档案馆");
        assert_eq!(check["issuer"]["name"], "兴义市档案馆");
    }
    let out = s.cli(
        &s.c,
        None,
        &["certificate", "check", "A.0000-0000-0000-0000-0000"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));

    // Offline: the PDF against the trust list saved from C, no server.
    let (trust, anchor) = s.trust_list();
    let out = verify_offline(&pdf, &trust, Some(&anchor));
    assert!(out.status.success(), "{}", text(&out));
    for expected in ["valid", "张三", "黔西南州档案馆", "M-1", &code] {
        assert!(
            text(&out).contains(expected),
            "no {expected:?}:\n{}",
            text(&out)
        );
    }
    // Poppler reads its Chinese text; zbar reads its QR code back into the
    // payload, which verifies offline too.
    let shown = tool("pdftotext", &["-layout", pdf.to_str().unwrap(), "-"]);
    for expected in [
        "张三",
        "兴义市档案馆",
        "黔西南州档案馆",
        "贵州省兴义市",
        &code,
    ] {
        assert!(
            shown.contains(expected),
            "pdftotext shows no {expected:?}:\n{shown}"
        );
    }
    let pages = s.path("page");
    tool(
        "pdftoppm",
        &[
            "-r",
            "300",
            "-png",
            "-f",
            "1",
            "-l",
            "1",
            pdf.to_str().unwrap(),
            pages.to_str().unwrap(),
        ],
    );
    let image = s.path("page-1.png");
    let payload = tool(
        "zbarimg",
        &["--quiet", "--raw", "-Sbinary", image.to_str().unwrap()],
    );
    let payload_file = s.path("payload.txt");
    std::fs::write(&payload_file, &payload).unwrap();
    let out = verify_offline(&payload_file, &trust, None);
    assert!(out.status.success(), "{}", text(&out));

    // The applicant's name changed in the payload (re-sealed by someone
    // without the archive's key): exit 3, a key the list does not hold;
    // changed under the real seal: exit 1.
    let sealed = xarchive_seal::certificate::Payload::parse(payload.trim_end())
        .unwrap()
        .sealed;
    let opened = xarchive_seal::Opened::parse(&sealed).unwrap();
    let mut statement =
        xarchive_seal::statement::CertificateStatement::decode(&opened.payload).unwrap();
    statement.applicant_name = "李四".into();
    let forger = xarchive_seal::SecretKey::generate(xarchive_seal::Algorithm::Sm2Sm3);
    let forged = xarchive_seal::certificate::Payload::text(&xarchive_seal::seal(
        &forger,
        statement.encode(),
    ));
    std::fs::write(&payload_file, &forged).unwrap();
    assert_eq!(
        verify_offline(&payload_file, &trust, None).status.code(),
        Some(3)
    );
    let at = sealed
        .windows("张三".len())
        .position(|w| w == "张三".as_bytes())
        .unwrap();
    let mut changed = sealed.clone();
    changed[at..at + "李四".len()].copy_from_slice("李四".as_bytes());
    std::fs::write(
        &payload_file,
        xarchive_seal::certificate::Payload::text(&changed),
    )
    .unwrap();
    let out = verify_offline(&payload_file, &trust, None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // Cut short: exit 7; the trust list altered: exit 6; signed by another
    // anchor than the one named: exit 6.
    std::fs::write(&payload_file, &payload[..payload.len() / 2]).unwrap();
    assert_eq!(
        verify_offline(&payload_file, &trust, None).status.code(),
        Some(7)
    );
    let mut list: Value = serde_json::from_slice(&std::fs::read(&trust).unwrap()).unwrap();
    let altered = s.path("altered-trust.json");
    list["payload"] = json!(list["payload"].as_str().unwrap().replace('A', "B"));
    std::fs::write(&altered, serde_json::to_vec(&list).unwrap()).unwrap();
    assert_eq!(verify_offline(&pdf, &altered, None).status.code(), Some(6));
    let other_anchor = "0000 ".repeat(16);
    assert_eq!(
        verify_offline(&pdf, &trust, Some(&other_anchor))
            .status
            .code(),
        Some(6)
    );
    let junk = s.path("junk.pdf");
    std::fs::write(&junk, b"%PDF-1.7 not really").unwrap();
    assert_eq!(verify_offline(&junk, &trust, None).status.code(), Some(7));

    // Online, the payload checks at any archive; a bad one gets its code.
    let client = ApiClient::new(&s.c.url, Duration::from_secs(10)).unwrap();
    let check = client.verify_certificate(payload.trim_end()).await.unwrap();
    assert_eq!(check.code, code);
    for (bad, code) in [
        (forged.as_str(), ErrorCode::CertificateKeyUnknown),
        ("XA1:%%", ErrorCode::CertificateMalformed),
    ] {
        let e = client.verify_certificate(bad).await.unwrap_err();
        assert_eq!(e.code(), Some(code), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_down_at_submission_refuses_it_naming_the_archive_and_once_back_the_same_submission_is_answered(
) {
    let mut s = Archives::start().await;
    s.put_at_b("M-2", "marriage").await;
    s.b.kill9();
    s.wait_gone("B").await;
    for records in [&[][..], &["M-2"][..]] {
        let out = s.submit_for(APPLICANT, records, "贷款");
        assert_eq!(out.status.code(), Some(4), "{}", text(&out));
        assert!(text(&out).contains("黔西南州档案馆"), "{}", text(&out));
        assert!(
            text(&out).contains("nothing was registered"),
            "{}",
            text(&out)
        );
    }
    let out = s.cli(&s.a, Some(&s.clerk), &["request", "list", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["requests"], json!([]), "{list:#}");

    s.b.restart();
    s.wait_converged().await;
    let id = s.submit(&[], "贷款");
    let answered = s.request_until(&id, |v| status(v) == "answered").await;
    assert_eq!(
        answered["holdings"][0]["copies"][0]["archive_number"],
        "M-2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_down_after_submission_leaves_its_part_waiting_never_refused_and_answers_it_once_back(
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
    s.b.kill9();
    s.wait_gone("B").await;
    // Waiting for B, said so, never refused (request_until asserts it).
    let waiting = s
        .request_until(&submitted.id, |v| {
            !v["awaiting"]["unreachable_since"].is_null() || state(v) == "released"
        })
        .await;
    let shown = s.cli(&s.a, Some(&s.clerk), &["request", "show", &submitted.id]);
    if state(&waiting) != "released" {
        assert!(
            text(&shown).contains("cannot be reached since"),
            "{}",
            text(&shown)
        );
    }

    s.b.restart();
    s.wait_converged().await;
    let answered = s
        .request_until(&submitted.id, |v| status(v) == "answered")
        .await;
    assert!(answered["awaiting"]["unreachable_since"].is_null());
    s.certify(&submitted.id);

    // Exactly once: A goes on asking until it has the answer, B answers a
    // repeat with what it kept. Given a moment for any repeat in flight.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(s.steps(&s.b, "request_released", &submitted.id).await, 1);
    assert_eq!(s.steps(&s.a, "copies_received", &submitted.id).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_no_archive_holds_gets_no_records_in_plain_words_and_a_certificate_saying_so() {
    let s = Archives::start().await;
    s.put_at_b("M-3", "marriage").await;
    let nobody = xarchive_node::id_card_number(110105, 1960, 8, 17, 123);
    let out = s.submit_for(&nobody, &[], "公证");
    assert!(out.status.success(), "{}", text(&out));
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status(&view), "no_records", "{view:#}");
    assert!(
        view["words"]["zh"].as_str().unwrap().contains("均未保存"),
        "{view:#}"
    );
    assert_eq!(view["holdings"], json!([]));
    let id = view["id"].as_str().unwrap().to_owned();
    let shown = s.cli(&s.a, Some(&s.clerk), &["request", "show", &id]);
    assert!(
        text(&shown).contains("No archive holds"),
        "{}",
        text(&shown)
    );
    // Named records nobody holds: the same.
    let out = s.submit_for(APPLICANT, &["NOBODY-1"], "公证");
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status(&view), "no_records", "{view:#}");
    assert_eq!(view["not_found"], json!(["NOBODY-1"]));

    let (code, pdf) = s.certify(&id);
    let (trust, _) = s.trust_list();
    let out = verify_offline(&pdf, &trust, None);
    assert!(out.status.success(), "{}", text(&out));
    let shown = tool("pdftotext", &[pdf.to_str().unwrap(), "-"]);
    assert!(shown.contains("均未保存申请人的档案记录"), "{shown}");
    let out = s.cli(&s.c, None, &["certificate", "check", &code]);
    assert!(out.status.success(), "{}", text(&out));
}

/// Changes the metadata of the first copy A keeps for request `id`, in
/// A's request book on disk (A stopped): what an insider editing the file
/// would do.
fn tamper_with_the_copy_kept_at_a(data: &Path, id: &str) {
    use redb::{ReadableDatabase, TableDefinition};
    let table: TableDefinition<&str, &[u8]> = TableDefinition::new("outgoing");
    let db = redb::Database::open(data.join("requests.redb")).unwrap();
    let stored = {
        let txn = db.begin_read().unwrap();
        let value = txn.open_table(table).unwrap().get(id).unwrap().unwrap();
        value.value().to_vec()
    };
    let mut request: Value = serde_json::from_slice(&stored).unwrap();
    request["parts"]["B"]["copies"][0]["metadata"]["形成日期"] = json!("1999-01-01");
    let txn = db.begin_write().unwrap();
    txn.open_table(table)
        .unwrap()
        .insert(id, serde_json::to_vec(&request).unwrap().as_slice())
        .unwrap();
    txn.commit().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_changed_at_rest_is_marked_gets_no_certificate_and_a_certificate_issued_before_fails_at_every_archive(
) {
    let mut s = Archives::start().await;
    s.put_at_b("M-4", "marriage").await;
    s.put_at_b("M-5", "marriage").await;
    let before = s.submit(&["M-4"], "贷款");
    let after = s.submit(&["M-5"], "贷款");
    for id in [&before, &after] {
        s.request_until(id, |v| status(v) == "answered").await;
    }
    let (code, _) = s.certify(&before);

    s.a.terminate();
    let a_data = s.path("A");
    tamper_with_the_copy_kept_at_a(&a_data, &before);
    tamper_with_the_copy_kept_at_a(&a_data, &after);
    s.a.restart();
    s.wait_converged().await;

    let shown = s.cli(&s.a, Some(&s.clerk), &["request", "show", &after]);
    assert!(text(&shown).contains("DOES NOT CHECK"), "{}", text(&shown));
    assert!(text(&shown).contains("changed"), "{}", text(&shown));
    let out = s.cli(&s.a, Some(&s.clerk), &["request", "certify", &after]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("copy_invalid"), "{}", text(&out));
    assert_eq!(s.steps(&s.a, "copy_failed_check", &after).await, 1);
    assert_eq!(s.steps(&s.a, "certificate_issued", &after).await, 0);
    for d in [&s.a, &s.c] {
        let out = s.cli(d, None, &["certificate", "check", &code]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("certificate_invalid"), "{}", text(&out));
    }
}

/// What the party between A and B does to B's answers.
#[derive(Clone)]
enum Rewrite {
    PassThrough,
    /// A refusal with a reason of its own.
    Refuse,
    /// Released, the copies taken away.
    EmptyRelease,
    /// The first copy's metadata changed.
    AlterCopy,
    /// The first copy replaced by one B sealed for another request.
    Replay(Value),
}

/// An HTTP proxy in front of B, for everyone who calls B (B advertises
/// it): answers of `POST /v1/peer/requests` rewritten as `mode` says; the
/// copies it saw pass kept, for a replay.
struct Proxy {
    url: String,
    mode: Arc<Mutex<Rewrite>>,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Proxy {
    fn start(target_port: u16, port: u16) -> Proxy {
        use axum::body::{to_bytes, Body};
        use axum::extract::{Request, State};
        use axum::response::Response;
        type Shared = (
            Arc<Mutex<Rewrite>>,
            Arc<Mutex<Vec<Value>>>,
            String,
            reqwest::Client,
        );
        let mode = Arc::new(Mutex::new(Rewrite::PassThrough));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state: Shared = (
            mode.clone(),
            seen.clone(),
            format!("http://127.0.0.1:{target_port}"),
            xarchive_node::cluster::client::http_client(Duration::from_mins(2), None, None)
                .unwrap(),
        );
        async fn forward(
            State((mode, seen, target, http)): State<Shared>,
            request: Request,
        ) -> Response {
            let (parts, body) = request.into_parts();
            let body = to_bytes(body, usize::MAX).await.unwrap_or_default();
            let path = parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned();
            let mut call = http
                .request(parts.method.clone(), format!("{target}{path}"))
                .body(body);
            for (name, value) in &parts.headers {
                // Plain bodies, to read and rewrite.
                if name != "host" && name != "accept-encoding" {
                    call = call.header(name, value);
                }
            }
            let Ok(answer) = call.send().await else {
                return Response::builder().status(502).body(Body::empty()).unwrap();
            };
            let status = answer.status();
            let headers = answer.headers().clone();
            let mut bytes = answer.bytes().await.unwrap_or_default().to_vec();
            if parts.method == "POST" && path == "/v1/peer/requests" && status == 200 {
                let mut answer: Value = serde_json::from_slice(&bytes).unwrap();
                if let Some(copy) = answer["copies"].get(0) {
                    seen.lock().unwrap().push(copy.clone());
                }
                match mode.lock().unwrap().clone() {
                    Rewrite::PassThrough => {}
                    Rewrite::Refuse => {
                        answer["state"] = json!("refused");
                        answer["reason"] = json!("伪造的拒绝理由");
                        answer["copies"] = json!([]);
                    }
                    Rewrite::EmptyRelease => answer["copies"] = json!([]),
                    Rewrite::AlterCopy => {
                        if let Some(copy) = answer["copies"].get_mut(0) {
                            copy["metadata"]["形成日期"] = json!("1999-01-01");
                        }
                    }
                    Rewrite::Replay(copy) => {
                        if let Some(first) = answer["copies"].get_mut(0) {
                            *first = copy;
                        }
                    }
                }
                bytes = serde_json::to_vec(&answer).unwrap();
            }
            let mut response = Response::builder().status(status.as_u16());
            for (name, value) in &headers {
                if !matches!(
                    name.as_str(),
                    "content-length" | "transfer-encoding" | "connection"
                ) {
                    response = response.header(name, value);
                }
            }
            response.body(Body::from(bytes)).unwrap()
        }
        let app = axum::Router::new().fallback(forward).with_state(state);
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        tokio::spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
        Proxy {
            url: format!("http://127.0.0.1:{port}"),
            mode,
            seen,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_party_between_two_archives_rewriting_answers_gets_nothing_forged_kept() {
    let (b_port, proxy_port) = (xarchive_testkit::free_port(), xarchive_testkit::free_port());
    let proxy = Proxy::start(b_port, proxy_port);
    let s = Archives::start_with(|name, spawn| match name {
        "B" => spawn
            .listen(&format!("127.0.0.1:{b_port}"))
            .args(["--advertise", &proxy.url]),
        _ => spawn,
    })
    .await;
    // A copy B sealed for a request, to replay into another's answer.
    s.put_at_b("M-0", "marriage").await;
    let first = s.submit(&["M-0"], "贷款");
    s.request_until(&first, |v| status(v) == "answered").await;
    let replayed = proxy.seen.lock().unwrap().last().cloned().unwrap();

    let modes = [
        ("refuse", Rewrite::Refuse),
        ("empty-release", Rewrite::EmptyRelease),
        ("alter-copy", Rewrite::AlterCopy),
        ("replay", Rewrite::Replay(replayed)),
    ];
    for (n, (what, mode)) in modes.into_iter().enumerate() {
        let record = format!("M-{}", n + 1);
        s.put_at_b(&record, "marriage").await;
        *proxy.mode.lock().unwrap() = mode;
        let id = s.submit(&[&record], "贷款");
        // Several deliveries, each answer rewritten: none kept.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let view = s.request_until(&id, |_| true).await;
        assert_eq!(state(&view), "pending", "{what}: {view:#}");
        assert_eq!(
            view["holdings"][0]["copies"],
            Value::Null,
            "{what}: {view:#}"
        );
        assert!(s.a.log().contains("an answer was not kept"), "{what}");
        // The wire is honest again: B's own answer is kept.
        *proxy.mode.lock().unwrap() = Rewrite::PassThrough;
        let answered = s.request_until(&id, |v| status(v) == "answered").await;
        let copy = &answered["holdings"][0]["copies"][0];
        assert_eq!(
            (&copy["archive_number"], &copy["valid"]),
            (&json!(record), &json!(true)),
            "{what}"
        );
        assert_eq!(s.steps(&s.a, "refusal_received", &id).await, 0, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_still_verifies_after_its_archive_rotates_its_key_and_not_after_it_revokes_it(
) {
    let mut s = Archives::start().await;
    s.put_at_b("M-8", "marriage").await;
    s.put_at_b("M-9", "marriage").await;
    let old = s.submit(&["M-8"], "贷款");
    s.request_until(&old, |v| status(v) == "answered").await;
    let (old_code, old_pdf) = s.certify(&old);
    let a_data = s.path("A");
    let keys = |data: &Path| {
        let out = run(
            &[
                "seal",
                "keys",
                "--data",
                data.to_str().unwrap(),
                "--output",
                "json",
            ],
            "http://127.0.0.1:9",
            None,
            None,
        );
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let before = keys(&a_data);
    assert_eq!(before[0]["algorithm"], "sm2-sm3");

    // Refused while A runs; done once it is stopped.
    let rotate = ["seal", "rotate", "--data", a_data.to_str().unwrap()];
    let out = run(&rotate, "http://127.0.0.1:9", None, None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("running"), "{}", text(&out));
    s.a.terminate();
    let out = run(&rotate, "http://127.0.0.1:9", None, None);
    assert!(out.status.success(), "{}", text(&out));
    s.a.restart();
    s.wait_converged().await;
    let after = keys(&a_data);
    assert_eq!(after.as_array().unwrap().len(), 2);

    // A new certificate is sealed with the new key; the old one still
    // checks, online at C and offline with a list saved now (once A's
    // restart has published its keys).
    let new = s.submit(&["M-9"], "贷款");
    s.request_until(&new, |v| status(v) == "answered").await;
    let (_, new_pdf) = s.certify(&new);
    let out = s.cli(&s.c, None, &["certificate", "check", &old_code]);
    assert!(out.status.success(), "{}", text(&out));
    s.offline_until(&new_pdf, 0).await;
    let (trust, _) = s.trust_list();
    assert!(verify_offline(&old_pdf, &trust, None).status.success());

    // Revoked (stolen, say): what it sealed no longer verifies.
    let old_key = before[0]["id"].as_str().unwrap();
    s.a.terminate();
    let out = run(
        &[
            "seal",
            "revoke",
            old_key,
            "--data",
            a_data.to_str().unwrap(),
        ],
        "http://127.0.0.1:9",
        None,
        None,
    );
    assert!(out.status.success(), "{}", text(&out));
    s.a.restart();
    s.wait_converged().await;
    let said = s.offline_until(&old_pdf, 5).await;
    assert!(said.contains("revoked"), "{said}");
    let (trust, _) = s.trust_list();
    assert!(verify_offline(&new_pdf, &trust, None).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openssl_verifies_a_holding_archive_s_sm2_seal_under_the_key_its_ca_certified() {
    // The archive's CA and B's key and certificate, made by OpenSSL.
    let pki = tempdir().unwrap();
    let p = |name: &str| pki.path().join(name).to_str().unwrap().to_owned();
    let distid = "distid:1234567812345678";
    tool(
        "openssl",
        &["genpkey", "-algorithm", "SM2", "-out", &p("ca.key")],
    );
    tool(
        "openssl",
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            &p("ca.key"),
            "-sm3",
            "-sigopt",
            distid,
            "-subj",
            "/CN=Guizhou Archives CA",
            "-days",
            "30",
            "-out",
            &p("ca.pem"),
        ],
    );
    tool(
        "openssl",
        &["genpkey", "-algorithm", "SM2", "-out", &p("b.key")],
    );
    tool(
        "openssl",
        &[
            "req",
            "-new",
            "-key",
            &p("b.key"),
            "-sm3",
            "-sigopt",
            distid,
            "-subj",
            "/CN=B",
            "-out",
            &p("b.csr"),
        ],
    );
    tool(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            &p("b.csr"),
            "-CA",
            &p("ca.pem"),
            "-CAkey",
            &p("ca.key"),
            "-sm3",
            "-sigopt",
            distid,
            "-vfyopt",
            distid,
            "-days",
            "30",
            "-set_serial",
            "1",
            "-out",
            &p("b.pem"),
        ],
    );
    let chain = format!(
        "{}{}",
        std::fs::read_to_string(p("b.pem")).unwrap(),
        std::fs::read_to_string(p("ca.pem")).unwrap()
    );
    std::fs::write(p("chain.pem"), chain).unwrap();

    let (key, cert) = (p("b.key"), p("chain.pem"));
    let s = Archives::start_with(|name, spawn| match name {
        "B" => spawn
            .env("XARCHIVE_SEAL__KEY_FILE", &key)
            .env("XARCHIVE_SEAL__CERTIFICATE_FILE", &cert),
        _ => spawn,
    })
    .await;
    s.put_at_b("M-10", "marriage").await;
    let id = s.submit(&["M-10"], "贷款");
    let answered = s.request_until(&id, |v| status(v) == "answered").await;
    assert_eq!(answered["holdings"][0]["copies"][0]["valid"], true);

    // The trust list carries B's certificate; OpenSSL checks its chain.
    let (trust, _) = s.trust_list();
    let signed: xarchive_seal::SignedTrustList =
        serde_json::from_slice(&std::fs::read(&trust).unwrap()).unwrap();
    let list = signed.open(None).unwrap();
    let b = list.archive("B").unwrap();
    let published = b.keys.iter().find(|k| k.certificate.is_some()).unwrap();
    std::fs::write(
        p("published.pem"),
        published.certificate.as_deref().unwrap(),
    )
    .unwrap();
    let said = tool(
        "openssl",
        &[
            "verify",
            "-vfyopt",
            distid,
            "-CAfile",
            &p("ca.pem"),
            &p("published.pem"),
        ],
    );
    assert!(said.contains("OK"), "{said}");

    // A copy B sealed, from the certificate: OpenSSL verifies its seal
    // with the public key in B's certificate.
    let (code, _) = s.certify(&id);
    let check = ApiClient::new(&s.a.url, Duration::from_secs(10)).unwrap();
    assert_eq!(
        check.check_certificate(&code).await.unwrap().copies.len(),
        1
    );
    let certificate = s
        .client(&s.a, &s.clerk)
        .issue_certificate(&id)
        .await
        .unwrap();
    let sealed = xarchive_seal::certificate::Payload::parse(&certificate.sheets[0].payload)
        .unwrap()
        .sealed;
    let sheet = xarchive_seal::Opened::parse(&sealed).unwrap();
    let statement = xarchive_seal::statement::CertificateStatement::decode(&sheet.payload).unwrap();
    let copy = xarchive_seal::Opened::parse(&statement.copies[0]).unwrap();
    std::fs::write(p("signed"), copy.signed_bytes()).unwrap();
    let der = xarchive_seal::key::signature_der(xarchive_seal::Algorithm::Sm2Sm3, copy.signature())
        .unwrap();
    std::fs::write(p("signature.der"), der).unwrap();
    let public = tool(
        "openssl",
        &["x509", "-in", &p("b.pem"), "-pubkey", "-noout"],
    );
    std::fs::write(p("b.pub"), public).unwrap();
    let said = tool(
        "openssl",
        &[
            "pkeyutl",
            "-verify",
            "-pubin",
            "-inkey",
            &p("b.pub"),
            "-rawin",
            "-digest",
            "sm3",
            "-pkeyopt",
            distid,
            "-in",
            &p("signed"),
            "-sigfile",
            &p("signature.der"),
        ],
    );
    assert!(said.contains("Signature Verified Successfully"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_policy_does_not_release_is_approved_by_the_reviewer_who_sees_titles_and_whether_the_applicant_is_named(
) {
    let s = Archives::start().await;
    s.put_at_b("C-1", "court").await;
    let id = s.submit(&["C-1"], "诉讼");
    s.request_until(&id, |v| state(v) == "in_review").await;

    let out = s.cli(&s.b, Some(&s.reviewer), &["review", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = text(&out);
    for expected in [
        id.as_str(),
        "C-1",
        "court",
        "张三",
        "诉讼",
        "婚姻登记",
        "兴义市档案馆",
    ] {
        assert!(listed.contains(expected), "no {expected:?} in:\n{listed}");
    }
    let out = s.cli(&s.b, Some(&s.reviewer), &["review", "list", "--json"]);
    let queue: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        queue["reviews"][0]["records"][0]["applicant_named"], true,
        "{queue:#}"
    );
    let out = s.cli(
        &s.b,
        Some(&s.reviewer),
        &["review", "approve", "A", &id, "--reason", "本人申请"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("released"), "{}", text(&out));

    s.request_until(&id, |v| status(v) == "answered").await;
    s.certify(&id);
    let out = s.cli(&s.b, Some(&s.reviewer), &["review", "list", "--json"]);
    let queue: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(queue["reviews"], json!([]), "{queue:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_the_holding_archive_s_with_its_reason_and_gets_no_certificate() {
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

    // The one way a request is refused: its holding archive said so.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let out = s.cli(&s.a, Some(&s.clerk), &["request", "show", &id, "--json"]);
        let view: Value = serde_json::from_slice(&out.stdout).unwrap();
        if status(&view) == "refused" {
            break view;
        }
        assert!(Instant::now() < deadline, "{view:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(refused["holdings"][0]["reason"], "涉及第三人隐私");
    assert_eq!(s.steps(&s.b, "review_refused", &id).await, 1);
    let shown = s.cli(&s.a, Some(&s.clerk), &["request", "show", &id]);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_number_typed_as_a_record_is_refused_and_kept_nowhere() {
    let s = Archives::start().await;
    let out = s.submit_for(APPLICANT, &[APPLICANT], "贷款");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let requests = s.path("A").join("requests.redb");
    let bytes = std::fs::read(requests).unwrap();
    let found = bytes
        .windows(APPLICANT.len())
        .any(|w| w == APPLICANT.as_bytes());
    assert!(!found, "the number is in A's request book");
    let _ = &s.zk;
}
