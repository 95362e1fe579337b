//! What the integration tests share: isolated temp dirs, the `xarchive`
//! binary run as real processes, and real servers (ZooKeeper, Redis)
//! started on free loopback ports and stopped by process id.
//!
//! Nothing here skips: a server that cannot start is a test failure.

mod link;
mod process;
mod servers;
mod signal;
mod tmpfs;

pub use link::LoopbackLink;
pub use process::{free_port, DomainProcess, Spawn};
pub use servers::{
    zookeeper_java_args, RedisServer, ZkSession, ZooKeeperServer, ZOOKEEPER_CLASSPATH,
};
pub use tempfile::{tempdir, TempDir};
pub use tmpfs::Tmpfs;

/// A short stand-in for `bytes` (to compare files and bodies before and
/// after a request, with failure messages that stay readable).
pub fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// IDs whose writes were acknowledged, in that order, shared between a
/// test's tasks: what a crash or a race must never lose.
#[derive(Debug, Default)]
pub struct Acknowledged(std::sync::Mutex<Vec<String>>);

impl Acknowledged {
    pub fn extend(&self, ids: impl IntoIterator<Item = String>) {
        self.ids().extend(ids);
    }

    pub fn len(&self) -> usize {
        self.ids().len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids().is_empty()
    }

    /// The `n`-th ID, counting round (none while nothing is acknowledged).
    pub fn pick(&self, n: usize) -> Option<String> {
        let ids = self.ids();
        (!ids.is_empty()).then(|| ids[n % ids.len()].clone())
    }

    pub fn all(&self) -> Vec<String> {
        self.ids().clone()
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // A task that panicked holding the lock has failed the test already.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Fails the test with a message unless `f` becomes true within `secs`.
pub fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("timed out after {secs} s waiting for {what}");
}

/// Runs `command` to its end and returns its standard output; fails the
/// test, showing both outputs, unless it exits successfully.
pub fn stdout_of(command: &mut std::process::Command) -> String {
    let out = command.output().expect("the command runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}\n{text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}
