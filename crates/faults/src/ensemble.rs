//! A three-server ZooKeeper ensemble (Debian's server, `QuorumPeerMain`),
//! on loopback (three client ports, distinct quorum and election ports on
//! 127.0.0.1) or each server in a network namespace of its own. The
//! testkit's server is standalone only; this follows how it runs Java
//! (the same classpath) and adds what a quorum needs: `server.N` lines
//! and a `myid` file in each data dir. The leader is found with the
//! `srvr` four-letter word (whitelisted in each zoo.cfg).

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xarchive_testkit::{free_port, zookeeper_java_args};

use crate::Error;

/// How long a server may take to join a quorum (serve) after a start.
const SERVE_PATIENCE: Duration = Duration::from_mins(1);

/// Where one server of the ensemble listens, and in which namespace it
/// runs (none: the root namespace).
#[derive(Clone, Debug)]
pub struct MemberSpec {
    /// `zk1`, `zk2`, `zk3`: the label of its node in a network, if any.
    pub label: String,
    pub netns: Option<String>,
    pub host: Ipv4Addr,
    pub client_port: u16,
    pub quorum_port: u16,
    pub election_port: u16,
}

impl MemberSpec {
    /// Three servers on 127.0.0.1, every port free now.
    pub fn loopback() -> Vec<MemberSpec> {
        (1..=3)
            .map(|n| MemberSpec {
                label: format!("zk{n}"),
                netns: None,
                host: Ipv4Addr::LOCALHOST,
                client_port: free_port(),
                quorum_port: free_port(),
                election_port: free_port(),
            })
            .collect()
    }
}

struct Member {
    /// `myid`: 1, 2, 3.
    id: usize,
    spec: MemberSpec,
    dir: PathBuf,
    generation: u32,
    child: Option<Child>,
}

impl Member {
    fn data_dir(&self) -> PathBuf {
        self.dir.join(format!("data-{}", self.generation))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| !matches!(c.try_wait(), Ok(None)))
    }

    fn mode(&self) -> Option<String> {
        mode(self.spec.host, self.spec.client_port)
    }

    fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_owned();
        move |source| Error::RunDir { path, source }
    }

    /// Writes its zoo.cfg and myid and starts `java` (without waiting).
    fn spawn(&mut self, all: &[MemberSpec]) -> Result<(), Error> {
        let data = self.data_dir();
        fs::create_dir_all(&data).map_err(Self::io_error(&data))?;
        let myid = data.join("myid");
        fs::write(&myid, format!("{}\n", self.id)).map_err(Self::io_error(&myid))?;
        let mut text = format!(
            "# written by xarchive-faults\n\
             tickTime=200\n\
             initLimit=50\n\
             syncLimit=25\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress={addr}\n\
             minSessionTimeout=400\n\
             maxSessionTimeout=20000\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=srvr,stat,ruok\n\
             forceSync=no\n",
            data = data.display(),
            port = self.spec.client_port,
            addr = self.spec.host,
        );
        for (n, s) in all.iter().enumerate() {
            text.push_str(&format!(
                "server.{}={}:{}:{}\n",
                n + 1,
                s.host,
                s.quorum_port,
                s.election_port
            ));
        }
        let cfg = self.dir.join("zoo.cfg");
        fs::write(&cfg, text).map_err(Self::io_error(&cfg))?;
        let log_path = self.log_path();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(Self::io_error(&log_path))?;
        let err = log.try_clone().map_err(Self::io_error(&log_path))?;
        let mut command = match &self.spec.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "java"]);
                c
            }
            None => Command::new("java"),
        };
        let child = command
            .args(zookeeper_java_args(
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            ))
            .arg(&cfg)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::Net {
                command: format!("java ... QuorumPeerMain ({})", self.spec.label),
                message: e.to_string(),
            })?;
        self.child = Some(child);
        Ok(())
    }

    fn not_serving(&mut self, why: &str) -> Error {
        let log = fs::read_to_string(self.log_path()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        Error::Net {
            command: format!("ZooKeeper {}", self.spec.label),
            message: format!(
                "{why}; log ends with:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ),
        }
    }
}

/// What `srvr` says the server's mode is (`leader`, `follower`,
/// `standalone`), if it serves: a server without its data loaded or
/// without a quorum answers that it is not serving, with no mode.
fn mode(host: Ipv4Addr, port: u16) -> Option<String> {
    let reply = four_letter(host, port, b"srvr")?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(|m| m.trim().to_owned())
}

/// Whether the ZooKeeper server at `host:port` serves clients now.
pub(crate) fn serves(host: Ipv4Addr, port: u16) -> bool {
    matches!(
        mode(host, port).as_deref(),
        Some("leader" | "follower" | "standalone")
    )
}

/// Sends a four-letter word and reads the reply to the end.
fn four_letter(host: Ipv4Addr, port: u16, word: &[u8]) -> Option<String> {
    let addr = SocketAddr::from((host, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    s.write_all(word).ok()?;
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    Some(String::from_utf8_lossy(&reply).into_owned())
}

/// Three ZooKeeper servers forming one ensemble; killed when dropped.
pub struct Ensemble {
    specs: Vec<MemberSpec>,
    members: Vec<Member>,
}

impl Ensemble {
    /// Starts every server (files under `dir/zkN`) and waits until each
    /// serves as leader or follower.
    pub fn start(specs: Vec<MemberSpec>, dir: &Path) -> Result<Ensemble, Error> {
        let members = specs
            .iter()
            .enumerate()
            .map(|(n, spec)| Member {
                id: n + 1,
                spec: spec.clone(),
                dir: dir.join(&spec.label),
                generation: 1,
                child: None,
            })
            .collect();
        let mut ensemble = Ensemble { specs, members };
        ensemble.start_all()?;
        Ok(ensemble)
    }

    /// `h1:p1,h2:p2,h3:p3`.
    pub fn connect_string(&self) -> String {
        self.specs
            .iter()
            .map(|s| format!("{}:{}", s.host, s.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The servers' labels (`zk1`...), in order.
    pub fn labels(&self) -> Vec<String> {
        self.specs.iter().map(|s| s.label.clone()).collect()
    }

    /// The index of the server `srvr` calls the leader now, if any.
    pub fn leader(&self) -> Option<usize> {
        self.members
            .iter()
            .position(|m| m.child.is_some() && m.mode().as_deref() == Some("leader"))
    }

    /// Whether every server serves (as leader or follower).
    pub fn serving(&self) -> bool {
        self.specs.iter().all(|s| serves(s.host, s.client_port))
    }

    /// SIGKILL of server `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Starts server `i` again on its data (killing it first if it runs),
    /// without waiting: it may not join a quorum until another fault
    /// heals, and the nemesis heals faults one after the other.
    pub fn start_again(&mut self, i: usize) -> Result<(), Error> {
        self.members[i].kill();
        self.members[i].spawn(&self.specs)
    }

    /// Every server started again on its data (killed first if running),
    /// without waiting (as [`start_again`](Self::start_again)).
    pub fn restart_all(&mut self) -> Result<(), Error> {
        for m in &mut self.members {
            m.kill();
            m.spawn(&self.specs)?;
        }
        Ok(())
    }

    /// SIGKILL of every server.
    pub fn kill_all(&mut self) {
        for m in &mut self.members {
            m.kill();
        }
    }

    /// Every server started (again) on its data; waits until all serve.
    pub fn start_all(&mut self) -> Result<(), Error> {
        for m in &mut self.members {
            m.kill();
            m.spawn(&self.specs)?;
        }
        let all: Vec<usize> = (0..self.members.len()).collect();
        self.wait_serving(&all)
    }

    /// Every server started again on a new, empty data dir (with its
    /// myid), without waiting: every session and znode is gone.
    pub fn restart_fresh(&mut self) -> Result<(), Error> {
        for m in &mut self.members {
            m.kill();
            let _ = fs::remove_dir_all(m.data_dir());
            m.generation += 1;
        }
        self.restart_all()
    }

    fn wait_serving(&mut self, which: &[usize]) -> Result<(), Error> {
        let deadline = Instant::now() + SERVE_PATIENCE;
        for &i in which {
            loop {
                let m = &mut self.members[i];
                if matches!(m.mode().as_deref(), Some("leader" | "follower")) {
                    break;
                }
                if m.exited() {
                    let e = m.not_serving("exited");
                    m.kill();
                    return Err(e);
                }
                if Instant::now() >= deadline {
                    return Err(m.not_serving(&format!(
                        "not serving as leader or follower within {} s",
                        SERVE_PATIENCE.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        self.kill_all();
    }
}
