//! `xarchive up`: several domains in one process with the in-process
//! coordinator, sample records on first run, data kept for the next.

use std::path::PathBuf;
use std::process::ExitCode;

use xarchive_node::cluster::{Coordinator, Hub};
use xarchive_node::sample;

use super::local::{domain_name, LocalCluster, Plan};

#[derive(clap::Args)]
pub struct UpArgs {
    /// Domains to start.
    #[arg(long, default_value_t = 3)]
    domains: usize,
    /// Sample records loaded into each new domain.
    #[arg(long, default_value_t = 10_000)]
    records: u64,
    /// Where the domains keep their data.
    #[arg(long, default_value = "xarchive-data")]
    data: PathBuf,
    /// Port of the first domain; the others follow.
    #[arg(long, default_value_t = 7701)]
    port: u16,
}

pub async fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!((1..=64).contains(&args.domains), "--domains must be 1..=64");
    let hub = Hub::new();
    let cluster = LocalCluster::start(Plan {
        domains: args.domains,
        data: args.data.clone(),
        port: args.port,
        records: args.records,
        tune: &|_| {},
        coordinator: &|_| hub.coordinator() as std::sync::Arc<dyn Coordinator>,
    })
    .await?;
    print_welcome(&cluster, &args)?;
    xarchive_node::shutdown::signal().await;
    cluster.stop().await?;
    println!("all domains stopped; data kept in {}", args.data.display());
    Ok(ExitCode::SUCCESS)
}

fn print_welcome(cluster: &LocalCluster, args: &UpArgs) -> anyhow::Result<()> {
    let nodes = &cluster.nodes;
    println!(
        "xarchive: {} domains up, in-process coordinator, plain HTTP on loopback (no TLS: for one machine)",
        nodes.len()
    );
    for node in nodes {
        println!(
            "  {:<3} {}  {:>7} records  data {}",
            node.domain.name(),
            node.cluster.address,
            node.domain.stats()?.records,
            node.config.data.display()
        );
    }
    let first = &nodes[0].cluster.address;
    // An ID of the last domain holding sample records, asked at the first.
    let holder = (0..nodes.len())
        .rev()
        .find(|&i| nodes[i].domain.contains(&sample::id(i, 42)))
        .unwrap_or(0);
    let id = sample::id(holder, 42);
    let encoded = xarchive_node::client::encode_id(&id);
    println!("\nPage: {first}/");
    println!(
        "A lookup at {} of an ID held by {}:",
        domain_name(0),
        domain_name(holder)
    );
    println!("  xarchive lookup '{id}' --server {first}");
    println!("  curl '{first}/v1/lookup/{encoded}'");
    println!("The cluster: curl {first}/v1/cluster");
    if args.records == 0 {
        println!("(no sample records were loaded: --records 0)");
    }
    println!(
        "Ctrl-C stops all domains; the data stays in {} for the next run.",
        args.data.display()
    );
    Ok(())
}
