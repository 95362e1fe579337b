//! `xarchive sample`: sample records with realistic archive numbers, as
//! NDJSON ready for `xarchive import`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use xarchive_node::sample;

#[derive(clap::Args)]
pub struct SampleArgs {
    /// Records to write.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Which domain's numbering to use (each has its own fonds numbers).
    #[arg(long, default_value_t = 0)]
    domain_index: usize,
    /// Output file (standard output if absent).
    #[arg(long)]
    out: Option<PathBuf>,
}

// Async as every command's `run` is, and awaited alike.
#[allow(clippy::unused_async)]
pub async fn run(args: SampleArgs) -> anyhow::Result<ExitCode> {
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(xarchive::output::stdout())),
    };
    for i in 0..args.count {
        out.write_all(sample::ndjson_line(args.domain_index, i).as_bytes())?;
    }
    out.flush()?;
    drop(out);
    // Standard output is the records themselves unless --out took them.
    if let (Some(path), true) = (&args.out, super::json(false)) {
        super::print_json(&serde_json::json!({"written": args.count, "out": path}))?;
    }
    Ok(ExitCode::SUCCESS)
}
