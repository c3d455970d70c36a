#!/usr/bin/env bash
# Prepares a fresh Debian 12 machine for pens and builds it: installs the Debian packages
# pens needs (only those missing), configures an optimized build in build/ and compiles.
# Called by scripts/test.sh and scripts/demo.sh; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# gnuplot-nox draws pens train's learning-curve.png; without it the run says so and the
# curve stays in curve.tsv.
scripts/ensure-packages.sh g++ meson ninja-build pkg-config libeigen3-dev libboost-graph-dev \
  nlohmann-json3-dev doctest-dev gnuplot-nox

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release >/dev/null
fi
echo "setup: building (meson, build/)"
ninja -C build >/dev/null
