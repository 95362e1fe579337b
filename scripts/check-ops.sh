#!/usr/bin/env bash
# Checks the operators' files under ops/ (docs/OPERATIONS.md, "Dashboards
# and alerts"):
#   1. the Prometheus alert rules:  promtool check rules ops/prometheus/alerts.yml
#   2. their unit tests:            promtool test rules ops/prometheus/alerts.test.yml
#   3. the Grafana dashboard is JSON, and the PromQL of every panel parses
#      (promtool check rules over them, with Grafana's variables filled in)
#   4. every metric the rules, their tests and the dashboard name is one a
#      domain exports, and the dashboard takes its Prometheus from a variable:
#      cargo test -p xarchive-node --test ops (reads /metrics of in-process
#      domains; `--no-cargo` skips it where the Rust tests run anyway).
# promtool comes with Debian's `prometheus` package.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo=1
for arg in "$@"; do
  case "$arg" in
    --no-cargo) cargo=0 ;;
    *) echo "usage: $0 [--no-cargo]" >&2; exit 2 ;;
  esac
done

rules=ops/prometheus/alerts.yml
tests=ops/prometheus/alerts.test.yml
dashboard=ops/grafana/xarchive.json

if ! command -v promtool >/dev/null 2>&1; then
  echo "error: promtool not found; it comes with Debian's prometheus package:" >&2
  echo "       sudo apt-get install --no-install-recommends prometheus   (or scripts/install-deps.sh)" >&2
  exit 1
fi
echo "== $(promtool --version 2>&1 | head -n 1)"

echo "== promtool check rules $rules"
promtool check rules "$rules"

echo "== promtool test rules $tests"
promtool test rules "$tests"

# The `expr` of every panel, one JSON string a line; fails on invalid JSON.
panel_exprs() {
  if command -v jq >/dev/null 2>&1; then
    jq -c '.. | objects | select(.expr | type == "string") | .expr' "$dashboard"
  elif command -v python3 >/dev/null 2>&1; then
    python3 - "$dashboard" <<'PY'
import json, sys
def walk(v):
    if isinstance(v, dict):
        if isinstance(v.get("expr"), str):
            print(json.dumps(v["expr"]))
        for x in v.values():
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
walk(json.load(open(sys.argv[1], encoding="utf-8")))
PY
  else
    echo "error: need jq or python3 to read $dashboard" >&2
    return 1
  fi
}

echo "== $dashboard: JSON, and the PromQL of its panels"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
panel_exprs >"$tmp/exprs" || { echo "error: $dashboard is not valid JSON" >&2; exit 1; }
n=$(wc -l <"$tmp/exprs")
if [ "$n" -eq 0 ]; then
  echo "error: no panel queries found in $dashboard" >&2
  exit 1
fi
{
  echo "groups:"
  echo "  - name: dashboard"
  echo "    rules:"
  i=0
  while IFS= read -r expr; do
    i=$((i + 1))
    # A JSON string is a YAML double-quoted scalar; Grafana's variables
    # become what they stand for.
    expr=${expr//\$__rate_interval/5m}
    expr=${expr//\$job/.*}
    expr=${expr//\$instance/.*}
    echo "      - record: dashboard_panel_query_$i"
    echo "        expr: $expr"
  done <"$tmp/exprs"
} >"$tmp/dashboard-rules.yml"
if ! promtool check rules "$tmp/dashboard-rules.yml" >"$tmp/out" 2>&1; then
  cat -n "$tmp/dashboard-rules.yml" >&2
  cat "$tmp/out" >&2
  echo "error: a panel query of $dashboard does not parse (the queries as checked are above)" >&2
  exit 1
fi
echo "  SUCCESS: $n panel queries parse"

if [ "$cargo" -eq 1 ]; then
  echo "== the metrics named are exported: cargo test -p xarchive-node --test ops"
  cargo test -p xarchive-node --locked --test ops
fi
echo "ops checks passed"
