#!/usr/bin/env bash
# Fuzzes pens' parsers with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer:
#   model_loader  model files (JSON, then the whole pseudo-ensemble build)
#   config        training configs (pens train's MNIST and tree configs, pens pretrain's)
#   idx           IDX files (MNIST images and labels)
#   npy           .npy files (the npy data source's NumPy arrays)
#   trees         sentiment trees (PTB format)
#
#   scripts/fuzz.sh [--seconds S | --runs N] [TARGET ...]     (default: --seconds 60, all)
#
# The fuzzers are built in build-sanitize/ (scripts/sanitize-build.sh). Each target starts
# from a seed corpus of the repository's own files (examples/, tests/) plus small
# hand-made ones, and keeps what it finds in build-sanitize/fuzz/corpus/TARGET, so a
# second run goes on from there. Prints one line per target:
#   fuzz TARGET: N executions in S s, no crash, leak or sanitizer report
# or the report and a non-zero exit; crashing inputs are kept in build-sanitize/fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=(-max_total_time=60)
targets=()
while (($#)); do
  case "$1" in
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    model_loader|config|idx|npy|trees) targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (--seconds S, --runs N, model_loader, config, idx, npy, trees)" >&2; exit 2 ;;
  esac
done
((${#targets[@]})) || targets=(model_loader config idx npy trees)

scripts/setup.sh >/dev/null  # the Debian packages pens itself needs
# The sanitized build the test suite's --sanitize run uses: after it, only the fuzzers'
# own files compile.
# shellcheck disable=SC2046
scripts/sanitize-build.sh $(printf 'tests/fuzz/fuzz_%s ' "${targets[@]}")

# Seeds: the repository's files of each kind, and for IDX (whose real files are too large
# to be useful seeds) a few small valid and broken ones. The first byte of an IDX input
# picks the rank the reader expects: even = labels (1), odd = images (3).
seed() {
  local target=$1 dir=build-sanitize/fuzz/corpus/$1
  mkdir -p "$dir"
  case "$target" in
    model_loader) cp tests/data/models/*.json examples/models/*.json examples/mnist/*.model.json \
                    examples/sst/*.model.json tests/data/checkpoints/*.json "$dir"/ ;;
    config) for f in examples/mnist/*.json examples/sst/*.json; do
              case "$f" in *.model.json) ;; *) cp "$f" "$dir"/ ;; esac
            done ;;
    idx) printf '\x00\x00\x00\x08\x01\x00\x00\x00\x03\x07\x02\x09' >"$dir/labels-3"
         printf '\x01\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02\x00\xff\x10\x20\x30\x40\x50\x60' \
           >"$dir/images-2x2x2"
         printf '\x01\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c' >"$dir/images-truncated"
         printf '\x1f\x8b\x08\x00' >"$dir/gzip" ;;
    npy) # numpy.save's layout: magic, version 1.0, a header padded to 64 bytes, the data.
         npy() {  # DESCR SHAPE DATA-BYTES
           local header="{'descr': '$1', 'fortran_order': False, 'shape': $2, }"
           while (( (10 + ${#header} + 1) % 64 )); do header+=" "; done
           printf '\x93NUMPY\x01\x00'
           printf "\\x$(printf %02x $(( (${#header} + 1) % 256 )))\\x$(printf %02x $(( (${#header} + 1) / 256 )))"
           printf '%s\n' "$header"
           printf "$3"
         }
         npy '<f4' '(2, 2)' '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40' >"$dir/f4-2x2"
         npy '<i8' '(3,)' '\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x02\x00\x00\x00\x00\x00\x00\x00' >"$dir/i8-3"
         npy '|u1' '(2, 1, 2)' '\x00\x01\x02\xff' >"$dir/u1-2x1x2"
         npy '<f8' '(1,)' '\x00\x00' >"$dir/f8-truncated" ;;
    trees) printf '(3 (2 It) (4 (4 (2 works) (3 well)) (2 .)))\n(1 (1 Dull) (2 -RRB-))\n' >"$dir/two-trees"
           printf '(2 (2 (2 a) (2 b)) (2 (2 c) (2 d)))' >"$dir/no-newline"
           printf '(5 (2 a) (2 b))\n(2 (2 a) (2 b) (2 c))\n' >"$dir/bad-label-arity" ;;
  esac
}

mkdir -p build-sanitize/fuzz/crashes
# fuzz_one TARGET: runs one target and prints its line (with the log's tail on a finding).
fuzz_one() {
  local target=$1 log=build-sanitize/fuzz/fuzz-$1.log start status seconds runs
  start=$(date +%s)
  set +e
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    "build-sanitize/tests/fuzz/fuzz_$target" "${limit[@]}" -print_final_stats=1 \
    -artifact_prefix="build-sanitize/fuzz/crashes/$target-" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    "build-sanitize/fuzz/corpus/$target" >"$log" 2>&1
  status=$?
  set -e
  seconds=$(($(date +%s) - start))
  # A crash can end the log before libFuzzer's statistics: no count then, not an abort.
  runs=$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}' || true)
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log"
    echo "fuzz $target: FAILED after ${runs:-?} executions (exit $status); inputs in build-sanitize/fuzz/crashes/"
    return
  fi
  echo "fuzz $target: ${runs} executions in ${seconds} s, no crash, leak or sanitizer report"
}

# A fuzzer is one process on one core: the targets run as many at a time as there are
# cores, so each still has its whole time limit on a core of its own. Their lines are
# printed in the targets' order once all have ended; a target passes only on its clean
# line, so one that ended without a line fails too.
for target in "${targets[@]}"; do
  seed "$target"
  while (( $(jobs -rp | wc -l) >= $(nproc) )); do wait -n || true; done
  fuzz_one "$target" >"build-sanitize/fuzz/result-$target" 2>&1 &
done
wait
failed=0
for target in "${targets[@]}"; do
  result=build-sanitize/fuzz/result-$target
  cat "$result"
  grep -q "^fuzz $target: .* no crash, leak or sanitizer report$" "$result" || failed=1
done
exit "$failed"
