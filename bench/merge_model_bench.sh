#!/usr/bin/env bash
# Whole-model streaming merge of a generated LLaMA-7B-shaped model at two sizes (LAYERS_SMALL and
# LAYERS_LARGE layers, two shards each): the native CLI's throughput (GB of base read per second) and peak
# RSS, to show that memory stays flat as the model grows; and the engine alone (bench/merge_model.cc) without
# the output's disk cost. Optionally the npm CLI (WASM under Node) too (PB_BENCH_NPM=1).
#   bash bench/merge_model_bench.sh [LAYERS_SMALL=2] [LAYERS_LARGE=8]
# Needs the native build (bash scripts/build.sh) and about 2 x (model size) of free disk in $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
small=${1:-2}
large=${2:-8}
work=$(mktemp -d "${TMPDIR:-/tmp}/pb-merge-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --build build/native --target pb_make_llama_model pb_merge_model peft-bridge >/dev/null
for layers in "$small" "$large"; do
  dir="$work/model-$layers"
  mkdir -p "$dir"
  build/native/bench/pb_make_llama_model "$dir" "$layers"
  sync
  cat "$dir"/*.safetensors >/dev/null  # warm the page cache, as a second run would find it
  echo "== merge engine alone (mmap in, discarding sink), $layers layers, 1 and 2 threads"
  build/native/bench/pb_merge_model "$dir"
  build/native/bench/pb_merge_model "$dir" --threads 2
  echo "== native CLI merge into $work (disk, fsync), $layers layers"
  build/native/peft-bridge merge --base "$dir" --adapter "$dir/adapter" --out "$work/out-$layers" --json
  if [[ "${PB_BENCH_NPM:-0}" == 1 ]]; then
    echo "== npm CLI (WASM under Node) merge, $layers layers"
    /usr/bin/time -f "node peak RSS: %M KiB" node web/bin/peft-bridge.mjs merge --base "$dir" --adapter "$dir/adapter" --out "$work/out-npm-$layers" --json
    cmp "$work/out-$layers/model-00001-of-00002.safetensors" "$work/out-npm-$layers/model-00001-of-00002.safetensors" && echo "native and WASM outputs identical (shard 1)"
  fi
  rm -rf "$dir" "$work/out-$layers" "$work/out-npm-$layers"
done
