#!/usr/bin/env bash
# The load test at full size: scripts/load.sh [users] [turns] (default 50 × 10).
#
# Starts DynamoDB Local (in memory) on a free port and runs the `load` binary
# (bench/src/load.rs over tests::load): N users at once, each a conversation of
# tool turns through the stream function's real handler over HTTP, resumes and
# Stops mixed in, DynamoDB throttles injected through a fault proxy; then every
# conversation's stored log is checked (0 lost, 0 duplicated, 0 cross-user).
# The report goes to stdout and .local/load-results.md. A debug build (the
# numbers are the machine's, not Lambda's; docs/performance.md).
set -euo pipefail

SERVICE_PREFIX="load-$$"
LOG_PREFIX="load"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

trap 'stop_started_services' EXIT
install_signal_traps

ensure_dynamodb_local
log "cargo build -p bench --bin load"
run_child cargo build -p bench --bin load
ddb_port="$(free_port)"
start_dynamodb_local "$ddb_port"
use_local_aws "http://127.0.0.1:$ddb_port"

results="$LOCAL_DIR/load-results.md"
target_dir="${CARGO_TARGET_DIR:-$REPO_ROOT/target}"
status=0
# The handler's own EMF lines go to a log; the report to stdout and $results.
"$target_dir/debug/load" "$@" 2>"$LOCAL_DIR/load-stderr.log" | grep -v '^{' | tee "$results" || status=$?
log "report written to ${results#"$REPO_ROOT"/} (status $status)"
exit "$status"
