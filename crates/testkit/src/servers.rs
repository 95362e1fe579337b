//! Real ZooKeeper and Redis servers for integration tests.
//!
//! Each server runs as a child process on a free loopback port, in its own
//! temp directory (config, data and log live there), and is stopped by
//! process id: SIGTERM (`kill -TERM <pid>`) with a grace period, then
//! SIGKILL. Dropping a server kills it. Nothing here skips: a server that
//! cannot start panics with the reason and the tail of its log.
//!
//! The binaries come from Debian's packages (`scripts/install-deps.sh`):
//! `java` plus `/usr/share/java/zookeeper.jar`, and `redis-server`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::process::free_port;

/// How long a server may take to become ready before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// `start()` picks a new port this many times when the one it picked was
/// taken before the server could bind it.
const START_ATTEMPTS: usize = 5;
/// How much of a log a failure message quotes.
const LOG_TAIL_LINES: usize = 40;

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

// ---------------------------------------------------------------------------
// A child process stopped by pid.

/// A server's child process. Behind a mutex so that `is_running` and
/// `pid` can take `&self`.
struct ServerProcess {
    child: Mutex<Option<Child>>,
}

impl ServerProcess {
    fn new(child: Child) -> Self {
        ServerProcess {
            child: Mutex::new(Some(child)),
        }
    }

    fn none() -> Self {
        ServerProcess {
            child: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(Child::id)
    }

    /// `Some(status)` once the process has exited (or was never started).
    fn exit_status(&self) -> Option<Option<ExitStatus>> {
        match self.lock().as_mut() {
            None => Some(None),
            Some(child) => match child.try_wait() {
                Ok(Some(status)) => Some(Some(status)),
                Ok(None) => None,
                Err(_) => Some(None),
            },
        }
    }

    fn is_running(&self) -> bool {
        self.exit_status().is_none()
    }

    /// SIGTERM, wait up to `STOP_GRACE`, then SIGKILL. Reaps the process.
    fn stop(&self) {
        let Some(mut child) = self.lock().take() else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// SIGKILL. Reaps the process.
    fn kill(&self) {
        if let Some(mut child) = self.lock().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------
// Starting and waiting.

/// Why a start attempt did not give a ready server.
enum StartError {
    /// The port was taken before the server could bind it: try another.
    PortTaken(String),
    /// Anything else: the test fails with this message.
    Failed(String),
}

impl StartError {
    fn message(self) -> String {
        match self {
            StartError::PortTaken(m) | StartError::Failed(m) => m,
        }
    }
}

/// Calls `spawn` with free ports until one is not taken before the server
/// binds it; panics (the test fails) on any other error.
fn on_a_free_port(what: &str, mut spawn: impl FnMut(u16) -> Result<(), StartError>) {
    let mut last = String::new();
    for _ in 0..START_ATTEMPTS {
        match spawn(free_port()) {
            Ok(()) => return,
            Err(StartError::PortTaken(msg)) => last = msg,
            Err(StartError::Failed(msg)) => panic!("cannot start {what}: {msg}"),
        }
    }
    panic!("cannot start {what}: every port tried was taken; last attempt: {last}")
}

/// Bytes of `path` from `offset` on (a log appended to by each start).
fn read_from(path: &Path, offset: u64) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines[from..].join("\n")
}

fn open_log(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open the server log {}: {e}", path.display()))
}

/// Polls until `ready()` says yes, the process exits, or `READY_TIMEOUT`.
/// `log()` gives what the server logged since this start.
fn wait_ready(
    what: &str,
    process: &ServerProcess,
    log: impl Fn() -> String,
    mut ready: impl FnMut() -> bool,
) -> Result<(), StartError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = process.exit_status() {
            let log = log();
            let status = status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string());
            let msg = format!(
                "{what} exited ({status}) before it was ready; its log ends with:\n{}",
                tail(&log)
            );
            return Err(if log.contains("Address already in use") {
                StartError::PortTaken(msg)
            } else {
                StartError::Failed(msg)
            });
        }
        if ready() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            process.kill();
            return Err(StartError::Failed(format!(
                "{what} was not ready within {} s; its log ends with:\n{}",
                READY_TIMEOUT.as_secs(),
                tail(&log())
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// How long a probe waits for a reply, unless told otherwise.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Reply timeouts for readiness probes: short at first (a server that is
/// not ready yet, or another process on the port, may leave a probe
/// unanswered), doubled each time a probe times out (a loaded machine is
/// merely slow), at most 4 s.
struct ProbeTimeout(Duration);

impl ProbeTimeout {
    fn new() -> Self {
        ProbeTimeout(Duration::from_millis(250))
    }

    /// Runs `probe` with the current timeout; lengthens it if the probe
    /// failed by running out of time.
    fn probe<T>(&mut self, probe: impl FnOnce(Duration) -> Option<T>) -> Option<T> {
        let started = Instant::now();
        let result = probe(self.0);
        if result.is_none() && started.elapsed() >= self.0 {
            self.0 = (self.0 * 2).min(Duration::from_secs(4));
        }
        result
    }
}

fn connect(port: u16, reply_timeout: Duration) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&loopback(port), Duration::from_millis(500))?;
    stream.set_read_timeout(Some(reply_timeout))?;
    stream.set_write_timeout(Some(reply_timeout))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

// ---------------------------------------------------------------------------
// ZooKeeper.

/// A ZooKeeper session as a server granted it, from the raw handshake of
/// [`ZooKeeperServer::open_session`]. Only for checking what a server
/// remembers; the code under test uses a real client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkSession {
    /// The session id the server assigned.
    pub id: i64,
    /// The session timeout the server agreed to (it clamps the request to
    /// its min/max).
    pub timeout_ms: u32,
    password: Vec<u8>,
}

fn put_i32(buf: &mut Vec<u8>, v: i32) {
    buf.extend_from_slice(&v.to_be_bytes());
}

fn put_i64(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&v.to_be_bytes());
}

fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= 1 << 20)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad ZooKeeper frame length"))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(body)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// The ZooKeeper client handshake (a jute `ConnectRequest`, answered by a
/// `ConnectResponse`). With `resume`, asks to reattach to that session;
/// `Ok(None)` means the server does not know it (expired).
fn zk_handshake(
    port: u16,
    timeout_ms: u32,
    resume: Option<&ZkSession>,
    reply_timeout: Duration,
) -> io::Result<(TcpStream, Option<ZkSession>)> {
    let mut stream = connect(port, reply_timeout)?;
    let (session_id, password) = match resume {
        Some(s) => (s.id, s.password.clone()),
        None => (0, vec![0u8; 16]),
    };
    let mut body = Vec::with_capacity(64);
    put_i32(&mut body, 0); // protocolVersion
    put_i64(&mut body, 0); // lastZxidSeen
    put_i32(&mut body, i32::try_from(timeout_ms).unwrap_or(i32::MAX));
    put_i64(&mut body, session_id);
    put_i32(&mut body, i32::try_from(password.len()).unwrap_or(0));
    body.extend_from_slice(&password);
    body.push(0); // readOnly = false
    let mut frame = Vec::with_capacity(body.len() + 4);
    put_i32(&mut frame, i32::try_from(body.len()).unwrap_or(0));
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;

    let reply = read_frame(&mut stream)?;
    // protocolVersion i32, timeOut i32, sessionId i64, passwd (i32 len + bytes), readOnly
    if reply.len() < 20 {
        return Err(invalid("short ZooKeeper ConnectResponse"));
    }
    let int = |at: usize| i32::from_be_bytes(reply[at..at + 4].try_into().unwrap_or_default());
    let timeout = int(4);
    let id = i64::from_be_bytes(reply[8..16].try_into().unwrap_or_default());
    let pw_len = usize::try_from(int(16)).map_err(|_| invalid("bad password length"))?;
    let password = reply
        .get(20..20 + pw_len)
        .ok_or_else(|| invalid("short ZooKeeper password"))?
        .to_vec();
    if timeout <= 0 || id == 0 {
        return Ok((stream, None));
    }
    let session = ZkSession {
        id,
        timeout_ms: u32::try_from(timeout).unwrap_or(0),
        password,
    };
    Ok((stream, Some(session)))
}

/// Sends `closeSession` on a handshaken connection and waits for the reply.
fn zk_close_session(stream: &mut TcpStream) -> io::Result<()> {
    let mut frame = Vec::with_capacity(12);
    put_i32(&mut frame, 8);
    put_i32(&mut frame, 1); // xid
    put_i32(&mut frame, -11); // OpCode.closeSession
    stream.write_all(&frame)?;
    read_frame(stream).map(drop)
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
    process: ServerProcess,
    port: u16,
    data_dir: PathBuf,
    generation: u32,
    log_start: u64,
    dir: TempDir,
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
        let dir = tempfile::Builder::new()
            .prefix("xarchive-zookeeper-")
            .tempdir()
            .expect("cannot create a temp dir for ZooKeeper");
        let data_dir = dir.path().join("data-1");
        fs::create_dir_all(&data_dir).expect("cannot create the ZooKeeper data dir");
        let mut server = ZooKeeperServer {
            process: ServerProcess::none(),
            port: 0,
            data_dir,
            generation: 1,
            log_start: 0,
            dir,
        };
        on_a_free_port("ZooKeeper", |port| {
            server.port = port;
            server.spawn()
        });
        server
    }

    /// The connect string for a client: `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The client port (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The pid of the running `java` process (for signals a test sends
    /// itself, such as SIGSTOP). Panics if the server is not running.
    pub fn pid(&self) -> u32 {
        self.process
            .pid()
            .unwrap_or_else(|| panic!("ZooKeeper on port {} is not running", self.port))
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Stops the server: SIGTERM, then SIGKILL after 10 s. Its data stays,
    /// so [`start_again`](Self::start_again) brings its sessions back.
    /// Does nothing if it is not running.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Kills the server with SIGKILL (a crash, not a shutdown).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts the server again on the same port with the same data: a short
    /// outage, after which clients reconnect to their sessions (if they
    /// have not timed out meanwhile). Stops it first if it is running.
    pub fn start_again(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!(
                "cannot start ZooKeeper again on port {}: {}",
                self.port,
                e.message()
            );
        }
    }

    /// Starts the server again on the same port with a new, empty data dir:
    /// every session and znode is gone, so each client's next reconnect is
    /// told its session expired. Stops it first if it is running.
    pub fn restart_fresh(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.data_dir);
        self.generation += 1;
        self.data_dir = self.dir.path().join(format!("data-{}", self.generation));
        fs::create_dir_all(&self.data_dir).expect("cannot create the ZooKeeper data dir");
        if let Err(e) = self.spawn() {
            panic!(
                "cannot restart ZooKeeper fresh on port {}: {}",
                self.port,
                e.message()
            );
        }
    }

    /// Opens a session by a raw handshake and leaves it open on the server
    /// (the connection is dropped, so it expires after its timeout unless
    /// resumed). For checking what the server remembers across restarts.
    pub fn open_session(&self, timeout_ms: u32) -> io::Result<ZkSession> {
        zk_handshake(self.port, timeout_ms, None, REPLY_TIMEOUT)?
            .1
            .ok_or_else(|| invalid("ZooKeeper refused a new session"))
    }

    /// Reattaches to `session` by a raw handshake: `Ok(true)` if the server
    /// still knows it, `Ok(false)` if it says the session expired.
    pub fn resume_session(&self, session: &ZkSession) -> io::Result<bool> {
        let (_, granted) =
            zk_handshake(self.port, session.timeout_ms, Some(session), REPLY_TIMEOUT)?;
        Ok(granted.is_some_and(|g| g.id == session.id))
    }

    /// The server's log: everything it printed, over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    /// Where the log is.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("zookeeper.log")
    }

    /// The current data dir (`dataDir` in zoo.cfg).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn write_config(&self) -> PathBuf {
        let cfg = format!(
            "# written by xarchive-testkit\n\
             tickTime={tick}\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress=127.0.0.1\n\
             minSessionTimeout={min}\n\
             maxSessionTimeout={max}\n\
             admin.enableServer=false\n\
             # tests do not survive a machine crash; page cache is enough\n\
             forceSync=no\n",
            tick = Self::TICK_MS,
            data = self.data_dir.display(),
            port = self.port,
            min = Self::MIN_SESSION_TIMEOUT_MS,
            max = Self::MAX_SESSION_TIMEOUT_MS,
        );
        let path = self.dir.path().join("zoo.cfg");
        fs::write(&path, cfg).expect("cannot write zoo.cfg");
        path
    }

    /// Starts the process on `self.port` and waits until it is ready.
    fn spawn(&mut self) -> Result<(), StartError> {
        let cfg = self.write_config();
        let log_path = self.log_path();
        self.log_start = file_len(&log_path);
        let log = open_log(&log_path);
        let err = log.try_clone().expect("cannot duplicate the log handle");
        let child = Command::new("java")
            .args([
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
                ZOOKEEPER_MAIN,
            ])
            .arg(&cfg)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `java` for ZooKeeper (scripts/install-deps.sh installs it): {e}")
            });
        self.process = ServerProcess::new(child);

        let port = self.port;
        let log_start = self.log_start;
        let bound = format!(":{port}");
        let what = format!("ZooKeeper on port {port}");
        let log_since = || read_from(&log_path, log_start);
        let process = &self.process;
        // A handshake that arrives while the server is still loading its
        // data can go unanswered (ZooKeeper 3.8 hits a NullPointerException
        // closing it): hence short, growing reply timeouts.
        let mut timeout = ProbeTimeout::new();
        wait_ready(&what, process, log_since, || {
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
            let granted = timeout.probe(|t| match zk_handshake(port, 1000, None, t) {
                Ok((stream, Some(_))) => Some(stream),
                _ => None,
            });
            let Some(mut stream) = granted else {
                return false;
            };
            let _ = zk_close_session(&mut stream);
            process.is_running()
        })
    }
}

impl Drop for ZooKeeperServer {
    fn drop(&mut self) {
        self.process.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- ZooKeeper on port {} (a failing test): its log ends with:\n{}",
                self.port,
                tail(&self.log())
            );
        }
    }
}

fn check_file(path: &Path, what: &str) {
    if !path.exists() {
        panic!(
            "{} is missing: {what} is needed (scripts/install-deps.sh installs it)",
            path.display()
        );
    }
}

// ---------------------------------------------------------------------------
// Redis.

/// A `redis-server` on a free loopback port, without persistence, with its
/// dir and log in its own temp dir.
///
/// Use it for tests of the real record cache (the tail of its log is
/// printed if the test fails). [`stop`](Self::stop) +
/// [`start_again`](Self::start_again) is an outage on the same port after
/// which the cache is empty. Killed when dropped.
pub struct RedisServer {
    process: ServerProcess,
    port: u16,
    log_start: u64,
    stdio_start: u64,
    dir: TempDir,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    /// Panics (the test fails) if it cannot, with the tail of its log.
    pub fn start() -> RedisServer {
        let dir = tempfile::Builder::new()
            .prefix("xarchive-redis-")
            .tempdir()
            .expect("cannot create a temp dir for Redis");
        let mut server = RedisServer {
            process: ServerProcess::none(),
            port: 0,
            log_start: 0,
            stdio_start: 0,
            dir,
        };
        on_a_free_port("Redis", |port| {
            server.port = port;
            server.spawn()
        });
        server
    }

    /// The URL for a client: `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The port (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The pid of the running `redis-server` (for signals a test sends
    /// itself, such as SIGSTOP). Panics if the server is not running.
    pub fn pid(&self) -> u32 {
        self.process
            .pid()
            .unwrap_or_else(|| panic!("Redis on port {} is not running", self.port))
    }

    /// Whether the server process is alive.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Stops the server: SIGTERM, then SIGKILL after 10 s. Does nothing if
    /// it is not running.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Kills the server with SIGKILL (a crash, not a shutdown).
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts the server again on the same port (empty: nothing is
    /// persisted). Stops it first if it is running.
    pub fn start_again(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!(
                "cannot start Redis again on port {}: {}",
                self.port,
                e.message()
            );
        }
    }

    /// Whether the server answers `PING` with `+PONG` right now.
    pub fn ping(&self) -> bool {
        redis_ping(self.port, REPLY_TIMEOUT)
    }

    /// The server's log (its `--logfile`), over all its starts.
    pub fn log(&self) -> String {
        read_from(&self.log_path(), 0)
    }

    /// Where the log is.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn stdio_path(&self) -> PathBuf {
        self.dir.path().join("redis.stdio.log")
    }

    fn spawn(&mut self) -> Result<(), StartError> {
        let log_path = self.log_path();
        let stdio_path = self.stdio_path();
        self.log_start = file_len(&log_path);
        self.stdio_start = file_len(&stdio_path);
        let out = open_log(&stdio_path);
        let err = out.try_clone().expect("cannot duplicate the log handle");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log_path)
            .args(["--daemonize", "no"])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run `redis-server` (scripts/install-deps.sh installs it): {e}")
            });
        self.process = ServerProcess::new(child);

        let port = self.port;
        let (log_start, stdio_start) = (self.log_start, self.stdio_start);
        let what = format!("Redis on port {port}");
        let log_since = || read_from(&stdio_path, stdio_start) + &read_from(&log_path, log_start);
        let process = &self.process;
        let pid = process.pid();
        let mut timeout = ProbeTimeout::new();
        wait_ready(&what, process, log_since, || {
            // PONG, from our own process (not some other server that took
            // the port).
            timeout
                .probe(|t| redis_ping(port, t).then_some(()))
                .is_some()
                && pid.is_some()
                && timeout.probe(|t| redis_pid(port, t)) == pid
                && process.is_running()
        })
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.process.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- Redis on port {} (a failing test): its log ends with:\n{}",
                self.port,
                tail(&self.log())
            );
        }
    }
}

fn redis_ping(port: u16, reply_timeout: Duration) -> bool {
    let Ok(mut stream) = connect(port, reply_timeout) else {
        return false;
    };
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

/// The `process_id` from `INFO server`.
fn redis_pid(port: u16, reply_timeout: Duration) -> Option<u32> {
    let mut stream = connect(port, reply_timeout).ok()?;
    stream.write_all(b"INFO server\r\n").ok()?;
    // A bulk string: `$<len>\r\n<len bytes>\r\n`.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
            continue;
        };
        let header = std::str::from_utf8(&buf[..eol]).ok()?;
        let len: usize = header.strip_prefix('$')?.parse().ok()?;
        if buf.len() < eol + 2 + len {
            continue;
        }
        let body = std::str::from_utf8(&buf[eol + 2..eol + 2 + len]).ok()?;
        return body
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok());
    }
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

        let dir = tempfile::tempdir().unwrap();
        let mut redis = RedisServer {
            process: ServerProcess::none(),
            port: taken,
            log_start: 0,
            stdio_start: 0,
            dir,
        };
        assert!(matches!(redis.spawn(), Err(StartError::PortTaken(_))));

        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data-1");
        fs::create_dir_all(&data_dir).unwrap();
        let mut zk = ZooKeeperServer {
            process: ServerProcess::none(),
            port: taken,
            data_dir,
            generation: 1,
            log_start: 0,
            dir,
        };
        match zk.spawn() {
            Err(StartError::PortTaken(_)) => {}
            Err(StartError::Failed(m)) => panic!("expected PortTaken, got Failed: {m}"),
            Ok(()) => panic!("expected PortTaken, got a ready server"),
        }
        drop(holder);
    }
}
