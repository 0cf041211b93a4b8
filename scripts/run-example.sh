#!/usr/bin/env bash
# The main job on the bundled example, from a fresh Debian 12 clone: installs the toolchain, builds
# both CLIs, inspects examples/tiny-llama.safetensors, converts it to BF16, reads and translates the
# bundled LoRA adapter (examples/tiny-llama-lora) and merges it into the model, each with the native and
# the WASM (Node) CLI, and checks that both wrote the same bytes.
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
echo "== peft-bridge adapter-info examples/tiny-llama-lora (a PEFT LoRA on q_proj and v_proj)"
build/native/peft-bridge adapter-info examples/tiny-llama-lora
echo "== peft-bridge translate examples/tiny-llama-lora $OUT/lora-mlx --to mlx"
rm -rf "$OUT/lora-mlx" "$OUT/merged" "$OUT/merged-wasm"
build/native/peft-bridge translate examples/tiny-llama-lora "$OUT/lora-mlx" --to mlx
echo "== peft-bridge merge --base $EXAMPLE --adapter examples/tiny-llama-lora --out $OUT/merged --dtype bf16"
build/native/peft-bridge merge --base "$EXAMPLE" --adapter examples/tiny-llama-lora --out "$OUT/merged" --dtype bf16
echo "== the same merge with the npm package's CLI (WASM under Node)"
node web/bin/peft-bridge.mjs merge --base "$EXAMPLE" --adapter examples/tiny-llama-lora --out "$OUT/merged-wasm" --dtype bf16
cmp "$OUT/merged/tiny-llama.safetensors" "$OUT/merged-wasm/tiny-llama.safetensors"
cmp "$OUT/merged/config.json" "$OUT/merged-wasm/config.json"
echo "native and WASM merges are byte-identical"
echo "== peft-bridge inspect --json $OUT/tiny-llama.bf16.safetensors"
node web/bin/peft-bridge.mjs inspect --json "$OUT/tiny-llama.bf16.safetensors" | head -c 400; echo " ..."
