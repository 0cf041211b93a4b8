#!/usr/bin/env bash
# Creates (once) the pinned Python environment of the golden corpus and prints its python.
# The venv lives under ~/.cache/peft-bridge/venv-<hash of requirements-golden.txt>, so a changed pin
# makes a new one and an unchanged pin reuses the cached one; a half-finished install is never
# reused (the ready marker is written last). Override the cache root with PB_GOLDEN_CACHE.
# `--if-ready` installs nothing: it prints the python of a finished venv, or exits 1 (scripts/test.sh).
# Progress goes to stderr; stdout is only the python path, for "$(bash scripts/golden-venv.sh)".
set -euo pipefail
cd "$(dirname "$0")/.."
req=requirements-golden.txt
hash=$(sha256sum "$req" | cut -c1-16)
root=${PB_GOLDEN_CACHE:-$HOME/.cache/peft-bridge}
venv=$root/venv-$hash
# The old PEFT of --old-peft (requirements-old-peft.txt), beside the venv's own, with its own ready marker.
old_req=requirements-old-peft.txt
old=$venv/old-peft-$(sha256sum "$old_req" | cut -c1-16)
if [[ "${1:-}" == "--if-ready" ]]; then
  [[ -f $venv/.ready && -f $old/.ready ]] || { echo "golden-venv: no finished venv at $venv (run scripts/golden-venv.sh)" >&2; exit 1; }
  echo "$venv/bin/python"
  exit 0
fi
if [[ ! -f $venv/.ready ]]; then
  echo "golden-venv: creating $venv from $req" >&2
  rm -rf "$venv"
  mkdir -p "$root"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet --no-input -r "$req" >&2
  # llama.cpp's converters (convert_lora_to_gguf.py, convert_hf_to_gguf.py and their gguf-py) from the very
  # sdist whose llama.cpp the venv just built, so the reference writer and the loader are one release.
  lcp=$(sed -n 's/^llama-cpp-python==//p' "$req")
  "$venv/bin/python" -m pip download --quiet --no-input --no-deps --no-binary :all: -d "$venv/sdist" \
    "llama-cpp-python==$lcp" >&2
  mkdir -p "$venv/llama.cpp"
  tar -xzf "$venv/sdist/llama_cpp_python-$lcp.tar.gz" -C "$venv/llama.cpp" --strip-components=3 \
    "llama_cpp_python-$lcp/vendor/llama.cpp"
  "$venv/bin/python" -m pip freeze > "$venv/freeze.txt"
  touch "$venv/.ready"
fi
if [[ ! -f $old/.ready ]]; then
  echo "golden-venv: installing $old from $old_req" >&2
  rm -rf "$old"
  "$venv/bin/python" -m pip install --quiet --no-input --no-deps --target "$old" -r "$old_req" >&2
  touch "$old/.ready"
fi
echo "$venv/bin/python"
