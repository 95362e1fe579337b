//! `xarchive up`: several domains in one process with the in-process
//! coordinator, sample records on first run, data kept for the next.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use xarchive_node::cluster::Hub;
use xarchive_node::record::RecordInput;
use xarchive_node::shutdown::Trigger;
use xarchive_node::store::Write;
use xarchive_node::{sample, ArchiveId, Node, NodeConfig};

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

/// Domain names: A, B, … Z, then D27, D28, …
pub fn domain_name(i: usize) -> String {
    if i < 26 {
        char::from(b'A' + i as u8).to_string()
    } else {
        format!("D{}", i + 1)
    }
}

/// Loads `count` sample records into an empty domain, in batches.
pub fn load_samples(
    node: &Node,
    index: usize,
    count: u64,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let max = node.config.limits.max_content_bytes;
    let mut i = 0;
    while i < count {
        let end = (i + 2_000).min(count);
        let writes = (i..end)
            .map(|n| {
                let input: RecordInput = serde_json::from_value(sample::body(index, n))?;
                Ok(Write::Put(
                    ArchiveId::parse(&sample::id(index, n))?,
                    input.validate(max)?,
                ))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        node.domain.apply(&writes)?;
        bar.inc(end - i);
        i = end;
    }
    Ok(())
}

pub async fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!((1..=64).contains(&args.domains), "--domains must be 1..=64");
    let hub = Hub::new();
    let mut listeners = Vec::new();
    for i in 0..args.domains {
        let port = args.port + i as u16;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on 127.0.0.1:{port} (is another xarchive running? try --port)"
                )
            })?;
        listeners.push(listener);
    }
    let mut nodes = Vec::new();
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("loading sample records [{bar:40}] {pos}/{len} {per_sec}")?
            .progress_chars("=> "),
    );
    for (i, listener) in listeners.iter().enumerate() {
        let name = domain_name(i);
        let config = NodeConfig {
            name: name.clone(),
            listen: listener.local_addr()?,
            data: args.data.join(&name),
            ..NodeConfig::default()
        };
        let address = format!("http://{}", listener.local_addr()?);
        let coordinator = hub.coordinator();
        let node =
            tokio::task::spawn_blocking(move || Node::open_in(config, coordinator, &address))
                .await?
                .with_context(|| format!("cannot open domain {name}"))?;
        if node.domain.stats()?.records == 0 && args.records > 0 {
            bar.inc_length(args.records);
            let (n, b, count) = (node.clone(), bar.clone(), args.records);
            tokio::task::spawn_blocking(move || load_samples(&n, i, count, &b)).await??;
        }
        nodes.push(node);
    }
    bar.finish_and_clear();

    let stop = Trigger::new();
    let mut servers = Vec::new();
    for (node, listener) in nodes.iter().zip(listeners) {
        let mut shutdown = stop.subscribe();
        servers.push(tokio::spawn(xarchive_node::server::serve(
            node.clone(),
            listener,
            async move { shutdown.recv().await },
        )));
    }
    print_welcome(&nodes, &args)?;
    xarchive_node::shutdown::signal().await;
    stop.fire();
    for server in servers {
        server.await??;
    }
    println!("all domains stopped; data kept in {}", args.data.display());
    Ok(ExitCode::SUCCESS)
}

fn print_welcome(nodes: &[Arc<Node>], args: &UpArgs) -> anyhow::Result<()> {
    println!(
        "xarchive: {} domains up, in-process coordinator, plain HTTP on loopback (no TLS: for one machine)",
        nodes.len()
    );
    for node in nodes {
        let stats = node.domain.stats()?;
        println!(
            "  {:<3} {}  {:>7} records  data {}",
            node.domain.name(),
            node.cluster.address,
            stats.records,
            node.config.data.display()
        );
    }
    let first = &nodes[0].cluster.address;
    let last = nodes.len() - 1;
    let (id, holder) = match node_with_records(nodes) {
        Some(i) if nodes.len() > 1 => (
            sample::id(i.max(1).min(last), 42),
            domain_name(i.max(1).min(last)),
        ),
        _ => (sample::id(0, 42), domain_name(0)),
    };
    let encoded = xarchive_node::client::encode_id(&id);
    println!(
        "\nA lookup at {} of an ID held by {holder}:",
        domain_name(0)
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

/// The last domain that holds sample records (for the example command).
fn node_with_records(nodes: &[Arc<Node>]) -> Option<usize> {
    (0..nodes.len())
        .rev()
        .find(|&i| nodes[i].domain.stats().is_ok_and(|s| s.records > 42))
}
