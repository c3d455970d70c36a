#!/usr/bin/env bash
# Fuzzes the model loader with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer for SECONDS (default 60), starting from the models in
# tests/data/models and examples/models. Prints libFuzzer's statistics and one line:
#   fuzz: N executions in S s, no crash   (or the crash and a non-zero exit)
# Crashing inputs are kept in build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

scripts/setup.sh >/dev/null  # the Debian packages pens itself needs
need=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -f build-fuzz/build.ninja ]; then
  CXX=clang++ meson setup build-fuzz -Dfuzz=true -Dtests=disabled -Dbuildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C build-fuzz tests/fuzz/fuzz_model_loader >/dev/null

corpus=build-fuzz/corpus
mkdir -p "$corpus" build-fuzz/crashes
cp tests/data/models/*.json examples/models/*.json "$corpus"/
log=build-fuzz/fuzz.log
set +e
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  build-fuzz/tests/fuzz/fuzz_model_loader -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix=build-fuzz/crashes/ -max_len=65536 -timeout=10 "$corpus" >"$log" 2>&1
status=$?
set -e
grep -E '^stat::' "$log" || true
runs=$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}')
if [ "$status" -ne 0 ]; then
  tail -n 40 "$log"
  echo "fuzz: FAILED after ${runs:-?} executions (exit $status); inputs in build-fuzz/crashes/"
  exit 1
fi
echo "fuzz: ${runs} executions in ${seconds} s, no crash, leak or sanitizer report"
