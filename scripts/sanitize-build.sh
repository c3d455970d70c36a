#!/usr/bin/env bash
# Builds the given targets in build-sanitize/: clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and libFuzzer's coverage instrumentation. One build serves
# both the sanitized test suite (scripts/test.sh --sanitize) and the fuzzers
# (scripts/fuzz.sh), so that CI compiles the library with sanitizers once.
#
#   scripts/sanitize-build.sh TARGET...      (ninja targets, e.g. tests/pens_tests)
#
# Installs clang and its sanitizer runtimes when missing; expects scripts/setup.sh to
# have run (the other packages). -O1, the sanitizers' usual level; line tables for the
# reports' stack traces instead of full debug information, which compiles faster
# (docs/development.md); assertions on.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-packages.sh clang libclang-rt-14-dev
source scripts/ccache-env.sh
if [ ! -f build-sanitize/build.ninja ]; then
  CXX=clang++ meson setup build-sanitize -Doptimization=1 -Ddebug=false -Dcpp_args=-gline-tables-only \
    -Db_ndebug=false -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true \
    -Dpython_bindings=enabled >/dev/null
fi
# The Python package's tests run on this build too (scripts/test.sh --sanitize); a folder
# configured before they did builds the bindings from now on.
if ! meson introspect build-sanitize --buildoptions | grep -q '"name": "python_bindings", "value": "enabled"'; then
  meson configure build-sanitize -Dpython_bindings=enabled >/dev/null
fi
scripts/ninja-quiet.sh build-sanitize "$@"
