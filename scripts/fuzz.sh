#!/usr/bin/env bash
# Fuzzes the parsers that read untrusted bytes: scripts/fuzz.sh [seconds per target]
#
# Targets (fuzz/fuzz_targets/, a cargo-fuzz crate with its own workspace):
#   sse_decoder   shared::sse::SseDecoder, bytes split anywhere
#   llm_chunks    shared::llm::ChunkParser (+ ToolCallAccumulator), the model's stream
#   turn_request  shared::turn::ValidTurn::parse, the body of a chat turn
# Each runs under libFuzzer for SECONDS (default 30), seeded from
# fuzz/seeds/<target>/; the corpus grows in fuzz/corpus/<target>/ (not
# committed). A panic, a failed assertion, a timeout or an out-of-memory fails
# the script; the input that did it is in fuzz/artifacts/<target>/ and replays
# with `RUSTC_BOOTSTRAP=1 cargo fuzz run --dev --sanitizer none -a <target> <file>` in fuzz/.
#
# Installs cargo-fuzz if missing. Stable Rust is enough: cargo-fuzz passes
# nightly-only flags (-Z...), which RUSTC_BOOTSTRAP=1 allows on stable.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

seconds="${1:-30}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/fuzz.sh [seconds per target]"
targets=(sse_decoder llm_chunks turn_request)

if ! cargo fuzz --version >/dev/null 2>&1; then
  log "installing cargo-fuzz (cargo install, compiles once)"
  cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1
# The dev profile (fuzz/Cargo.toml says why) and no sanitizer: the targets are
# safe Rust, where AddressSanitizer finds nothing a panic would not, and it
# slows the build, which instruments every dependency. -a: debug assertions.
flags=(--dev --sanitizer none -a)
cd "$REPO_ROOT/fuzz"

# The fuzz crate is a workspace of its own with its own Cargo.lock: a change of
# `shared`'s dependencies leaves it stale, and a build would rewrite it (a CI
# run must leave every tracked file as committed). Checked first, without
# writing: a stale lock fails here, saying how to refresh it.
if ! cargo metadata --locked --format-version 1 >/dev/null; then
  die "fuzz/Cargo.lock is stale (shared's dependencies changed): refresh it with" \
    "'cp Cargo.lock fuzz/Cargo.lock && (cd fuzz && cargo metadata --format-version 1 >/dev/null)'" \
    "(the main lock's versions, plus libfuzzer-sys) and commit it"
fi

t0=$SECONDS
log "cargo fuzz build ${flags[*]} (every target)"
cargo fuzz build "${flags[@]}"
log "built in $((SECONDS - t0))s"

failed=()
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  log "fuzzing $target for ${seconds}s"
  if ! cargo fuzz run "${flags[@]}" "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
    failed+=("$target")
  fi
done
if ((${#failed[@]})); then
  die "fuzzing found a failure in: ${failed[*]} (inputs in fuzz/artifacts/)"
fi
log "no failure in ${targets[*]} (${seconds}s each; total $((SECONDS - t0))s)"
