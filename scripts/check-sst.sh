#!/usr/bin/env bash
# Checks the Stanford Sentiment Treebank files (PTB tree format) against their MD5s.
#   scripts/check-sst.sh [DIR]   (default ../shared/data/sst)
# The trees are never committed: pens reads them from this folder or one a user names.
set -euo pipefail
dir="${1:-$(dirname "$0")/../../shared/data/sst}"
for f in train.txt dev.txt test.txt; do
  [[ -f $dir/$f ]] || { echo "check-sst: $dir/$f is missing (the treebank: train.txt, dev.txt, test.txt)" >&2; exit 1; }
done
(cd "$dir" && md5sum -c --quiet - <<'SUMS'
b12d531b1b913a3bb49719ba5cc1f67a  train.txt
c405f1d724964e6f72314b5a51fea691  dev.txt
97b75f6ca1ae58b4d52fbf9381dc6f8c  test.txt
SUMS
) || { echo "check-sst: $dir does not hold the expected treebank files (MD5 mismatch above)" >&2; exit 1; }
echo "check-sst: $dir: train.txt, dev.txt, test.txt verified"
