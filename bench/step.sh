#!/usr/bin/env bash
# Builds pens (scripts/setup.sh) and prints the baseline figures of bench/step_mlp.cpp,
# one JSON object per line. Times are medians; the machine is shared, so compare
# figures taken in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
build/bench/step_mlp "$@"
