//! A real standalone ZooKeeper server for coordinator tests: how it is
//! configured, run with `java`, and judged ready (it bound our port and
//! grants a session), and how its data is kept or thrown away on restart.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::logs::{file_len, open_log, read_from};
use super::probe::{ProbeTimeout, REPLY_TIMEOUT};
use super::process::{ServerKind, StartError, Supervised};
use super::zk_wire::{self, ZkSession};

/// The Java classpath the ZooKeeper server runs with.
///
/// Debian's own `zkEnv.sh` uses `/etc/zookeeper/conf:/usr/share/java/zookeeper.jar`:
/// the jar's manifest `Class-Path` names its dependencies (jute, netty,
/// slf4j-api, metrics-core, snappy, commons-cli/io, jackson, jetty), so
/// they need not be listed. That path has no slf4j *binding*, though, so
/// the server would log nothing; `slf4j-simple.jar` (package
/// libslf4j-java, a dependency of libzookeeper-java) makes it log to
/// stderr, which goes to the server's log file.
pub const ZOOKEEPER_CLASSPATH: &str =
    "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

const ZOOKEEPER_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// The `java` arguments that run Debian's ZooKeeper class `main`
/// (`ZooKeeperServerMain`, or `QuorumPeerMain` for an ensemble), to be
/// followed by its config file: a small heap and a quick start, IPv4, and
/// times in the log.
pub fn zookeeper_java_args(main: &str) -> [&str; 11] {
    [
        "-Xms16m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.net.preferIPv4Stack=true",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        "-cp",
        ZOOKEEPER_CLASSPATH,
        main,
    ]
}

/// A standalone ZooKeeper 3.8 server (Debian's), on a free loopback port,
/// with its config, data and log in its own temp dir.
///
/// Use it for tests of the real coordinator: registration, watches,
/// session loss. If the test fails, the tail of the server's log is
/// printed when it is dropped. [`stop`](Self::stop) + [`start_again`](Self::start_again)
/// is a short outage that sessions survive; [`restart_fresh`](Self::restart_fresh)
/// loses every session (how tests force a session expiry). Killed when
/// dropped.
pub struct ZooKeeperServer {
    server: Supervised<ZooKeeper>,
}

/// What is particular to a ZooKeeper server: its data dir, which
/// [`ZooKeeperServer::restart_fresh`] replaces by a new one.
struct ZooKeeper {
    data_dir: PathBuf,
    generation: u32,
}

impl ZooKeeperServer {
    /// The server's tick. Short, so that session expiry is checked often.
    pub const TICK_MS: u32 = 200;
    /// The shortest session timeout the server grants.
    pub const MIN_SESSION_TIMEOUT_MS: u32 = 400;
    /// The longest session timeout the server grants (tests typically ask
    /// for 3 000 ms).
    pub const MAX_SESSION_TIMEOUT_MS: u32 = 20_000;

    /// Starts a server on a free port and waits until it grants sessions.
    /// Panics (the test fails) if it cannot, with the tail of its log.
    pub fn start() -> ZooKeeperServer {
        check_file(
            Path::new("/usr/share/java/zookeeper.jar"),
            "ZooKeeper (Debian package zookeeper)",
        );
        check_file(
            Path::new("/usr/share/java/slf4j-simple.jar"),
            "slf4j-simple (Debian package libslf4j-java)",
        );
        let (dir, kind) = ZooKeeper::new_dir();
        ZooKeeperServer {
            server: Supervised::start(kind, dir),
        }
    }

    /// The connect string for a client: `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.server.port())
    }

    /// The client port (the same across restarts).
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// Requests the server has received from clients so far (`mntr`'s
    /// `zk_packets_received`): what a test counts to show what an
    /// operation costs ZooKeeper.
    pub fn packets_received(&self) -> u64 {
        self.mntr("zk_packets_received")
    }

    /// Packets the server has sent to clients so far (`mntr`'s
    /// `zk_packets_sent`: answers and watch events).
    pub fn packets_sent(&self) -> u64 {
        self.mntr("zk_packets_sent")
    }

    /// One figure of `mntr`'s answer.
    fn mntr(&self, figure: &str) -> u64 {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port()))
            .expect("ZooKeeper accepts a connection for mntr");
        stream.write_all(b"mntr").expect("mntr sent");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("mntr answered");
        text.lines()
            .find_map(|l| l.strip_prefix(figure))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {figure} in mntr's answer: {text}"))
    }

    /// The pid of the running `java` process (for signals a test sends
    /// itself, such as SIGSTOP). Panics if the server is not running.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.server.is_running()
    }

    /// Stops the server: SIGTERM, then SIGKILL after 10 s. Its data stays,
    /// so [`start_again`](Self::start_again) brings its sessions back.
    /// Does nothing if it is not running.
    pub fn stop(&mut self) {
        self.server.stop();
    }

    /// Kills the server with SIGKILL (a crash, not a shutdown).
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Starts the server again on the same port with the same data: a short
    /// outage, after which clients reconnect to their sessions (if they
    /// have not timed out meanwhile). Stops it first if it is running.
    pub fn start_again(&mut self) {
        self.server.start_again();
    }

    /// Starts the server again on the same port with a new, empty data dir:
    /// every session and znode is gone, so each client's next reconnect is
    /// told its session expired. Stops it first if it is running.
    pub fn restart_fresh(&mut self) {
        self.server.stop();
        let _ = fs::remove_dir_all(&self.server.kind.data_dir);
        let generation = self.server.kind.generation + 1;
        let data_dir = self.server.dir().join(format!("data-{generation}"));
        fs::create_dir_all(&data_dir).expect("cannot create the ZooKeeper data dir");
        self.server.kind = ZooKeeper {
            data_dir,
            generation,
        };
        self.server.respawn("restart ZooKeeper fresh");
    }

    /// Opens a session by a raw handshake and leaves it open on the server
    /// (the connection is dropped, so it expires after its timeout unless
    /// resumed). For checking what the server remembers across restarts.
    pub fn open_session(&self, timeout_ms: u32) -> io::Result<ZkSession> {
        zk_wire::handshake(self.server.port(), timeout_ms, None, REPLY_TIMEOUT)?
            .1
            .ok_or_else(|| zk_wire::invalid("ZooKeeper refused a new session"))
    }

    /// Reattaches to `session` by a raw handshake: `Ok(true)` if the server
    /// still knows it, `Ok(false)` if it says the session expired.
    pub fn resume_session(&self, session: &ZkSession) -> io::Result<bool> {
        let (_, granted) = zk_wire::handshake(
            self.server.port(),
            session.timeout_ms,
            Some(session),
            REPLY_TIMEOUT,
        )?;
        Ok(granted.is_some_and(|g| g.id == session.id))
    }

    /// The server's log: everything it printed, over all its starts.
    pub fn log(&self) -> String {
        self.server.log()
    }

    /// Where the log is.
    pub fn log_path(&self) -> PathBuf {
        self.server.log_path()
    }

    /// The current data dir (`dataDir` in zoo.cfg).
    pub fn data_dir(&self) -> &Path {
        &self.server.kind.data_dir
    }
}

impl ZooKeeper {
    /// A temp dir for a server, with its first data dir in it.
    fn new_dir() -> (tempfile::TempDir, ZooKeeper) {
        let dir = tempfile::Builder::new()
            .prefix("xarchive-zookeeper-")
            .tempdir()
            .expect("cannot create a temp dir for ZooKeeper");
        let data_dir = dir.path().join("data-1");
        fs::create_dir_all(&data_dir).expect("cannot create the ZooKeeper data dir");
        let kind = ZooKeeper {
            data_dir,
            generation: 1,
        };
        (dir, kind)
    }

    fn write_config(server: &Supervised<ZooKeeper>) -> PathBuf {
        let cfg = format!(
            "# written by xarchive-testkit\n\
             tickTime={tick}\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress=127.0.0.1\n\
             minSessionTimeout={min}\n\
             maxSessionTimeout={max}\n\
             admin.enableServer=false\n\
             # `xarchive-bench nation` reads ZooKeeper's own figures\n\
             4lw.commands.whitelist=mntr,srvr,ruok\n\
             # tests do not survive a machine crash; page cache is enough\n\
             forceSync=no\n",
            tick = ZooKeeperServer::TICK_MS,
            data = server.kind.data_dir.display(),
            port = server.port(),
            min = ZooKeeperServer::MIN_SESSION_TIMEOUT_MS,
            max = ZooKeeperServer::MAX_SESSION_TIMEOUT_MS,
        );
        let path = server.dir().join("zoo.cfg");
        fs::write(&path, cfg).expect("cannot write zoo.cfg");
        path
    }
}

impl ServerKind for ZooKeeper {
    const NAME: &'static str = "ZooKeeper";
    const LOG_FILE: &'static str = "zookeeper.log";

    fn spawn(server: &mut Supervised<ZooKeeper>) -> Result<(), StartError> {
        let cfg = ZooKeeper::write_config(server);
        let log_path = server.log_path();
        let log_start = file_len(&log_path);
        let log = open_log(&log_path);
        let err = log.try_clone().expect("cannot duplicate the log handle");
        let child = Command::new("java")
            .args(zookeeper_java_args(ZOOKEEPER_MAIN))
            .arg(&cfg)
            .current_dir(server.dir())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `java` for ZooKeeper (scripts/install-deps.sh installs it): {e}")
            });

        let port = server.port();
        let bound = format!(":{port}");
        let log_since = || read_from(&log_path, log_start);
        // A handshake that arrives while the server is still loading its
        // data can go unanswered (ZooKeeper 3.8 hits a NullPointerException
        // closing it): hence short, growing reply timeouts.
        let mut timeout = ProbeTimeout::new();
        server.supervise(child, log_since, |process| {
            // Our own process reached the bind (so a session below is not
            // granted by some other server on this port) ...
            let log = read_from(&log_path, log_start);
            let bound_here = log
                .lines()
                .any(|l| l.contains("binding to port") && l.ends_with(&bound));
            if !bound_here || log.contains("Address already in use") {
                return false;
            }
            // ... and it grants a session, which is closed again.
            let granted = timeout.probe(|t| match zk_wire::handshake(port, 1000, None, t) {
                Ok((stream, Some(_))) => Some(stream),
                _ => None,
            });
            let Some(mut stream) = granted else {
                return false;
            };
            let _ = zk_wire::close_session(&mut stream);
            process.is_running()
        })
    }
}

fn check_file(path: &Path, what: &str) {
    assert!(
        path.exists(),
        "{} is missing: {what} is needed (scripts/install-deps.sh installs it)",
        path.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A port someone else holds is reported as taken (so `start()` tries
    /// another), not as a failure.
    #[test]
    fn a_taken_port_is_retried_not_failed() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = holder.local_addr().unwrap().port();
        let (dir, kind) = ZooKeeper::new_dir();
        let mut zk = Supervised::new(kind, dir, taken);
        match ZooKeeper::spawn(&mut zk) {
            Err(StartError::PortTaken(_)) => {}
            Err(StartError::Failed(m)) => panic!("expected PortTaken, got Failed: {m}"),
            Ok(()) => panic!("expected PortTaken, got a ready server"),
        }
        drop(holder);
    }
}
