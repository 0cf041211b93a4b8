#!/usr/bin/env bash
# Installs the Debian 12 toolchain peft-bridge builds with. Idempotent; needs root (or sudo).
#   scripts/setup-debian.sh          build toolchain
#   scripts/setup-debian.sh --test   plus what only the tests use: torch, to cross-check conversions
set -euo pipefail
PACKAGES=(
  build-essential cmake g++ clang libclang-rt-14-dev   # native build, libFuzzer + sanitizers
  ccache                                                # rebuilds in a fresh clone reuse earlier objects
  libhwy-dev nlohmann-json3-dev                         # core dependencies
  libcurl4-openssl-dev                                  # the native CLI's http(s) / hf:// input (never the core)
  googletest libgtest-dev libbenchmark-dev              # tests (gtest sources also feed the WASM test build)
  emscripten node-acorn                                 # WASM build (emcc's optimizer needs node-acorn)
)
if [[ "${1:-}" == "--test" ]]; then
  PACKAGES+=(python3 python3-numpy python3-torch)  # a reference to compare against, never a library dependency
  PACKAGES+=(python3-venv)                          # the pinned venv of the golden corpus (scripts/golden-venv.sh)
  PACKAGES+=(chromium)                              # the web page's end-to-end test (driven by npm playwright-core)
fi
# Node and npm may come from elsewhere (e.g. NodeSource); only fall back to Debian's when absent.
command -v node >/dev/null || PACKAGES+=(nodejs)
command -v npm >/dev/null || PACKAGES+=(npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
