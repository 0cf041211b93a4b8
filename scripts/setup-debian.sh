#!/usr/bin/env bash
# Installs the Debian 12 toolchain peft-bridge builds with. Idempotent; needs root (or sudo).
#   scripts/setup-debian.sh          build toolchain
#   scripts/setup-debian.sh --test   plus what only the tests use: torch, to cross-check conversions, and
#                                    a Rust toolchain for the safetensors-crate oracle (tests/rust_oracle)
set -euo pipefail
PACKAGES=(
  build-essential cmake g++ clang libclang-rt-14-dev   # native build, libFuzzer + sanitizers
  ccache                                                # rebuilds in a fresh clone reuse earlier objects
  libhwy-dev nlohmann-json3-dev                         # core dependencies
  libcurl4-openssl-dev                                  # the native CLI's http(s) / hf:// input (never the core)
  googletest libgtest-dev libbenchmark-dev              # tests (gtest sources also feed the WASM test build)
  emscripten node-acorn                                 # WASM build (emcc's optimizer needs node-acorn)
  clang-format                                          # the C++ half of scripts/format.sh (Debian 12: 14)
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

# The Rust oracle (tests/rust_oracle) needs cargo >= 1.80 for the safetensors crate; Debian 12 ships 1.63, so
# rustup installs the toolchain tests/rust_oracle/rust-toolchain.toml pins (a test tool, never linked).
if [[ "${1:-}" == "--test" ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
  toolchain=$(sed -n 's/^channel = "\(.*\)"/\1/p' "$(dirname "$0")/../tests/rust_oracle/rust-toolchain.toml")
  if ! command -v rustup >/dev/null; then
    command -v curl >/dev/null || { SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo; $SUDO apt-get install -y -qq curl ca-certificates; }
    # A failed download leaves the oracle check to report itself (scripts/rust-oracle.sh), not the whole set-up.
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain "$toolchain" ||
      echo "setup-debian.sh: warning: rustup could not be installed; the Rust oracle check will fail" >&2
  fi
  if command -v rustup >/dev/null; then
    rustup toolchain list | grep -q "^$toolchain" || rustup toolchain install --profile minimal "$toolchain" ||
      echo "setup-debian.sh: warning: Rust $toolchain could not be installed; the Rust oracle check will fail" >&2
  fi
fi
