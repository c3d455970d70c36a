#!/usr/bin/env bash
# Regenerates the pictures in docs/img from pens itself (needs Graphviz: apt install graphviz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
command -v dot >/dev/null || { echo "render-docs: Graphviz 'dot' is missing (apt install graphviz)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A 4-3-2 network: mask noise on the input and hidden layer, bias noise, V^c on the
# hidden layer and V^k on the output, the loss on child 1.
build/pens new mlp --layers 4,3,2 --mask-input 0.2 --mask-hidden 0.5 --gaussian-bias 0.1 \
  --penalty h1:direction:1 --penalty logits:kl:1 --loss-on child > "$tmp/tiny.json"
build/pens inspect "$tmp/tiny.json" --format dot --batch 8 | dot -Tpng -Gdpi=80 -o docs/img/pseudo-ensemble.png
echo "wrote docs/img/pseudo-ensemble.png"
