//! `xarchive-bench`: the benchmarks, measured, not assumed; a binary of
//! its own so that the `xarchive` binary the package ships carries none of
//! them (nor their dependencies).

mod child;
mod domains;
mod lookup;
mod memory;
mod meter;
mod nation;
mod requests;
mod sheets;
mod svg;
mod sync;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xarchive::{failure, logging};

#[derive(Parser)]
#[command(
    name = "xarchive-bench",
    version,
    about = "Benchmarks of xarchive against the seed paper's figures (Luo et al., 2023, DOI 10.57237/j.cst.2023.04.008)"
)]
struct Cli {
    /// More logging (-v debug, -vv trace); `XARCHIVE_LOG` overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// How logs are written to standard error: text for people (coloured
    /// on a terminal unless `NO_COLOR` is set), or one JSON object a line for
    /// a log collector.
    #[arg(long, value_enum, default_value_t = logging::LogFormat::Text, global = true, env = "XARCHIVE_LOG_FORMAT")]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The seed paper's Table 2: lookup time against concurrent users,
    /// routed by the filters and broadcast, side by side.
    Lookup(Box<lookup::LookupBenchArgs>),
    /// Time from an acknowledged write at one domain until another routes
    /// the ID to it, through a real ZooKeeper.
    Sync(sync::SyncBenchArgs),
    /// The seed paper's Table 3: memory for 100 000 to 1 000 000 IDs, of
    /// each filter kind and of a whole domain process.
    Memory(memory::MemoryBenchArgs),
    /// A nation of archives, first part: the routing state and
    /// step of one domain among N of realistic sizes, for three layouts of
    /// its copies of their filters.
    Nation(nation::NationBenchArgs),
    /// Real domains in groups on one ZooKeeper under steady writes: a
    /// write's acknowledgement, its lag to the far end of the relay tree,
    /// ZooKeeper's packets per write and domain, each domain's CPU.
    Domains(domains::DomainsBenchArgs),
    /// A cross-archive request from the clerk's submission to the issued
    /// certificate, between two domains on loopback.
    Requests(requests::RequestsBenchArgs),
    /// The client's memory while `xarchive import` reads hostile
    /// spreadsheets: a dimension claiming every cell, and workbooks of a
    /// few MB expanding to gigabytes (docs/BENCHMARKS.md §16).
    Sheets(sheets::SheetsBenchArgs),
}

/// The log filter without `-v` or `XARCHIVE_LOG`: a benchmark opens
/// thousands of ZooKeeper sessions, whose client library logs each at
/// info.
const QUIET_LOG: &str = "info,zookeeper_client=warn";

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.verbose, QUIET_LOG, cli.log_format);
    failure::run(run(cli.command))
}

async fn run(command: BenchCommand) -> anyhow::Result<ExitCode> {
    match command {
        BenchCommand::Lookup(args) => lookup::run(*args).await,
        BenchCommand::Sync(args) => sync::run(args).await,
        BenchCommand::Memory(args) => memory::run(args).await,
        BenchCommand::Nation(args) => nation::run(args).await,
        BenchCommand::Domains(args) => domains::run(args).await,
        BenchCommand::Requests(args) => requests::run(args).await,
        BenchCommand::Sheets(args) => sheets::run(args).await,
    }
}

/// The value at quantile `q` of sorted `xs`.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    // A rounded, non-negative index into `xs`, clamped to its last below.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let at = ((xs.len() - 1) as f64 * q).round() as usize;
    xs[at.min(xs.len() - 1)]
}

#[cfg(test)]
mod tests {
    /// As the `xarchive` binary's test of the same name: no subcommand or
    /// flag without a line of help.
    #[test]
    fn every_command_and_flag_says_what_it_is_for() {
        let missing = xarchive::help::missing(&<super::Cli as clap::CommandFactory>::command());
        assert!(missing.is_empty(), "without help: {missing:#?}");
    }
}
