//! `xarchive up`: several domains in one process with the in-process
//! coordinator, sample records on first run, data kept for the next.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use xarchive_node::cluster::{Coordinator, Hub};
use xarchive_node::{sample, NodeConfig};

use xarchive::local::{domain_name, LocalCluster, Plan};

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
    #[arg(long, default_value_t = 7700)]
    port: u16,
    /// Settings every domain shares (as `serve --config`), with any
    /// `XARCHIVE_<SECTION>__<KEY>` in the environment over them; each
    /// domain's name, address and data directory are its own, and they
    /// follow each other through this process, not ZooKeeper.
    #[arg(long, env = "XARCHIVE_CONFIG")]
    config: Option<PathBuf>,
}

pub async fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!((1..=64).contains(&args.domains), "--domains must be 1..=64");
    let shared = super::serve::layered(args.config.as_deref())?;
    let hub = Hub::new();
    let cluster = LocalCluster::start(Plan {
        domains: args.domains,
        data: args.data.clone(),
        port: args.port,
        records: args.records,
        // Each domain's own name, address and data, the shared rest.
        tune: &|config| {
            *config = NodeConfig {
                name: config.name.clone(),
                listen: config.listen,
                data: std::mem::take(&mut config.data),
                ..shared.clone()
            }
        },
        coordinator: &|_| hub.coordinator() as std::sync::Arc<dyn Coordinator>,
    })
    .await?;
    if super::json(false) {
        print_domains(&cluster)?;
    } else {
        print_welcome(&cluster, &args)?;
    }
    xarchive_node::shutdown::signal().await;
    cluster.stop().await?;
    if !super::json(false) {
        // Whoever read the welcome may be gone (a closed pipe is not an error).
        let _ = writeln!(
            xarchive::output::stdout(),
            "all domains stopped; data kept in {}",
            args.data.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// With `--output json`: the domains started, as one document, printed
/// once they serve (nothing more is printed when they stop).
fn print_domains(cluster: &LocalCluster) -> anyhow::Result<()> {
    let mut domains = Vec::new();
    for node in &cluster.nodes {
        domains.push(serde_json::json!({
            "name": node.domain().name(),
            "address": node.address(),
            "records": node.domain().stats()?.records,
            "data": node.config().data,
        }));
    }
    super::print_json(&serde_json::json!({
        "domains": domains,
        "page": format!("{}/", cluster.nodes[0].address()),
    }))
}

fn print_welcome(cluster: &LocalCluster, args: &UpArgs) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let nodes = &cluster.nodes;
    let mut out = String::new();
    let transport = if nodes[0].config().tls.serves_tls() {
        "HTTPS on loopback"
    } else {
        "plain HTTP on loopback (no TLS: for one machine)"
    };
    writeln!(
        out,
        "xarchive: {} domains up, in-process coordinator, {transport}",
        nodes.len()
    )?;
    for node in nodes {
        writeln!(
            out,
            "  {:<3} {}  {:>7} records  data {}",
            node.domain().name(),
            node.address(),
            node.domain().stats()?.records,
            node.config().data.display()
        )?;
    }
    let first = &nodes[0].address();
    // An ID of the last domain holding sample records, asked at the first.
    let holder = (0..nodes.len())
        .rev()
        .find(|&i| nodes[i].domain().contains(&sample::id(i, 42)))
        .unwrap_or(0);
    let id = sample::id(holder, 42);
    let encoded = xarchive_node::cluster::client::encode_id(&id);
    writeln!(out, "\nPage: {first}/")?;
    let (asker, owner) = (domain_name(0), domain_name(holder));
    writeln!(out, "A lookup at {asker} of an ID held by {owner}:")?;
    writeln!(out, "  xarchive lookup '{id}' --server {first}")?;
    writeln!(out, "  curl '{first}/v1/lookup/{encoded}'")?;
    // The sample person with records in the most domains.
    let domains_of = |p: u64| {
        (0..nodes.len())
            .filter(|&d| sample::records_of(p, d, args.records).next().is_some())
            .count()
    };
    let (p, found_in) =
        (0..sample::PEOPLE)
            .map(|p| (p, domains_of(p)))
            .fold(
                (0, 0),
                |best, this| if this.1 > best.1 { this } else { best },
            );
    let person = sample::person_keys(p);
    writeln!(
        out,
        "A search by identity number, finding {}'s records in {found_in} domain(s):",
        person["name_birth"].as_str().unwrap_or_default()
    )?;
    // The identity number on standard input, as README says: never an
    // argument, which every user of the machine sees (`ps`).
    writeln!(out, "  xarchive search --key id_card=- --server {first}")?;
    writeln!(
        out,
        "  and give it the sample identity number on standard input: {}",
        person["id_card"].as_str().unwrap_or_default()
    )?;
    writeln!(out, "The cluster: curl {first}/v1/cluster")?;
    if args.records == 0 {
        writeln!(out, "(no sample records were loaded: --records 0)")?;
    }
    writeln!(
        out,
        "Ctrl-C stops all domains; the data stays in {} for the next run.",
        args.data.display()
    )?;
    // A reader that went away (a closed pipe) is not an error.
    let _ = xarchive::output::stdout().write_all(out.as_bytes());
    Ok(())
}
