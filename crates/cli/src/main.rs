//! `xarchive`: a thin command line over the node library.

mod cmd;

use std::process::ExitCode;

use clap::Parser;
use xarchive::{failure, logging};

fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    logging::init(cli.verbose, "info", cli.log_format);
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
