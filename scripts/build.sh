#!/usr/bin/env bash
# Builds everything from one source tree: the native tree (core, CLI, tests, benchmarks) in
# build/native and the WASM tree (ES module + .wasm, C++ tests for Node) in build/wasm, then copies
# the module into web/dist for the npm package.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"

# ccache (when installed) keys objects by content with paths relative to the clone, so a fresh clone (CI's)
# rebuilds from the cache of the last one.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build/native -j"$JOBS"

bash scripts/build-wasm.sh
