#!/usr/bin/env bash
# Runs ninja in build folder DIR on the given targets, one job per core, quietly when it
# works; when it fails, the end of its output (the compiler's messages, which ninja
# prints on stdout) on stderr. Used by setup.sh and sanitize-build.sh.
#
#   scripts/ninja-quiet.sh DIR [TARGET...]
set -euo pipefail
dir=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! ninja -C "$dir" -j "$(nproc)" "$@" > "$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "ninja-quiet: the build in $dir failed (the end of its output is above)" >&2
  exit 1
fi
