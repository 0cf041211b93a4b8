#!/usr/bin/env bash
# Merge + quantize against plain merge, in the same run: a generated LLaMA-7B-shaped BF16 model
# (bench/make_llama_model.cc, LAYERS layers in two shards, a PEFT r=16 adapter on q/k/v/o) merged into tmpfs by
# the native CLI and the npm CLI (WASM under Node), plainly and with each --quantize scheme. Prints per run the
# median wall time of RUNS runs, its ratio to the plain native merge, peak RSS, and whether the npm CLI's
# output is byte-identical to the native one.
#   bash bench/quantize_bench.sh [LAYERS=2] [RUNS=3]
# Needs the native and WASM builds (bash scripts/build.sh) and about 3 x (model size) free in /dev/shm. Results:
# docs/benchmarks.md, "Merge + quantize".
set -euo pipefail
cd "$(dirname "$0")/.."
layers=${1:-2}
runs=${2:-3}
shm=${PB_BENCH_DIR:-/dev/shm}
work=$(mktemp -d "$shm/pb-quant-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --build build/native --target pb_make_llama_model peft-bridge >/dev/null
model="$work/model"
mkdir -p "$model"
build/native/bench/pb_make_llama_model "$model" "$layers" >/dev/null
echo "model: $layers layers, $(du -sb "$model" | awk '{printf "%.2f GB", $1/1e9}') (tmpfs), adapter r=16 q/k/v/o"

# One configuration: RUNS timed runs of one CLI; prints "median_seconds peak_rss_kib".
time_runs() {
  local out=$1; shift
  local times=() peak=0
  for ((i = 0; i < runs; i++)); do
    rm -rf "$out"
    local t0 t1 rss
    t0=$(date +%s.%N)
    /usr/bin/time -f "%M" -o "$work/rss" "$@" --out "$out" -q >/dev/null
    t1=$(date +%s.%N)
    rss=$(cat "$work/rss")
    times+=("$(echo "$t1 - $t0" | bc -l)")
    (( rss > peak )) && peak=$rss
  done
  printf '%s\n' "${times[@]}" | sort -g | awk -v n="$runs" '{a[NR]=$1} END {printf "%.3f", a[int((n+1)/2)]}'
  echo " $peak"
}

native=(build/native/peft-bridge merge --base "$model" --adapter "$model/adapter")
npm=(node web/bin/peft-bridge.mjs merge --base "$model" --adapter "$model/adapter")
printf '%-26s %-7s %9s %8s %12s %s\n' "configuration" "CLI" "median s" "÷ plain" "peak RSS" "npm = native"
base_time=""
for q in "" "fp8" "fp8 --scheme block" "int8" "int4" "int4 --scheme per-channel"; do
  extra=()
  [[ -n $q ]] && read -r -a extra <<<"--quantize $q"
  label=${q:-plain (bf16)}
  read -r t rss < <(time_runs "$work/out-native" "${native[@]}" "${extra[@]}")
  [[ -z $base_time ]] && base_time=$t
  printf '%-26s %-7s %9s %8.2f %9.1f MiB\n' "$label" native "$t" "$(echo "$t / $base_time" | bc -l)" "$(echo "$rss / 1024" | bc -l)"
  read -r t2 rss2 < <(time_runs "$work/out-npm" "${npm[@]}" "${extra[@]}")
  same=identical
  for f in "$work/out-native"/*.safetensors "$work/out-native"/*.json; do
    cmp -s "$f" "$work/out-npm/$(basename "$f")" || same="DIFFERENT ($(basename "$f"))"
  done
  printf '%-26s %-7s %9s %8.2f %9.1f MiB %s\n' "$label" npm "$t2" "$(echo "$t2 / $base_time" | bc -l)" "$(echo "$rss2 / 1024" | bc -l)" "$same"
done
