//! The subcommands.

mod backup;
mod client;
mod cluster;
mod export;
mod formula_cells;
mod import;
mod lookup;
mod man;
mod private_file;
mod requests;
mod sample;
mod seal;
mod search;
mod serve;
mod table;
mod token;
mod up;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use xarchive::logging::LogFormat;
use xarchive::output::Output;
use xarchive_node::ApiClient;

#[derive(Parser)]
#[command(
    name = "xarchive",
    version,
    about = "Find archive records across domains, fast"
)]
pub struct Cli {
    /// More logging (-v debug, -vv trace); `XARCHIVE_LOG` overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// How logs are written to standard error: text for people (coloured
    /// on a terminal unless `NO_COLOR` is set), or one JSON object a line for
    /// a log collector.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true, env = "XARCHIVE_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// What a command prints on standard output: text for people, or JSON
    /// for scripts (one document; every command, `--json` where a command
    /// has it means the same).
    #[arg(long, value_enum, default_value_t = Output::Text, global = true, env = "XARCHIVE_OUTPUT")]
    pub output: Output,
    #[command(subcommand)]
    command: Command,
}

/// Whether the command prints JSON (`--output json`, or its own `--json`).
fn json(own_flag: bool) -> bool {
    own_flag || xarchive::output::json()
}

use xarchive::output::print_json;

/// Whether the command line asks for JSON (`--output json` or
/// `XARCHIVE_OUTPUT=json`), read leniently, for telling a command line
/// that clap refused.
pub fn asks_for_json() -> bool {
    <Cli as clap::CommandFactory>::command()
        .ignore_errors(true)
        .try_get_matches()
        .ok()
        .and_then(|m| m.get_one::<Output>("output").copied())
        == Some(Output::Json)
}

/// Where a client command sends its requests.
#[derive(clap::Args, Clone)]
pub struct ServerArgs {
    /// The domain's address: `http://host:port` (or https), `host:port`,
    /// with or without a trailing `/v1`.
    #[arg(long, env = "XARCHIVE_SERVER", default_value = "http://127.0.0.1:7700", value_parser = server_address)]
    server: String,
    /// Seconds to wait for an answer.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// API token (from `xarchive token create`).
    #[arg(long, env = "XARCHIVE_TOKEN", hide_env_values = true, value_parser = token)]
    token: Option<String>,
    /// Trust only this certificate authority (PEM) for HTTPS.
    #[arg(long, env = "XARCHIVE_TLS_CA")]
    tls_ca: Option<std::path::PathBuf>,
}

/// An archive ID as the server takes it (checked here, so that an ID no
/// URL can carry, such as `.`, is refused as bad usage rather than sent).
fn archive_id(text: &str) -> Result<String, String> {
    xarchive_node::ArchiveId::parse(text)
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

/// `--server` as the client will use it, or why it cannot be: an
/// `http://` or `https://` URL with a host (a scheme is added when
/// missing), without spaces, a query or a fragment.
fn server_address(text: &str) -> Result<String, String> {
    if !text.contains("://") && text.contains(":/") {
        return Err(
            "a scheme is written with `://`: give http://host:port or https://host:port".into(),
        );
    }
    let base = base_address(text);
    let url = url::Url::parse(&base).map_err(|e| {
        format!("not an address ({e}): give http://host:port, https://host:port or host:port")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "the scheme {:?} is neither http nor https",
            url.scheme()
        ));
    }
    // A path stays: a domain may be served under one (a reverse proxy's).
    if url.host_str().is_none_or(str::is_empty)
        || base.chars().any(char::is_whitespace)
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(
            "not a domain's base address (no spaces, query or fragment): give http://host:port, https://host:port or host:port"
                .into(),
        );
    }
    Ok(text.to_owned())
}

/// A token as sent: refused when empty (an empty `XARCHIVE_TOKEN=` is a
/// mistake, not "no token").
fn token(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the token is empty: give one, or unset XARCHIVE_TOKEN to send none".into());
    }
    if text.chars().any(|c| c.is_control() || c == ' ') {
        return Err("a token has no spaces or control characters".into());
    }
    Ok(text.to_owned())
}

/// A server address as people write it, as the client takes it: a scheme
/// added when missing (http), a trailing `/` or `/v1` taken off (the
/// client adds the API's paths itself).
fn base_address(server: &str) -> String {
    let server = server.trim();
    let mut base = if server.contains("://") {
        server.to_owned()
    } else {
        format!("http://{server}")
    };
    while base.ends_with('/') || base.ends_with("/v1") {
        base.truncate(base.trim_end_matches('/').trim_end_matches("/v1").len());
    }
    base
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_command_and_flag_says_what_it_is_for() {
        let missing = xarchive::help::missing(&<super::Cli as clap::CommandFactory>::command());
        assert!(missing.is_empty(), "without help: {missing:#?}");
    }

    #[test]
    fn server_addresses_are_taken_as_people_write_them() {
        for (given, base) in [
            ("http://127.0.0.1:7700", "http://127.0.0.1:7700"),
            ("127.0.0.1:7700", "http://127.0.0.1:7700"),
            ("localhost:7700/", "http://localhost:7700"),
            (
                "https://a.example.org:7700/v1",
                "https://a.example.org:7700",
            ),
            ("http://127.0.0.1:18950/v1/", "http://127.0.0.1:18950"),
        ] {
            assert_eq!(super::base_address(given), base, "{given}");
            assert!(super::server_address(given).is_ok(), "{given}");
        }
    }

    #[test]
    fn an_address_the_client_cannot_use_is_refused_before_any_request() {
        for bad in [
            "htp:/bad url",
            "htp:/bad",
            "http:/127.0.0.1:7700",
            "ftp://a.example.org",
            "http://",
            "http://a b:7700",
            "http://127.0.0.1:7700/?x=1",
        ] {
            assert!(super::server_address(bad).is_err(), "{bad}");
        }
        assert!(super::token("").is_err() && super::token("  ").is_err());
        assert_eq!(super::token("xa_1").as_deref(), Ok("xa_1"));
    }
}

impl ServerArgs {
    fn client(&self) -> anyhow::Result<ApiClient> {
        let trust = xarchive_node::security::tls::TlsConfig {
            ca: self.tls_ca.clone(),
            ..Default::default()
        }
        .trust()?;
        Ok(ApiClient::with_options(
            &base_address(&self.server),
            Duration::from_secs(self.timeout),
            self.token.as_deref(),
            trust,
        )?)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Start several domains in this process (sample records on first run).
    Up(up::UpArgs),
    /// Serve one domain (its store, filter and HTTP API).
    Serve(Box<serve::ServeArgs>),
    /// Create or replace a record.
    Put(client::PutArgs),
    /// Print a record held by the domain.
    Get(client::IdArgs),
    /// Find a record in whichever domain holds it.
    Lookup(lookup::LookupArgs),
    /// Find every record with a key (an identity number, say), in every domain.
    Search(search::SearchArgs),
    /// The searches by private key that reached the domain.
    Audit(search::AuditArgs),
    /// Delete a record.
    Rm(client::IdArgs),
    /// Print the domain's figures (records, filter).
    Stats(client::StatsArgs),
    /// Every domain as this one sees it: up, reachable, filter versions, lag.
    Cluster(cluster::ClusterArgs),
    /// Import records from CSV, NDJSON or a spreadsheet (UTF-8, GBK or GB18030).
    Import(import::ImportArgs),
    /// Export records as NDJSON, CSV or a spreadsheet (without private keys).
    Export(export::ExportArgs),
    /// Save an online backup of a running domain to a file (backup role).
    Backup(backup::BackupArgs),
    /// Restore a backup into the empty data directory of a stopped domain.
    Restore(backup::RestoreArgs),
    /// Write sample records (realistic archive numbers) as NDJSON.
    Sample(sample::SampleArgs),
    /// Cross-archive requests (异地查档、跨馆出证) at the receiving
    /// archive: submit, list, show, certify (clerk role).
    #[command(subcommand)]
    Request(requests::RequestCommand),
    /// Requests from other archives waiting for a reviewer here: list,
    /// approve, refuse (reviewer role).
    #[command(subcommand)]
    Review(requests::ReviewCommand),
    /// Check a certificate: online at any archive by its code, or offline
    /// from its PDF or QR payload against a saved trust list.
    #[command(subcommand)]
    Certificate(requests::CertificateCommand),
    /// The keys this domain seals with: list, rotate, revoke (offline).
    #[command(subcommand)]
    Seal(seal::SealCommand),
    /// API tokens.
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Print the completion script for a shell (bash, zsh, fish, …).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff), for `man -l -`: xarchive(1), or a
    /// command's (`man import`); `--dir` writes them all.
    Man(man::ManArgs),
    /// The spreadsheet reader `import` runs as a child of its own, its
    /// memory bounded (not for people).
    #[command(name = import::CHILD_COMMAND, hide = true)]
    SheetRows(import::SheetRowsArgs),
}

/// A command run without the async runtime (its threads and their memory
/// arenas): the spreadsheet reader child, whose memory is bounded.
pub fn without_runtime(cli: &Cli) -> Option<ExitCode> {
    match &cli.command {
        Command::SheetRows(args) => Some(import::sheet_rows_child(args)),
        _ => None,
    }
}

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    xarchive::output::set(cli.output);
    match cli.command {
        Command::Up(args) => up::run(args).await,
        Command::Serve(args) => serve::run(*args).await,
        Command::Lookup(args) => lookup::run(args).await,
        Command::Search(args) => search::run(args).await,
        Command::Audit(args) => search::audit(args).await,
        Command::Put(args) => client::put(args).await,
        Command::Get(args) => client::get(args).await,
        Command::Rm(args) => client::rm(args).await,
        Command::Stats(args) => client::stats(args).await,
        Command::Cluster(args) => cluster::run(args).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            // Into memory first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "xarchive", &mut script);
            std::io::Write::write_all(&mut xarchive::output::stdout(), &script)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(args) => man::run(args),
        Command::Import(args) => import::run(args).await,
        Command::Export(args) => export::run(args).await,
        Command::Sample(args) => sample::run(args).await,
        Command::Backup(args) => backup::backup(args).await,
        Command::Restore(args) => backup::restore(args).await,
        Command::Token(command) => token::run(command),
        Command::Request(command) => requests::request(command).await,
        Command::Review(command) => requests::review(command).await,
        Command::Certificate(command) => requests::certificate(command).await,
        Command::Seal(command) => seal::run(command),
        Command::SheetRows(args) => Ok(import::sheet_rows_child(&args)),
    }
}
