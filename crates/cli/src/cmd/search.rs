//! `xarchive search --key TYPE=VALUE`: every record with a key (an
//! identity number, say), in every domain.

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::Context;
use xarchive_node::wire::SearchRequest;

use super::ServerArgs;
use xarchive::failure::EXIT_UNAVAILABLE;

#[derive(clap::Args)]
pub struct SearchArgs {
    /// The key: `id_card=110101199003071234`. With `TYPE=-` the value is
    /// read from the first line of standard input, which keeps it out of
    /// the shell's history and the process list.
    #[arg(long, value_name = "TYPE=VALUE")]
    key: String,
    /// Print the whole answer as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn run(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let (key_type, value) = args
        .key
        .split_once('=')
        .context("--key must be TYPE=VALUE (or TYPE=- to read the value from standard input)")?;
    let value = if value == "-" {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("cannot read the key's value from standard input")?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    } else {
        value.to_owned()
    };
    let request = SearchRequest {
        key_type: key_type.to_owned(),
        value,
        local: false,
        requester: None,
    };
    let (status, answer) = args.server.client()?.search(&request).await?;
    if super::json(args.json) {
        super::print_json(&answer)?;
    } else {
        let mut domain = None;
        for record in &answer.records {
            if domain != Some(&record.domain) {
                xarchive::outln!("{}:", record.domain);
                domain = Some(&record.domain);
            }
            xarchive::outln!("  {}  {}", record.id, record.title);
        }
    }
    let summary = format!(
        "{} records in {} domains; {:.1} ms, {} remote calls, asked [{}]",
        answer.records.len(),
        answer
            .records
            .iter()
            .map(|r| &r.domain)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        answer.elapsed_ms,
        answer.remote_calls,
        answer.asked.join(","),
    );
    if status == 200 {
        xarchive::errln!("{summary}");
        Ok(ExitCode::SUCCESS)
    } else {
        xarchive::errln!(
            "incomplete: {} ({summary})",
            answer
                .message
                .as_deref()
                .unwrap_or("some domains could not be reached")
        );
        Ok(ExitCode::from(EXIT_UNAVAILABLE))
    }
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    /// Entries from this time on (RFC 3339, e.g. 2026-11-25T08:00:00Z).
    #[arg(long)]
    since: Option<String>,
    /// Print the entries as one JSON document (`{"entries": [...]}`).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Subcommand)]
pub enum AuditCommand {
    /// Check that the log is whole (its hash chain) and still holds the
    /// head anchored outside the domain; exit 1 if not.
    Verify {
        /// Print what was found as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// `xarchive audit verify`: the domain's check of its log, printed.
async fn verify(json: bool, server: ServerArgs) -> anyhow::Result<ExitCode> {
    let found = server.client()?.audit_verify().await?;
    if json {
        super::print_json(&found)?;
    } else {
        xarchive::outln!(
            "{} entries, last hash {}",
            found.head.entries,
            found.head.hash
        );
        match (&found.anchor, &found.unanchored) {
            (Some(a), _) => xarchive::outln!("anchored: {} entries, hash {}", a.entries, a.hash),
            (None, Some(why)) => xarchive::outln!("anchor not compared: {why}"),
            (None, None) => xarchive::outln!("nothing anchored yet"),
        }
        for problem in &found.problems {
            xarchive::outln!("PROBLEM: {problem}");
        }
        xarchive::outln!("{}", if found.intact { "intact" } else { "NOT INTACT" });
    }
    Ok(if found.intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `xarchive audit`: every search by private key that reached the domain
/// (needs a token with the `audit` role); `xarchive audit verify`: the
/// log's integrity.
pub async fn audit(args: AuditArgs) -> anyhow::Result<ExitCode> {
    if let Some(AuditCommand::Verify { json, server }) = args.command {
        return verify(super::json(json), server).await;
    }
    let json = super::json(args.json);
    let client = args.server.client()?;
    let mut since = args.since;
    let mut count = 0usize;
    // With JSON, the entries of every page make one document.
    let mut entries = Vec::new();
    loop {
        let page = client.audit(since.as_deref()).await?;
        for entry in page.entries {
            count += 1;
            if json {
                entries.push(entry);
                continue;
            }
            let at =
                time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(entry.at_us) * 1_000)
                    .ok()
                    .and_then(|t| {
                        t.format(&time::format_description::well_known::Rfc3339)
                            .ok()
                    })
                    .unwrap_or_else(|| entry.at_us.to_string());
            xarchive::outln!(
                "{at}  {} ({}) at {}  {} #{}  {} records",
                entry.requester.token,
                entry.requester.role,
                entry.requester.domain,
                entry.key_type,
                entry.value_digest,
                entry.records.len(),
            );
        }
        match page.next {
            Some(next) => since = Some(next),
            None => break,
        }
    }
    if json {
        super::print_json(&serde_json::json!({ "entries": entries }))?;
    }
    xarchive::errln!("{count} searches on record");
    Ok(ExitCode::SUCCESS)
}
