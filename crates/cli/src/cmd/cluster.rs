//! `xarchive cluster`: the cluster as one domain sees it, as a table (like
//! `nodetool status`): who is up and reachable, where each filter stands
//! and how far this domain's copy of it lags.

use std::process::ExitCode;

use super::ServerArgs;

#[derive(clap::Args)]
pub struct ClusterArgs {
    /// Print `/v1/cluster` as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    let view = args.server.client()?.cluster().await?;
    if super::json(args.json) {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "domain {} · {} · {}",
        view.domain,
        view.coordinator,
        if view.connected {
            "membership confirmed"
        } else {
            "MEMBERSHIP NOT CONFIRMED"
        }
    );
    println!(
        "{:<12} {:<4} {:<10} {:>10} {:>10} {:>6} {:>9}  address",
        "name", "up", "reachable", "version", "copy", "lag", "behind ms"
    );
    let text = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    for d in &view.domains {
        let name = if d.is_self {
            format!("{} *", d.name)
        } else {
            d.name.clone()
        };
        println!(
            "{:<12} {:<4} {:<10} {:>10} {:>10} {:>6} {:>9}  {}",
            name,
            if d.up { "yes" } else { "NO" },
            if d.reachable { "yes" } else { "NO" },
            text(d.version),
            text(d.replica_version),
            text(d.lag),
            text(d.behind_ms),
            d.address
        );
        if let Some(error) = &d.last_error {
            println!("{:<12} last error: {error}", "");
        }
    }
    Ok(ExitCode::SUCCESS)
}
