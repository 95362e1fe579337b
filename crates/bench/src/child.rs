//! `xarchive serve` as a child of a benchmark, for figures that only a
//! separate process shows (its resident memory): started from the
//! `xarchive` binary beside this one (Cargo builds both into the same
//! folder), its address read from its log, stopped by process id
//! (SIGTERM, then SIGKILL if it lingers), and killed when dropped so that
//! an error or a panic in the benchmark leaves no orphan.
//!
//! (The test harness's `DomainProcess` does the same for tests; a
//! benchmark cannot depend on it.)

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use xarchive_node::ApiClient;

/// How long a start or a stop may take before the benchmark gives up.
const PATIENCE: Duration = Duration::from_mins(2);

/// A running `xarchive serve`.
pub struct ServeChild {
    child: Option<Child>,
    pid: u32,
    pub url: String,
    log: PathBuf,
}

/// A process's memory, from `/proc/<pid>/status`, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ProcMemory {
    /// `VmRSS`: resident now.
    #[serde(rename = "vm_rss_bytes")]
    pub rss: u64,
    /// `VmHWM`: the most that was ever resident.
    #[serde(rename = "vm_hwm_bytes")]
    pub hwm: u64,
    /// `RssAnon`: the resident part not backed by a file (heap, stacks),
    /// i.e. without the binary's own pages; absent on old kernels.
    #[serde(rename = "rss_anon_bytes")]
    pub rss_anon: Option<u64>,
}

/// Reads the memory figures out of the text of `/proc/<pid>/status`
/// (lines such as `VmRSS:` then a tab, spaces and `12345 kB`).
pub fn parse_status(text: &str) -> Option<ProcMemory> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let mut words = rest.split_whitespace();
            let value: u64 = words.next()?.parse().ok()?;
            match words.next() {
                Some("kB") => value.checked_mul(1024),
                _ => None,
            }
        })
    };
    Some(ProcMemory {
        rss: field("VmRSS")?,
        hwm: field("VmHWM")?,
        rss_anon: field("RssAnon"),
    })
}

/// The `xarchive` binary beside `exe` (this program's own binary): Cargo
/// builds both into one folder, `target/release` or `target/debug`.
/// Fails, naming where it looked and what builds it, if it is not there.
pub fn xarchive_beside(exe: &Path) -> anyhow::Result<PathBuf> {
    let folder = exe.parent().unwrap_or(Path::new("."));
    let binary = folder.join("xarchive");
    if binary.is_file() {
        return Ok(binary);
    }
    let release = if folder.ends_with("release") {
        " --release"
    } else {
        ""
    };
    bail!(
        "the xarchive binary is not at {}: this benchmark runs `xarchive serve` from beside \
         xarchive-bench; build it there with `cargo build{release} -p xarchive`",
        binary.display()
    )
}

impl ServeChild {
    /// Starts `xarchive serve --name NAME --data DATA ARGS…` on a loopback
    /// port of its choosing, appending its log to `log`, and returns once
    /// it is ready.
    pub async fn start(
        name: &str,
        data: &Path,
        args: &[String],
        log: &Path,
    ) -> anyhow::Result<ServeChild> {
        let exe = std::env::current_exe().context("cannot find this program's own binary")?;
        let exe = xarchive_beside(&exe)?;
        let mut command = Command::new(&exe);
        // The child takes its settings from these arguments only, not from
        // XARCHIVE_* variables meant for this command (XARCHIVE_ZK would
        // make it join a ZooKeeper cluster).
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("XARCHIVE_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .arg("serve")
            .args(["--name", name, "--listen", "127.0.0.1:0"])
            .arg("--data")
            .arg(data)
            .args(args)
            .env("XARCHIVE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {} serve", exe.display()))?;
        let pid = child.id();
        let stderr = child.stderr.take();
        let mut this = ServeChild {
            child: Some(child),
            pid,
            url: String::new(),
            log: log.to_owned(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        if let Some(stderr) = stderr {
            // Drains the child's log (a full pipe would stall it) until it
            // exits, passing on the address it listens on.
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    // `http://`, or `https://` with TLS on.
                    if let Some(at) = line.find("listening on http") {
                        if let Some(url) =
                            line[at + "listening on ".len()..].split_whitespace().next()
                        {
                            let _ = tx.send(url.to_owned());
                        }
                    }
                    let _ = writeln!(file, "{line}");
                }
            });
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            match rx.try_recv() {
                Ok(url) => {
                    this.url = url;
                    break;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    bail!("the domain exited before listening{}", this.log_tail())
                }
            }
            this.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "the domain did not listen within {PATIENCE:?}{}",
                    this.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Ready means /readyz answers 200, not merely /healthz: the log line
        // above comes once the store is open and the filter loaded, and
        // /readyz answers once the server accepts and the coordinator (here
        // the in-process one) has confirmed the membership, so every piece
        // a serving domain holds is in place; /healthz would only say that
        // the HTTP server answers.
        let client = ApiClient::new(&this.url, Duration::from_secs(10))?;
        while client.ready().await.is_err() {
            this.check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "the domain was not ready within {PATIENCE:?}{}",
                    this.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(this)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its memory now.
    pub fn memory(&self) -> anyhow::Result<ProcMemory> {
        let path = format!("/proc/{}/status", self.pid);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {path} (resident memory is read on Linux)"))?;
        parse_status(&text).with_context(|| format!("no VmRSS or VmHWM in {path}"))
    }

    /// SIGTERM (the domain saves its filter snapshot), then waits for it
    /// to exit; SIGKILL if it has not within the patience.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // Not yet reaped, so the pid is still this child's.
        let raw = i32::try_from(self.pid).context("process id out of range")?;
        if let Err(e) = kill(Pid::from_raw(raw), Signal::SIGTERM) {
            // It may have exited already; try_wait below tells.
            tracing::debug!("SIGTERM to {}: {e}", self.pid);
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = child.try_wait()? {
                if !status.success() {
                    bail!("the domain exited with {status}{}", self.log_tail());
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the domain did not stop within {PATIENCE:?} of SIGTERM; killed");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(child) = self.child.as_mut() {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                bail!("the domain exited with {status}{}", self.log_tail());
            }
        }
        Ok(())
    }

    /// The end of its log, for an error message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        format!("; the end of its log ({}):\n{tail}", self.log.display())
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_text_gives_bytes() {
        let text = "Name:\txarchive\nVmPeak:\t  900000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   30000 kB\nRssFile:\t   10960 kB\nThreads:\t5\n";
        assert_eq!(
            parse_status(text),
            Some(ProcMemory {
                rss: 40960 * 1024,
                hwm: 51234 * 1024,
                rss_anon: Some(30000 * 1024),
            })
        );
        // RssAnon is optional; VmRSS and VmHWM are not, and need their unit.
        let old = "VmHWM:\t 2 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(
            parse_status(old).map(|m| (m.rss, m.rss_anon)),
            Some((1024, None))
        );
        assert_eq!(parse_status("VmHWM:\t 2 kB\n"), None);
        assert_eq!(parse_status("VmHWM:\t 2 kB\nVmRSS:\t 1\n"), None);
        assert_eq!(parse_status("VmHWM:\t 2 kB\nVmRSSx:\t 1 kB\n"), None);
    }

    #[test]
    fn a_missing_xarchive_binary_is_named_with_the_command_that_builds_it() {
        let dir = xarchive_testkit::tempdir().unwrap();
        let release = dir.path().join("release");
        std::fs::create_dir(&release).unwrap();
        let said = xarchive_beside(&release.join("xarchive-bench"))
            .unwrap_err()
            .to_string();
        assert!(
            said.contains(&release.join("xarchive").display().to_string()),
            "{said}"
        );
        assert!(
            said.contains("cargo build --release -p xarchive`"),
            "{said}"
        );

        std::fs::write(release.join("xarchive"), b"").unwrap();
        assert_eq!(
            xarchive_beside(&release.join("xarchive-bench")).unwrap(),
            release.join("xarchive")
        );
    }
}
