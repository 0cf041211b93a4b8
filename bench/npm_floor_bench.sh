#!/usr/bin/env bash
# The parts every npm CLI merge goes through, timed beside both CLIs' merges in one interleaved loop: Node
# starting, the npm CLI's dry run (Node, modules, module instance, plan), Node copying the shards whole at once
# with fs.promises.copyFile (what the npm CLI's whole-shard copies do), then the native and the npm CLI merges.
# Medians (and fastest), CPU = user + system, to tmpfs with the page pool warmed before every command.
#   bash bench/npm_floor_bench.sh [LAYERS=3] [ROUNDS=7]
# Needs the native and WASM builds (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
layers=${1:-3}
rounds=${2:-7}
source bench/two-shard-model.sh
bench_model npm-floor "$layers"
copies="import fs from 'node:fs/promises';
const names = (await fs.readdir('$work')).filter((n) => n.endsWith('.safetensors'));
await fs.mkdir('$out/o', { recursive: true });
await Promise.all(names.map((n) => fs.copyFile('$work/' + n, '$out/o/' + n)));"
merge=(merge --base "$work" --adapter "$work/adapter" --out "$out/o" --quiet)
whats=(node dry-run copies native npm)
declare -A secs cpu
for r in $(seq 0 "$rounds"); do
  for what in "${whats[@]}"; do
    rm -rf "$out/o"; warm
    case $what in
      node) cmd=(node -e 0) ;;
      dry-run) cmd=(node web/bin/peft-bridge.mjs "${merge[@]}" --dry-run) ;;
      copies) cmd=(node --input-type=module -e "$copies") ;;
      native) cmd=(build/native/peft-bridge "${merge[@]}") ;;
      npm) cmd=(node web/bin/peft-bridge.mjs "${merge[@]}") ;;
    esac
    /usr/bin/time -o "$work/time" -f "%e %U %S" "${cmd[@]}" >/dev/null
    [[ $r == 0 ]] && continue  # warm-up round
    read -r s u k < <(tail -1 "$work/time")
    secs[$what]+="$s "; cpu[$what]+="$(echo "$u + $k" | bc) "
  done
done
fastest() { tr ' ' '\n' | grep -v '^$' | sort -g | head -1; }
echo "model: $layers layers, $bytes bytes; $rounds rounds after a warm-up; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for what in "${whats[@]}"; do
  printf '%-8s median %6.3f s  fastest %6.3f s  (%s)  CPU %5.2f s\n' "$what" "$(echo "${secs[$what]}" | median)" \
    "$(echo "${secs[$what]}" | fastest)" "${secs[$what]% }" "$(echo "${cpu[$what]}" | median)"
done
