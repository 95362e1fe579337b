//! `xarchive request`, `review` and `certificate`: cross-archive requests
//! (异地查档、跨馆出证) from the command line: the clerk's side at the
//! receiving archive, the reviewer's at the holding archive, and anyone's
//! check of a certificate: online at any archive by its code, or offline
//! against a saved trust list with no server at all. Thin: each command is
//! one call of the node's client (or of the seal library), printed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use xarchive::failure::Usage;
use xarchive_node::wire::{
    Answer, Awaiting, Certificate, CertificateCheck, Decision, HoldingView, RequestView, ReviewItem,
};
use xarchive_seal::{SignedTrustList, TrustList};

use super::table::{print_table, row};
use super::ServerArgs;

/// Where the applicant's identity number is read from, said once for the
/// help of `request submit`.
const IDENTITY_HELP: &str = "The applicant's identity number is never taken from the \
command line: every user of the machine sees a command's arguments (`ps`, /proc), and the \
shell keeps them in its history. It is read from --applicant-id-file, or else from the first \
line of standard input (asked for when standard input is a terminal). It is sent to the \
domain only, and never printed.";

#[derive(clap::Subcommand)]
pub enum RequestCommand {
    /// Register an applicant's request for copies of their records held
    /// at other archives (clerk role); the identity number is read from
    /// standard input or a file, never from an argument.
    #[command(after_long_help = IDENTITY_HELP)]
    Submit(SubmitArgs),
    /// The requests registered at this archive, newest first (clerk role).
    List(ListArgs),
    /// One request: where it stands at each holding archive, its copies
    /// and their verification codes (clerk role).
    Show(RequestArgs),
    /// Issue an answered request's certificate and print it (clerk role;
    /// issued once, printed the same again); `--pdf FILE` saves its PDF.
    Certify(CertifyArgs),
}

#[derive(clap::Subcommand)]
pub enum ReviewCommand {
    /// The requests from other archives waiting for a reviewer here
    /// (reviewer role).
    List(ListArgs),
    /// Release the records of a request waiting for review (reviewer role).
    Approve(ApproveArgs),
    /// Refuse a request waiting for review, with the reason the receiving
    /// archive's clerk will see (reviewer role).
    Refuse(RefuseArgs),
}

#[derive(clap::Subcommand)]
pub enum CertificateCommand {
    /// Check a certificate by its verification code at any archive of the
    /// cluster (the one that issued it is asked); no token needed. Exit 0
    /// when it checks, 1 when it was changed, 3 when no such code was
    /// issued, 4 when its archive cannot be asked now.
    Check(CheckArgs),
    /// Check a certificate offline: its PDF, or its payload (as its QR
    /// code holds it), against a saved trust list, with no server. Exit 0
    /// valid, 1 changed, 3 sealed by a key the list does not hold, 5 by a
    /// key revoked or not valid then, 6 the trust list fails its own
    /// check, 7 not a certificate (cut short, malformed).
    Verify(VerifyArgs),
    /// Save the cluster's trust list (every archive's name and keys,
    /// signed) for offline checks, after checking its signature.
    TrustList(TrustListArgs),
}

#[derive(clap::Args)]
pub struct SubmitArgs {
    /// The applicant's name as on their identity card.
    #[arg(long)]
    name: String,
    /// What the copies are for (a bank, a court, a pension office).
    #[arg(long)]
    purpose: String,
    /// A record asked for, by archive number (repeat for more); without
    /// any, the records a search by the applicant's identity number finds.
    #[arg(long = "record", value_name = "ID", value_parser = super::archive_id)]
    records: Vec<String>,
    /// A file whose first line is the applicant's identity number (instead
    /// of standard input).
    #[arg(long, value_name = "PATH")]
    applicant_id_file: Option<PathBuf>,
    /// Print the registered request as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct RequestArgs {
    /// The request's ID (as `request submit` and `request list` print it).
    id: String,
    /// Print the request as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct CertifyArgs {
    /// The request's ID (as `request submit` and `request list` print it).
    id: String,
    /// Also save the certificate's PDF (A4, with its QR codes) here,
    /// readable by its owner alone (it names the applicant).
    #[arg(long, value_name = "FILE")]
    pdf: Option<PathBuf>,
    /// Print the certificate as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// The certificate's PDF, or a text file holding its payload
    /// (`XA1:…`, one per sheet); `-` reads standard input.
    file: PathBuf,
    /// The trust list saved with `xarchive certificate trust-list`.
    #[arg(long, value_name = "FILE")]
    trust_list: PathBuf,
    /// The fingerprint of the cluster's anchor, as its operators publish
    /// it: the trust list must be signed by it.
    #[arg(long, value_name = "FINGERPRINT")]
    anchor: Option<String>,
    /// Print what was found as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct TrustListArgs {
    /// Where to save it.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The fingerprint of the cluster's anchor it must be signed by.
    #[arg(long, value_name = "FINGERPRINT")]
    anchor: Option<String>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct ApproveArgs {
    /// The archive (domain) the request came from.
    receiving: String,
    /// The request's ID.
    request: String,
    /// A note kept with the approval.
    #[arg(long)]
    reason: Option<String>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct RefuseArgs {
    /// The archive (domain) the request came from.
    receiving: String,
    /// The request's ID.
    request: String,
    /// Why it is refused (the receiving archive's clerk sees it).
    #[arg(long)]
    reason: String,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The verification code printed on the certificate
    /// (ARCHIVE.XXXX-XXXX-XXXX-XXXX-XXXX).
    code: String,
    /// Print what the archive found as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn request(command: RequestCommand) -> anyhow::Result<ExitCode> {
    match command {
        RequestCommand::Submit(args) => submit(args).await,
        RequestCommand::List(args) => list(args).await,
        RequestCommand::Show(args) => {
            let view = args.server.client()?.request(&args.id).await?;
            print_view(&view, super::json(args.json))
        }
        RequestCommand::Certify(args) => certify(args).await,
    }
}

async fn certify(args: CertifyArgs) -> anyhow::Result<ExitCode> {
    let client = args.server.client()?;
    let certificate = client.issue_certificate(&args.id).await?;
    if let Some(path) = &args.pdf {
        let pdf = client.certificate_pdf(&args.id).await?;
        let file = super::private_file::PrivateFile::create(path)?;
        file.file()
            .write_all(&pdf)
            .with_context(|| format!("cannot write {}", path.display()))?;
        file.persist()?;
        xarchive::errln!(
            "saved the certificate's PDF ({} bytes) to {}, readable by its owner alone",
            pdf.len(),
            path.display()
        );
    }
    if super::json(args.json) {
        super::print_json(&certificate)?;
    } else {
        print_certificate(&certificate)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn review(command: ReviewCommand) -> anyhow::Result<ExitCode> {
    match command {
        ReviewCommand::List(args) => {
            let queue = args.server.client()?.reviews().await?;
            if super::json(args.json) {
                super::print_json(&queue)?;
            } else {
                print_reviews(&queue.reviews)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ReviewCommand::Approve(args) => {
            let decision = Decision {
                approve: true,
                reason: args.reason.unwrap_or_default(),
            };
            decide(
                &args.server,
                &args.receiving,
                &args.request,
                &decision,
                args.json,
            )
            .await
        }
        ReviewCommand::Refuse(args) => {
            if args.reason.trim().is_empty() {
                return Err(Usage("a refusal needs its reason: --reason".into()).into());
            }
            let decision = Decision {
                approve: false,
                reason: args.reason,
            };
            decide(
                &args.server,
                &args.receiving,
                &args.request,
                &decision,
                args.json,
            )
            .await
        }
    }
}

pub async fn certificate(command: CertificateCommand) -> anyhow::Result<ExitCode> {
    match command {
        CertificateCommand::Check(args) => {
            let check = args.server.client()?.check_certificate(&args.code).await?;
            if super::json(args.json) {
                super::print_json(&check)?;
            } else {
                xarchive::outln!("valid: certificate {} checks", check.code);
                print_check(&check)?;
                xarchive::outln!("  {:<16} {}", "checked by", check.checked_by);
            }
            Ok(ExitCode::SUCCESS)
        }
        CertificateCommand::Verify(args) => verify(&args),
        CertificateCommand::TrustList(args) => {
            let body = args.server.client()?.trust_list().await?;
            let signed = SignedTrustList::from(body);
            let list = signed
                .open(args.anchor.as_deref())
                .context("the trust list served does not check")?;
            let bytes = serde_json::to_vec_pretty(&signed)?;
            std::fs::write(&args.out, bytes)
                .with_context(|| format!("cannot write {}", args.out.display()))?;
            let anchor = xarchive_seal::trust::fingerprint(&signed.anchor()?);
            xarchive::outln!(
                "saved the trust list of cluster {} ({} archives) to {}",
                list.cluster,
                list.archives.len(),
                args.out.display()
            );
            xarchive::outln!("anchor: {anchor}");
            if !list.secured {
                xarchive::errln!(
                    "warning: this cluster has no secret: anyone can make a trust list that checks"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Exit code of `certificate verify` when the trust list itself fails.
const EXIT_TRUST_LIST: u8 = 6;

/// `xarchive certificate verify`: offline, with nothing but the trust list.
fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let json = super::json(args.json);
    let said = |code: u8, why: &str, hint: Option<&str>| {
        if json {
            let _ = super::print_json(
                &serde_json::json!({"valid": false, "exit": code, "message": why}),
            );
        }
        xarchive::errln!("error: {why}");
        if let Some(hint) = hint {
            xarchive::errln!("hint: {hint}");
        }
        Ok(ExitCode::from(code))
    };
    let text = match std::fs::read(&args.trust_list) {
        Ok(text) => text,
        Err(e) => {
            return said(
                EXIT_TRUST_LIST,
                &format!(
                    "cannot read the trust list {}: {e}",
                    args.trust_list.display()
                ),
                Some("save one with `xarchive certificate trust-list --out FILE`"),
            )
        }
    };
    let trust: TrustList = match serde_json::from_slice::<SignedTrustList>(&text)
        .map_err(|e| xarchive_seal::TrustError::Malformed(e.to_string()))
        .and_then(|signed| signed.open(args.anchor.as_deref()))
    {
        Ok(list) => list,
        Err(e) => {
            return said(
                EXIT_TRUST_LIST,
                &format!("the trust list {}: {e}", args.trust_list.display()),
                None,
            )
        }
    };
    let input = if args.file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)?;
        bytes
    } else {
        std::fs::read(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?
    };
    let payloads = if input.starts_with(b"%PDF") {
        match xarchive_seal::pdf::payloads(&input) {
            Ok(p) => p,
            Err(e) => return said(7, &e.to_string(), None),
        }
    } else {
        String::from_utf8_lossy(&input)
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with(xarchive_seal::certificate::PREFIX))
            .map(str::to_owned)
            .collect()
    };
    if payloads.is_empty() {
        return said(7, "no certificate payload (XA1:…) in it", None);
    }
    let mut sheets = Vec::new();
    for payload in &payloads {
        match xarchive_seal::verify_certificate(payload, &trust) {
            Ok(sheet) => sheets.push(sheet),
            Err(rejected) => return said(rejected.exit_code(), &rejected.to_string(), None),
        }
    }
    let first = &sheets[0].statement;
    if sheets
        .iter()
        .any(|s| s.statement.code != first.code || s.statement.request_id != first.request_id)
    {
        return said(1, "its sheets are of different certificates", None);
    }
    if json {
        let copies: Vec<serde_json::Value> = sheets
            .iter()
            .flat_map(|s| &s.copies)
            .map(|c| {
                serde_json::json!({
                    "holding": c.holding.domain, "holding_name": c.holding.name(),
                    "archive_number": c.statement.archive_number, "title": c.statement.title,
                    "record_date": c.statement.record_date,
                })
            })
            .collect();
        super::print_json(&serde_json::json!({
            "valid": true,
            "code": first.code,
            "issuer": first.issuer,
            "issuer_name": sheets[0].issuer.name(),
            "request_id": first.request_id,
            "issued_at": xarchive_seal::trust::format_time(first.issued),
            "applicant_name": first.applicant_name,
            "purpose": first.purpose,
            "copies": copies,
            "sheets": sheets.len(),
            "of_sheets": first.sheets,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!(
        "valid: certificate {} checks against the trust list of cluster {} (sheets {} of {})",
        first.code,
        trust.cluster,
        sheets.len(),
        first.sheets
    );
    let rows = [
        (
            "issued by",
            format!("{} ({})", sheets[0].issuer.name(), first.issuer),
        ),
        ("issued", xarchive_seal::trust::format_time(first.issued)),
        ("applicant", first.applicant_name.clone()),
        ("purpose", first.purpose.clone()),
        ("request", first.request_id.clone()),
    ];
    for (name, value) in rows.iter().filter(|(_, v)| !v.is_empty()) {
        xarchive::outln!("  {name:<16} {value}");
    }
    let mut table = vec![row([
        "HOLDING ARCHIVE",
        "ARCHIVE NUMBER",
        "TITLE",
        "RECORD DATE",
    ])];
    for c in sheets.iter().flat_map(|s| &s.copies) {
        table.push(vec![
            c.holding.name().to_owned(),
            c.statement.archive_number.clone(),
            c.statement.title.clone(),
            c.statement
                .record_date
                .clone()
                .unwrap_or_else(|| "—".into()),
        ]);
    }
    if table.len() > 1 {
        print_table(&table)?;
    }
    if !trust.secured {
        xarchive::errln!("warning: the trust list is of a cluster without a secret: anyone can make one that checks");
    }
    xarchive::outln!(
        "Compare these with the paper: a printed field that differs means the paper was changed."
    );
    Ok(ExitCode::SUCCESS)
}

/// What a check found, as a person compares it with the paper.
fn print_check(check: &CertificateCheck) -> anyhow::Result<()> {
    let rows = [
        (
            "issued by",
            format!("{} ({})", check.issuer.name, check.issuer.domain),
        ),
        ("issued", check.issued_at.clone()),
        ("applicant", check.applicant_name.clone()),
        ("purpose", check.purpose.clone()),
        ("request", check.request_id.clone()),
    ];
    for (name, value) in rows.iter().filter(|(_, v)| !v.is_empty()) {
        xarchive::outln!("  {name:<16} {value}");
    }
    let mut table = vec![row([
        "HOLDING ARCHIVE",
        "ARCHIVE NUMBER",
        "TITLE",
        "RECORD DATE",
        "RELEASED",
        "CONTENT SHA-256",
    ])];
    for c in &check.copies {
        table.push(vec![
            c.holding.name.clone(),
            c.archive_number.clone(),
            c.title.clone(),
            c.record_date.clone().unwrap_or_else(|| "—".into()),
            c.released.clone(),
            c.content_sha256.clone().unwrap_or_default(),
        ]);
    }
    if table.len() > 1 {
        print_table(&table)?;
    }
    for n in &check.not_provided {
        let holding = n
            .holding
            .as_ref()
            .map_or("no archive".to_owned(), |h| h.name.clone());
        xarchive::outln!(
            "  not provided by {holding}: {} ({}{})",
            n.records.join(", "),
            n.why,
            n.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

async fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let applicant_id = identity_number(args.applicant_id_file.as_deref())?;
    let mut body = serde_json::json!({
        "applicant_id": applicant_id,
        "applicant_name": args.name,
        "purpose": args.purpose,
    });
    if !args.records.is_empty() {
        body["records"] = serde_json::to_value(&args.records)?;
    }
    let view = args.server.client()?.submit_request(&body).await?;
    print_view(&view, super::json(args.json))
}

async fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let list = args.server.client()?.requests().await?;
    if super::json(args.json) {
        super::print_json(&list)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = vec![row([
        "ID",
        "STATUS",
        "SUBMITTED",
        "APPLICANT",
        "PURPOSE",
        "HOLDINGS",
    ])];
    for r in &list.requests {
        let holdings = r
            .holdings
            .iter()
            .map(|h| format!("{}:{}", h.name, state(h)))
            .chain((r.awaiting.archives > 0).then(|| awaiting(&r.awaiting)))
            .collect::<Vec<_>>()
            .join(" ");
        rows.push(vec![
            r.id.clone(),
            status(&r.status),
            r.submitted_at.clone(),
            r.applicant_name.clone(),
            r.purpose.clone(),
            holdings,
        ]);
    }
    print_table(&rows)?;
    xarchive::errln!("{} requests", list.requests.len());
    Ok(ExitCode::SUCCESS)
}

async fn decide(
    server: &ServerArgs,
    receiving: &str,
    request: &str,
    decision: &Decision,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let answer = server
        .client()?
        .decide(receiving, request, decision)
        .await?;
    if super::json(json) {
        super::print_json(&answer)?;
    } else {
        print_answer(receiving, request, &answer)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The applicant's identity number: the first line of `file`, or of
/// standard input (asked for on a terminal). Never quoted in an error.
fn identity_number(file: Option<&Path>) -> anyhow::Result<String> {
    let line = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read the identity number from {}: {e}",
                    path.display()
                )
            })?;
            text.lines().next().unwrap_or_default().to_owned()
        }
        None => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                write!(std::io::stderr(), "applicant's identity number: ")?;
                std::io::stderr().flush()?;
            }
            let mut line = String::new();
            stdin.lock().read_line(&mut line).map_err(|e| {
                anyhow::anyhow!("cannot read the identity number from standard input: {e}")
            })?;
            line
        }
    };
    let number = line.trim();
    if number.is_empty() {
        return Err(Usage(
            "no identity number: give it on standard input (the first line) or in \
             --applicant-id-file, never as an argument"
                .into(),
        )
        .into());
    }
    Ok(number.to_owned())
}

fn status(s: &impl serde::Serialize) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn state(h: &HoldingView) -> String {
    status(&h.state).replace('_', " ")
}

/// A request as a clerk reads it: its status and what to tell the
/// applicant, then each holding archive's part with its copies, each
/// marked if it no longer checks.
fn print_view(view: &RequestView, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        super::print_json(view)?;
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!("request {}: {}", view.id, status(&view.status));
    xarchive::outln!("  {} {}", view.words.zh, view.words.en);
    xarchive::outln!(
        "  applicant {}, for {}; submitted {} by {}",
        view.applicant_name,
        view.purpose,
        view.submitted_at,
        view.clerk
    );
    if let Some(certificate) = &view.certificate {
        xarchive::outln!(
            "  certificate {} issued {} ({} sheets)",
            certificate.code,
            certificate.issued_at,
            certificate.sheets
        );
    }
    let mut rows = vec![row(["HOLDING", "STATE", "RECORDS", "NOTE"])];
    for h in &view.holdings {
        let mut note = Vec::new();
        if let Some(reason) = &h.reason {
            note.push(format!("reason: {reason}"));
        }
        if !h.missing.is_empty() {
            note.push(format!("not held: {}", h.missing.join(", ")));
        }
        rows.push(vec![
            format!("{} ({})", h.name, h.domain),
            state(h),
            h.records.join(", "),
            note.join("; "),
        ]);
    }
    if view.holdings.is_empty() && view.awaiting.archives == 0 {
        xarchive::outln!("  no archive holds a record of it");
    } else if !view.holdings.is_empty() {
        print_table(&rows)?;
    }
    if view.awaiting.archives > 0 {
        xarchive::outln!(
            "  {} (each is named, with its records, once it answers)",
            awaiting(&view.awaiting)
        );
        if let Some(since) = &view.awaiting.unreachable_since {
            xarchive::outln!("  one of them cannot be reached since {since}");
        }
    }
    if !view.not_found.is_empty() {
        xarchive::outln!("  held by no archive: {}", view.not_found.join(", "));
    }
    let copies: Vec<_> = view.holdings.iter().flat_map(|h| &h.copies).collect();
    if !copies.is_empty() {
        xarchive::outln!("copies:");
        let mut rows = vec![row([
            "HOLDING",
            "ARCHIVE NUMBER",
            "TITLE",
            "RECORD DATE",
            "RELEASED",
            "CHECK",
        ])];
        for c in &copies {
            rows.push(vec![
                c.holding.clone(),
                c.archive_number.clone(),
                c.title.clone(),
                c.record_date.clone().unwrap_or_else(|| "—".into()),
                c.released.clone(),
                if c.valid {
                    "ok".into()
                } else {
                    "DOES NOT CHECK".into()
                },
            ]);
        }
        print_table(&rows)?;
        for c in copies.iter().filter(|c| !c.valid) {
            xarchive::outln!(
                "  ✗ the copy of {} from {} does not check: {}; no certificate can be issued while it is kept",
                c.archive_number,
                c.holding,
                c.problem.as_deref().unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The holding archives a request waits for, in a few words.
fn awaiting(awaiting: &Awaiting) -> String {
    match awaiting.in_review {
        0 => format!("awaiting {} archives", awaiting.archives),
        n => format!("awaiting {} archives ({n} in review)", awaiting.archives),
    }
}

/// The certificate as the applicant takes it away: each copy with the
/// archive holding it, the code and where to check it.
fn print_certificate(certificate: &Certificate) -> anyhow::Result<()> {
    let view = &certificate.request;
    xarchive::outln!("档案查询证明 · CERTIFICATE OF ARCHIVE SEARCH");
    xarchive::outln!(
        "  issued by    {} ({})",
        certificate.issuer.name,
        certificate.issuer.domain
    );
    if !certificate.issuer.address.is_empty() {
        xarchive::outln!("               {}", certificate.issuer.address);
    }
    xarchive::outln!("  code         {}", certificate.code);
    xarchive::outln!("  issued       {}", certificate.issued_at);
    xarchive::outln!("  request      {}", view.id);
    xarchive::outln!("  applicant    {}", view.applicant_name);
    xarchive::outln!("  purpose      {}", view.purpose);
    xarchive::outln!("  {} {}", view.words.zh, view.words.en);
    xarchive::outln!();
    let mut rows = vec![row([
        "HOLDING ARCHIVE",
        "ARCHIVE NUMBER",
        "TITLE",
        "RECORD DATE",
    ])];
    for h in &view.holdings {
        for c in &h.copies {
            rows.push(vec![
                h.name.clone(),
                c.archive_number.clone(),
                c.title.clone(),
                c.record_date.clone().unwrap_or_else(|| "—".into()),
            ]);
        }
    }
    if rows.len() > 1 {
        print_table(&rows)?;
    }
    for h in view
        .holdings
        .iter()
        .filter(|h| h.copies.is_empty() || !h.missing.is_empty())
    {
        let what = if h.copies.is_empty() {
            &h.records
        } else {
            &h.missing
        };
        xarchive::outln!(
            "  not provided by {}: {}{}",
            h.name,
            what.join(", "),
            h.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
    }
    if !view.not_found.is_empty() {
        xarchive::outln!("  held by no archive: {}", view.not_found.join(", "));
    }
    xarchive::outln!();
    xarchive::outln!(
        "Check it at any archive of the cluster: xarchive certificate check {}",
        certificate.code
    );
    if !certificate.issuer.url.is_empty() {
        xarchive::outln!(
            "or on the page: {}#verify",
            certificate.issuer.url.trim_end_matches('/')
        );
    }
    xarchive::outln!(
        "Offline, from its PDF or QR code: xarchive certificate verify FILE --trust-list TRUST.json"
    );
    Ok(())
}

fn print_reviews(reviews: &[ReviewItem]) -> anyhow::Result<()> {
    let mut rows = vec![row([
        "RECEIVING",
        "REQUEST",
        "RECEIVED",
        "APPLICANT",
        "PURPOSE",
        "RECORD",
        "TITLE",
        "APPLICANT NAMED",
        "WHY REVIEW",
    ])];
    for r in reviews {
        for (i, record) in r.records.iter().enumerate() {
            let first = i == 0;
            let cell = |s: &str| if first { s.to_owned() } else { String::new() };
            rows.push(vec![
                cell(&format!("{} ({})", r.receiving_name, r.receiving)),
                cell(&r.request_id),
                cell(&r.received_at),
                cell(&r.applicant_name),
                cell(&r.purpose),
                record.id.clone(),
                record
                    .title
                    .clone()
                    .unwrap_or_else(|| "(no longer held)".into()),
                if record.applicant_named { "yes" } else { "no" }.into(),
                cell(&r.reason),
            ]);
        }
    }
    print_table(&rows)?;
    xarchive::errln!("{} waiting for review", reviews.len());
    Ok(())
}

fn print_answer(receiving: &str, request: &str, answer: &Answer) -> anyhow::Result<()> {
    let state = status(&answer.state).replace('_', " ");
    xarchive::outln!(
        "request {request} from {receiving}: {state}, {} copies",
        answer.copies.len()
    );
    if let Some(reason) = &answer.reason {
        xarchive::outln!("  reason: {reason}");
    }
    if answer.state == xarchive_node::wire::HoldingState::NoneHeld {
        xarchive::outln!("  none of its records is held here any more");
    }
    if !answer.missing.is_empty() {
        xarchive::outln!("  not held here: {}", answer.missing.join(", "));
    }
    Ok(())
}
