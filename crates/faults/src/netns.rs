//! Phase 2: real network partitions made by the kernel. Each domain and
//! the ZooKeeper server get a network namespace of their own, joined by a
//! veth pair to a bridge this run creates in the root namespace (where the
//! clients are); cutting a node off is `ip link set <veth> down` on the
//! bridge side, healing it `up`; partitioning exactly two sides from each
//! other ([`Network::split`]) is a blackhole route to each other's
//! address in each one's namespace (the root namespace for the clients,
//! whose source address is the bridge's), healing it `ip route del`. Addresses are only ever from 198.18.0.0/15
//! (one /24 per run, picked from the process id). Everything is removed
//! when the [`Network`] is dropped, failure or not.
//!
//! ZooKeeper is started here rather than by the testkit (whose server binds
//! loopback in the root namespace): [`NsZooKeeper`] runs Debian's server
//! under `ip netns exec`. Domains run through the testkit's `Spawn` with a
//! two-line wrapper script as the binary (`exec ip netns exec NS xarchive
//! "$@"`): `ip netns exec` execs, so the pid the testkit holds is the
//! domain's own and kill -9, SIGSTOP and restarts work as on loopback.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use xarchive_testkit::zookeeper_java_args;

use crate::Error;

/// A node of the network: a namespace, the bridge end of its veth, its
/// address.
#[derive(Clone, Debug)]
pub struct NetNode {
    /// What the test calls it: `zk`, `A`, ...
    pub label: String,
    pub netns: String,
    /// The veth end on the bridge (in the root namespace): the link cut.
    pub host_veth: String,
    pub addr: Ipv4Addr,
}

/// The bridge, the namespaces and the veths of one run.
pub struct Network {
    bridge: String,
    bridge_addr: Ipv4Addr,
    bridge_up: bool,
    nodes: Vec<NetNode>,
    /// Blackhole routes added in the root namespace (by [`split`](Network::split)
    /// with [`CLIENTS`]): routes there outlive the bridge, so whatever is
    /// still in place is removed on drop.
    root_routes: Mutex<Vec<Ipv4Addr>>,
}

/// The label [`Network::split`] takes for the root namespace, where the
/// clients (the workload, the nemesis's probes) are: their source address
/// is the bridge's.
pub const CLIENTS: &str = "clients";

/// Runs `ip ARGS`, failing with its stderr.
fn ip(args: &[&str]) -> Result<(), Error> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Net {
            command: format!("ip {}", args.join(" ")),
            message: format!("cannot run `ip` (package iproute2): {e}"),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Net {
            command: format!("ip {}", args.join(" ")),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Removes what a run with the same tag left behind when it was killed
/// before its cleanup (only names this module makes); fails if a process
/// still runs in one of those namespaces (another run has that tag).
fn remove_leftovers(tag: &str, labels: &[&str]) -> Result<(), Error> {
    let listed = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let existing: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for label in labels {
        let ns = format!("{tag}-{label}");
        if !existing.contains(&ns.as_str()) {
            continue;
        }
        let pids = Command::new("ip")
            .args(["netns", "pids", &ns])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        if !pids.is_empty() {
            return Err(Error::Net {
                command: format!("ip netns add {ns}"),
                message: format!("it exists with processes in it ({pids}): another run?"),
            });
        }
        let _ = ip(&["netns", "del", &ns]);
    }
    for i in 0..labels.len() {
        let _ = ip(&["link", "del", &format!("{tag}h{i}")]);
    }
    let _ = ip(&["link", "del", &format!("{tag}br")]);
    Ok(())
}

impl Network {
    /// Creates the bridge and a namespace per label, in 198.18.K.0/24 with
    /// K from the process id and how many networks this process made
    /// before (tests in one process run at once): the bridge is .1, the
    /// nodes .2, .3, ... Needs root (`CAP_NET_ADMIN`, `CAP_SYS_ADMIN`). On
    /// failure, what was made is removed again.
    pub fn create(labels: &[&str]) -> Result<Network, Error> {
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nth = MADE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let k = u8::try_from((std::process::id() + nth * 101) % 250 + 1).unwrap_or(1);
        let tag = format!("xaf{k}");
        remove_leftovers(&tag, labels)?;
        let mut net = Network {
            bridge: format!("{tag}br"),
            bridge_addr: Ipv4Addr::new(198, 18, k, 1),
            bridge_up: false,
            nodes: Vec::new(),
            root_routes: Mutex::new(Vec::new()),
        };
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        net.bridge_up = true;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", net.bridge_addr),
            "dev",
            &net.bridge,
        ])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        for (i, label) in labels.iter().enumerate() {
            let n = u8::try_from(i + 2).unwrap_or(u8::MAX);
            let node = NetNode {
                label: (*label).to_owned(),
                netns: format!("{tag}-{label}"),
                host_veth: format!("{tag}h{i}"),
                addr: Ipv4Addr::new(198, 18, k, n),
            };
            let inner = format!("{tag}n{i}");
            ip(&["netns", "add", &node.netns])?;
            net.nodes.push(node.clone());
            ip(&[
                "link",
                "add",
                &node.host_veth,
                "type",
                "veth",
                "peer",
                "name",
                &inner,
            ])?;
            ip(&["link", "set", &node.host_veth, "master", &net.bridge])?;
            ip(&["link", "set", &node.host_veth, "up"])?;
            ip(&["link", "set", &inner, "netns", &node.netns])?;
            let exec = |args: &[&str]| {
                let mut all = vec!["netns", "exec", node.netns.as_str(), "ip"];
                all.extend_from_slice(args);
                ip(&all)
            };
            exec(&["addr", "add", &format!("{}/24", node.addr), "dev", &inner])?;
            exec(&["link", "set", &inner, "up"])?;
            exec(&["link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    /// The node called `label`.
    pub fn node(&self, label: &str) -> Option<&NetNode> {
        self.nodes.iter().find(|n| n.label == label)
    }

    /// The address of the root namespace on the bridge (where clients are).
    pub fn bridge_addr(&self) -> Ipv4Addr {
        self.bridge_addr
    }

    fn veth(&self, label: &str) -> Result<&str, Error> {
        self.node(label)
            .map(|n| n.host_veth.as_str())
            .ok_or_else(|| Error::Net {
                command: format!("cut {label}"),
                message: "no such node".to_owned(),
            })
    }

    /// Cuts `label` off the bridge: nothing reaches it, nothing leaves.
    pub fn cut(&self, label: &str) -> Result<(), Error> {
        ip(&["link", "set", self.veth(label)?, "down"])
    }

    /// Joins `label` to the bridge again.
    pub fn heal(&self, label: &str) -> Result<(), Error> {
        ip(&["link", "set", self.veth(label)?, "up"])
    }

    /// Where `label` is: its namespace (none for [`CLIENTS`], the root
    /// namespace) and its address on the bridge.
    fn place(&self, label: &str) -> Result<(Option<&str>, Ipv4Addr), Error> {
        if label == CLIENTS {
            return Ok((None, self.bridge_addr));
        }
        self.node(label)
            .map(|n| (Some(n.netns.as_str()), n.addr))
            .ok_or_else(|| Error::Net {
                command: format!("partition {label}"),
                message: "no such node".to_owned(),
            })
    }

    /// `ip route add|del blackhole ADDR/32`, in `netns` (or the root
    /// namespace).
    fn blackhole(&self, netns: Option<&str>, addr: Ipv4Addr, add: bool) -> Result<(), Error> {
        let dest = format!("{addr}/32");
        let verb = if add { "add" } else { "del" };
        let mut args: Vec<&str> = Vec::new();
        if let Some(ns) = netns {
            args.extend(["netns", "exec", ns, "ip"]);
        }
        args.extend(["route", verb, "blackhole", dest.as_str()]);
        ip(&args)?;
        if netns.is_none() {
            let mut routes = self.root_routes.lock().unwrap_or_else(|e| e.into_inner());
            if add {
                routes.push(addr);
            } else {
                routes.retain(|a| *a != addr);
            }
        }
        Ok(())
    }

    /// Partitions every node of `a` from every node of `b`, both ways,
    /// and nothing else: in each node's namespace a blackhole route to
    /// each address on the other side (a packet to it is dropped, and so
    /// is every reply to a packet from it). [`CLIENTS`] stands for the
    /// root namespace. `heal_split` removes the same routes.
    pub fn split(&self, a: &[&str], b: &[&str]) -> Result<(), Error> {
        for (x, y) in pairs(a, b) {
            let (ns_x, addr_x) = self.place(x)?;
            let (ns_y, addr_y) = self.place(y)?;
            self.blackhole(ns_x, addr_y, true)?;
            self.blackhole(ns_y, addr_x, true)?;
        }
        Ok(())
    }

    /// Removes the routes [`split`](Self::split) added for the same sides
    /// (all of them, even after one fails; the first failure is returned).
    pub fn heal_split(&self, a: &[&str], b: &[&str]) -> Result<(), Error> {
        let mut first = Ok(());
        for (x, y) in pairs(a, b) {
            let (ns_x, addr_x) = self.place(x)?;
            let (ns_y, addr_y) = self.place(y)?;
            for r in [
                self.blackhole(ns_x, addr_y, false),
                self.blackhole(ns_y, addr_x, false),
            ] {
                if first.is_ok() {
                    first = r;
                }
            }
        }
        first
    }

    /// A script that runs `bin` with its arguments inside `label`'s
    /// namespace (for the testkit's `Spawn`, which runs a binary).
    pub fn wrapper(&self, label: &str, bin: &Path, dir: &Path) -> Result<PathBuf, Error> {
        let node = self.node(label).ok_or_else(|| Error::Net {
            command: format!("wrapper for {label}"),
            message: "no such node".to_owned(),
        })?;
        let path = dir.join(format!("in-{}.sh", node.netns));
        let script = format!(
            "#!/bin/sh\n# written by xarchive-faults: run the domain in its namespace\nexec ip netns exec {} '{}' \"$@\"\n",
            node.netns,
            bin.display()
        );
        let io = |source| Error::RunDir {
            path: path.clone(),
            source,
        };
        fs::write(&path, script).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).map_err(io)?;
        }
        Ok(path)
    }
}

fn pairs<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    a.iter()
        .flat_map(|x| b.iter().map(move |y| (*x, *y)))
        .collect()
}

impl Drop for Network {
    fn drop(&mut self) {
        let routes = std::mem::take(
            self.root_routes
                .get_mut()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for addr in routes {
            let _ = ip(&["route", "del", "blackhole", &format!("{addr}/32")]);
        }
        for node in &self.nodes {
            // Deleting the namespace deletes the veth end inside it, and so
            // its peer; the explicit delete covers a half-made node.
            let _ = ip(&["netns", "del", &node.netns]);
            let _ = ip(&["link", "del", &node.host_veth]);
        }
        if self.bridge_up {
            let _ = ip(&["link", "del", &self.bridge]);
        }
    }
}

/// How long ZooKeeper may take to answer `ruok` after a start.
const ZK_READY: Duration = Duration::from_secs(30);

/// Debian's ZooKeeper run inside a namespace, listening on the node's
/// address; killed when dropped.
pub struct NsZooKeeper {
    netns: String,
    addr: Ipv4Addr,
    port: u16,
    dir: PathBuf,
    generation: u32,
    child: Option<Child>,
}

impl NsZooKeeper {
    /// Starts it in `node`'s namespace with its files under `dir`, and
    /// waits until it answers.
    pub fn start(node: &NetNode, dir: &Path) -> Result<NsZooKeeper, Error> {
        let mut zk = NsZooKeeper {
            netns: node.netns.clone(),
            addr: node.addr,
            port: 2181,
            dir: dir.to_owned(),
            generation: 1,
            child: None,
        };
        fs::create_dir_all(zk.data_dir()).map_err(|source| Error::RunDir {
            path: zk.data_dir(),
            source,
        })?;
        zk.spawn()?;
        Ok(zk)
    }

    pub fn connect_string(&self) -> String {
        format!("{}:{}", self.addr, self.port)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join(format!("data-{}", self.generation))
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    /// Whether it serves clients now (`srvr`).
    pub fn serving(&self) -> bool {
        crate::ensemble::serves(self.addr, self.port)
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same data (killing it first if running).
    pub fn start_again(&mut self) -> Result<(), Error> {
        self.kill();
        self.spawn()
    }

    /// Starts it again on a new, empty data dir: every session is gone.
    pub fn restart_fresh(&mut self) -> Result<(), Error> {
        self.kill();
        let _ = fs::remove_dir_all(self.data_dir());
        self.generation += 1;
        fs::create_dir_all(self.data_dir()).map_err(|source| Error::RunDir {
            path: self.data_dir(),
            source,
        })?;
        self.spawn()
    }

    fn spawn(&mut self) -> Result<(), Error> {
        let cfg = self.dir.join("zoo.cfg");
        let text = format!(
            "# written by xarchive-faults\n\
             tickTime=200\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress={addr}\n\
             minSessionTimeout=400\n\
             maxSessionTimeout=20000\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=srvr,ruok\n\
             forceSync=no\n",
            data = self.data_dir().display(),
            port = self.port,
            addr = self.addr,
        );
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| Error::RunDir { path, source }
        };
        fs::write(&cfg, text).map_err(io(&cfg))?;
        let log_path = self.log_path();
        let log: File = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io(&log_path))?;
        let err = log.try_clone().map_err(io(&log_path))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.netns, "java"])
            .args(zookeeper_java_args(
                "org.apache.zookeeper.server.ZooKeeperServerMain",
            ))
            .arg(&cfg)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::Net {
                command: format!("ip netns exec {} java ... ZooKeeperServerMain", self.netns),
                message: e.to_string(),
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + ZK_READY;
        loop {
            if self.ruok() {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| !matches!(c.try_wait(), Ok(None)));
            if exited || Instant::now() >= deadline {
                self.kill();
                let log = fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                return Err(Error::Net {
                    command: format!("ZooKeeper in {}", self.netns),
                    message: format!(
                        "not answering ruok (exited: {exited}); log ends with:\n{}",
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether it answers the `ruok` four-letter word with `imok`.
    fn ruok(&self) -> bool {
        let addr = SocketAddr::from((self.addr, self.port));
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"ruok").is_err() {
            return false;
        }
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        reply == b"imok"
    }
}

impl Drop for NsZooKeeper {
    fn drop(&mut self) {
        self.kill();
    }
}
