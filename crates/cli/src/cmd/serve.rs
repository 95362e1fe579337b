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
    /// The file's settings with the flags laid over them.
    pub fn config(&self) -> anyhow::Result<NodeConfig> {
        let mut config = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                NodeConfig::from_toml(&text).with_context(|| format!("in {}", path.display()))?
            }
            None => NodeConfig::default(),
        };
        if let Some(name) = &self.name {
            config.name = name.clone();
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
                tracing::error!(error = %format!("{e:#}"), file = %path.display(), "tokens not reloaded; the old ones stay")
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
