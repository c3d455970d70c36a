#!/usr/bin/env bash
# The main job: sets up (scripts/setup.sh), fetches MNIST (scripts/fetch-mnist.sh), and
# trains a semi-supervised pseudo-ensemble (virtual adversarial training) on MNIST with
# 600 labels for about 10 minutes (examples/mnist/demo.json), with progress on the
# terminal; ends with the test error and where the plots are. Extra arguments go to
# `pens train` (--budget-minutes M, --split-seed S, --threads T, --out DIR, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch-mnist.sh
exec build/pens train examples/mnist/demo.json --out runs/demo "$@"
