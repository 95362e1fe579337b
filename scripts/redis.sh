#!/usr/bin/env bash
# Starts a throwaway Redis (Debian's package) on a free loopback port,
# runs the given command with XARCHIVE_REDIS (its URL) and
# XARCHIVE_REDIS_PID set, then stops it by process id. For benchmarks:
#   scripts/redis.sh sh -c 'target/release/xarchive-bench lookup --cache none,memory,redis'
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
dir=$(mktemp -d)
port=$(shuf -i 20000-60000 -n 1)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" --daemonize no >/dev/null 2>&1 &
pid=$!
# Exits with the command's status, not that of stopping Redis (under
# `set -e` a failing `wait` would end the trap there).
trap 'status=$?; kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; exit "$status"' EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.05
done
echo "Redis on 127.0.0.1:$port (pid $pid)" >&2
XARCHIVE_REDIS="redis://127.0.0.1:$port/0" XARCHIVE_REDIS_PID="$pid" "$@"
