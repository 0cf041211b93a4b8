#!/usr/bin/env bash
# The npm CLI's merge on one thread against its shards on worker threads (--threads 2), with the native CLI's
# default beside them, on the same two-shard LLaMA-shaped model to tmpfs: interleaved round by round after one
# warm-up; medians, peak RSS and CPU time (user + system, all threads). What chose merge::DefaultWorkerThreads.
#   bash bench/npm_threads_bench.sh [LAYERS=3] [ROUNDS=5] [RANK=16] [MERGE OPTIONS...]   e.g. ... 3 5 16 --quantize fp8
# Needs the native and WASM builds (bash scripts/build.sh); the model goes to $TMPDIR (page cache warm), the
# outputs to /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/.."
layers=${1:-3}
rounds=${2:-5}
rank=${3:-16}
shift $(($# < 3 ? $# : 3))
source bench/two-shard-model.sh
bench_model npm-threads "$layers" "$rank"
args=(merge --base "$work" --adapter "$work/adapter" --quiet "$@")
declare -A secs rss cpu
whats=(native npm-1 npm-2)
for r in $(seq 0 "$rounds"); do
  for what in "${whats[@]}"; do
    rm -rf "$out/o"; warm
    case $what in
      native) cmd=(build/native/peft-bridge "${args[@]}" --out "$out/o") ;;
      npm-1) cmd=(node web/bin/peft-bridge.mjs "${args[@]}" --out "$out/o" --threads 1) ;;
      npm-2) cmd=(node web/bin/peft-bridge.mjs "${args[@]}" --out "$out/o" --threads 2) ;;
    esac
    /usr/bin/time -o "$work/time" -f "%e %M %U %S" "${cmd[@]}" >/dev/null
    [[ $r == 0 ]] && continue  # warm-up round
    read -r s m u k < <(tail -1 "$work/time")
    secs[$what]+="$s "; rss[$what]+="$m "; cpu[$what]+="$(echo "$u + $k" | bc) "
  done
done
echo "model: $layers layers, r = $rank, $bytes bytes; options: ${*:-none}; $rounds rounds after a warm-up; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for what in "${whats[@]}"; do
  s=$(echo "${secs[$what]}" | median); m=$(echo "${rss[$what]}" | median); u=$(echo "${cpu[$what]}" | median)
  printf '%-7s median %6.3f s  (%s)  peak RSS %6.1f MiB  CPU %5.2f s\n' "$what" "$s" "${secs[$what]% }" "$(echo "$m / 1024" | bc -l)" "$u"
done
rm -rf "$out/a" "$out/b"
node web/bin/peft-bridge.mjs "${args[@]}" --out "$out/a" --threads 1
node web/bin/peft-bridge.mjs "${args[@]}" --out "$out/b" --threads 2
for f in "$out"/a/*; do cmp "$f" "$out/b/$(basename "$f")"; done && echo "one thread and two: identical outputs"
