#!/usr/bin/env bash
# The whole test suite: installs what the tests need when it is missing
# (scripts/install-deps.sh), then runs every Rust test (unit, property,
# in-process handler tests, process-level tests against real ZooKeeper and
# Redis servers) and the JavaScript tests.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cargo test --workspace --locked "$@"
