#!/usr/bin/env bash
# Every test, from a fresh Debian 12 clone: installs the toolchain and npm dependencies, builds the
# native and WASM trees, and runs all suites (see scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh --test
npm ci --no-audit --no-fund
npm test
