#!/usr/bin/env bash
# Regenerates web/src/api/types.gen.ts from the Rust wire types
# (shared::edge::openapi): run after changing an event, a request or a response
# type, and commit the result. tests/tests/web_types.rs fails on drift.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
web_deps
UPDATE_WEB_TYPES=1 cargo test -q -p tests --test web_types the_checked_in_typescript
echo "wrote web/src/api/types.gen.ts"
