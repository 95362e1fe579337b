//! The system under test as real processes: one ZooKeeper and the domains
//! as `xarchive serve`, each on a loopback port picked once, so that a
//! domain restarted after a crash listens (and registers in ZooKeeper)
//! where clients and peers already look for it. With a [`Network`], each
//! process runs in a network namespace of its own instead (phase 2).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use xarchive_node::wire::ClusterView;
use xarchive_testkit::{free_port, DomainProcess, Spawn, Tmpfs, ZooKeeperServer};

use crate::ensemble::{serves, Ensemble, MemberSpec};
use crate::http;
use crate::netns::{Network, NsZooKeeper};
use crate::Error;

/// The domains' names: `A`, `B`, … in one group; in several, the group
/// (a province's two-digit code, from 11) and a number, `11-01`, `12-01`,
/// `11-02`, …, the groups taking turns so that each holds about as many
/// and the relay tree, laid out in name order, runs through both. A
/// domain's group is its name's first two characters ([`group_of`]).
pub fn domain_names(domains: usize, groups: usize) -> Vec<String> {
    if groups <= 1 && domains <= 26 {
        return (b'A'..)
            .take(domains)
            .map(|c| char::from(c).to_string())
            .collect();
    }
    let groups = groups.max(1);
    (0..domains)
        .map(|i| format!("{}-{:02}", 11 + i % groups, 1 + i / groups))
        .collect()
}

/// The group of a domain named by [`domain_names`] in several groups.
pub fn group_of(name: &str) -> Option<&str> {
    let (group, _) = name.split_once('-')?;
    (group.len() == 2 && group.bytes().all(|b| b.is_ascii_digit())).then_some(group)
}

/// How the domains are started.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The `xarchive` binary.
    pub bin: PathBuf,
    /// Where each domain's data dir (`<dir>/<name>`) and log
    /// (`<dir>/<name>.log`) go.
    pub dir: PathBuf,
    pub names: Vec<String>,
    /// The cluster's name in ZooKeeper.
    pub cluster: String,
    pub session_timeout_ms: u64,
    pub expected_items: u64,
    /// A three-server ZooKeeper ensemble instead of one server.
    pub ensemble: bool,
    /// The in-process cache with this `cache.max_lag_ms`; none: the
    /// domains run with `XARCHIVE_CACHE=none`.
    pub cache_max_lag_ms: Option<u64>,
    /// The size of each domain's data directory, a file system of its own
    /// (a tmpfs: the disk-full fault fills it).
    pub disk_bytes: u64,
}

/// What a domain's data directory holds at most in a fault run: far more
/// than its records take, so that only the disk-full fault fills it.
pub const DISK_BYTES: u64 = 512 << 20;

/// The ZooKeeper service: the testkit's server on loopback, one in a
/// network namespace, or a three-server ensemble (either way).
pub enum Coordinator {
    Loopback(ZooKeeperServer),
    Namespaced(NsZooKeeper),
    Ensemble(Ensemble),
}

impl Coordinator {
    pub fn connect_string(&self) -> String {
        match self {
            Coordinator::Loopback(zk) => zk.connect_string(),
            Coordinator::Namespaced(zk) => zk.connect_string(),
            Coordinator::Ensemble(zk) => zk.connect_string(),
        }
    }

    /// SIGKILL (of every server of an ensemble).
    pub fn kill(&mut self) {
        match self {
            Coordinator::Loopback(zk) => zk.kill(),
            Coordinator::Namespaced(zk) => zk.kill(),
            Coordinator::Ensemble(zk) => zk.kill_all(),
        }
    }

    /// Whether every server serves clients now (`srvr`: leader, follower
    /// or standalone).
    pub fn serving(&self) -> bool {
        match self {
            Coordinator::Loopback(zk) => serves(Ipv4Addr::LOCALHOST, zk.port()),
            Coordinator::Namespaced(zk) => zk.serving(),
            Coordinator::Ensemble(zk) => zk.serving(),
        }
    }

    /// The ensemble, if it is one.
    pub fn ensemble(&mut self) -> Option<&mut Ensemble> {
        match self {
            Coordinator::Ensemble(zk) => Some(zk),
            _ => None,
        }
    }

    /// Started again on its data, on the same address.
    pub fn start_again(&mut self) -> Result<(), Error> {
        match self {
            Coordinator::Loopback(zk) => {
                zk.start_again();
                Ok(())
            }
            Coordinator::Namespaced(zk) => zk.start_again(),
            Coordinator::Ensemble(zk) => zk.restart_all(),
        }
    }

    /// Started again empty, on the same address.
    pub fn restart_fresh(&mut self) -> Result<(), Error> {
        match self {
            Coordinator::Loopback(zk) => {
                zk.restart_fresh();
                Ok(())
            }
            Coordinator::Namespaced(zk) => zk.restart_fresh(),
            Coordinator::Ensemble(zk) => zk.restart_fresh(),
        }
    }
}

/// ZooKeeper and the domains, all killed when dropped (and then the
/// network, if any, removed: fields drop in order).
pub struct Cluster {
    pub zk: Coordinator,
    pub domains: Vec<DomainProcess>,
    /// Each domain's data directory (unmounted after the domains stop).
    pub disks: Vec<Tmpfs>,
    pub names: Vec<String>,
    /// `http://ADDRESS:PORT` of each domain, fixed for the run.
    pub urls: Vec<String>,
    /// The labels of the ZooKeeper servers' network nodes (`zk`, or
    /// `zk1`..`zk3` for an ensemble).
    pub zk_labels: Vec<String>,
    /// The namespaces, when the run has them. Last: dropped last.
    pub network: Option<Network>,
}

/// The label of ZooKeeper's node in a [`Network`].
pub const ZK_NODE: &str = "zk";

impl Cluster {
    /// Starts ZooKeeper, then each domain on a port of its own. Panics
    /// (with the process's log) if a process cannot start, as the testkit
    /// does.
    pub fn start(config: &ClusterConfig) -> Result<Cluster, Error> {
        let (zk, zk_labels) = if config.ensemble {
            let ensemble = Ensemble::start(MemberSpec::loopback(), &config.dir.join("zookeeper"))?;
            let labels = ensemble.labels();
            (Coordinator::Ensemble(ensemble), labels)
        } else {
            (
                Coordinator::Loopback(ZooKeeperServer::start()),
                vec![ZK_NODE.to_owned()],
            )
        };
        let disks = disks(config)?;
        let mut domains = Vec::new();
        let mut urls = Vec::new();
        for name in &config.names {
            let port = free_port();
            let listen = format!("127.0.0.1:{port}");
            let domain =
                domain_spawn(config, &config.bin, &zk.connect_string(), name, &listen)?.start();
            urls.push(format!("http://{listen}"));
            domains.push(domain);
        }
        Ok(Cluster {
            zk,
            domains,
            disks,
            names: config.names.clone(),
            urls,
            zk_labels,
            network: None,
        })
    }

    /// Like [`start`](Self::start), with ZooKeeper and each domain in a
    /// network namespace of its own on a bridge this creates (root only).
    pub fn start_namespaced(config: &ClusterConfig) -> Result<Cluster, Error> {
        let zk_labels: Vec<String> = if config.ensemble {
            (1..=3).map(|n| format!("{ZK_NODE}{n}")).collect()
        } else {
            vec![ZK_NODE.to_owned()]
        };
        let mut labels: Vec<&str> = zk_labels.iter().map(String::as_str).collect();
        labels.extend(config.names.iter().map(String::as_str));
        let network = Network::create(&labels)?;
        let zk_node = |label: &str| {
            network.node(label).ok_or_else(|| Error::Net {
                command: "create".into(),
                message: format!("no ZooKeeper node {label}"),
            })
        };
        let zk_dir = config.dir.join("zookeeper");
        let zk = if config.ensemble {
            let specs = zk_labels
                .iter()
                .map(|label| {
                    zk_node(label).map(|node| MemberSpec {
                        label: label.clone(),
                        netns: Some(node.netns.clone()),
                        host: node.addr,
                        client_port: 2181,
                        quorum_port: 2888,
                        election_port: 3888,
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            Coordinator::Ensemble(Ensemble::start(specs, &zk_dir)?)
        } else {
            Coordinator::Namespaced(NsZooKeeper::start(zk_node(ZK_NODE)?, &zk_dir)?)
        };
        let disks = disks(config)?;
        let mut domains = Vec::new();
        let mut urls = Vec::new();
        for name in &config.names {
            let node = network.node(name).ok_or_else(|| Error::Net {
                command: "create".into(),
                message: format!("no node for {name}"),
            })?;
            let listen = format!("{}:7700", node.addr);
            let wrapper = network.wrapper(name, &config.bin, &config.dir)?;
            let domain =
                domain_spawn(config, &wrapper, &zk.connect_string(), name, &listen)?.start();
            urls.push(format!("http://{listen}"));
            domains.push(domain);
        }
        Ok(Cluster {
            zk,
            domains,
            disks,
            names: config.names.clone(),
            urls,
            zk_labels,
            network: Some(network),
        })
    }

    /// The index of the domain called `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Whether ZooKeeper serves and every domain answers `/healthz`: the
    /// system whole again, from where convergence is timed. `Err` says
    /// what is not there yet.
    pub fn whole_now(&self, client: &Client) -> Result<(), String> {
        if !self.zk.serving() {
            return Err("ZooKeeper is not serving".to_owned());
        }
        for url in &self.urls {
            let alive = client
                .get(format!("{url}/healthz"))
                .send()
                .is_ok_and(|r| r.status().is_success());
            if !alive {
                return Err(format!("{url}: /healthz does not answer"));
            }
        }
        Ok(())
    }

    /// Where domain `i` logs (over all its starts).
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.domains[i].spawn.data.with_extension("log")
    }
}

fn domain_spawn(
    config: &ClusterConfig,
    bin: &Path,
    zk: &str,
    name: &str,
    listen: &str,
) -> Result<Spawn, Error> {
    let spawn = Spawn::new(bin, name, &data_dir(&config.dir, name))
        .listen(listen)
        .args(["--zk", zk, "--cluster", &config.cluster])
        .args([
            "--session-timeout-ms",
            &config.session_timeout_ms.to_string(),
        ])
        .args(["--expected-items", &config.expected_items.to_string()]);
    let spawn = match group_of(name) {
        Some(group) => spawn.env("XARCHIVE_CLUSTER__GROUP", group),
        None => spawn,
    };
    Ok(match config.cache_max_lag_ms {
        None => spawn.env("XARCHIVE_CACHE", "none"),
        Some(max_lag_ms) => {
            // XARCHIVE_CACHE unset: the cache is the config file's, the
            // in-process one, with the bound the checker allows for.
            let path = config.dir.join(format!("{name}.toml"));
            let text = format!(
                "# written by xarchive-faults\n[cache]\nurl = \"memory\"\nmax_lag_ms = {max_lag_ms}\n"
            );
            std::fs::create_dir_all(&config.dir)
                .and_then(|()| std::fs::write(&path, text))
                .map_err(|source| Error::RunDir {
                    path: path.clone(),
                    source,
                })?;
            spawn.arg("--config").arg(path.display().to_string())
        }
    })
}

fn data_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// A file system of its own for each domain's data directory.
fn disks(config: &ClusterConfig) -> Result<Vec<Tmpfs>, Error> {
    config
        .names
        .iter()
        .map(|name| {
            let path = data_dir(&config.dir, name);
            Tmpfs::mount_at(&path, config.disk_bytes).map_err(Error::Disk)
        })
        .collect()
}

/// Waits until every domain has shown, since this call began, each other
/// domain up with its copies (filter and key filter) current, while
/// connected and seeing all `urls.len()` domains (`Ok` with when), or
/// until `patience` runs out (`Err` with what is still missing).
///
/// A copy current at a moment after the call began holds everything its
/// domain published before: so this is "every write made before the wait
/// reached every domain". Each copy may be current at its own moment:
/// under writes that never stop, a dozen domains are seldom all current
/// at the same instant, and asking that would wait for a lull, not for
/// the cluster to keep up.
pub fn wait_converged(
    client: &Client,
    urls: &[String],
    patience: Duration,
) -> Result<Instant, String> {
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    let pairs = urls.len() * urls.len().saturating_sub(1);
    poll(patience, || {
        let mut waiting = Vec::new();
        for url in urls {
            let state: ClusterView =
                http::get_typed(client, url, "/v1/cluster").map_err(|e| format!("{url}: {e}"))?;
            if !state.connected || state.domains.len() != urls.len() {
                let text = serde_json::to_string(&state).unwrap_or_else(|e| e.to_string());
                return Err(format!("{url}: not connected to all: {text}"));
            }
            for peer in state.domains.iter().filter(|d| !d.is_self) {
                let pair = (state.domain.clone(), peer.name.clone());
                if peer.up && peer.current == Some(true) && peer.keys_current == Some(true) {
                    seen.insert(pair);
                } else if !seen.contains(&pair) {
                    let text = serde_json::to_string(peer).unwrap_or_else(|e| e.to_string());
                    waiting.push(format!("{} of {}: {text}", state.domain, peer.name));
                }
            }
        }
        if seen.len() >= pairs {
            Ok(())
        } else {
            Err(format!(
                "copies not yet current since the wait began: {}",
                waiting.join("; ")
            ))
        }
    })
}

/// Polls `check` every 50 ms until it holds (`Ok` with when) or
/// `patience` runs out (`Err` with the last reason).
pub fn poll(
    patience: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) -> Result<Instant, String> {
    let deadline = Instant::now() + patience;
    loop {
        match check() {
            Ok(()) => return Ok(Instant::now()),
            Err(why) if Instant::now() >= deadline => return Err(why),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{domain_names, group_of};

    #[test]
    fn three_domains_in_one_group_are_a_b_and_c_and_more_groups_take_turns() {
        assert_eq!(domain_names(3, 1), ["A", "B", "C"]);
        let names = domain_names(5, 2);
        assert_eq!(names, ["11-01", "12-01", "11-02", "12-02", "11-03"]);
        let groups: Vec<_> = names.iter().map(|n| group_of(n)).collect();
        assert_eq!(
            groups,
            [Some("11"), Some("12"), Some("11"), Some("12"), Some("11")]
        );
        assert_eq!(group_of("A"), None);
        assert_eq!(domain_names(30, 1).len(), 30);
        assert!(domain_names(30, 1)
            .iter()
            .all(|n| group_of(n) == Some("11")));
    }
}
