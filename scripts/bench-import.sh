#!/usr/bin/env bash
# Keyed imports, two builds alternated: each run starts a fresh domain with
# one binary and imports the same records with it, recording the rate the
# import prints and the server's CPU time (utime + stime, in clock ticks).
# Prints each binary's runs sorted and their medians (docs/BENCHMARKS.md §3).
#   scripts/bench-import.sh BEFORE_BIN AFTER_BIN [RUNS] [RECORDS]
# RECORDS sample records are made (default 200 000); the personnel ones,
# which carry keys (a quarter), are imported.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,8p "$0" >&2; exit 2; }
. "$(dirname "$0")/lib.sh"
bins=("$1" "$2")
runs=${3:-7}
records=${4:-200000}
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

"${bins[1]}" sample --count "$records" --out "$work/all.ndjson"
grep '"keys"' "$work/all.ndjson" >"$work/keyed.ndjson"

one() { # BIN → "RATE TICKS"
  local data="$work/data" log="$work/serve.log" addr
  rm -rf "$data"
  "$1" serve --name bench --listen 127.0.0.1:0 --data "$data" --expected-items "$records" 2>"$log" &
  pid=$!
  addr=$(listening_at "$log" "$pid")
  local rate ticks
  rate=$("$1" import "$work/keyed.ndjson" --server "http://$addr" | grep -o '[0-9]* records/s' | cut -d' ' -f1)
  ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  echo "$rate $ticks"
}

declare -a rates=("" "") ticks=("" "")
for _ in $(seq "$runs"); do
  for i in 0 1; do
    read -r r t < <(one "${bins[$i]}")
    rates[$i]+="$r "; ticks[$i]+="$t "
  done
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
sorted() { tr ' ' '\n' | grep . | sort -n | tr '\n' ' '; }
echo "| | rate, records/s (sorted) | median | server CPU, ticks (sorted) | median |"
echo "|---|---|---|---|---|"
for i in 0 1; do
  name=$([ "$i" = 0 ] && echo before || echo after)
  echo "| $name | $(echo "${rates[$i]}" | sorted)| $(echo "${rates[$i]}" | median) | $(echo "${ticks[$i]}" | sorted)| $(echo "${ticks[$i]}" | median) |"
done
