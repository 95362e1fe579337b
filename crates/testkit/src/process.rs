//! `xarchive serve` as a child process: started on a port it picks itself
//! (its log names the address), stopped by SIGTERM or SIGKILL.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::signal::{self, Signal};

/// A loopback port that was free a moment ago (for servers that cannot
/// be told to pick their own).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind a loopback port")
}

/// How to start a domain: the binary, its name and data directory, and
/// any further arguments and environment.
#[derive(Clone, Debug)]
pub struct Spawn {
    pub bin: PathBuf,
    pub name: String,
    pub data: PathBuf,
    pub listen: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Spawn {
    pub fn new(bin: &Path, name: &str, data: &Path) -> Self {
        Spawn {
            bin: bin.to_owned(),
            name: name.to_owned(),
            data: data.to_owned(),
            listen: "127.0.0.1:0".into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    #[must_use]
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    #[must_use]
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    #[must_use]
    pub fn listen(mut self, addr: &str) -> Self {
        self.listen = addr.into();
        self
    }

    pub fn start(self) -> DomainProcess {
        DomainProcess::start(self)
    }
}

/// A running `xarchive serve`. Killed when dropped.
pub struct DomainProcess {
    pub spawn: Spawn,
    /// Where it listens, as its log says: `http://…`, or `https://…`
    /// with TLS on.
    pub url: String,
    child: Option<Child>,
}

impl DomainProcess {
    fn start(spawn: Spawn) -> DomainProcess {
        let log_path = spawn.data.with_extension("log");
        if let Some(parent) = log_path.parent() {
            std::fs::create_dir_all(parent).expect("cannot create the log directory");
        }
        let mut child = Command::new(&spawn.bin)
            .arg("serve")
            .args(["--name", &spawn.name, "--listen", &spawn.listen])
            .arg("--data")
            .arg(&spawn.data)
            .args(&spawn.args)
            .envs(spawn.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("XARCHIVE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", spawn.bin.display()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        let log_for_thread = log_path.clone();
        std::thread::spawn(move || {
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_for_thread)
                .ok();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // Written before the address is told: a test that reads
                // the log once the domain started finds the line there.
                if let Some(log) = log.as_mut() {
                    let _ = writeln!(log, "{line}");
                }
                // `http://` or, with TLS on, `https://`.
                if let Some(at) = line.find("listening on http") {
                    // Up to a space, or a quote when the log is JSON.
                    let url = line[at + "listening on ".len()..]
                        .split(|c: char| c.is_whitespace() || c == '"')
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let _ = tx.send(url);
                }
            }
        });
        let Ok(url) = rx.recv_timeout(Duration::from_mins(1)) else {
            let _ = child.kill();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!(
                "domain {} did not start within 60 s; its log:\n{log}",
                spawn.name
            );
        };
        DomainProcess {
            spawn,
            url,
            child: Some(child),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGKILL: no chance to save anything.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for the process to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the domain is running");
        // Not yet reaped, so the pid is still this child's. If it cannot
        // be signalled it has exited, which the loop below sees.
        let _ = signal::send(&child, Signal::SIGTERM);
        for _ in 0..1500 {
            if let Ok(Some(status)) = child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        panic!(
            "domain {} did not stop within 30 s of SIGTERM",
            self.spawn.name
        );
    }

    /// Starts the same domain again (on a port of its choosing, unless
    /// `listen` was fixed).
    pub fn restart(&mut self) {
        self.kill9();
        let again = DomainProcess::start(self.spawn.clone());
        *self = again;
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.spawn.data.with_extension("log")).unwrap_or_default()
    }
}

impl Drop for DomainProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}
