//! `xarchive lookup ID`: find a record in whichever domain holds it.

use std::process::ExitCode;

use super::ServerArgs;
use xarchive::failure::{EXIT_NOT_FOUND, EXIT_UNAVAILABLE};
use xarchive_node::wire::Strategy;

#[derive(clap::Args)]
pub struct LookupArgs {
    /// The archive number as typed: the domain reads it by the cluster's
    /// ID profile (trimmed, NFKC, "." and other look-alikes of "·" as "·").
    #[arg(value_parser = super::archive_id)]
    id: String,
    /// Ask every domain (the seed paper's broadcast) instead of routing.
    #[arg(long)]
    broadcast: bool,
    /// Print the whole answer as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn run(args: LookupArgs) -> anyhow::Result<ExitCode> {
    let (status, answer) = args
        .server
        .client()?
        .lookup(&args.id, strategy(args.broadcast))
        .await?;
    let json = super::json(args.json);
    if json {
        super::print_json(&answer)?;
    }
    let route = &answer.route;
    let summary = format!(
        "{:.1} ms, {} remote calls, candidates [{}], asked [{}]{}",
        route.elapsed_ms,
        route.remote_calls,
        route.candidates.join(","),
        route.asked.join(","),
        if route.broadcast { ", broadcast" } else { "" },
    );
    match status {
        200 => {
            if !json {
                super::print_json(&answer.record)?;
                xarchive::errln!(
                    "found in domain {} ({summary})",
                    answer.owner.as_deref().unwrap_or("?")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        404 => {
            xarchive::errln!("not found in any domain: {} ({summary})", args.id);
            // The domain read what was typed by the cluster's ID profile
            // (trimmed, NFKC, look-alikes of "·") before looking it up.
            if !answer.suggestions.is_empty() {
                xarchive::errln!("did you mean: {}", answer.suggestions.join(", "));
            }
            Ok(ExitCode::from(EXIT_NOT_FOUND))
        }
        _ => {
            xarchive::errln!(
                "unavailable: {} ({summary})",
                answer
                    .message
                    .as_deref()
                    .unwrap_or("some domains could not be reached")
            );
            Ok(ExitCode::from(EXIT_UNAVAILABLE))
        }
    }
}

/// The strategy `--broadcast` asks for.
fn strategy(broadcast: bool) -> Strategy {
    if broadcast {
        Strategy::Broadcast
    } else {
        Strategy::Routed
    }
}
