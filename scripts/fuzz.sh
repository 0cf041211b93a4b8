#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build/fuzz and runs each of them (docs/fuzzing.md).
#
#   scripts/fuzz.sh [SECONDS=90] [extra libFuzzer flags...]
#       the brief run of the test suite: SECONDS split evenly among the targets, one after the other
#   scripts/fuzz.sh --campaign SECONDS [extra libFuzzer flags...]
#       a long campaign: SECONDS for EACH target, in sequence, unattended, e.g.
#       scripts/fuzz.sh --campaign 3600 -jobs=2 -workers=2
#
# Environment:
#   PB_FUZZ_TARGETS="fuzz_regex fuzz_reader"  run only these (default: all)
#   PB_FIXTURES=dir          fixtures to derive extra seeds from (default tests/fixtures, else ../shared/fixtures)
#
# Seeds: fuzz/corpus_seeds/<target>/ (committed), plus seeds derived at run time from the fixtures and the
# naming tables into build/fuzz/seeds/<target>/. Each target's growing corpus is build/fuzz/corpus/<target>/
# (kept between runs), findings go to build/fuzz/artifacts/<target>-crash-..., logs to build/fuzz/logs/.
# Prints one line per target, "fuzz.sh: <target>: ok|FAILED ...", then a summary. Exit status: non-zero if
# the build fails or any target finds a crash, a sanitizer report, a failed check, a timeout or an OOM.
set -euo pipefail

campaign=0
if [[ ${1:-} == --campaign ]]; then
  campaign=1
  shift
  seconds=${1:?--campaign needs SECONDS per target}
  shift
else
  seconds=${1:-90}
  [[ $# -gt 0 ]] && shift
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build/fuzz
fixtures=${PB_FIXTURES:-$root/tests/fixtures}
[[ -n ${PB_FIXTURES:-} || -d $fixtures ]] || fixtures=$root/../shared/fixtures
all_targets=(fuzz_reader fuzz_adapter_config fuzz_regex fuzz_naming_tables fuzz_model_index fuzz_merge_plan
             fuzz_adapter_readers fuzz_command_line fuzz_http_policy fuzz_combine fuzz_extract fuzz_gguf
             fuzz_commit_journal fuzz_merge_engine)
read -r -a targets <<<"${PB_FUZZ_TARGETS:-${all_targets[*]}}"

mkdir -p "$build"
launcher=()
command -v ccache >/dev/null && { export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1; launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); }
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DPB_FUZZ=ON -DPB_BUILD_TESTS=OFF -DPB_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j"${PB_FUZZ_JOBS:-2}" --target "${targets[@]}"

# Seeds made at run time: the fixtures (fuzz_reader: each file cut to 64 KiB after 4 split-seed bytes;
# adapters shrunk to 4x4 factors; configs; indexes) and the shipped naming tables.
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds/fuzz_reader" "$build/artifacts" "$build/logs"
if [[ -d $fixtures ]]; then
  n=0
  while IFS= read -r -d '' f; do
    for split in '\x01\x00\x00\x00' '\x07\x13\x5a\xc3'; do
      n=$((n + 1))
      { printf "$split"; head -c 65536 "$f"; } >"$seeds/fuzz_reader/fixture_$n"
    done
  done < <(find "$fixtures" -type f -name '*.safetensors' -print0 | sort -z)
  python3 "$root/fuzz/make_seeds.py" fixtures "$fixtures" "$seeds"
else
  echo "fuzz.sh: no fixtures at $fixtures; using the committed seeds only" >&2
fi

if [[ $campaign == 1 ]]; then per=$seconds; else per=$(( seconds / ${#targets[@]} )); (( per >= 1 )) || per=1; fi
echo "fuzz.sh: ${#targets[@]} targets, ${per}s each$([[ $campaign == 1 ]] && echo ' (campaign)')"

failed=0
for t in "${targets[@]}"; do
  dict=$build/logs/$t.dict
  case $t in
    fuzz_regex | fuzz_command_line | fuzz_http_policy | fuzz_gguf | fuzz_commit_journal) cp "$root/fuzz/$t.dict" "$dict" ;;  # not JSON
    *) cat "$root/fuzz/json.dict" > "$dict"; [[ -f $root/fuzz/$t.dict ]] && cat "$root/fuzz/$t.dict" >>"$dict" ;;
  esac
  corpus=$build/corpus/$t
  mkdir -p "$corpus" "$seeds/$t" "$build/logs/$t"
  log=$build/logs/$t.log
  # Inputs stay small: huge values come from the compact encoding (fuzz/fuzz_input.h).
  args=("$corpus" "$root/fuzz/corpus_seeds/$t" "$seeds/$t" -dict="$dict" -max_total_time="$per" -max_len=65536
        -timeout=20 -rss_limit_mb=3072 -malloc_limit_mb=3072 -artifact_prefix="$build/artifacts/$t-"
        -print_final_stats=1 -use_value_profile=1 "$@")
  rm -f "$build/logs/$t"/fuzz-*.log
  started=$(date +%s)
  # With -jobs, libFuzzer writes fuzz-<n>.log into the working directory.
  if (cd "$build/logs/$t" && "$build/fuzz/$t" "${args[@]}") >"$log" 2>&1; then status=ok; else status=FAILED; failed=1; fi
  elapsed=$(( $(date +%s) - started ))
  logs=("$log")
  compgen -G "$build/logs/$t/fuzz-*.log" >/dev/null && logs+=("$build/logs/$t"/fuzz-*.log)
  # With -jobs the parent's log repeats each worker's final stats: count the workers' logs alone then.
  counted=("${logs[@]}")
  (( ${#logs[@]} > 1 )) && counted=("${logs[@]:1}")
  execs=$(grep -h "stat::number_of_executed_units" "${counted[@]}" | awk '{s += $2} END {print s + 0}')
  last=$(grep -h -E "^#[0-9]+.*cov: " "${logs[@]}" | tail -1 | grep -oE "cov: [0-9]+ ft: [0-9]+" || true)
  echo "fuzz.sh: $t: $status executions=$execs ${last:-cov: ? ft: ?} seconds=$elapsed corpus=$(ls "$corpus" | wc -l)"
  if [[ $status != ok ]]; then
    grep -h -E "ERROR: |SUMMARY: |^fuzz_|Test unit written|==[0-9]+== ?ERROR" "${logs[@]}" | head -8 | sed 's/^/    /'
  fi
done
if [[ $failed == 0 ]]; then echo "fuzz.sh: all targets ok"; else echo "fuzz.sh: FINDINGS (see build/fuzz/artifacts, build/fuzz/logs)"; fi
exit $failed
