#!/usr/bin/env bash
# One domain's throughput, measured: import rate of N sample records, and
# GET /v1/contains/{id} under wrk beside a minimal axum handler on the same
# runtime settings, in the same run. Prints a Markdown table.
#   scripts/bench-domain.sh [RECORDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-200000}
seconds=${2:-10}
command -v wrk >/dev/null || { sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo; $sudo apt-get install -y -qq wrk >/dev/null; }

# Two builds: `--example` would restrict a combined one to the example,
# leaving whatever xarchive binary was there before.
cargo build --release -q -p xarchive
cargo build --release -q -p xarchive-node --example minimal_axum
bin=target/release/xarchive
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

. scripts/lib.sh

$bin sample --count "$records" --out "$work/records.ndjson"
$bin serve --name bench --listen 127.0.0.1:0 --data "$work/data" --expected-items "$records" 2>"$work/serve.log" &
pids+=($!)
addr=$(listening_at "$work/serve.log" "${pids[-1]}")
import=$($bin import "$work/records.ndjson" --server "http://$addr" | tail -1)
rate=$(echo "$import" | grep -o '[0-9]* records/s' | cut -d' ' -f1)

target/release/examples/minimal_axum 127.0.0.1:0 >"$work/minimal.log" 2>&1 &
pids+=($!)
base=$(listening_at "$work/minimal.log" "${pids[-1]}")
id=$($bin sample --count 1 | sed 's/.*"id":"\([^"]*\)".*/\1/')
path="/v1/contains/$(printf '%s' "$id" | od -An -tx1 | tr -s ' ' | sed 's/ /%/g' | tr -d '\n')"
rps() { wrk -t1 -c64 -d"${seconds}s" "http://$1$path" | awk '/Requests\/sec/ {print $2}'; }
minimal=$(rps "$base")
contains=$(rps "$addr")
ratio=$(awk -v a="$contains" -v b="$minimal" 'BEGIN {printf "%.2f", a/b}')

echo "| measurement | value |"
echo "|---|---|"
echo "| import of $records sample records | $rate records/s |"
echo "| GET /v1/contains/{id}, wrk -t1 -c64 -d${seconds}s | $contains requests/s |"
echo "| minimal axum handler, same wrk run | $minimal requests/s |"
echo "| contains / minimal | $ratio |"
