//! `xarchive`: a thin command line over the node library.

mod cmd;
mod failure;

use std::process::ExitCode;

use clap::Parser;

/// Exit code when a record does not exist.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code when a lookup could not reach every domain that might hold
/// the record.
pub const EXIT_UNAVAILABLE: u8 = 4;

fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    init_logging(cli.verbose, cli.default_log(), cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(code) => code,
        Err(e) => failure::report(&e),
    }
}

fn init_logging(verbose: u8, quiet: &str, format: cmd::LogFormat) {
    let default = match verbose {
        0 => quiet,
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("XARCHIVE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    match format {
        cmd::LogFormat::Json => logs.json().init(),
        cmd::LogFormat::Text => logs.with_ansi(colour()).init(),
    }
}

/// Colour only on a terminal, and not when NO_COLOR is set to anything
/// (no-color.org).
fn colour() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
