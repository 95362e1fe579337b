//! Real ZooKeeper and Redis servers for integration tests.
//!
//! Each server runs as a child process on a free loopback port, in its own
//! temp directory (config, data and log live there), and is stopped by
//! process id: SIGTERM (sent with `kill(2)`) with a grace period, then
//! SIGKILL. Dropping a server kills it. Nothing here skips: a server that
//! cannot start panics with the reason and the tail of its log.
//!
//! The binaries come from Debian's packages (`scripts/install-deps.sh`):
//! `java` plus `/usr/share/java/zookeeper.jar`, and `redis-server`.
//!
//! - `process`: the lifecycle both servers share (start on a free port,
//!   wait until ready, stop, kill, start again, log tail on failure);
//! - `zookeeper` and `redis`: how each server is run and probed;
//! - `zk_wire` and `redis_wire`: just enough of each protocol to probe;
//! - `probe` and `logs`: loopback connections and log files.

mod logs;
mod probe;
mod process;
mod redis;
mod redis_wire;
mod zk_wire;
mod zookeeper;

pub use redis::RedisServer;
pub use zk_wire::ZkSession;
pub use zookeeper::{zookeeper_java_args, ZooKeeperServer, ZOOKEEPER_CLASSPATH};
