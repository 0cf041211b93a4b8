#!/usr/bin/env bash
# Every test, from a fresh Debian 12 clone: installs the toolchain and npm dependencies, builds the
# native and WASM trees, and runs all suites (see scripts/test.sh).
# Also creates the pinned Python venv of the live cross-checks (scripts/golden-venv.sh; cached).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh --test
# The pinned PyPI venv the live cross-checks run in (tests/golden/README.md): made once as the user who runs
# the tests, then reused from ~/.cache/peft-bridge while requirements-golden.txt is unchanged.
bash scripts/golden-venv.sh >/dev/null
npm ci --no-audit --no-fund
npm test
