#!/usr/bin/env bash
# Runs every test: native C++ (ctest), the same C++ suites compiled to WASM under Node, the JS API
# and CLI suites (node --test) against the WASM build, a short fuzzing run, the torch cross-checks and the
# live cross-checks in the pinned venv (tests/golden/README.md) and the house formatting check. Ends with one
# "N passed, N failed" line summing all of them.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=build/test-logs
mkdir -p "$LOGS"

bash scripts/build.sh || { echo "build failed"; echo "tests: 0 passed, 1 failed"; exit 1; }

status=0
passed=0
failed=0
skipped=0

count_ctest() {  # "100% tests passed, 0 tests failed out of 57"
  local line
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of" "$1" | tail -1)
  local f total
  f=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  [[ -n "$line" ]] || { failed=$((failed + 1)); return; }
  local s  # GTEST_SKIP'd tests: ctest lists them "(Skipped)" and counts them among the passed
  s=$(grep -cE "^[[:space:]]*[0-9]+ - .*\(Skipped\)" "$1")
  passed=$((passed + total - f - s)); failed=$((failed + f)); skipped=$((skipped + s))
}

count_script() {  # one counted check from a script's exit status: 0 passed, 77 skipped, else failed
  case $1 in
    0) passed=$((passed + 1)) ;;
    77) if [[ ${PB_REQUIRE_FIXTURES:-0} == 1 ]]; then  # .ci/run: nothing may be skipped
          echo "FAIL: skipped under PB_REQUIRE_FIXTURES=1"; status=1; failed=$((failed + 1))
        else skipped=$((skipped + 1)); fi ;;
    *) status=1; failed=$((failed + 1)) ;;
  esac
}

echo "== native C++ tests (ctest)"
ctest --test-dir build/native --output-on-failure -j2 2>&1 | tee "$LOGS/native.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
count_ctest "$LOGS/native.log"

echo "== C++ tests compiled to WASM, run under Node (ctest)"
ctest --test-dir build/wasm --output-on-failure 2>&1 | tee "$LOGS/wasm.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
count_ctest "$LOGS/wasm.log"

echo "== fuzzing: a short libFuzzer run of every target (one pass or failure per target; docs/fuzzing.md)"
bash scripts/fuzz.sh "${PB_FUZZ_SECONDS:-90}" 2>&1 | tee "$LOGS/fuzz.log" | grep -E "^fuzz.sh: |^    " || true
fuzz_ok=$(grep -cE "^fuzz.sh: fuzz_[a-z_]+: ok" "$LOGS/fuzz.log" || true)
fuzz_failed=$(grep -cE "^fuzz.sh: fuzz_[a-z_]+: FAILED" "$LOGS/fuzz.log" || true)
grep -q "^fuzz.sh: all targets ok" "$LOGS/fuzz.log" || { status=1; (( fuzz_failed > 0 )) || fuzz_failed=1; }
passed=$((passed + fuzz_ok)); failed=$((failed + fuzz_failed))

echo "== torch cross-check: conversions bit-identical to Debian's python3-torch (skipped when it is not installed)"
if [[ -x /usr/bin/python3 ]]; then
  /usr/bin/python3 tests/torch/compare_with_torch.py build/native/peft-bridge 2>&1 | tee "$LOGS/torch.log" | tail -4
  torch_status=${PIPESTATUS[0]}
else
  echo "SKIP: no /usr/bin/python3"; torch_status=77
fi
count_script "$torch_status"

echo "== torch cross-check: merges equal PEFT's CPU maths in Debian's python3-torch (skipped when it is not installed)"
if [[ -x /usr/bin/python3 ]]; then
  /usr/bin/python3 tests/torch/merge_with_torch.py build/native/peft-bridge 2>&1 | tee "$LOGS/torch-merge.log" | tail -14
  torch_status=${PIPESTATUS[0]}
else
  echo "SKIP: no /usr/bin/python3"; torch_status=77
fi
count_script "$torch_status"

# The live cross-checks run the real libraries (transformers, PEFT, safetensors) from the pinned venv that
# scripts/run-tests.sh creates (scripts/golden-venv.sh): one counted check per script. Without the venv they
# are skipped, except under PB_REQUIRE_FIXTURES=1 (.ci/run), where a missing venv is a failure.
golden_python=$(bash scripts/golden-venv.sh --if-ready 2>/dev/null) || golden_python=""
# They run in one process (tests/golden/check_all.py: one import of torch/transformers/PEFT, each merge and
# translation written once) and are still counted one by one, from the exit status each leaves in its log's .rc.
live_logs=(live.log live-adapters.log live-safetensors.log live-configs.log)
live_logs+=(live-create.log live-combine.log live-extract.log)  # the create, combine and extract commands
live_logs+=(live-gguf.log)  # translate --to gguf against llama.cpp's converter
live_logs+=(live-llama-cpp.log)  # llama.cpp itself runs the .gguf adapters
live_logs+=(live-quantize.log)  # merge --quantize against compressed-tensors and transformers
live_logs+=(live-key-mapping.log)  # merge into checkpoints named as saved (transformers' key mapping) against PEFT
if [[ -n $golden_python ]]; then
  for log in "${live_logs[@]}"; do rm -f "$LOGS/$log" "$LOGS/$log.rc"; done
  "$golden_python" tests/golden/check_all.py build/native/peft-bridge "$LOGS"
  all_rc=$?
  for log in "${live_logs[@]}"; do
    rc=$(cat "$LOGS/$log.rc" 2>/dev/null) || rc=$all_rc  # no .rc: check_all stopped before it (77: no CLI)
    [[ $rc == 0 || $rc == 77 ]] || rc=1
    count_script "$rc"
  done
else
  for log in "${live_logs[@]}"; do
    if [[ ${PB_REQUIRE_FIXTURES:-0} == 1 ]]; then
      echo "FAIL: the pinned venv is missing (bash scripts/golden-venv.sh) and PB_REQUIRE_FIXTURES=1"; count_script 1
    else
      echo "SKIP: the pinned venv is missing (bash scripts/golden-venv.sh)"; count_script 77
    fi
  done
fi

echo "== Rust safetensors crate: the committed reader vectors are its verdicts (cargo; tests/rust_oracle/README.md)"
bash scripts/rust-oracle.sh 2>&1 | tee "$LOGS/rust-oracle.log" | tail -12
count_script "${PIPESTATUS[0]}"  # no cargo is a skip, and under PB_REQUIRE_FIXTURES=1 (.ci/run) a failure

echo "== house formatting: clang-format 14 and prettier leave every tracked source unchanged (scripts/format.sh --check)"
bash scripts/format.sh --check 2>&1 | tee "$LOGS/format.log" | tail -6
count_script "${PIPESTATUS[0]}"

echo "== TypeScript: the published types compile against an application-style usage file (lib esnext.disposable, and es2022)"
if npx --no-install tsc -p tests/types && npx --no-install tsc -p tests/types/tsconfig.es2022.json; then
  echo "types: ok"; passed=$((passed + 1))
else
  status=1; failed=$((failed + 1))
fi

echo "== JS API and CLI tests (node --test) against the WASM build"
node --test --test-reporter=spec tests/js/ 2>&1 | tee "$LOGS/js.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
js_pass=$(grep -E "^ℹ pass [0-9]+" "$LOGS/js.log" | tail -1 | awk '{print $3}')
js_fail=$(grep -E "^ℹ fail [0-9]+" "$LOGS/js.log" | tail -1 | awk '{print $3}')
js_skip=$(grep -E "^ℹ skipped [0-9]+" "$LOGS/js.log" | tail -1 | awk '{print $3}')
passed=$((passed + ${js_pass:-0})); failed=$((failed + ${js_fail:-1})); skipped=$((skipped + ${js_skip:-0}))
# Under PB_REQUIRE_FIXTURES=1 (.ci/run) a skipped JS test is a failure too, as everywhere else in this script.
if [[ ${PB_REQUIRE_FIXTURES:-0} == 1 && ${js_skip:-0} -gt 0 ]]; then
  echo "FAIL: $js_skip JS tests skipped under PB_REQUIRE_FIXTURES=1"; status=1
  failed=$((failed + js_skip)); skipped=$((skipped - js_skip))
fi

echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
