//! `xarchive cluster`: the cluster as one domain sees it, as a table (like
//! `nodetool status`): who is up and reachable, where each filter stands
//! and how far this domain's copy of it lags; and `xarchive cluster forget`,
//! which retires a domain for good.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use xarchive_node::Node;

use super::table::{self, row};
use super::ServerArgs;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ClusterArgs {
    /// Print `/v1/cluster` as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Retire a domain for good: lookups and searches stop asking it, so
    /// a dead archive no longer turns a "not found" into a 503. Refused
    /// while it is registered; it takes part again if it ever registers.
    Forget(ForgetArgs),
}

#[derive(clap::Args)]
struct ForgetArgs {
    /// The domain to retire.
    name: String,
    /// A domain's TOML settings of this cluster (for ZooKeeper, the
    /// cluster's name and secret); XARCHIVE_* variables override it.
    #[arg(long, env = "XARCHIVE_CONFIG")]
    config: Option<PathBuf>,
    /// ZooKeeper: host:port[,host:port…][/chroot].
    #[arg(long, env = "XARCHIVE_ZK")]
    zk: Option<String>,
    /// The cluster's name.
    #[arg(long = "cluster", env = "XARCHIVE_CLUSTER")]
    cluster_name: Option<String>,
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    if let Some(Action::Forget(forget)) = args.action {
        return run_forget(forget).await;
    }
    let view = args.server.client()?.cluster().await?;
    if super::json(args.json) {
        super::print_json(&view)?;
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!(
        "domain {} · {} · {}",
        view.domain,
        view.coordinator,
        if view.connected {
            "membership confirmed"
        } else {
            "MEMBERSHIP NOT CONFIRMED"
        }
    );
    let text = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let mut rows = vec![row([
        "name",
        "up",
        "reachable",
        "answer ms",
        "version",
        "copy",
        "lag",
        "behind ms",
        "address",
    ])];
    let mut notes = Vec::new();
    for d in &view.domains {
        let name = if d.is_self {
            format!("{} *", d.name)
        } else {
            d.name.clone()
        };
        rows.push(vec![
            name,
            (if d.up { "yes" } else { "NO" }).to_owned(),
            (if d.reachable { "yes" } else { "NO" }).to_owned(),
            text(d.probe_ms),
            text(d.version),
            text(d.replica_version),
            text(d.lag),
            text(d.behind_ms),
            d.address.clone(),
        ]);
        if let Some(error) = &d.probe_error {
            notes.push(format!("{}: not reachable now: {error}", d.name));
        }
        if let Some(error) = &d.last_error {
            notes.push(format!("{}: last sync error: {error}", d.name));
        }
    }
    for line in table::lines(&rows, &[3, 4, 5, 6, 7], "") {
        xarchive::outln!("{line}");
    }
    for note in notes {
        xarchive::outln!("{note}");
    }
    xarchive::outln!(
        "reachable: answered a request made during this call (within {} ms)",
        view.probe_timeout_ms
    );
    Ok(ExitCode::SUCCESS)
}

/// Retires a domain through ZooKeeper, with a domain's settings of the
/// cluster: whoever holds the cluster's secret administers it.
async fn run_forget(args: ForgetArgs) -> anyhow::Result<ExitCode> {
    let mut config = super::serve::layered(args.config.as_deref())?;
    if let Some(zk) = args.zk {
        config.cluster.zk = Some(zk);
    }
    if let Some(name) = args.cluster_name {
        config.cluster.name = name;
    }
    anyhow::ensure!(
        config.cluster.zk.is_some(),
        "forgetting a domain needs the cluster's ZooKeeper (--zk, or cluster.zk in --config): \
         the domains of `xarchive up` share one process and forget nothing"
    );
    let coordinator = Node::coordinator_for(&config)?;
    coordinator
        .forget(&args.name)
        .await
        .with_context(|| format!("cannot forget domain {}", args.name))?;
    if super::json(false) {
        super::print_json(&serde_json::json!({"forgotten": args.name}))?;
    } else {
        xarchive::outln!(
            "domain {} is retired: lookups and searches no longer ask it",
            args.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
