#!/usr/bin/env bash
# The whole test suite: installs what the tests need when it is missing
# (scripts/install-deps.sh), then runs every Rust test (unit, property,
# in-process handler tests, process-level tests against real ZooKeeper and
# Redis servers), the JavaScript tests (the browser's filter reader against
# vectors written by the Rust library) and the page's end-to-end test in
# headless Chromium against a real `xarchive up` (screenshots in
# test-artifacts/).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
node --test web/test/
cargo test --workspace --locked "$@"

# The page in a real browser: the binary it starts, the driver, the test.
cargo build -p xarchive --locked
npm ci --prefix web/e2e --no-audit --no-fund
node --test web/e2e/
