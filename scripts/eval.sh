#!/usr/bin/env bash
# The agent eval against the running local stack (docs/eval.md):
#
#   scripts/stack.sh --keep </dev/null      # first: bring the stack up (same env)
#   scripts/eval.sh [--reps N] [SCENARIO...]
#
# Runs each scenario N times (default 5; all scenarios unless named), each
# with a new user, and prints per run and per scenario: success (checked
# through the entities API), turns, tool calls, and latency (first model
# event, first tool call, done). Every run is kept in .local/eval-*.json.
# Uses the ports stack.sh uses (LAMBDA_PORT, LLM_PORT; same defaults), and
# the stack's dev secret. The model is whatever the stack serves
# (LOCAL_MODEL=... scripts/stack.sh --keep, after scripts/stack.sh down).
set -euo pipefail

SERVICE_PREFIX="stack"
LOG_PREFIX="stack"
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

LAMBDA_PORT="${LAMBDA_PORT:-9000}"
LLM_PORT="${LLM_PORT:-8080}"
service_pid stack-lambda >/dev/null \
  || die "the stack is not running: start it with scripts/stack.sh --keep </dev/null (same env), then rerun"
CLI="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/debug/agentic-chat"
[[ -x "$CLI" ]] || die "cli binary not found at $CLI (stack.sh builds it)"
if [[ -z "${AUTH_JWT_SECRET:-}" ]]; then
  AUTH_JWT_SECRET="$(cat "$LOCAL_DIR/dev-secret")" || die "no .local/dev-secret: run scripts/stack.sh first"
fi
export AUTH_JWT_SECRET

model="$(curl -s --max-time 5 "http://127.0.0.1:$LLM_PORT/v1/models" \
  | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])' 2>/dev/null || echo "?")"
out="$LOCAL_DIR/eval-$(date +%Y%m%d-%H%M%S).json"
log "eval: model $model, stack at http://127.0.0.1:$LAMBDA_PORT, runs kept in ${out#"$REPO_ROOT"/}"
run_child "$PYTHON" scripts/eval.py --url "http://127.0.0.1:$LAMBDA_PORT" --cli "$CLI" --json "$out" "$@"
