#!/usr/bin/env bash
# The Debian package: the release binary, then what it generates for the
# package (its manual pages, one a command, and shell completions, under
# target/assets/),
# then `cargo deb -p xarchive` (extra arguments passed on). Writes
# target/debian/xarchive_*.deb. Needs cargo-deb (scripts/test-package.sh
# installs the version it tests) and gzip.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p xarchive --locked
assets=target/assets
mkdir -p "$assets"
bin=target/release/xarchive
rm -rf "$assets/man"
"$bin" man --dir "$assets/man" 2>/dev/null
gzip -9n "$assets"/man/*.1
"$bin" completions bash >"$assets/xarchive.bash"
"$bin" completions zsh >"$assets/_xarchive"
"$bin" completions fish >"$assets/xarchive.fish"
cargo deb -p xarchive "$@"
