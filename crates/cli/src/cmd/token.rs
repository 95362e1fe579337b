//! `xarchive token create`: a new API token, printed once; only its digest
//! goes into the domain's configuration.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use xarchive_node::security::auth::{generate_token, sha256_hex, Role};

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Make a token; print it, and the entry for the domain's config.
    Create(CreateArgs),
}

#[derive(clap::Args)]
pub struct CreateArgs {
    /// `read` (lookups, reads, filters), `write` (also puts, deletes,
    /// imports), `search` (also searches by key) or `audit` (also the log
    /// of searches).
    #[arg(long)]
    role: Role,
    /// A name for the token, shown in logs and metrics.
    #[arg(long, default_value = "client")]
    name: String,
    /// Append the entry to this config file (the domain reads it at start).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The domain the token belongs to: a search token then searches only
    /// there, so that all its searches in the cluster are counted against
    /// its rate in one place (docs/SECURITY.md).
    #[arg(long)]
    domain: Option<String>,
}

pub fn run(command: TokenCommand) -> anyhow::Result<ExitCode> {
    let TokenCommand::Create(args) = command;
    anyhow::ensure!(
        !args.name.is_empty() && !args.name.contains(['"', '\\', '\n']),
        "--name must be a plain name"
    );
    let token = generate_token();
    let role = args.role.as_str();
    let mut entry = format!(
        "\n[[auth.tokens]]\nname = \"{}\"\nrole = \"{role}\"\nsha256 = \"{}\"\n",
        args.name,
        sha256_hex(&token)
    );
    if let Some(domain) = &args.domain {
        anyhow::ensure!(
            !domain.is_empty()
                && domain
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "--domain must be a domain's name (A-Z a-z 0-9 - _)"
        );
        entry.push_str(&format!("domain = \"{domain}\"\n"));
    }
    match &args.config {
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            file.write_all(entry.as_bytes())?;
            eprintln!(
                "added token {:?} ({role}) to {}; restart the domain to use it",
                args.name,
                path.display()
            );
        }
        None => eprintln!("add this to the domain's config file:{entry}"),
    }
    eprintln!("the token (shown once; keep it secret):");
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}
