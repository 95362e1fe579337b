#!/usr/bin/env bash
# What rotating the cluster secret costs one domain: RECORDS records, each
# with an identity number and a name with birth date (two private keys), are
# imported under one secret; the domain is restarted under the same secret
# (the saved filters are loaded), then under a new one (both filters are
# rebuilt from the store, the key filter under the new key, in a new epoch,
# so every peer takes a snapshot of each). Prints a Markdown table.
#   scripts/bench-rotation.sh [RECORDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
records=${1:-1000000}

cargo build --release -q -p xarchive
bin=target/release/xarchive
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# Records whose every one carries keys (the sample's carry keys on every
# fourth only): valid identity numbers (GB 11643 check character).
python3 - "$records" >"$work/records.ndjson" <<'EOF'
import json, sys
weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
out = sys.stdout
for i in range(int(sys.argv[1])):
    body = "%06d%04d%02d%02d%03d" % (110101 + i % 7, 1940 + i % 70, 1 + i // 70 % 12, 1 + i // 840 % 28, i // 23520 % 1000)
    card = body + "10X98765432"[sum(int(c) * w for c, w in zip(body, weights)) % 11]
    line = {"id": "R-%d" % i, "title": "人事档案", "keys": {"id_card": card, "name_birth": "张伟%d|%s-%s-%s" % (i, body[6:10], body[10:12], body[12:14])}}
    out.write(json.dumps(line, ensure_ascii=False) + "\n")
EOF

head -c 32 /dev/urandom | base64 >"$work/old.secret"
head -c 32 /dev/urandom | base64 >"$work/new.secret"
printf '[auth]\nrate_per_second = 10000\nrate_burst = 10000\n' >"$work/domain.toml"
token=$($bin token create --role write --name bench --config "$work/domain.toml" 2>/dev/null)

serve() { # serve SECRET LOG: starts the domain, waits until it is ready
  $bin serve --config "$work/domain.toml" --name R --listen 127.0.0.1:0 --data "$work/data" \
    --expected-items "$records" --cluster-secret-file "$1" 2>"$2" &
  pid=$!
  addr=$(listening_at "$2" "$pid")
}
stop() { kill -TERM "$pid"; wait "$pid" || true; pid=""; }
elapsed() { grep -o "$2.*elapsed_ms=[0-9]*" "$1" | grep -o 'elapsed_ms=[0-9]*' | cut -d= -f2 | tail -1; }
member() { # the token members present: derived from the cluster and the secret
  printf 'xam_%s' "$(printf 'xarchive member\0default\0%s' "$(tr -d '\n' <"$1")" | sha256sum | cut -d' ' -f1)"
}

serve "$work/old.secret" "$work/first.log"
import=$($bin import "$work/records.ndjson" --server "http://$addr" --token "$token" | tail -1)
rate=$(echo "$import" | grep -o '[0-9]* records/s' | cut -d' ' -f1)
stop

serve "$work/old.secret" "$work/same.log"
loaded=$(elapsed "$work/same.log" "loaded the saved filter snapshot")
stop

started=$(date +%s%N)
serve "$work/new.secret" "$work/rotated.log"
until curl -sf "http://$addr/readyz" >/dev/null; do sleep 0.05; done
ready_ms=$(( ($(date +%s%N) - started) / 1000000 ))
rebuilt=$(elapsed "$work/rotated.log" "rebuilt the filters from the store")
size() { curl -s -o /dev/null -w '%{size_download}' -H "authorization: Bearer $(member "$work/new.secret")" "http://$addr$1"; }
key_bytes=$(size /v1/filter/keys)
id_bytes=$(size /v1/filter)
stop

echo "| $records records, two private keys each | value |"
echo "|---|---|"
echo "| import under the first secret | $rate records/s |"
echo "| restart, same secret: saved filters loaded | $loaded ms |"
echo "| restart, new secret: both filters rebuilt from the store | $rebuilt ms |"
echo "| restart, new secret: start to /readyz | $ready_ms ms |"
echo "| key filter each peer then fetches (bit view) | $key_bytes bytes |"
echo "| filter each peer then fetches (new epoch) | $id_bytes bytes |"
