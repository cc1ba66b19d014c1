#!/usr/bin/env bash
# THE "bring the whole stack up locally and chat" command.
#
#   scripts/stack.sh                 stack up, interactive chat (agentic-chat chat --repl),
#                                    everything stopped when the REPL exits
#   scripts/stack.sh "hello"         stack up, one chat turn, everything stopped
#   scripts/stack.sh --keep "hello"  stack up, one chat turn, stack left running
#   scripts/stack.sh --keep          stack up, REPL, stack left running after it
#                                    (--keep </dev/null: just bring it up)
#   scripts/stack.sh --calendar "what's on this week?"
#                                    the chat in the calendar scope (the REPL: /calendar)
#   scripts/stack.sh down            stop whatever a --keep run left running
#   scripts/stack.sh status          show which stack services are running
#
# Services (ports overridable by env): DynamoDB Local with data in
# .local/ddb-data (DDB_PORT=8000), moto_server for SQS (MOTO_PORT=5000),
# the local model server (LLM_PORT=8080; LOCAL_MODEL=qwen2.5-coder-1.5b, or
# smollm2 for a small chat-only model; skipped when LLM_BASE_URL is set),
# `cargo lambda watch` serving the functions (LAMBDA_PORT=9000), and the local
# SQS event source feeding the summarizer from the turns FIFO queue on moto,
# Radicale, the CalDAV server the calendar syncs with (RADICALE_PORT=5232;
# collections in .local/radicale-data; dev-user's account in CALDAV_ACCOUNTS),
# and, while the stack stays up (the REPL or --keep), the chat page (web/,
# built once, served by `vite preview` on WEB_PORT=5173 with a config.json
# naming this stack; docs/web.md; WEB=0 skips it).
# Logs: .local/stack-*.log. See docs/local-stack.md.
set -euo pipefail

SERVICE_PREFIX="stack"
LOG_PREFIX="stack"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

keep=0
message=()
scope=()
while (($#)); do
  case "$1" in
    down)
      if ((${#message[@]} == 0 && $# == 1)); then
        stop_services_matching 'stack-*'
        log "stack is down"
        exit 0
      fi
      message+=("$1")
      ;;
    status)
      if ((${#message[@]} == 0 && $# == 1)); then
        any=0
        for svc in dynamodb moto radicale llama lambda events web; do
          if pid="$(service_pid "stack-$svc")"; then
            echo "stack-$svc running (pid $pid)"
            any=1
          fi
        done
        ((any)) || echo "no stack services running"
        exit 0
      fi
      message+=("$1")
      ;;
    --keep) keep=1 ;;
    --calendar) scope=(--context calendar) ;;
    -h | --help)
      usage
      exit 0
      ;;
    --)
      shift
      message+=("$@")
      break
      ;;
    *) message+=("$1") ;;
  esac
  shift
done

DDB_PORT="${DDB_PORT:-8000}"
MOTO_PORT="${MOTO_PORT:-5000}"
RADICALE_PORT="${RADICALE_PORT:-5232}"
LLM_PORT="${LLM_PORT:-8080}"
LAMBDA_PORT="${LAMBDA_PORT:-9000}"
WEB_PORT="${WEB_PORT:-5173}"
# The chat page, only when the stack stays up for a person to use it.
serve_web=0
if [[ "${WEB:-1}" == 1 ]] && ((${#message[@]} == 0 || keep)); then
  serve_web=1
fi

# Tear down what this run started unless it ends normally with --keep.
leave_running=0
use_local_model=0
# shellcheck disable=SC2317 # called through the EXIT trap
on_exit() {
  local status=$?
  stop_background_build
  if ((leave_running)); then
    log "stack left running; stop it with: scripts/stack.sh down"
  else
    stop_started_services
  fi
  exit "$status"
}
trap on_exit EXIT
install_signal_traps

t0=$SECONDS
# ---------------------------------------------------------------- build ---
# The Rust build is a first run's long step (minutes on 2 cores): it starts
# first, in the background, while the rest installs and starts beside it,
# and the model server computes the prompt head every first turn shares
# (server.mjs --warm); its output is shown once the rest is up.
start_background_build agentic-chat stream entities summarizer

# ---------------------------------------------------------------- deps ---
# pip's part (moto, Radicale, cargo-lambda: nothing to do once installed) in
# the background beside npm's (the model server, DynamoDB Local, the page):
# on a machine with empty caches each is a minute or more of downloads.
pip_log="$(log_file "$LOG_PREFIX-pip")"
(ensure_moto && ensure_radicale && ensure_cargo_lambda) >"$pip_log" 2>&1 &
pip_pid=$!
if [[ -z "${LLM_BASE_URL:-}" ]]; then
  use_local_model=1
  ensure_local_model
  local_model_spec
fi
ensure_dynamodb_local
if ((serve_web)); then
  if have node && have npm; then
    web_build
  else
    warn "node/npm not found: no chat page (install Node.js 20 for web/)"
    serve_web=0
  fi
fi
wait "$pip_pid" || {
  cat "$pip_log" >&2
  die "installing moto, Radicale or cargo-lambda failed (above; ${pip_log#"$REPO_ROOT"/})"
}
# Again in this shell: each only puts pip's scripts on PATH now.
ensure_moto
ensure_radicale
ensure_cargo_lambda
log "dependencies ready ($((SECONDS - t0))s)"

# ------------------------------------------------------------- env ---
export TABLE_NAME="${TABLE_NAME:-agentic-chat}"
use_local_aws "http://127.0.0.1:$DDB_PORT" "http://127.0.0.1:$MOTO_PORT"
# The dev user's CalDAV account on the stack's Radicale (user and password
# from RADICALE_USERS in lib.sh; docs/calendar-caldav.md). A CALDAV_ACCOUNTS
# of the caller's (e.g. a real server's) wins.
if [[ -z "${CALDAV_ACCOUNTS:-}" ]]; then
  CALDAV_ACCOUNTS='{"dev-user": {"url": "http://127.0.0.1:'"$RADICALE_PORT"'/", "username": "dev-user", "password": "dev-user-pw"}}'
fi
export CALDAV_ACCOUNTS

if ((use_local_model)); then
  export LLM_BASE_URL="http://127.0.0.1:$LLM_PORT/v1"
  export LLM_MODEL="$LOCAL_MODEL_ALIAS"
  export LLM_API_KEY="${LLM_API_KEY:-local}"
  # The model's window (LOCAL_MODEL_CTX, lib.sh) holds what is sent
  # (messages and tool definitions: CONTEXT_MAX_TOKENS, in the model's
  # tokens) plus the answer (LLM_MAX_TOKENS).
  export LLM_MAX_TOKENS="${LLM_MAX_TOKENS:-1024}"
  export CONTEXT_MAX_TOKENS="${CONTEXT_MAX_TOKENS:-$((LOCAL_MODEL_CTX - LLM_MAX_TOKENS))}"
  # On 2 cores a cold prompt of several thousand tokens takes minutes to its
  # first token (the model computes one prompt at a time); the app's 30 s
  # default would abandon it. A late first token is not retried (the server
  # is still computing), so this bounds one attempt, not three.
  export LLM_FIRST_TOKEN_TIMEOUT_MS="${LLM_FIRST_TOKEN_TIMEOUT_MS:-600000}"
  # One model server answering one request at a time: summaries leave it to
  # any running chat turn of the user (docs/summarizer.md).
  export SUMMARY_YIELD_TO_TURNS="${SUMMARY_YIELD_TO_TURNS:-user}"
else
  export LLM_BASE_URL
  [[ -n "${LLM_MODEL:-}" ]] || warn "LLM_BASE_URL is set but LLM_MODEL is not; the app's default model name is used"
fi

# Dev HS256 secret: generated once, kept in .local/dev-secret.
if [[ -z "${AUTH_JWT_SECRET:-}" ]]; then
  secret_file="$LOCAL_DIR/dev-secret"
  if [[ ! -s "$secret_file" ]]; then
    (
      umask 077
      od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$secret_file"
    )
    log "generated a dev AUTH_JWT_SECRET in ${secret_file#"$REPO_ROOT"/}"
  fi
  AUTH_JWT_SECRET="$(cat "$secret_file")"
fi
export AUTH_JWT_SECRET
# The page's origin may call the functions: locally the functions answer CORS
# themselves (on AWS the function URL's Cors does; CORS_ALLOW_ORIGIN unset).
if ((serve_web)); then
  export CORS_ALLOW_ORIGIN="${CORS_ALLOW_ORIGIN:-http://127.0.0.1:$WEB_PORT}"
fi
# The eval's local page server (scripts/eval.py read_local_page, EVAL_WEB_PORT):
# web_visit may reach it on this local stack only; production never sets these.
export WEB_FETCH_ALLOW_CIDRS="${WEB_FETCH_ALLOW_CIDRS-127.0.0.1/32}"
export WEB_FETCH_ALLOW_PORTS="${WEB_FETCH_ALLOW_PORTS-${EVAL_WEB_PORT:-8790}}"

# ------------------------------------------------------------ services ---
start_dynamodb_local "$DDB_PORT" "$LOCAL_DIR/ddb-data"
start_moto "$MOTO_PORT"
start_radicale "$RADICALE_PORT" "$LOCAL_DIR/radicale-data"
# The summarizer's FIFO queue; the stream publishes TurnCompleted events to it.
SUMMARY_QUEUE_URL="$("$PYTHON" scripts/local-event-source.py --create-queue)" \
  || die "could not create the summarizer queue on moto"
export SUMMARY_QUEUE_URL
log "summarizer queue: $SUMMARY_QUEUE_URL"

# The model server, while cargo builds: it loads, then computes the global
# scope's rules and tools (--warm, ~35 s of one core on 2 cores). Started
# once cargo reaches `shared`, the last and longest crate, which compiles on
# about one core: the warm-up then takes the other one, not the build's
# (started with the rest, it ran beside the build's two-core phase instead).
show_background_build
if ((use_local_model)); then
  await_background_build_at shared
  log "starting the model server beside the build"
  start_llama_server "$LLM_PORT"
fi
wait_background_build
CLI="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/agentic-chat"
[[ -x "$CLI" ]] || die "cli binary not found at $CLI"

run_child "$CLI" create-table

# Everything the functions read, passed with --env-file (values may contain
# commas, which --env-var would split). Values are single-quoted (literal);
# a value with a single quote or a newline can't be written that way, and
# reaches the functions only through the inherited environment.
env_file="$LOCAL_DIR/stack.env"
(
  umask 077
  : >"$env_file"
  while IFS= read -r name; do
    value="${!name}"
    if [[ "$value" == *"'"* || "$value" == *$'\n'* ]]; then
      log "$name is passed to the functions through the inherited environment only"
    else
      printf "%s='%s'\n" "$name" "$value" >>"$env_file"
    fi
  done < <(compgen -e | grep -E '^(TABLE_NAME|HISTORY_LIMIT|BUDGET_[A-Z_]+|FRAME_FLUSH_MS|SUMMARY_[A-Z_]+|SUMMARIZER_MODEL|TURN_EVENT_WAIT_MS|CONTEXT_[A-Z_]+|MAX_MESSAGE_BYTES|SESSION_LEASE_MS|DEADLINE_MARGIN_MS|TURN_TIMEOUT_MS|LOG_FORMAT|RUST_LOG|CORS_ALLOW_ORIGIN|CALDAV_ACCOUNTS|WEB_[A-Z_]+|LLM_[A-Z_]+|AUTH_[A-Z_]+|AWS_REGION|AWS_DEFAULT_REGION|AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_EC2_METADATA_DISABLED|AWS_ENDPOINT_URL_[A-Z_]+)$' | sort)
)
start_cargo_lambda_watch "$LAMBDA_PORT" --env-file "$env_file"
# Lambda's SQS event source mapping, locally: queue -> summarizer invocations.
start_service "$SERVICE_PREFIX-events" "$(log_file "$LOG_PREFIX-events")" "local-event-source" \
  "$PYTHON" scripts/local-event-source.py \
  --invoke-url "http://127.0.0.1:$LAMBDA_PORT/2015-03-31/functions/summarizer/invocations"

STREAM_URL="http://127.0.0.1:$LAMBDA_PORT/lambda-url/stream/"
# The first request waits for cargo lambda to compile and boot the function;
# without a token the function answers 401, which is enough to know it serves.
log "waiting for the stream function to compile and answer (first time: minutes)"
code_file="$RUN_DIR/stack-warmup.code"
run_child curl -s -o /dev/null -w '%{http_code}' --max-time 900 -X POST \
  -H 'content-type: application/json' -d '{"message":"ping"}' "$STREAM_URL" >"$code_file" || true
code="$(cat "$code_file" 2>/dev/null || true)"
rm -f "$code_file"
[[ -n "$code" ]] || code=000
if [[ "$code" == 000 ]]; then
  print_log_tail "$(log_file "$LOG_PREFIX-lambda")"
  die "the stream function did not answer at $STREAM_URL"
fi
log "stream function answered (HTTP $code without a token) after $((SECONDS - t0))s"
if watch_compiled "$(log_file "$LOG_PREFIX-lambda")" 2>/dev/null; then
  warn "cargo lambda watch compiled again after the build above (see .local/stack-lambda.log): please report it"
fi

# What to reach the stack with, only when it stays up (the REPL, or --keep):
# a one-shot run stops it right after its turn. The token is for the CLI's
# default user, so curl and the CLI see the same sessions and projects.
if ((${#message[@]} == 0 || keep)); then
  ENTITIES_URL="http://127.0.0.1:$LAMBDA_PORT/lambda-url/entities/"
  TOKEN="$("$CLI" token)"
  page_line=""
  if ((serve_web)); then
    write_web_config "$WEB_DIR/dist/config.json" "$STREAM_URL" "$ENTITIES_URL" "$TOKEN"
    start_web_preview "$WEB_PORT"
    page_line="    chat page          http://127.0.0.1:$WEB_PORT/   (web/, docs/web.md)"
  fi
  cat >&2 <<EOF

  Stack is up:
$page_line
    stream function    $STREAM_URL
    entities function  $ENTITIES_URL
    DynamoDB Local     $AWS_ENDPOINT_URL_DYNAMODB   (table $TABLE_NAME, data in .local/ddb-data)
    SQS (moto)         $AWS_ENDPOINT_URL_SQS   (summarizer queue $SUMMARY_QUEUE_URL)
    CalDAV (Radicale)  http://127.0.0.1:$RADICALE_PORT/   (dev-user / dev-user-pw, data in .local/radicale-data)
    model              $LLM_BASE_URL   (model ${LLM_MODEL:-<app default>})
    logs               .local/stack-*.log

  You are user "dev-user": the CLI's default, and this token's (24 h):
    export TOKEN=$TOKEN

  curl -N "$STREAM_URL" -H "authorization: Bearer \$TOKEN" \\
    -H 'content-type: application/json' -d '{"message":"hello"}'
  curl -s "${ENTITIES_URL}projects" -H "authorization: Bearer \$TOKEN"
  STREAM_URL=$STREAM_URL AUTH_JWT_SECRET=\$(cat .local/dev-secret) ${CLI#"$REPO_ROOT"/} projects   # the same, through the CLI

EOF
fi

status=0
if ((${#message[@]})); then
  # One turn; the CLI then reads back, through the entities API, what it changed.
  run_child "$CLI" chat --url "$STREAM_URL" "${scope[@]}" "${message[*]}" || status=$?
else
  # Interactive: in the foreground, on this terminal.
  "$CLI" chat --url "$STREAM_URL" "${scope[@]}" --repl || status=$?
fi
if ((keep)); then
  leave_running=1
fi
exit "$status"
