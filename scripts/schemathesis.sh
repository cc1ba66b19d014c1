#!/usr/bin/env bash
# scripts/schemathesis.sh [extra `st run` args...]
#
# Property-based test of every function's HTTP API against its own OpenAPI
# document: schemathesis (pinned) generates valid and invalid requests for
# every operation and checks every answer against the document (every check:
# schemathesis' default, set in scripts/schemathesis.toml). One run per
# document, each against its function under the same emulator:
#   docs/openapi.json          entities  (/lambda-url/entities)
#   docs/openapi-stream.json   stream    (/lambda-url/stream: a turn, sessions, chat)
#   docs/openapi-prewarm.json  prewarm   (/lambda-url/prewarm)
# Exits non-zero if any run has a failure.
#
# Starts DynamoDB Local (in memory), a paced stand-in model
# (scripts/local_stack/paced_model.py) and `cargo lambda watch` on free ports,
# creates the table, mints a token for a throwaway user, runs
#   st run DOC --url http://127.0.0.1:PORT/lambda-url/FUNCTION \
#     -H "Authorization: Bearer ..." --seed SEED -n EXAMPLES ...
# and stops the services on exit. Knobs (env):
#   ST_SEED (default 20), ST_EXAMPLES (max examples per operation, default 25),
#   ST_WORKERS (default 1: with 2, Python 3.11.7 can fail in ast.parse
#   across threads inside hypothesis, CPython gh-106905),
#   ST_APIS (default "entities stream prewarm": the documents to run),
#   ABORT_STORM_REQUESTS (default 240: requests the client cuts, before the runs).
# Reports (JUnit and each run's ndjson) go to .local/schemathesis/<function>/.
set -euo pipefail

SERVICE_PREFIX="st-$$"
LOG_PREFIX="schemathesis"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

ST_SEED="${ST_SEED:-20}"
ST_EXAMPLES="${ST_EXAMPLES:-25}"
ST_WORKERS="${ST_WORKERS:-1}"
ST_APIS="${ST_APIS:-entities stream prewarm}"

trap 'stop_started_services' EXIT
install_signal_traps

t0=$SECONDS
ensure_dynamodb_local
ensure_cargo_lambda
ensure_schemathesis
log "dependencies ready ($((SECONDS - t0))s)"

# Build first, each binary on its own as `cargo lambda watch` builds it
# (lib.sh build_like_watch), so that the watch finds it fresh and the time
# below is the run's; checked below (the watch compiles nothing).
build_like_watch entities stream prewarm agentic-chat
CLI="$REPO_ROOT/target/debug/agentic-chat"

ddb_port="$(free_port)"
start_dynamodb_local "$ddb_port"

use_local_aws "http://127.0.0.1:$ddb_port"
unset AUTH_JWKS_URL AUTH_ISSUER AUTH_AUDIENCE || true
export TABLE_NAME="schemathesis"
# A throwaway HS256 secret: the token minted below is only good for this run.
AUTH_JWT_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export AUTH_JWT_SECRET
export RUST_LOG="${RUST_LOG:-warn}"
# The functions' own CORS, for one origin; checked below against what the
# emulator answers (lib.sh check_local_cors).
export CORS_ALLOW_ORIGIN="http://app.example"
# The stream function's model for the local stack check: 40 words, 0.25 s
# apart (scripts/local_stack/paced_model.py).
model_port="$(free_port)"
start_service "$SERVICE_PREFIX-model" "$(log_file "$LOG_PREFIX-model")" "paced_model" \
  "$PYTHON" scripts/local_stack/paced_model.py "$model_port" 40 0.25
export LLM_BASE_URL="http://127.0.0.1:$model_port/v1" LLM_MODEL="paced" LLM_API_KEY="local"

run_child "$CLI" create-table
TOKEN="$("$CLI" token --sub schemathesis --ttl-secs 3600)"

env_file="$LOCAL_DIR/schemathesis.env"
: >"$env_file"
for name in TABLE_NAME AUTH_JWT_SECRET RUST_LOG AWS_REGION AWS_DEFAULT_REGION AWS_ACCESS_KEY_ID \
  AWS_SECRET_ACCESS_KEY AWS_EC2_METADATA_DISABLED AWS_ENDPOINT_URL_DYNAMODB CORS_ALLOW_ORIGIN \
  LLM_BASE_URL LLM_MODEL LLM_API_KEY; do
  printf "%s='%s'\n" "$name" "${!name}" >>"$env_file"
done

lambda_port="$(free_port)"
# Watching, as scripts/stack.sh runs it (the local stack check below needs the
# watch's reloads on): the run's own files (reports) are under .local/, which
# .gitignore keeps out of what the watch reacts to.
start_cargo_lambda_watch "$lambda_port" --env-file "$env_file"
base="http://127.0.0.1:$lambda_port/lambda-url/entities"
# The first request boots the function; the document itself is public.
wait_for_http "$base/openapi.json" 300 || {
  print_log_tail "$(log_file "$LOG_PREFIX-lambda")"
  die "the entities function did not answer under cargo lambda watch"
}
log "entities function ready at $base ($((SECONDS - t0))s)"
# The local stack's own promises, checked on the same emulator: it built
# nothing the build above had not (scripts/stack.sh builds the same way), and
# only CORS_ALLOW_ORIGIN is allowed (the emulator's own CORS layer is off).
check_local_cors "$base/projects" "$CORS_ALLOW_ORIGIN" || die "the local stack's CORS is not the functions' own"
repo_arg=()
if git -C "$REPO_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then repo_arg=("$REPO_ROOT"); fi
run_child "$PYTHON" scripts/local_stack/check.py "http://127.0.0.1:$lambda_port/lambda-url/stream" "$TOKEN" \
  "${repo_arg[@]}" || {
  print_log_tail "$(log_file "$LOG_PREFIX-lambda")"
  die "the local stack cut a running turn off (scripts/local_stack/check.py)"
}
# Both functions have run by now: the watch must have compiled neither.
if watch_compiled "$(log_file "$LOG_PREFIX-lambda")"; then
  die "cargo lambda watch compiled again after build_like_watch (above): the first run would build twice"
fi
log "local stack checks passed: the watch compiled nothing; CORS allows only $CORS_ALLOW_ORIGIN; requests during a turn are served at once, Stop stops it, the turn and its resume end with done"

# Many turns from here on (the stream document's `POST /` and `POST /chat`):
# each may end at once, the stack check above is done with the slow model.
"$PYTHON" - "http://127.0.0.1:$model_port/pace?words=2&gap=0" <<'PY' || die "the paced model did not take its new pace"
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="PUT"), timeout=10)
PY

# Clients that hang up at every phase of a request (before headers, mid-stream,
# at done): the function must keep answering (issue 43; the file says more).
# A user of its own: the storm spends its budgets, not the runs' below.
STORM_TOKEN="$("$CLI" token --sub abort-storm --ttl-secs 3600)"
run_child "$PYTHON" scripts/local_stack/abort_storm.py "http://127.0.0.1:$lambda_port/lambda-url/stream" "$STORM_TOKEN" \
  "${ABORT_STORM_REQUESTS:-240}" || {
  print_log_tail "$(log_file "$LOG_PREFIX-lambda")"
  die "the stream function stopped answering after clients hung up (scripts/local_stack/abort_storm.py)"
}

report_root="$LOCAL_DIR/schemathesis"
rm -rf "$report_root"
mkdir -p "$report_root"
# The hooks tell the local emulator's own 500s from the function's answers
# (see the file); they count what they resend.
export SCHEMATHESIS_HOOKS="$REPO_ROOT/scripts/schemathesis_hooks.py"

# run_schemathesis FUNCTION DOC [extra args]: one document against its
# function; its reports in $report_root/FUNCTION. Returns st's exit status.
run_schemathesis() {
  local name="$1" doc="$2" dir="$report_root/$1" t1=$SECONDS status=0
  shift 2
  mkdir -p "$dir"
  export ST_HOOK_LOG="$dir/emulator-resends.tsv"
  # Hypothesis keeps examples and caches here: a fresh place each run, so no
  # run depends on an earlier one (and nothing lands in the repo).
  export HYPOTHESIS_STORAGE_DIRECTORY="$dir/hypothesis"
  : >"$ST_HOOK_LOG"
  log "schemathesis: $doc against $name"
  run_child st --config-file scripts/schemathesis.toml run "$doc" \
    --url "http://127.0.0.1:$lambda_port/lambda-url/$name" \
    -H "Authorization: Bearer $TOKEN" \
    --seed "$ST_SEED" --max-examples "$ST_EXAMPLES" --workers "$ST_WORKERS" \
    --generation-database none --request-timeout 30 \
    --report junit,ndjson --report-dir "$dir" "$@" || status=$?
  log "schemathesis on $name took $((SECONDS - t1))s (exit $status; reports in ${dir#"$REPO_ROOT"/})"
  if [[ -s "$ST_HOOK_LOG" ]]; then
    log "requests resent past the local emulator's own 500 (scripts/schemathesis_hooks.py):"
    cut -f1 "$ST_HOOK_LOG" | sort | uniq -c >&2
  fi
  return "$status"
}

status=0
failed=()
for api in $ST_APIS; do
  case "$api" in
    entities) doc=docs/openapi.json ;;
    stream) doc=docs/openapi-stream.json ;;
    prewarm) doc=docs/openapi-prewarm.json ;;
    *) die "ST_APIS: unknown function $api (entities, stream, prewarm)" ;;
  esac
  run_schemathesis "$api" "$doc" "$@" || { status=1; failed+=("$api"); }
done
if ((status != 0)); then
  log "schemathesis failed on: ${failed[*]}"
fi
exit "$status"
