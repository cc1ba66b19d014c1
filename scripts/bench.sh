#!/usr/bin/env bash
# THE bench command: scripts/bench.sh [bench args...]
#
# Installs what the benchmarks need (DynamoDB Local, cargo-lambda) if it is
# missing, starts DynamoDB Local (in memory) on a free port, builds the release
# `stream` binary and the bench binary, runs the bench binary (the real stream
# handler in-process behind a local HTTP adapter; the real binary with the real
# runtime client against a Runtime API stand-in, and under `cargo lambda
# watch`, each before/after the Nagle fix; start → ready; RSS; sizes;
# DynamoDB Local's own round trips) and the criterion micro-benchmarks, and
# prints one Markdown report, also written to .local/bench-results.md. Stops
# what it started on exit.
#
# Arguments go to the bench binary (see `cargo run -p bench --release -- --help`),
# e.g. `scripts/bench.sh --turns 100 --ttft-ms 300`. Environment:
#   BENCH_ARM64=1     also `cargo lambda build --release --arm64` and report its size
#   BENCH_CRITERION=0 skip the criterion micro-benchmarks
# Results and how to read them: docs/performance.md.
set -euo pipefail

SERVICE_PREFIX="bench-$$"
LOG_PREFIX="bench"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

trap 'stop_started_services' EXIT
install_signal_traps

t0=$SECONDS
ensure_dynamodb_local
ensure_cargo_lambda
log "dependencies ready ($((SECONDS - t0))s)"

# Built the way `cargo lambda watch` builds the function (`cargo run --release
# --bin stream` from the root, so features are unified across the workspace):
# the watch then finds it fresh instead of relinking it (minutes, with LTO),
# and the start-up and runtime modes time the very binary the watch runs.
log "cargo build --release --bin stream --bin bench"
run_child cargo build --release --bin stream --bin bench
# The other functions, for their start → ready and size: a build of their own,
# so their feature set cannot make the one above (and the watch's) stale.
log "cargo build --release --bin entities --bin summarizer --bin prewarm"
run_child cargo build --release --bin entities --bin summarizer --bin prewarm
if [[ "${BENCH_ARM64:-0}" == 1 ]]; then
  ensure_arm64_target
  log "cargo lambda build --release --arm64 --bin stream"
  run_child cargo lambda build --release --arm64 --bin stream
fi
log "builds ready ($((SECONDS - t0))s)"

ddb_port="$(free_port)"
start_dynamodb_local "$ddb_port"
use_local_aws "http://127.0.0.1:$ddb_port"

results="$LOCAL_DIR/bench-results.md"
status=0
target_dir="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
log "bench $* (progress below; the report follows)"
# The report goes to $results; stdout (the handler's own lines, e.g. its EMF
# metrics, in adapter mode) to a log.
run_child "$target_dir/release/bench" --report "$results" "$@" >"$LOCAL_DIR/bench-stdout.log" || status=$?

if [[ "${BENCH_CRITERION:-1}" != 0 ]]; then
  # Short runs (1 s warm-up, 2 s measurement per benchmark) keep the whole
  # command near two minutes after the build; the bencher format is one line
  # per benchmark, which becomes the table below.
  log "cargo bench -p bench (criterion)"
  crit="$LOCAL_DIR/bench-criterion.txt"
  if run_child cargo bench -p bench -- --warm-up-time 1 --measurement-time 2 --output-format bencher >"$crit"; then
    {
      echo "### Micro-benchmarks (criterion; its point estimate per iteration)"
      echo
      echo "| benchmark | time per iteration |"
      echo "|---|--:|"
      awk '/^test .* bench:/ {
             name = $2; ns = $5; gsub(",", "", ns)
             if (ns + 0 >= 1000000) t = sprintf("%.2f ms", ns / 1e6)
             else if (ns + 0 >= 1000) t = sprintf("%.2f µs", ns / 1e3)
             else t = ns " ns"
             printf "| %s | %s |\n", name, t
           }' "$crit"
      echo
    } >>"$results"
  else
    status=1
    warn "cargo bench failed; see $crit"
  fi
fi

cat "$results"
log "report written to ${results#"$REPO_ROOT"/} ($((SECONDS - t0))s; status $status)"
exit "$status"
