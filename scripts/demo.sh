#!/usr/bin/env bash
# Sets up (scripts/setup.sh), builds, and runs the main job: a real pseudo-ensemble
# training run with progress on the terminal. Until the MNIST data path exists this is
# a dropout MLP trained on a synthetic teacher task (examples/mlp_synthetic.cpp).
# Extra arguments go to the program (--epochs N, --threads N).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/examples/mlp_synthetic "$@"
