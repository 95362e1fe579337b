//! `xarchive serve`: one domain from a TOML file, flags and environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use xarchive_node::{FilterKind, Node, NodeConfig};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// A TOML file of settings; flags and XARCHIVE_* variables override it.
    #[arg(long, env = "XARCHIVE_CONFIG")]
    config: Option<PathBuf>,
    /// The domain's name.
    #[arg(long, env = "XARCHIVE_NAME")]
    name: Option<String>,
    /// Address of the HTTP API: `ip:port` or `host:port`.
    #[arg(long, env = "XARCHIVE_LISTEN", value_parser = listen_address)]
    listen: Option<SocketAddr>,
    /// Data directory (the store and the filter snapshot).
    #[arg(long, env = "XARCHIVE_DATA")]
    data: Option<PathBuf>,
    /// Filter kind: counting (a counting Bloom filter) or cuckoo.
    #[arg(long, env = "XARCHIVE_FILTER_KIND")]
    filter_kind: Option<FilterKind>,
    /// Records the filter is sized for.
    #[arg(long, env = "XARCHIVE_EXPECTED_ITEMS")]
    expected_items: Option<u64>,
    /// Target false-positive rate.
    #[arg(long, env = "XARCHIVE_FPR")]
    fpr: Option<f64>,
    /// Largest record content, in bytes.
    #[arg(long, env = "XARCHIVE_MAX_CONTENT_BYTES")]
    max_content_bytes: Option<usize>,
    /// Bytes a write must leave free on the data directory's disk (else 507).
    #[arg(long, env = "XARCHIVE_MIN_FREE_BYTES")]
    min_free_bytes: Option<u64>,
    /// Join a ZooKeeper-coordinated cluster: host:port[,host:port…][/chroot].
    #[arg(long, env = "XARCHIVE_ZK")]
    zk: Option<String>,
    /// The cluster's name (its ZooKeeper folder is /xarchive/<name>).
    #[arg(long = "cluster", env = "XARCHIVE_CLUSTER")]
    cluster_name: Option<String>,
    /// The URL other domains use to reach this one (default http://<listen>).
    #[arg(long, env = "XARCHIVE_ADVERTISE")]
    advertise: Option<String>,
    /// ZooKeeper session timeout, in milliseconds.
    #[arg(long, env = "XARCHIVE_SESSION_TIMEOUT_MS")]
    session_timeout_ms: Option<u64>,
    /// Cache for other domains' records: memory, none, or redis://host:port/db.
    #[arg(long, env = "XARCHIVE_CACHE")]
    cache: Option<String>,
    /// The file holding the secret shared by the cluster's members.
    #[arg(long, env = "XARCHIVE_CLUSTER_SECRET_FILE")]
    cluster_secret_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM)…
    #[arg(long, env = "XARCHIVE_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// …and this private key (PEM).
    #[arg(long, env = "XARCHIVE_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Trust only this certificate authority (PEM) for calls to peers.
    #[arg(long, env = "XARCHIVE_TLS_CA")]
    tls_ca: Option<PathBuf>,
}

/// The defaults, then the file (if any), then every setting named in the
/// environment as `XARCHIVE_<SECTION>__<KEY>` (`XARCHIVE_LIMITS__MIN_FREE_BYTES`,
/// `XARCHIVE_CLUSTER__RELAY_FANOUT`): every key of the file can be set
/// without it. An error names where the bad value came from (the file and
/// key, or the variable).
pub fn layered(file: Option<&std::path::Path>) -> anyhow::Result<NodeConfig> {
    use figment::providers::{Env, Format, Serialized, Toml};
    let mut figment = figment::Figment::from(Serialized::defaults(NodeConfig::default()));
    if let Some(path) = file {
        anyhow::ensure!(
            path.is_file(),
            "cannot read {}: no such file",
            path.display()
        );
        figment = figment.merge(Toml::file_exact(path));
    }
    figment = figment.merge(
        Env::prefixed("XARCHIVE_")
            .filter(|key| key.as_str().contains("__"))
            .split("__"),
    );
    let config: NodeConfig = figment.extract().map_err(|e| {
        anyhow::anyhow!(
            "invalid configuration: {}",
            e.into_iter()
                .map(|e| {
                    let from_env = e
                        .metadata
                        .as_ref()
                        .is_some_and(|m| m.name.contains("environment"));
                    if from_env {
                        let var = e.path.join("__").to_uppercase();
                        format!("{} in XARCHIVE_{var}", e.kind)
                    } else {
                        e.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("; ")
        )
    })?;
    config.check().context("invalid configuration")?;
    Ok(config)
}

/// A listening address as people write it: an IP or a host name (the
/// first address it resolves to), with a port.
fn listen_address(text: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    text.to_socket_addrs()
        .map_err(|e| format!("{e} (expected ip:port or host:port, such as 127.0.0.1:7700)"))?
        .next()
        .ok_or_else(|| format!("{text} resolves to no address"))
}

impl ServeArgs {
    /// The settings in layers: the defaults, the file, the environment
    /// (see [`layered`]), then the flags (and their own `XARCHIVE_*`).
    pub fn config(&self) -> anyhow::Result<NodeConfig> {
        let mut config = layered(self.config.as_deref())?;
        if let Some(name) = &self.name {
            config.name = xarchive_node::DomainName::parse(name)?;
            if self.data.is_none() && self.config.is_none() {
                config.data = PathBuf::from("xarchive-data").join(name);
            }
        }
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(data) = &self.data {
            config.data = data.clone();
        }
        if let Some(kind) = self.filter_kind {
            config.filter.kind = kind;
        }
        if let Some(n) = self.expected_items {
            config.filter.expected_items = n;
        }
        if let Some(p) = self.fpr {
            config.filter.fpr = p;
        }
        if let Some(n) = self.max_content_bytes {
            config.limits.max_content_bytes = n;
        }
        if let Some(n) = self.min_free_bytes {
            config.limits.min_free_bytes = n;
        }
        if let Some(zk) = &self.zk {
            config.cluster.zk = Some(zk.clone());
        }
        if let Some(name) = &self.cluster_name {
            config.cluster.name = name.clone();
        }
        if let Some(url) = &self.advertise {
            config.cluster.advertise = Some(url.clone());
        }
        if let Some(ms) = self.session_timeout_ms {
            config.cluster.session_timeout_ms = ms;
        }
        if let Some(url) = &self.cache {
            config.cache.url = url.clone();
        }
        if let Some(path) = &self.cluster_secret_file {
            config.auth.cluster_secret_file = Some(path.clone());
        }
        if let Some(path) = &self.tls_cert {
            config.tls.cert = Some(path.clone());
        }
        if let Some(path) = &self.tls_key {
            config.tls.key = Some(path.clone());
        }
        if let Some(path) = &self.tls_ca {
            config.tls.ca = Some(path.clone());
        }
        config.check()?;
        Ok(config)
    }
}

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    // Everything this process creates (the store, the audit log, filter
    // snapshots, peers.json, the directories) holds or points to personal
    // data: its owner's only (files 0600, directories 0700), however the
    // process was started (stricter than the packaged unit's UMask=0027).
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let config = args.config()?;
    let listen = config.listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let local = listener.local_addr()?;
    let scheme = if config.tls.serves_tls() {
        "https"
    } else {
        "http"
    };
    let address = config
        .cluster
        .advertise
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{local}"));
    let coordinator = Node::coordinator_for(&config)?;
    let (name, data) = (config.name.clone(), config.data.clone());
    let node = tokio::task::spawn_blocking(move || Node::open_in(config, coordinator, &address))
        .await?
        .with_context(|| format!("cannot open domain {name} in {}", data.display()))?;
    let stats = node.domain().stats()?;
    tracing::info!(
        domain = %node.config().name,
        records = stats.records,
        filter = node.config().filter.kind.as_str(),
        coordinator = %node.cluster().coordinator().describe(),
        advertise = %node.address(),
        tls = node.config().tls.serves_tls(),
        auth = node.auth().enabled(),
        "listening on {scheme}://{local}"
    );
    warn_if_others_may_read(&node.config().data);
    if !node.auth().enabled() && !local.ip().is_loopback() {
        tracing::warn!(
            "no API tokens or cluster secret configured: anyone who can reach {local} can read, write and delete"
        );
    }
    tokio::spawn(tell_systemd_when_ready(node.clone()));
    if let Some(path) = args.config.clone() {
        tokio::spawn(reload_tokens_on_sighup(node.clone(), path));
    }
    xarchive_node::server::serve(node, listener, xarchive_node::shutdown::signal()).await?;
    tracing::info!("stopped cleanly");
    Ok(ExitCode::SUCCESS)
}

/// On SIGHUP (`systemctl reload`), reads the configuration file again and
/// takes its `[[auth.tokens]]` from then on: a token created or revoked
/// needs no restart. Nothing else is reloaded; a file that cannot be read
/// or parsed leaves the tokens as they were, and says why.
async fn reload_tokens_on_sighup(node: std::sync::Arc<Node>, path: PathBuf) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: tokens are read at start only");
        return;
    };
    while hangups.recv().await.is_some() {
        let reloaded = std::fs::read_to_string(&path)
            .map_err(anyhow::Error::from)
            .and_then(|text| Ok(NodeConfig::from_toml(&text)?))
            .and_then(|config| Ok(node.auth().reload_tokens(&config.auth.tokens)?));
        match reloaded {
            Ok(count) => tracing::info!(tokens = count, file = %path.display(), "tokens reloaded"),
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), file = %path.display(), "tokens not reloaded; the old ones stay");
            }
        }
    }
}

/// Tells systemd (a `Type=notify` unit) that the domain is ready once it
/// has read its cluster's membership: from then on it answers every lookup,
/// "not found" included (as `/readyz` says). Nothing without systemd.
async fn tell_systemd_when_ready(node: std::sync::Arc<Node>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let mut view = node.cluster().coordinator().view();
    if view.wait_for(|v| v.connected).await.is_ok() {
        if let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
            tracing::warn!(error = %e, "cannot tell systemd the domain is ready");
        }
    }
}

/// Warns when the data directory, made before and left as it was, lets
/// users other than its owner and group in (the packaged unit's is 0750,
/// its group the service's own).
fn warn_if_others_may_read(data: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(data) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o007 != 0 {
            tracing::warn!(
                data = %data.display(),
                "the data directory holds personal data but its mode is {mode:o}: `chmod 700` it"
            );
        }
    }
}

#[cfg(test)]
// figment's Jail takes closures returning its own (large) error type.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;
    use toml::Value;

    /// A value of the same type as `default`, but another.
    fn other(default: &Value) -> Option<String> {
        Some(match default {
            Value::Integer(i) => (i + 1).to_string(),
            Value::Float(f) => (f / 2.0).to_string(),
            Value::Boolean(b) => (!b).to_string(),
            Value::String(s) if s == "counting" => "cuckoo".into(),
            Value::String(s) if s == "memory" => "none".into(),
            Value::String(s) if s == "summary" => "full".into(),
            Value::String(s) if s == "sm2-sm3" => "ed25519".into(),
            Value::String(s) if s == "auto" => "both".into(),
            // One character (the archive numbers' separator).
            Value::String(s) if s.chars().count() == 1 => "-".into(),
            Value::String(s) => format!("x{s}"),
            _ => return None,
        })
    }

    #[test]
    fn every_setting_of_the_file_can_be_set_from_the_environment() {
        let defaults = toml::Table::try_from(NodeConfig::default()).unwrap();
        let mut tried = 0;
        for (section, values) in &defaults {
            let Value::Table(values) = values else {
                continue;
            };
            for (key, default) in values {
                let Some(value) = other(default) else {
                    continue;
                };
                let var = format!(
                    "XARCHIVE_{}__{}",
                    section.to_uppercase(),
                    key.to_uppercase()
                );
                figment::Jail::expect_with(|jail| {
                    jail.set_env(&var, &value);
                    let config = layered(None).map_err(|e| format!("{var}={value}: {e:#}"))?;
                    let read = toml::Table::try_from(config).unwrap();
                    assert_ne!(&read[section][key], default, "{var}={value} was not taken");
                    Ok(())
                });
                tried += 1;
            }
        }
        assert!(tried >= 30, "only {tried} settings tried");
    }

    #[test]
    fn a_province_code_or_a_cluster_name_of_digits_is_taken_from_the_environment_as_written() {
        for (group, read) in [
            ("44", "44"),
            ("01", "01"),
            ("7", "07"),
            ("east-1", "east-1"),
        ] {
            figment::Jail::expect_with(|jail| {
                jail.set_env("XARCHIVE_CLUSTER__GROUP", group);
                jail.set_env("XARCHIVE_CLUSTER__NAME", "2026");
                let config = layered(None).map_err(|e| format!("{group}: {e:#}"))?;
                assert_eq!(config.cluster.group, read);
                assert_eq!(config.cluster.name, "2026");
                Ok(())
            });
        }
    }

    #[test]
    fn a_bad_value_names_where_it_came_from() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("domain.toml", "[limits]\nmax_bulk_lines = \"many\"\n")?;
            let from_file = layered(Some(std::path::Path::new("domain.toml"))).unwrap_err();
            assert!(
                format!("{from_file:#}").contains("domain.toml"),
                "{from_file:#}"
            );
            jail.set_env("XARCHIVE_FILTER__FPR", "often");
            let from_env = layered(None).unwrap_err();
            assert!(
                format!("{from_env:#}").contains("XARCHIVE_FILTER__FPR"),
                "{from_env:#}"
            );
            Ok(())
        });
    }
}
