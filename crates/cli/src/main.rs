//! `xarchive`: a thin command line over the node library.

mod cmd;

use std::process::ExitCode;

use clap::Parser;
use xarchive::{failure, logging};

fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    if let Some(code) = cmd::without_runtime(&cli) {
        return code;
    }
    logging::init(cli.verbose, "info", cli.log_format);
    failure::run(cmd::run(cli))
}
