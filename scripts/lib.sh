# Shared by the benchmark scripts: source it.

# listening_at LOG [PID]: waits for the "listening on http://ADDR" line a
# domain (or the minimal axum example) writes to LOG once it serves, and
# prints ADDR; fails with the log if PID exits first or after 5 minutes
# (a domain loading a million records takes a while).
listening_at() {
  local addr
  for _ in $(seq 6000); do
    addr=$(grep -o 'listening on http://[0-9.:]*' "$1" 2>/dev/null | head -1 | sed 's|listening on http://||') || true
    [ -n "$addr" ] && { echo "$addr"; return; }
    if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
      echo "server exited: $(cat "$1")" >&2; return 1
    fi
    sleep 0.05
  done
  echo "server did not start: $(cat "$1")" >&2; return 1
}
