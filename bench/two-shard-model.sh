# Sourced by the npm CLI benches (merge_npm_bench.sh, npm_threads_bench.sh, npm_floor_bench.sh), from the repo's
# root: `bench_model NAME LAYERS [RANK]` builds the CLI and the generator, writes a two-shard LLaMA-7B-shaped BF16
# model and its PEFT adapter (bench/make_llama_model.cc) to $work, reads it once (page cache warm), makes $out on
# tmpfs and sets $bytes; both directories go on exit. warm() writes and drops a file as large as the output: the
# VM returns freed memory to its host, so every timed command should find warm pages (docs/toolchain.md).
# median: the middle of the numbers on stdin.
bench_model() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/pb-$1.XXXXXX")
  out=$(mktemp -d "/dev/shm/pb-$1.XXXXXX")
  trap 'rm -rf "$work" "$out"' EXIT
  cmake --build build/native --target pb_make_llama_model peft-bridge >/dev/null
  build/native/bench/pb_make_llama_model "$work" "$2" "${3:-16}" >/dev/null
  cat "$work"/*.safetensors >/dev/null
  bytes=$(cat "$work"/*.safetensors | wc -c)
}
warm() { head -c "$bytes" /dev/zero >"$out/warm" && rm -f "$out/warm"; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
