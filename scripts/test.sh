#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds, runs the whole test suite and ends with one line:
#   tests: N passed, M failed
# Exits non-zero when anything failed.
#
#   scripts/test.sh              the optimized build in build/
#   scripts/test.sh --sanitize   a clang build with AddressSanitizer and
#                                UndefinedBehaviorSanitizer in build-sanitize/ (shared with
#                                scripts/fuzz.sh)
# Further arguments go to the doctest runner (e.g. -tc="*tape*" to run some tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

dir=build
if [ "${1:-}" = "--sanitize" ]; then
  shift
  dir=build-sanitize
  echo "test: building with AddressSanitizer and UndefinedBehaviorSanitizer ($dir/)"
  # Only what the suites run: the tests, the tool and the extending example they start as
  # programs, and the Python package.
  ext=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  scripts/sanitize-build.sh tests/pens_tests pens examples/extending "python/pens/_pens$ext" \
    python/pens/__init__.py python/pens/optim.py
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  # Open MPI keeps what MPI_Init allocated past MPI_Finalize (the mpirun tests): suppressed
  # by library, which needs whole stacks (the slow unwinder) in the processes mpirun starts.
  export LSAN_OPTIONS="suppressions=$PWD/tests/support/lsan-mpi.supp:print_suppressions=0"
  export PENS_TEST_MPIRUN_ARGS="-x ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0"
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fi

log=$(mktemp)
install_log=$(mktemp)
install_pid=""
trap '[ -n "$install_pid" ] && kill "$install_pid" 2>/dev/null; rm -f "$log" "$install_log"' EXIT
# The installed library (a temporary prefix, examples/consumer built against it), in the
# plain build: started first, beside the suites, which leave a core mostly idle while
# they wait on the programs they start.
if [ "$dir" = build ]; then
  scripts/check-install.sh build >"$install_log" 2>&1 &
  install_pid=$!
fi
status=0
# The thread pool under ThreadSanitizer (tests/ops/stress_parallel.cpp), in the plain
# build only; a race or a wrong result fails the run.
stress_failed=0
if [ "$dir" = build ] && [ -x build/tests/stress_parallel ]; then
  build/tests/stress_parallel || stress_failed=1
fi
"$dir/tests/pens_tests" "$@" 2>&1 | tee "$log" || status=$?

summary=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1 || true)
if [ -z "$summary" ]; then
  echo "tests: 0 passed, 1 failed (the test runner did not finish; exit status $status)"
  exit 1
fi
passed=$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$summary")
failed=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$summary")
failed=$((failed + stress_failed))

# The Python package (pytest, tests/python). The sanitized extension module needs the
# sanitizer runtime loaded before Python starts; Python's own allocations that live to
# its exit are not leaks of pens', so leak detection is off there.
python_env=(PENS="$dir/pens" PYTHONPATH="$dir/python")
if [ "$dir" = build-sanitize ]; then
  python_env+=(LD_PRELOAD="$(clang++ -print-file-name=libclang_rt.asan-x86_64.so)"
               ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 PENS_SANITIZED=1)
fi
pytest_log=$(mktemp)
env "${python_env[@]}" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python 2>&1 | tee "$pytest_log" || true
py_passed=$(grep -oE '[0-9]+ passed' "$pytest_log" | tail -n 1 | cut -d' ' -f1 || true)
py_failed=$( (grep -oE '[0-9]+ (failed|error)' "$pytest_log" || true) | awk '{n += $1} END {print n + 0}')
if [ -z "$py_passed" ] && [ "$py_failed" -eq 0 ]; then py_failed=1; fi  # pytest did not run
passed=$((passed + ${py_passed:-0}))
failed=$((failed + py_failed))
rm -f "$pytest_log"

if [ "$dir" = build ]; then
  install_status=0
  wait "$install_pid" || install_status=$?
  install_pid=""
  cat "$install_log"
  if [ "$install_status" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
fi
echo "tests: $passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
