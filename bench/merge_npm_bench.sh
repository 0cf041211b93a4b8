#!/usr/bin/env bash
# The npm CLI's merge (WASM under Node) against the native CLI's on the same model, to tmpfs, with `cp` + `sync`
# of the same bytes as the baseline, interleaved round by round after one warm-up; medians, peak RSS and CPU time
# (user + system, all threads: on a machine of N cores no command can take less than its CPU time / N).
#   bash bench/merge_npm_bench.sh [LAYERS=3] [ROUNDS=5]
# Needs the native and WASM builds (bash scripts/build.sh); the model goes to $TMPDIR (page cache warm), the
# outputs to /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/.."
layers=${1:-3}
rounds=${2:-5}
source bench/two-shard-model.sh
bench_model npm-bench "$layers"
time_of() {  # prints "seconds peak_kib cpu_seconds" of the command
  /usr/bin/time -o "$work/time" -f "%e %M %U %S" "$@" >/dev/null
  tail -1 "$work/time" | awk '{print $1, $2, $3 + $4}'
}
declare -A secs rss cpu
for r in $(seq 0 "$rounds"); do
  for what in cp native npm; do
    rm -rf "$out/o"; mkdir -p "$out/o"; warm
    case $what in
      cp) res=$(time_of sh -c "cp $work/*.safetensors $out/o/ && sync $out/o/*") ;;
      native) rm -rf "$out/o"; res=$(time_of build/native/peft-bridge merge --base "$work" --adapter "$work/adapter" --out "$out/o" --quiet) ;;
      npm) rm -rf "$out/o"; res=$(time_of node web/bin/peft-bridge.mjs merge --base "$work" --adapter "$work/adapter" --out "$out/o" --quiet) ;;
    esac
    [[ $r == 0 ]] && continue  # warm-up round
    read -r s m c <<<"$res"
    secs[$what]+="$s "; rss[$what]+="$m "; cpu[$what]+="$c "
  done
done
echo "model: $layers layers, $bytes bytes of safetensors; $rounds rounds after a warm-up; load: $(cut -d' ' -f1-3 /proc/loadavg)"
c=$(echo "${secs[cp]}" | median)
n=$(echo "${secs[native]}" | median)
for what in cp native npm; do
  s=$(echo "${secs[$what]}" | median); m=$(echo "${rss[$what]}" | median); u=$(echo "${cpu[$what]}" | median)
  printf '%-7s median %6.3f s  (%s)  %5.2f x cp  %5.2f x native  peak RSS %6.1f MiB  CPU %5.2f s\n' "$what" "$s" "${secs[$what]% }" \
    "$(echo "$s / $c" | bc -l)" "$(echo "$s / $n" | bc -l)" "$(echo "$m / 1024" | bc -l)" "$u"
done
rm -rf "$out/n" "$out/j"
build/native/peft-bridge merge --base "$work" --adapter "$work/adapter" --out "$out/n" --quiet
node web/bin/peft-bridge.mjs merge --base "$work" --adapter "$work/adapter" --out "$out/j" --quiet
for f in "$out"/n/*; do cmp "$f" "$out/j/$(basename "$f")"; done && echo "npm and native outputs identical"
