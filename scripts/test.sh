#!/usr/bin/env bash
# THE test command: scripts/test.sh [nextest args...]
#
# Installs what the tests need (DynamoDB Local, moto, Radicale, Xandikos,
# cargo-nextest, the AI SDK check's npm packages in tests/node) if it is
# missing, starts DynamoDB Local (in memory), moto_server, Radicale and
# Xandikos (CalDAV) on free ports, exports the AWS endpoint/credential
# variables, CALDAV_TEST_URL and CALDAV_TEST_URL_XANDIKOS, runs
# `cargo nextest run --workspace --no-fail-fast "$@"` and stops the services
# on exit. Exits with the test runner's status.
#
# Also builds web/ (docs/web.md) and installs Debian's Chromium for the
# browser test when missing.
#
# The tests need no real model: they run a scripted OpenAI-compatible server
# inside the Rust test code. First, the local model server's tests
# (scripts/local_llm_node, node's test runner: wire format and grammar; no
# node-llama-cpp, no model).
set -euo pipefail

# Unique pid-file names per run; logs are .local/test-*.log (last run).
SERVICE_PREFIX="test-$$"
LOG_PREFIX="test"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

trap 'stop_started_services' EXIT
install_signal_traps

# Stop services left behind by earlier test runs whose shell is gone
# (e.g. killed with SIGKILL, so their EXIT trap never ran).
shopt -s nullglob
for f in "$RUN_DIR"/test-*.pid; do
  owner="$(basename "$f" .pid)"
  owner="${owner#test-}"
  owner="${owner%%-*}"
  if [[ "$owner" =~ ^[0-9]+$ ]] && ! kill -0 "$owner" 2>/dev/null; then
    stop_service "$(basename "$f" .pid)"
  fi
done
shopt -u nullglob

t0=$SECONDS
ensure_dynamodb_local
ensure_moto
ensure_radicale
ensure_ical_corpus
ensure_xandikos
ensure_ai_sdk_check
use_nextest=1
if ! ensure_nextest; then
  warn "cargo-nextest unavailable; falling back to cargo test"
  use_nextest=0
fi

# ---- cargo-lambda ----------------------------------------------------------
# Not needed yet. When a test drives the functions through `cargo lambda`
# (e.g. an end-to-end test against `cargo lambda watch`), enable this
# (unconditionally, or keep the opt-in NEED_CARGO_LAMBDA=1):
if [[ "${NEED_CARGO_LAMBDA:-0}" == 1 ]]; then
  ensure_cargo_lambda
fi
# ----------------------------------------------------------------------------
# The chat page and its browser test (tests/tests/browser.rs, web_types.rs):
# npm packages, the built page, Debian's Chromium. In CI they are required (the
# tests fail without them); elsewhere a machine without Node.js skips them.
if have node && have npm; then
  web_build
  ensure_chromium
elif [[ "${CI:-}" == true ]]; then
  die "node and npm are required in CI (the web tests)"
else
  warn "node/npm not found: the web tests will be skipped"
fi
log "dependencies ready ($((SECONDS - t0))s)"

ddb_port="$(free_port)"
start_dynamodb_local "$ddb_port"
moto_port="$(free_port)"
start_moto "$moto_port"
# The CalDAV server of tests/tests/caldav.rs: fresh collections each run, the
# users of RADICALE_USERS (lib.sh).
radicale_port="$(free_port)"
start_radicale "$radicale_port"
export CALDAV_TEST_URL="http://127.0.0.1:$radicale_port"
export CALDAV_TEST_USERS="$RADICALE_USERS"
# The same tests against Xandikos too (HTTPS with its own certificate, the same users).
xandikos_port="$(free_port)"
start_xandikos "$xandikos_port"
export CALDAV_TEST_URL_XANDIKOS="https://localhost:$xandikos_port"
export CALDAV_TEST_XANDIKOS_CA="$XANDIKOS_CA"

use_local_aws "http://127.0.0.1:$ddb_port" "http://127.0.0.1:$moto_port"

log "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB"
log "AWS_ENDPOINT_URL_SQS=$AWS_ENDPOINT_URL_SQS"
log "CALDAV_TEST_URL=$CALDAV_TEST_URL"
log "CALDAV_TEST_URL_XANDIKOS=$CALDAV_TEST_URL_XANDIKOS"

status=0
# The local model server's wire format and answer grammar (no packages, no model).
if have node; then
  log "node --test scripts/local_llm_node/test/"
  run_child node --test scripts/local_llm_node/test/ || status=$?
fi
if ((use_nextest)); then
  log "cargo nextest run --workspace --no-fail-fast $*"
  run_child cargo nextest run --workspace --no-fail-fast "$@" || status=$((status ? status : $?))
else
  log "cargo test --workspace --no-fail-fast $*"
  run_child cargo test --workspace --no-fail-fast "$@" || status=$((status ? status : $?))
fi
log "tests finished with status $status ($((SECONDS - t0))s)"
exit "$status"
