#!/usr/bin/env bash
# Runs pens on a corpus of bad inputs and checks that each one is refused well:
#
#   scripts/bad-inputs.sh [-v] [CORPUS]   (default tests/data/bad-inputs; -v prints
#                                         every case's message, not only failures)
#
# CORPUS/cases.tsv has one case per line: a name, a text the message must contain ("-" for
# none) and the pens arguments, tab-separated; lines starting with # are comments. Paths
# in the arguments are relative to CORPUS; {out} is replaced by a fresh output folder.
# Each case runs with a 60 s timeout and 16 GiB of address space, and must end with exit
# status 1 and exactly one line of output naming the problem (pens' "error:" line). A case
# is reported as one of
#   accepted   exit status 0: the bad input was taken
#   hang       still running after 60 s
#   crash      a signal, an internal error, or another exit status
#   oom        out of memory (bad_alloc, or killed)
#   library    text of a library in the message (JSON exception, std::, what())
#   lines      more than one line of output
#   unclear    the message lacks the expected text
# and the script prints a line per failure, the counts, and exits 1 if any case failed.
set -uo pipefail
cd "$(dirname "$0")/.."
verbose=0
if [ "${1:-}" = -v ]; then verbose=1; shift; fi
corpus=$(cd "${1:-tests/data/bad-inputs}" && pwd)
pens=${PENS:-$(pwd)/build/pens}  # PENS: another build of the tool (the test suite's)
[ -x "$pens" ] || { echo "bad-inputs.sh: build pens first (scripts/test.sh or ninja -C build)" >&2; exit 2; }
# 16 GiB of address space turns a runaway allocation into a quick failure; not under
# AddressSanitizer, which reserves terabytes of address space for its shadow memory.
memory=$((16 * 1024 * 1024))
# A sanitized tool has __asan_init among its dynamic symbols, whether the runtime is a
# shared library (GCC) or linked in (clang). (Read whole: `nm | grep -q` under pipefail
# fails when grep exits before nm has written.)
[[ $(nm -D "$pens" 2>/dev/null) == *__asan_init* ]] && memory=unlimited

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
declare -A count=()
total=0
failed=0
while IFS=$'\t' read -r name expect args; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  [ "$expect" = - ] && expect=""
  total=$((total + 1))
  out="$scratch/out-$total"
  args=${args//\{out\}/$out}
  # shellcheck disable=SC2086  # the arguments are split as a shell would
  text=$(cd "$corpus" && ulimit -v "$memory" && timeout 60 "$pens" $args 2>&1)
  status=$?
  lines=$(printf '%s' "$text" | grep -c '')
  if [ "$status" -eq 0 ]; then verdict=accepted
  elif [ "$status" -eq 124 ]; then verdict=hang
  elif grep -qiE 'bad_alloc|out of memory' <<<"$text" || [ "$status" -eq 137 ]; then verdict=oom
  elif [ "$status" -ne 1 ] || grep -q 'internal error' <<<"$text"; then verdict=crash
  elif grep -qE 'json\.exception|std::|what\(\)|terminate called|basic_string|stoll|stod' <<<"$text"; then verdict=library
  elif [ "$lines" -ne 1 ]; then verdict=lines
  elif [ -n "$expect" ] && ! grep -qF -- "$expect" <<<"$text"; then verdict=unclear
  else verdict=ok
  fi
  count[$verdict]=$((${count[$verdict]:-0} + 1))
  [ "$verdict" != ok ] && failed=$((failed + 1))
  if [ "$verdict" != ok ] || [ "$verbose" -eq 1 ]; then
    printf '%-9s %s (exit %s): %s\n' "$verdict" "$name" "$status" "$(printf '%s' "$text" | head -c 400 | tr '\n' '|')"
  fi
done <"$corpus/cases.tsv"

summary="bad inputs: $total cases, ${count[ok]:-0} refused well"
for v in accepted hang crash oom library lines unclear; do summary+=", ${count[$v]:-0} $v"; done
echo "$summary"
[ "$failed" -eq 0 ]
