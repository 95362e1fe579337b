//! `xarchive request`, `review` and `certificate`: cross-archive requests
//! (异地查档、跨馆出证) from the command line: the clerk's side at the
//! receiving archive, the reviewer's at the holding archive, and anyone's
//! check of a certificate's verification code. Thin: each command is one
//! call of the node's client, printed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use xarchive::failure::Usage;
use xarchive_node::wire::{Answer, Decision, HoldingView, RequestView, ReviewItem};

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
    /// issued once, printed the same again).
    Certify(RequestArgs),
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
    /// Check a certificate's verification code at an archive (the one that
    /// issued it, or the one that holds the record); no token needed.
    /// Exit 0 when the copy checks, 1 when it was changed, 3 when no such
    /// code was issued there.
    Check(CheckArgs),
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
    /// The verification code printed on the certificate.
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
        RequestCommand::Certify(args) => {
            let view = args.server.client()?.issue_certificate(&args.id).await?;
            if super::json(args.json) {
                super::print_json(&view)?;
            } else {
                print_certificate(&view)?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
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
    let CertificateCommand::Check(args) = command;
    let check = args.server.client()?.check_certificate(&args.code).await?;
    if super::json(args.json) {
        super::print_json(&check)?;
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!("valid: the copy under code {} checks", check.code);
    let mut rows = vec![
        ["holding archive", check.holding.as_str()],
        ["issued by", check.receiving.as_str()],
        ["archive number", check.archive_number.as_str()],
        ["title", check.title.as_str()],
        ["released", check.date.as_str()],
        ["request", check.request_id.as_str()],
    ];
    if let Some(sha) = &check.content_sha256 {
        rows.push(["content sha256", sha.as_str()]);
    }
    rows.push(["checked by", check.checked_by.as_str()]);
    for [name, value] in rows {
        xarchive::outln!("  {name:<16} {value}");
    }
    Ok(ExitCode::SUCCESS)
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
            .map(|h| format!("{}:{}", h.domain, state(h)))
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
                let mut prompt = std::io::stderr();
                write!(prompt, "applicant's identity number: ")?;
                prompt.flush()?;
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

/// A request as a clerk reads it: its status, then each holding archive's
/// part with its copies and their codes.
fn print_view(view: &RequestView, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        super::print_json(view)?;
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!("request {}: {}", view.id, status(&view.status));
    xarchive::outln!(
        "  applicant {}, for {}; submitted {} by {}",
        view.applicant_name,
        view.purpose,
        view.submitted_at,
        view.clerk
    );
    if let Some(at) = &view.certified_at {
        xarchive::outln!("  certificate issued {at}");
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
            h.domain.clone(),
            state(h),
            h.records.join(", "),
            note.join("; "),
        ]);
    }
    print_table(&rows)?;
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
            "RELEASED",
            "VERIFICATION CODE",
        ])];
        for c in copies {
            rows.push(vec![
                c.copy.holding.clone(),
                c.copy.archive_number.clone(),
                c.copy.title.clone(),
                c.copy.date.clone(),
                c.code.clone(),
            ]);
        }
        print_table(&rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The certificate as the applicant takes it away: each copy with the
/// archive holding it and the code that checks it.
fn print_certificate(view: &RequestView) -> anyhow::Result<()> {
    xarchive::outln!("CERTIFICATE OF ARCHIVE RECORDS (跨馆出证)");
    xarchive::outln!("  request      {}", view.id);
    xarchive::outln!("  applicant    {}", view.applicant_name);
    xarchive::outln!("  purpose      {}", view.purpose);
    if let Some(at) = &view.certified_at {
        xarchive::outln!("  issued       {at} by {}", view.clerk);
    }
    xarchive::outln!();
    let mut rows = vec![row([
        "HOLDING ARCHIVE",
        "ARCHIVE NUMBER",
        "TITLE",
        "DATE",
        "REQUEST",
        "VERIFICATION CODE",
    ])];
    for c in view.holdings.iter().flat_map(|h| &h.copies) {
        rows.push(vec![
            c.copy.holding.clone(),
            c.copy.archive_number.clone(),
            c.copy.title.clone(),
            c.copy.date.clone(),
            c.copy.request_id.clone(),
            c.code.clone(),
        ]);
    }
    print_table(&rows)?;
    let refused: Vec<&HoldingView> = view
        .holdings
        .iter()
        .filter(|h| h.copies.is_empty())
        .collect();
    for h in refused {
        xarchive::outln!(
            "  {} released no copy{}",
            h.domain,
            h.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    xarchive::outln!();
    xarchive::outln!("Check a code at either archive: xarchive certificate check CODE");
    Ok(())
}

fn print_reviews(reviews: &[ReviewItem]) -> anyhow::Result<()> {
    let mut rows = vec![row([
        "RECEIVING",
        "REQUEST",
        "RECEIVED",
        "APPLICANT",
        "PURPOSE",
        "RECORDS",
        "WHY REVIEW",
    ])];
    for r in reviews {
        rows.push(vec![
            r.receiving.clone(),
            r.request_id.clone(),
            r.received_at.clone(),
            r.applicant_name.clone(),
            r.purpose.clone(),
            r.records.join(", "),
            r.reason.clone(),
        ]);
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
    if !answer.missing.is_empty() {
        xarchive::outln!("  not held here: {}", answer.missing.join(", "));
    }
    Ok(())
}
