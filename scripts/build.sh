#!/usr/bin/env bash
# Builds everything from one source tree: the native tree (core, CLI, tests, benchmarks) in
# build/native and the WASM tree (ES module + .wasm, C++ tests for Node) in build/wasm, then copies
# the module into web/dist for the npm package.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"

cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j"$JOBS"

bash scripts/build-wasm.sh
