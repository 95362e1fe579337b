#!/usr/bin/env bash
# Fuzzes the decoders of crates/filter with cargo-fuzz (libFuzzer + ASan),
# and feeds the node's decoders (crate-private, out of cargo-fuzz's reach)
# arbitrary input through their proptests.
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]
#
# TARGET is one of decode_bloom, decode_counting, decode_atomic,
# decode_cuckoo, decode_delta, node_decoders (default: all, one after
# another); SECONDS is the time per target (default 60; for node_decoders,
# a thousand cases per second for each of its properties, named any_*:
# the relay page, the delta with IDs, the stored record, the ledger, the
# audit entry, the backup file, key values and archive numbers as typed). Seeds are rebuilt into fuzz/corpus/
# first; crashes are written to fuzz/artifacts/<target>/. Exits non-zero if
# any target crashed. Not run by CI.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/fuzz"
TARGETS=(decode_bloom decode_counting decode_atomic decode_cuckoo decode_delta node_decoders)

usage() {
    echo "usage: scripts/fuzz.sh [TARGET|all] [SECONDS]" >&2
    echo "targets: ${TARGETS[*]}" >&2
    exit 2
}

which_target="${1:-all}"
seconds="${2:-60}"
[[ $# -le 2 ]] || usage
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || usage
if [[ "$which_target" == all ]]; then
    selected=("${TARGETS[@]}")
else
    selected=()
    for t in "${TARGETS[@]}"; do
        [[ "$t" == "$which_target" ]] && selected=("$t")
    done
    [[ ${#selected[@]} -eq 1 ]] || usage
fi

# cargo-fuzz passes -Z flags (sanitizers, coverage instrumentation) that only
# nightly accepts; this lets the stable toolchain take them.
export RUSTC_BOOTSTRAP=1

declare -a summary=()
failed=0
if [[ " ${selected[*]} " == *" node_decoders "* ]]; then
    echo "== node_decoders: $((seconds * 1000)) cases for each property"
    if PROPTEST_CASES=$((seconds * 1000)) cargo test --quiet --manifest-path "$ROOT/Cargo.toml" \
        -p xarchive-node --lib -- any_; then
        summary+=("node_decoders: ok, $((seconds * 1000)) cases each")
    else
        failed=1
        summary+=("node_decoders: FAILED (proptest printed the smallest input above)")
    fi
    selected=("${selected[@]/node_decoders}")
    [[ -n "${selected[*]// /}" ]] || { printf '%s\n' "${summary[@]}"; exit "$failed"; }
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

build_corpus() {
    echo "== building the seed corpus in fuzz/corpus/"
    cargo run --quiet --release --manifest-path "$FUZZ/Cargo.toml" \
        --example build_corpus -- "$FUZZ/corpus"
}
build_corpus

for t in "${selected[@]}"; do
    [[ -n "$t" ]] || continue
    echo "== fuzzing $t for ${seconds}s"
    artifacts="$FUZZ/artifacts/$t"
    mkdir -p "$artifacts"
    marker="$(mktemp)"
    log="$(mktemp)"
    status=0
    # One in-process fuzzer at a time (no -jobs/-fork workers): the machine is
    # small. cargo-fuzz sets -artifact_prefix to fuzz/artifacts/<target>/.
    cargo fuzz run --fuzz-dir "$FUZZ" --debug-assertions "$t" "$FUZZ/corpus/$t" -- \
        -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
        2>&1 | tee "$log" || status=$?
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    found="$(find "$artifacts" -type f -newer "$marker" | sort)"
    rm -f "$marker" "$log"
    if [[ $status -ne 0 || -n "$found" ]]; then
        failed=1
        summary+=("$t: FAILED (exit $status) after ${runs:-?} runs")
        while IFS= read -r f; do
            [[ -n "$f" ]] && summary+=("    artifact: $f" "    reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir $FUZZ $t $f")
        done <<<"$found"
    else
        summary+=("$t: ok, ${runs:-?} runs in ${seconds}s")
    fi
done

echo "== summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
