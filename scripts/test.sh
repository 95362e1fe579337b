#!/usr/bin/env bash
# The whole test suite: installs what the tests need when it is missing
# (scripts/install-deps.sh), then runs every Rust test (unit, property,
# in-process handler tests, process-level tests against real ZooKeeper and
# Redis servers; the API's contract fuzzed by Schemathesis), the alert
# rules' tests (promtool), the JavaScript tests (the browser's filter
# reader against vectors written by the Rust library; every string the
# page shows in both languages), the page's end-to-end test in headless
# Chromium against a real `xarchive up` (axe-core's WCAG 2.1 AA rules
# included; screenshots in test-artifacts/), and the Debian package
# (scripts/test-package.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

# What the tests run against, so that a failure report carries it.
version() { printf '%-10s %s\n' "$1" "$(sh -c "$2" 2>&1 | head -n 1)"; }
echo "versions used by the tests:"
version rustc 'rustc --version'
version chromium '/usr/bin/chromium --version 2>/dev/null'
version node 'node --version'
version java 'java -version'
version zookeeper "dpkg-query -W -f '\${Version}' zookeeper"
version redis 'redis-server --version'
version promtool 'promtool --version'
version schemathesis "${SCHEMATHESIS_VENV:-/opt/xarchive-test/schemathesis}/bin/st --version"
echo
node --test web/test/
# Build every test target first: this also builds target/debug/xarchive,
# the binary the page test starts, with the same features (a separate
# `cargo build` would resolve other features and build the dependencies a
# second time, doubling the disk a clean build needs).
cargo test --workspace --locked --no-run
cargo test --workspace --locked "$@"

# The Prometheus alert rules (promtool's rule tests) and the Grafana
# dashboard's queries; the metric names they use are checked against a real
# /metrics by tests/ops.rs, already run above.
scripts/check-ops.sh --no-cargo

# The page in a real browser: the driver, then the test.
npm ci --prefix web/e2e --no-audit --no-fund
node --test web/e2e/

# The Debian package: built with cargo-deb (a release build), its contents,
# metadata and unit checked, installed into this system and purged (root).
scripts/test-package.sh
