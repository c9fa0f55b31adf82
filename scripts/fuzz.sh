#!/usr/bin/env bash
# Long fuzz campaigns of every parser of outside input (the targets of src/fuzz.rs).
#
#   scripts/fuzz.sh [RUNS] [TARGET...]   libFuzzer via cargo-fuzz on a nightly toolchain:
#                                        RUNS inputs per target (default 10,000,000); the
#                                        corpus in fuzz/corpus/<target> grows as it runs
#   scripts/fuzz.sh --stable CASES       the stable-toolchain driver (tests/fuzz.rs) with
#                                        CASES generated inputs per target
#
# FUZZ_SECONDS=S also bounds each target's time (libFuzzer's -max_total_time), and
# FUZZ_JOBS=N fuzzes N targets at once (default 1), for campaigns on a shared machine;
# FUZZ_NO_BUILD=1 runs the targets as last built.
#
# Prints, per target, the inputs run, the time taken and whether it crashed; a crash
# leaves its input in fuzz/artifacts/<target>/ and makes the script exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."

targets_all=(claude_stream_json codex_exec_jsonl codex_app_server opencode_events result_block socket_request config redact)

if [ "${1:-}" = "--stable" ]; then
    cases=${2:-100000}
    echo "== stable: ${cases} generated inputs per target (plus the corpus)"
    DROVER_FUZZ_CASES=$cases cargo test --release --test fuzz -- --test-threads=1
    exit 0
fi

runs=${1:-10000000}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${targets_all[@]}")

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "error: no nightly toolchain; libFuzzer needs one (rustup toolchain install nightly)," >&2
    echo "or run the stable driver: scripts/fuzz.sh --stable 1000000" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "error: cargo-fuzz is not installed: cargo install cargo-fuzz" >&2
    exit 1
fi

seconds=${FUZZ_SECONDS:-0}
jobs=${FUZZ_JOBS:-1}

# One target's campaign; its summary line goes to fuzz/artifacts/<target>/summary.
fuzz_one() {
    local t=$1
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    local log="fuzz/artifacts/$t/last-run.log" start result done_runs
    start=$(date +%s)
    # The binary cargo-fuzz built (`cargo fuzz run` would build again whenever the
    # sources change while a campaign runs).
    if "$bin_dir/$t" "fuzz/corpus/$t" -runs="$runs" -max_total_time="$seconds" \
        -artifact_prefix="fuzz/artifacts/$t/" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1; then
        result="0 crashes"
    else
        result="CRASHED (see $log and fuzz/artifacts/$t/)"
    fi
    done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "$t: ${done_runs} inputs in $(( $(date +%s) - start )) s, ${result}" | tee "fuzz/artifacts/$t/summary"
}

# Built once, before the targets run side by side (FUZZ_NO_BUILD=1 reuses the last build).
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || cargo +nightly fuzz build -O
bin_dir="fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait
status=0
for t in "${targets[@]}"; do
    grep -q '0 crashes' "fuzz/artifacts/$t/summary" 2>/dev/null || status=1
done
exit $status
