//! `xarchive token create|list|revoke`: API tokens in a domain's
//! configuration file. A new token is printed once; only its digest goes
//! into the file. A running domain takes the file's tokens again on SIGHUP
//! (`systemctl reload`).

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
    /// The tokens a configuration file holds: name, role, domain.
    List {
        /// The domain's configuration file.
        #[arg(long)]
        config: PathBuf,
    },
    /// Remove a token's entry from a configuration file.
    Revoke {
        /// The token's name.
        name: String,
        /// The domain's configuration file.
        #[arg(long)]
        config: PathBuf,
    },
}

/// The tokens in `config`, as the domain reads them.
fn tokens_in(
    config: &std::path::Path,
) -> anyhow::Result<Vec<xarchive_node::security::auth::TokenEntry>> {
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("cannot read {}", config.display()))?;
    let parsed = xarchive_node::NodeConfig::from_toml(&text)
        .with_context(|| format!("in {}", config.display()))?;
    Ok(parsed.auth.tokens)
}

fn list(config: &std::path::Path) -> anyhow::Result<ExitCode> {
    let tokens = tokens_in(config)?;
    if super::json(false) {
        super::print_json(&tokens)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = vec![super::table::row(["name", "role", "domain", "sha256"])];
    for t in &tokens {
        rows.push(vec![
            t.name.clone(),
            t.role.as_str().to_owned(),
            t.domain.clone().unwrap_or_else(|| "any".to_owned()),
            format!("{}…", t.sha256.get(..12).unwrap_or(&t.sha256)),
        ]);
    }
    for line in super::table::lines(&rows, &[], "") {
        xarchive::outln!("{line}");
    }
    xarchive::errln!("{} tokens in {}", tokens.len(), config.display());
    Ok(ExitCode::SUCCESS)
}

/// Removes every `[[auth.tokens]]` entry named `name`, keeping the rest of
/// the file (comments included) as it was; the file is replaced whole, so
/// a crash leaves the old one or the new one.
fn revoke(name: &str, config: &std::path::Path) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("cannot read {}", config.display()))?;
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not TOML", config.display()))?;
    let removed = match document
        .get_mut("auth")
        .and_then(|auth| auth.get_mut("tokens"))
        .and_then(|tokens| tokens.as_array_of_tables_mut())
    {
        Some(tokens) => {
            let before = tokens.len();
            tokens.retain(|t| t.get("name").and_then(|n| n.as_str()) != Some(name));
            before - tokens.len()
        }
        None => 0,
    };
    anyhow::ensure!(
        removed > 0,
        "no token named {name:?} in {}",
        config.display()
    );
    let tmp = config.with_extension("toml.tmp");
    std::fs::write(&tmp, document.to_string())
        .and_then(|()| std::fs::rename(&tmp, config))
        .with_context(|| format!("cannot write {}", config.display()))?;
    if super::json(false) {
        super::print_json(&serde_json::json!({"revoked": name, "config": config}))?;
    }
    xarchive::errln!(
        "revoked token {name:?} in {}; a running domain stops taking it on SIGHUP (systemctl reload xarchive@NAME)",
        config.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `--role`: every role, each with what it allows, from the node's own
/// list (so `--help` names them all).
fn role() -> impl clap::builder::TypedValueParser<Value = Role> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        Role::ALL.map(|role| PossibleValue::new(role.as_str()).help(role.about())),
    )
    .try_map(|name| name.parse::<Role>())
}

#[derive(clap::Args)]
pub struct CreateArgs {
    /// What the token may do: every role reads; each other permission
    /// belongs to one role.
    #[arg(long, value_parser = role())]
    role: Role,
    /// A name for the token, shown in logs and metrics.
    #[arg(long, default_value = "client")]
    name: String,
    /// Append the entry to this config file (the domain reads it at start).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The domain (archive) the token belongs to: its role then acts only
    /// there (elsewhere it only reads, and of another archive's records
    /// gets what that archive's policy gives others), and all its searches
    /// in the cluster are counted against its rate in one place
    /// (docs/SECURITY.md).
    #[arg(long)]
    domain: Option<String>,
}

pub fn run(command: TokenCommand) -> anyhow::Result<ExitCode> {
    let args = match command {
        TokenCommand::Create(args) => args,
        TokenCommand::List { config } => return list(&config),
        TokenCommand::Revoke { name, config } => return revoke(&name, &config),
    };
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
    if args.domain.is_none() && args.role != Role::Read {
        xarchive::errln!(
            "note: without --domain this token is the own of every domain that lists it: its role acts \
             at each, each limiting its rate on its own, and it reads every archive's records whole; \
             with --domain NAME its role acts only there, and its rate holds across the cluster"
        );
    }
    if let Some(domain) = &args.domain {
        xarchive_node::DomainName::parse(domain)
            .map_err(|e| anyhow::anyhow!("--domain must be a domain's name: {e}"))?;
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
            xarchive::errln!(
                "added token {:?} ({role}) to {}; a running domain takes it on SIGHUP (systemctl reload xarchive@NAME)",
                args.name,
                path.display()
            );
        }
        None => xarchive::errln!("add this to the domain's config file:{entry}"),
    }
    if super::json(false) {
        super::print_json(&serde_json::json!({
            "name": args.name,
            "role": role,
            "domain": args.domain,
            "token": token,
            "entry": entry.trim(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::errln!("the token (shown once; keep it secret):");
    xarchive::outln!("{token}");
    Ok(ExitCode::SUCCESS)
}
