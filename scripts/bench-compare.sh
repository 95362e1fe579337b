#!/usr/bin/env bash
# Two builds of xarchive measured in one sitting, alternated round by
# round, on the benchmarks that must not get worse: Table 2 (lookups
# across 8 domains, routed and broadcast), searches by key, the cache
# (memory and Redis, Zipf), sync (a write until a peer routes it, real
# ZooKeeper) and GET /v1/contains under wrk. Prints each figure's median
# per build and the ratio after ÷ before (docs/BENCHMARKS.md).
#   scripts/zookeeper.sh scripts/redis.sh scripts/bench-compare.sh BEFORE_DIR AFTER_DIR [ROUNDS]
# Each DIR holds a release `xarchive` and, if that build has one,
# `xarchive-bench` (older builds ran the benchmarks as `xarchive bench`).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,10p "$0" >&2; exit 2; }
: "${XARCHIVE_ZK:?run under scripts/zookeeper.sh}" "${XARCHIVE_REDIS:?run under scripts/redis.sh}"
. "$(dirname "$0")/lib.sh"
dirs=("$1" "$2")
rounds=${3:-3}
command -v wrk >/dev/null || { sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo; $sudo apt-get install -y -qq wrk >/dev/null; }
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
results="$work/results.tsv" # build \t figure \t value

bench() { # DIR ARGS...
  local dir=$1; shift
  if [ -x "$dir/xarchive-bench" ]; then "$dir/xarchive-bench" "$@"; else "$dir/xarchive" bench "$@"; fi
}

# figure NAME VALUE for build I
note() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"; }

# The p50, throughput of one run of a lookup report: STRATEGY CACHE USERS FIELD
run_field() {
  python3 -c '
import json, sys
report = json.load(open(sys.argv[1]))
for run in report["runs"]:
    if (run["strategy"], run["cache"], run["users"]) == (sys.argv[2], sys.argv[3], int(sys.argv[4])):
        print(run[sys.argv[5]]); break
else:
    sys.exit("no such run in " + sys.argv[1])
' "$@"
}

one_round() { # I
  local i=$1 dir=${dirs[$1]} json="$work/lookup.json"
  bench "$dir" lookup --domains 8 --concurrency 10,100 --wan-delay 20ms --duration 3s \
    --json "$json" --plot "$work/lookup.svg" >/dev/null
  note "$i" "Table 2: routed p50 at 10 users, ms" "$(run_field "$json" routed none 10 p50_ms)"
  note "$i" "Table 2: routed p50 at 100 users, ms" "$(run_field "$json" routed none 100 p50_ms)"
  note "$i" "Table 2: broadcast p50 at 100 users, ms" "$(run_field "$json" broadcast none 100 p50_ms)"
  note "$i" "Table 2: routed lookups/s at 100 users" "$(run_field "$json" routed none 100 throughput)"

  bench "$dir" lookup --workload keys --domains 8 --concurrency 10,100 --wan-delay 20ms --duration 3s \
    --json "$json" --plot "$work/lookup.svg" >/dev/null
  note "$i" "search p50 at 10 users, ms" "$(run_field "$json" search none 10 p50_ms)"
  note "$i" "search p50 at 100 users, ms" "$(run_field "$json" search none 100 p50_ms)"

  bench "$dir" lookup --domains 8 --records 100000 --workload zipf --strategies routed \
    --cache memory,redis --concurrency 100 --warmup 15s --duration 5s \
    --json "$json" --plot "$work/lookup.svg" >/dev/null
  note "$i" "cache, memory: p50 at 100 users, ms" "$(run_field "$json" routed memory 100 p50_ms)"
  note "$i" "cache, Redis: p50 at 100 users, ms" "$(run_field "$json" routed redis 100 p50_ms)"
  note "$i" "cache, memory: lookups/s at 100 users" "$(run_field "$json" routed memory 100 throughput)"

  bench "$dir" sync --samples 300 >"$work/sync.out"
  note "$i" "sync: acknowledgement to routed elsewhere, median ms" \
    "$(tail -1 "$work/sync.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ack_to_routed_ms"]["median"])')"

  local data="$work/data" log="$work/serve.log" addr
  rm -rf "$data"
  "$dir/xarchive" serve --name bench --listen 127.0.0.1:0 --data "$data" 2>"$log" &
  pid=$!
  addr=$(listening_at "$log" "$pid")
  "$dir/xarchive" import "$work/records.ndjson" --server "http://$addr" >/dev/null
  note "$i" "GET /v1/contains, requests/s" \
    "$(wrk -t1 -c64 -d10s "http://$addr$contains" | awk '/Requests\/sec/ {print $2}')"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

"${dirs[1]}/xarchive" sample --count 20000 --out "$work/records.ndjson"
id=$("${dirs[1]}/xarchive" sample --count 1 | sed 's/.*"id":"\([^"]*\)".*/\1/')
contains="/v1/contains/$(printf '%s' "$id" | od -An -tx1 | tr -s ' ' | sed 's/ /%/g' | tr -d '\n')"

for round in $(seq "$rounds"); do
  for i in 0 1; do
    echo "round $round of $rounds: $([ "$i" = 0 ] && echo before || echo after) (${dirs[$i]})" >&2
    one_round "$i"
  done
done

python3 - "$results" "$rounds" <<'PY'
import statistics, sys
from collections import defaultdict
values = defaultdict(lambda: ([], []))
order = []
for line in open(sys.argv[1]):
    build, figure, value = line.rstrip("\n").split("\t")
    if figure not in order:
        order.append(figure)
    values[figure][int(build)].append(float(value))
print(f"medians of {sys.argv[2]} rounds, before and after alternated")
print()
print("| figure | before (each round) | after (each round) | before, median | after, median | after ÷ before |")
print("|---|---|---|---|---|---|")
for figure in order:
    b, a = values[figure]
    mb, ma = statistics.median(b), statistics.median(a)
    each = lambda xs: " / ".join(f"{x:.4g}" for x in xs)
    print(f"| {figure} | {each(b)} | {each(a)} | {mb:.4g} | {ma:.4g} | {ma / mb:.3f} |")
PY
