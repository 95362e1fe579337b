#!/usr/bin/env bash
# Starts a throwaway ZooKeeper (Debian's package) on a free loopback port
# in a temporary directory, runs the given command with XARCHIVE_ZK set to
# its address, then stops it by process id. For benchmarks and trying the
# distributed mode by hand:
#   scripts/zookeeper.sh target/release/xarchive-bench sync
# (`cargo build --release -p xarchive -p xarchive-bench` first).
# ZK_HEAP sets its Java heap (default 256m; `xarchive-bench nation` at
# 3 301 domains wants 2g). Connections per client address are not limited
# (`xarchive-bench nation` opens a session per light domain from one
# process), and `mntr` is allowed (it reads ZooKeeper's own figures).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
dir=$(mktemp -d)
port=$(shuf -i 20000-60000 -n 1)
cat >"$dir/zoo.cfg" <<CFG
tickTime=200
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
minSessionTimeout=400
maxSessionTimeout=20000
maxClientCnxns=0
4lw.commands.whitelist=mntr,srvr,ruok
CFG
java -Xmx"${ZK_HEAP:-256m}" -XX:+UseSerialGC -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
  org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" >"$dir/zookeeper.log" 2>&1 &
zk=$!
# Exits with the command's status, not that of stopping ZooKeeper (under
# `set -e` a failing `wait` would end the trap there).
trap 'status=$?; kill "$zk" 2>/dev/null; wait "$zk" 2>/dev/null || true; rm -rf "$dir"; exit "$status"' EXIT
for _ in $(seq 150); do
  grep -q "binding to port" "$dir/zookeeper.log" 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
sleep 0.5
echo "ZooKeeper on 127.0.0.1:$port (pid $zk)" >&2
XARCHIVE_ZK="127.0.0.1:$port" "$@"
