#!/usr/bin/env bash
# The house formatters: clang-format (.clang-format) for the C++ of src/ wasm/ tests/ fuzz/ bench/, prettier
# (.prettierrc.json) for the JavaScript and TypeScript of web/ tests/js tests/hub tests/types bench/ scripts/.
#   scripts/format.sh            format those files in place
#   scripts/format.sh --check    change nothing; list the files that are not formatted and exit 1 if there are any
#   scripts/format.sh [--check] FILE...   only these files (those outside the sets above are skipped)
# The files are the repository's tracked and new (not ignored) ones, so build/, web/dist/ and node_modules/ never
# count. clang-format must be version 14 (Debian 12's, scripts/setup-debian.sh; another major version formats
# differently): CLANG_FORMAT=path picks the binary. prettier is the exact version package.json pins (`npm ci`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

check=0
if [[ ${1:-} == --check ]]; then check=1; shift; fi
if [[ ${1:-} == -* ]]; then
  echo "usage: scripts/format.sh [--check] [FILE...]" >&2
  exit 2
fi

clang_format=${CLANG_FORMAT:-clang-format}
prettier=$root/node_modules/.bin/prettier
fail() { echo "format.sh: $*" >&2; exit 2; }
command -v "$clang_format" >/dev/null || fail "$clang_format not found (scripts/setup-debian.sh installs it)"
version=$("$clang_format" --version 2>/dev/null | sed -n 's/.*version \([0-9]*\)\..*/\1/p' || true)
[[ $version == 14 ]] || fail "clang-format 14 required, $clang_format is version ${version:-unknown}"
[[ -x $prettier ]] || fail "$prettier not found (run npm ci)"

# The file sets, as paths relative to the root: tracked and untracked-but-not-ignored files.
listed() { git ls-files --cached --others --exclude-standard -- "$@" | sort -u; }
cxx_files=$(listed 'src/*.cc' 'src/*.h' 'wasm/*.cc' 'wasm/*.h' 'tests/*.cc' 'tests/*.h' 'fuzz/*.cc' 'fuzz/*.h' \
  'bench/*.cc' 'bench/*.h')
js_files=$(listed 'web/*.js' 'web/*.mjs' 'web/*.ts' 'tests/js/*.js' 'tests/js/*.mjs' 'tests/hub/*.js' \
  'tests/hub/*.mjs' 'tests/types/*.ts' 'bench/*.js' 'bench/*.mjs' 'scripts/*.js' 'scripts/*.mjs')
if (($#)); then
  # Only the files named, and only those in a set.
  wanted=$(for f in "$@"; do realpath --relative-to="$root" "$f"; done | sort -u)
  cxx_files=$(comm -12 <(echo "$cxx_files") <(echo "$wanted"))
  js_files=$(comm -12 <(echo "$js_files") <(echo "$wanted"))
fi
# Files listed by git but deleted in the work tree are not formatted.
existing() { while IFS= read -r f; do if [[ -n $f && -f $f ]]; then printf '%s\0' "$f"; fi; done; }

jobs=${JOBS:-$(nproc)}
if ((check)); then
  # clang-format prints the formatted text; a file is unformatted when that differs from it.
  export clang_format
  unformatted=$(echo "$cxx_files" | existing | xargs -0 -r -n 16 -P "$jobs" sh -c '
    for f; do "$clang_format" --style=file "$f" | cmp -s - "$f" || echo "$f"; done' sh)
  # prettier --list-different prints the files it would change; its exit status is 1 when there are any, 2 when
  # it could not parse one (the error is on stderr).
  mapfile -d '' js < <(echo "$js_files" | existing)
  status=0
  ((${#js[@]} == 0)) || unformatted+=$'\n'$("$prettier" --list-different "${js[@]}") || status=$?
  ((status <= 1)) || exit 2
  unformatted=$(echo "$unformatted" | sed '/^$/d' | sort)
  if [[ -n $unformatted ]]; then
    echo "$unformatted"
    echo "format.sh: $(echo "$unformatted" | wc -l) file(s) not formatted; run scripts/format.sh" >&2
    exit 1
  fi
  exit 0
fi
echo "$cxx_files" | existing | xargs -0 -r -n 16 -P "$jobs" "$clang_format" --style=file -i
mapfile -d '' js < <(echo "$js_files" | existing)
((${#js[@]} == 0)) || "$prettier" --log-level warn --write "${js[@]}"
