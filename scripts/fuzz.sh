#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan) in build/fuzz and fuzzes the push parser.
#
#   scripts/fuzz.sh [seconds=60] [extra libFuzzer flags...]
#   e.g. scripts/fuzz.sh 3600 -jobs=2 -workers=2          (a long run; see docs/fuzzing.md)
#
# Seeds are made at run time in build/fuzz/seeds (never in the repository): the fixtures in
# ../shared/fixtures (or $PB_FIXTURES), each cut to 64 KiB and prefixed with 4 split-seed bytes, plus
# a few hand-made files. The growing corpus lives in build/fuzz/corpus, crashes in build/fuzz/artifacts.
# Exit status: non-zero if the build fails or the fuzzer finds a crash or a mismatch.
set -euo pipefail

seconds=${1:-60}
[[ $# -gt 0 ]] && shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build/fuzz
fixtures=${PB_FIXTURES:-$root/../shared/fixtures}

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DPB_FUZZ=ON -DPB_BUILD_TESTS=OFF -DPB_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target fuzz_reader

seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds" "$build/corpus" "$build/artifacts"

# A seed file: 4 split-seed bytes, then the file's first 64 KiB.
n=0
add_seed() {  # add_seed <split-seed-hex-escapes> <file>
  n=$((n + 1))
  { printf "$1"; head -c 65536 "$2"; } >"$seeds/seed_$n"
}
if [[ -d $fixtures ]]; then
  while IFS= read -r -d '' f; do
    add_seed '\x01\x00\x00\x00' "$f"
    add_seed '\x07\x13\x5a\xc3' "$f"
  done < <(find "$fixtures" -type f -name '*.safetensors' -print0 | sort -z)
else
  echo "fuzz.sh: no fixtures at $fixtures; using hand-made seeds only" >&2
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
hand() {  # hand <json> <data-byte-count>: a safetensors file with the JSON padded to 8 and zero data
  local json=$1 pad
  pad=$(( (8 - ${#json} % 8) % 8 ))
  json="$json$(printf '%*s' "$pad" '')"
  local len=${#json}
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' $((len & 255)) $((len >> 8 & 255)) $((len >> 16 & 255)) $((len >> 24 & 255)))" >"$tmp"
  printf '%s' "$json" >>"$tmp"
  head -c "$2" /dev/zero >>"$tmp"
  add_seed '\x2a\x00\x00\x00' "$tmp"
}
hand '{}' 0
hand '{"__metadata__":{"format":"pt"}}' 0
hand '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}' 16
hand '{"__metadata__":{"k":"v\u00e9\n"},"b":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},"a\"x":{"dtype":"F8_E4M3","shape":[0],"data_offsets":[6,6]},"c":{"dtype":"F4","shape":[4],"data_offsets":[6,8]}}' 8
hand '{"x":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"y":{"dtype":"BOOL","shape":[5],"data_offsets":[8,13],"extra":[1,{"z":null}]}}' 13
hand '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 12

echo "fuzz.sh: $(ls "$seeds" | wc -l) seeds, $(ls "$build/corpus" | wc -l) corpus files, ${seconds}s"
"$build/fuzz/fuzz_reader" "$build/corpus" "$seeds" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1 "$@"
