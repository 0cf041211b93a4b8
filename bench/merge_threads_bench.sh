#!/usr/bin/env bash
# Native CLI `merge --threads 1` vs `--threads 2` on a generated single-file LLaMA-7B-shaped BF16 model
# (bench/make_llama_model.cc --single-file, adapter on q_proj and v_proj unless TARGETS says) at each rank given, output on tmpfs
# (/dev/shm), with `cp MODEL /dev/shm/x && sync` as the baseline in the same run. Rounds are interleaved
# (cp, 1 thread, 2 threads, ...); before every timed command the page pool is warmed by writing and deleting a
# file as large as the output (docs/toolchain.md: freed memory returns to the host and cold pages slow writes); the
# model is read once first so the page cache is warm. Prints medians and peak RSS (/usr/bin/time %M), and checks
# the two outputs are the same bytes.
#   bash bench/merge_threads_bench.sh [LAYERS=3] [RANKS="16 64 128"] [ROUNDS=5] [TARGETS=q_proj,v_proj]
# Needs the native build (build/native) and 2 x the model size free in $TMPDIR and in /dev/shm. Results:
# docs/benchmarks.md, "Native CLI threads".
set -euo pipefail
cd "$(dirname "$0")/.."
layers=${1:-3}
ranks=${2:-"16 64 128"}
rounds=${3:-5}
targets=${4:-q_proj,v_proj}  # the adapter's modules (make_llama_model --targets)
cli=build/native/peft-bridge
work=$(mktemp -d "${TMPDIR:-/tmp}/pb-threads-bench.XXXXXX")
shm=$(mktemp -d /dev/shm/pb-threads-bench.XXXXXX)
trap 'rm -rf "$work" "$shm"' EXIT

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# Writes and deletes a file as large as the output, untimed.
warm() { dd if=/dev/zero of="$shm/warm" bs=256K count=$(($1 / 262144 + 1)) status=none; rm -f "$shm/warm"; }

# run NAME COMMAND...: appends "seconds peak_kib" to $work/NAME.times.
run() {
  local name=$1
  shift
  local t0=$EPOCHREALTIME
  /usr/bin/time -f %M -o "$work/rss" "$@" >/dev/null
  local t1=$EPOCHREALTIME
  echo "$(echo "$t1 - $t0" | bc) $(cat "$work/rss")" >>"$work/$name.times"
}

# How much of the 2 cores this process gets: one busy loop alone, then two at once (2 free cores: the same time).
spin() { local i; for ((i = 0; i < 1000000; ++i)); do :; done; }
cpu_check() {
  local t0=$EPOCHREALTIME
  spin
  local t1=$EPOCHREALTIME
  spin &
  spin
  wait
  local t2=$EPOCHREALTIME
  echo "CPU check: one busy loop $(echo "$t1 - $t0" | bc) s, two at once $(echo "$t2 - $t1" | bc) s"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
cpu_check
printf '| layers | rank | model | cp+sync | --threads 1 | --threads 2 | 1 / 2 | 1 / cp | 2 / cp | peak RSS 1 / 2 |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for rank in $ranks; do
  dir="$work/model-r$rank"
  mkdir -p "$dir"
  build/native/bench/pb_make_llama_model "$dir" "$layers" --rank "$rank" --single-file --targets "$targets" >/dev/null
  model="$dir/model.safetensors"
  size=$(stat -c %s "$model")
  cat "$model" "$dir/adapter/adapter_model.safetensors" >/dev/null
  rm -f "$work"/*.times
  for ((i = 0; i <= rounds; ++i)); do  # round 0 is the warm-up, not counted
    for what in cp t1 t2; do
      warm "$size"
      case $what in
        cp) run cp sh -c "cp '$model' '$shm/x' && sync '$shm/x'" ;;
        t1) run t1 "$cli" merge --base "$dir" --adapter "$dir/adapter" --out "$shm/t1" --threads 1 -q ;;
        t2) run t2 "$cli" merge --base "$dir" --adapter "$dir/adapter" --out "$shm/t2" --threads 2 -q ;;
      esac
      if ((i == 0)); then rm -f "$work/$what.times"; fi
    done
    if ((i == 0)); then cmp "$shm/t1/model.safetensors" "$shm/t2/model.safetensors"; fi
    rm -rf "$shm/x" "$shm/t1" "$shm/t2"
  done
  cp_s=$(cut -d' ' -f1 "$work/cp.times" | median)
  t1_s=$(cut -d' ' -f1 "$work/t1.times" | median)
  t2_s=$(cut -d' ' -f1 "$work/t2.times" | median)
  t1_m=$(cut -d' ' -f2 "$work/t1.times" | sort -g | tail -1)
  t2_m=$(cut -d' ' -f2 "$work/t2.times" | sort -g | tail -1)
  printf '| %s | %s | %.2f GB | %.3f s | %.3f s | %.3f s | %.2f× | %.2f | %.2f | %d / %d MiB |\n' "$layers" "$rank" \
    "$(echo "$size / 1000000000" | bc -l)" "$cp_s" "$t1_s" "$t2_s" "$(echo "$t1_s / $t2_s" | bc -l)" \
    "$(echo "$t1_s / $cp_s" | bc -l)" "$(echo "$t2_s / $cp_s" | bc -l)" $((t1_m / 1024)) $((t2_m / 1024))
  rm -rf "$dir"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
cpu_check
echo "outputs of --threads 1 and 2 compared with cmp: identical"
