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
    init_logging(cli.verbose, cli.default_log());
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

fn init_logging(verbose: u8, quiet: &str) {
    let default = match verbose {
        0 => quiet,
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("XARCHIVE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
