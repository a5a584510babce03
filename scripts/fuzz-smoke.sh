#!/usr/bin/env bash
# Short fuzz run for CI: every target in fuzz/ for FUZZ_SECONDS seconds (default 20) on the
# installed nightly toolchain, one libFuzzer job at a time, from the checked-in corpus
# (fuzz/corpus/<target>, read only: new inputs go to a temporary directory) and the checked-in
# reproducers (fuzz/regressions/<target>, replayed first). Fails on the first crash, panic, hang
# (-timeout, default 10 s per input) or memory blow-up, leaving the input under
# fuzz/artifacts/<target>/.
#
# Runtime on a 2-core machine: about 7 minutes for the first build of the fuzz targets (cargo-fuzz
# installed: ~1 more minute), then 8 targets x (20 s + ~5 s start-up and corpus load) = ~2.5 min.
# Needs `rustup toolchain install nightly`; installs cargo-fuzz from crates.io when missing.
#
#   scripts/fuzz-smoke.sh                 # every target, 20 s each
#   FUZZ_SECONDS=60 scripts/fuzz-smoke.sh plan_estimate csv_row
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-20}"
timeout="${FUZZ_TIMEOUT:-10}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(model_toml hf_config gpu_toml plan_file csv_row plan_estimate whole_run lengths_file)
fi
# Overflow checks and debug assertions on (an overflow is a panic, as in a debug build), no
# sanitizer (the library and its dependencies are safe Rust): the same build as the long runs.
flags=(--debug-assertions --sanitizer none)

step() { echo "==> $* ($(date -u +%H:%M:%S))"; }

if ! cargo +nightly --version > /dev/null 2>&1; then
    echo "fuzz-smoke: the nightly toolchain is missing (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo fuzz --version > /dev/null 2>&1; then
    step "installing cargo-fuzz"
    cargo install --locked cargo-fuzz
fi
step "building the fuzz targets"
cargo +nightly fuzz build "${flags[@]}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
    if [ -d "fuzz/regressions/$target" ] && [ -n "$(ls -A "fuzz/regressions/$target")" ]; then
        step "$target: replaying fuzz/regressions/$target"
        # A reproducer of a bug not fixed yet is listed in fuzz/README.md; FUZZ_SKIP_REGRESSIONS=1
        # fuzzes anyway.
        if [ "${FUZZ_SKIP_REGRESSIONS:-0}" != 1 ]; then
            cargo +nightly fuzz run "${flags[@]}" "$target" "fuzz/regressions/$target" -- -runs=0
        fi
    fi
    step "$target: fuzzing for ${seconds}s"
    mkdir -p "$scratch/$target"
    log="$scratch/$target.log"
    if ! cargo +nightly fuzz run "${flags[@]}" "$target" "$scratch/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 > "$log" 2>&1; then
        tail -n 60 "$log"
        echo "fuzz-smoke: $target failed; the input is under fuzz/artifacts/$target/" >&2
        exit 1
    fi
    grep -E '^stat::number_of_executed_units|DONE' "$log" | tail -n 2
done
step "done: ${#targets[@]} targets, no crash"
