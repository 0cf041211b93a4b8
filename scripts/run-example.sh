#!/usr/bin/env bash
# The main job on the bundled example, from a fresh Debian 12 clone: installs the toolchain, builds
# both CLIs, inspects examples/tiny-llama.safetensors, converts it to BF16 with each CLI, and checks
# that the native and the WASM (Node) CLI wrote the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
npm ci --no-audit --no-fund
npm run build

EXAMPLE=examples/tiny-llama.safetensors
OUT=build/example
mkdir -p "$OUT"
echo "== peft-bridge inspect $EXAMPLE"
build/native/peft-bridge inspect "$EXAMPLE"
echo "== peft-bridge convert $EXAMPLE $OUT/tiny-llama.bf16.safetensors --dtype bf16 (native)"
build/native/peft-bridge convert "$EXAMPLE" "$OUT/tiny-llama.bf16.safetensors" --dtype bf16
echo "== the same with the npm package's CLI (WASM under Node)"
node web/bin/peft-bridge.mjs convert "$EXAMPLE" "$OUT/tiny-llama.bf16.wasm.safetensors" --dtype bf16
cmp "$OUT/tiny-llama.bf16.safetensors" "$OUT/tiny-llama.bf16.wasm.safetensors"
echo "native and WASM outputs are byte-identical"
echo "== peft-bridge inspect --json $OUT/tiny-llama.bf16.safetensors"
node web/bin/peft-bridge.mjs inspect --json "$OUT/tiny-llama.bf16.safetensors" | head -c 400; echo " ..."
