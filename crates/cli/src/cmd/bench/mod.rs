//! `xarchive bench`: measured, not assumed.

mod child;
mod lookup;
mod memory;
mod nation;
mod svg;
mod sync;

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
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
}

pub async fn run(command: BenchCommand) -> anyhow::Result<ExitCode> {
    match command {
        BenchCommand::Lookup(args) => lookup::run(*args).await,
        BenchCommand::Sync(args) => sync::run(args).await,
        BenchCommand::Memory(args) => memory::run(args).await,
        BenchCommand::Nation(args) => nation::run(args).await,
    }
}

/// The value at quantile `q` of sorted `xs`.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let at = ((xs.len() - 1) as f64 * q).round() as usize;
    xs[at.min(xs.len() - 1)]
}
