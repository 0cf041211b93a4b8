#!/usr/bin/env bash
# Builds the WASM tree (build/wasm) with Emscripten: the ES module + .wasm (copied into web/dist/ by a
# post-build step, where the npm package's web/src/init.js loads them from) and the C++ tests for Node.
#   scripts/build-wasm.sh            configure if needed, build, copy
#   JOBS=4 scripts/build-wasm.sh     parallel jobs (default 2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/wasm"
# Emscripten 3.1.6's optimizer (acorn) is found through Debian's node module path.
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"
# ccache (when installed) caches em++'s objects as scripts/build.sh does the native ones: keyed by content with
# paths relative to the clone, so a fresh clone or worktree rebuilds from the cache instead of from scratch.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f "$BUILD/CMakeCache.txt" ]] || { [[ ${#launcher[@]} -gt 0 ]] && ! grep -q '^CMAKE_CXX_COMPILER_LAUNCHER' "$BUILD/CMakeCache.txt"; }; then
  emcmake cmake -S "$ROOT" -B "$BUILD" -DPB_BUILD_BENCH=OFF "${launcher[@]}"
fi
# Everything in the WASM tree: the module and the C++ test suites compiled for Node.
cmake --build "$BUILD" -j"${JOBS:-2}"
# The target's POST_BUILD step already copies into web/dist (PB_WASM_COPY_TO_WEB); copying again keeps this
# script correct when that option is off.
mkdir -p "$ROOT/web/dist"
cp "$BUILD/wasm/peft_bridge_wasm.mjs" "$BUILD/wasm/peft_bridge_wasm.wasm" "$ROOT/web/dist/"
echo "web/dist: $(ls "$ROOT/web/dist" | tr '\n' ' ')"
