//! `xarchive`: a thin command line over the node library.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cmd;

use std::process::ExitCode;

use clap::Parser;
use xarchive::{failure, logging};

fn main() -> ExitCode {
    let cli = match cmd::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return failure::refused_usage(&e, cmd::asks_for_json()),
    };
    if let Some(code) = cmd::without_runtime(&cli) {
        return code;
    }
    logging::init(cli.verbose, "info", cli.log_format);
    failure::run(cmd::run(cli))
}
