//! Several domains in this process, each on its own loopback port: what
//! `xarchive up` runs, and what the benchmarks measure.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinHandle;
use xarchive_node::cluster::Coordinator;
use xarchive_node::server::ServeError;
use xarchive_node::shutdown::CancellationToken;
use xarchive_node::DomainName;
use xarchive_node::{sample, ArchiveId, Node, NodeConfig, RecordInput, Write};

/// Domain names: A, B, … Z, then D27, D28, …
pub fn domain_name(i: usize) -> DomainName {
    let name = if i < 26 {
        char::from(b'A' + u8::try_from(i).expect("below 26")).to_string()
    } else {
        format!("D{}", i + 1)
    };
    DomainName::parse(&name).expect("a letter, or D and digits, names a domain")
}

/// What to start.
pub struct Plan<'a> {
    pub domains: usize,
    pub data: PathBuf,
    /// Port of the first domain (the others follow); 0 picks free ports.
    pub port: u16,
    /// Sample records loaded into each domain that is still empty.
    pub records: u64,
    /// Adjusts each domain's configuration.
    pub tune: &'a dyn Fn(&mut NodeConfig),
    /// The coordinator for domain `i`.
    pub coordinator: &'a dyn Fn(usize) -> Arc<dyn Coordinator>,
}

pub struct LocalCluster {
    pub nodes: Vec<Arc<Node>>,
    stop: CancellationToken,
    servers: Vec<JoinHandle<Result<(), ServeError>>>,
}

/// Loads `count` sample records of domain `index` into `node`, in batches.
fn load_samples(node: &Node, index: usize, count: u64, bar: &ProgressBar) -> anyhow::Result<()> {
    let max = node.config().limits.max_content_bytes;
    let mut i = 0;
    while i < count {
        let end = (i + 2_000).min(count);
        let writes = (i..end)
            .map(|n| {
                let input: RecordInput = serde_json::from_value(sample::body(index, n))?;
                Ok(Write::Put(
                    ArchiveId::parse(&sample::id(index, n))?,
                    input.validate(max, node.key_types())?,
                ))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        node.domain().apply(&writes)?;
        bar.inc(end - i);
        i = end;
    }
    Ok(())
}

impl LocalCluster {
    pub async fn start(plan: Plan<'_>) -> anyhow::Result<LocalCluster> {
        let mut listeners = Vec::new();
        for i in 0..plan.domains {
            let port = if plan.port == 0 {
                0
            } else {
                plan.port + u16::try_from(i)?
            };
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .with_context(|| {
                    format!("cannot listen on 127.0.0.1:{port} (is another xarchive running? try --port)")
                })?;
            listeners.push(listener);
        }
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template(
                "loading sample records [{bar:40}] {pos}/{len} {per_sec}",
            )?
            .progress_chars("=> "),
        );
        let mut nodes = Vec::new();
        for (i, listener) in listeners.iter().enumerate() {
            let name = domain_name(i);
            let mut config = NodeConfig {
                name: name.clone(),
                listen: listener.local_addr()?,
                data: plan.data.join(name.as_str()),
                ..NodeConfig::default()
            };
            (plan.tune)(&mut config);
            let scheme = if config.tls.serves_tls() {
                "https"
            } else {
                "http"
            };
            let address = format!("{scheme}://{}", listener.local_addr()?);
            let coordinator = (plan.coordinator)(i);
            let node =
                tokio::task::spawn_blocking(move || Node::open_in(config, coordinator, &address))
                    .await?
                    .with_context(|| format!("cannot open domain {name}"))?;
            if node.domain().stats()?.records == 0 && plan.records > 0 {
                bar.inc_length(plan.records);
                let (n, b, count) = (node.clone(), bar.clone(), plan.records);
                tokio::task::spawn_blocking(move || load_samples(&n, i, count, &b)).await??;
            }
            nodes.push(node);
        }
        bar.finish_and_clear();
        let stop = CancellationToken::new();
        let servers = nodes
            .iter()
            .zip(listeners)
            .map(|(node, listener)| {
                let shutdown = stop.child_token();
                tokio::spawn(xarchive_node::server::serve(
                    node.clone(),
                    listener,
                    async move { shutdown.cancelled().await },
                ))
            })
            .collect();
        Ok(LocalCluster {
            nodes,
            stop,
            servers,
        })
    }

    /// Waits until every domain holds a current copy of every other.
    pub async fn converged(&self, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let mut done = true;
            for node in &self.nodes {
                done &= node.cluster_view().await.converged(self.nodes.len());
            }
            if done {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the domains did not converge within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn addresses(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.address().to_owned()).collect()
    }

    /// Stops every domain cleanly (requests finish, snapshots saved).
    pub async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        for server in self.servers {
            server.await??;
        }
        Ok(())
    }
}
