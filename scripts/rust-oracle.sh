#!/usr/bin/env bash
# The Rust safetensors crate as the judge of our reader (tests/rust_oracle/README.md).
#   scripts/rust-oracle.sh                 builds the oracle, regenerates the vectors and checks that the
#                                          committed tests/native/data/rust_oracle_vectors.txt is exactly
#                                          what the crate says today (exit 1 and a diff if not)
#   scripts/rust-oracle.sh --regenerate    the same, then writes the file instead of comparing
#   scripts/rust-oracle.sh --bench FILE [N]  the crate's parse of FILE, N times (time and peak RSS)
# Needs cargo >= 1.80 (rustup; Debian 12's 1.63 is too old for the crate): scripts/setup-debian.sh --test.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
manifest=tests/rust_oracle/Cargo.toml
target=build/rust-oracle
oracle=$target/release/pb-rust-oracle
vectors=tests/native/data/rust_oracle_vectors.txt

command -v cargo >/dev/null || { echo "rust-oracle: no cargo (run scripts/setup-debian.sh --test)" >&2; exit 77; }
start=$(date +%s)
cargo build --quiet --release --locked -j "${JOBS:-2}" --manifest-path "$manifest" --target-dir "$target"
echo "rust-oracle: oracle built in $(( $(date +%s) - start )) s ($(cargo --version))" >&2

if [[ "${1:-}" == "--bench" ]]; then
  shift
  exec "$oracle" bench "$@"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 tests/rust_oracle/generate_vectors.py emit > "$tmp/raw.txt"
"$oracle" fill "$tmp/raw.txt" > "$tmp/filled.txt"
/usr/bin/python3 tests/rust_oracle/generate_vectors.py finish "$tmp/filled.txt" > "$tmp/vectors.txt"
count=$(grep -vc '^#' "$tmp/vectors.txt")

if [[ "${1:-}" == "--regenerate" ]]; then
  cp "$tmp/vectors.txt" "$vectors"
  echo "rust-oracle: wrote $count vectors to $vectors"
  exit 0
fi
if cmp -s "$tmp/vectors.txt" "$vectors"; then
  echo "rust-oracle: ok: the $count committed vectors are the crate's verdicts"
else
  echo "rust-oracle: FAILED: $vectors differs from what the generator and the crate give now" \
       "(scripts/rust-oracle.sh --regenerate, then review the diff):"
  diff <(cut -f1-6 "$vectors") <(cut -f1-6 "$tmp/vectors.txt") | head -40
  exit 1
fi
