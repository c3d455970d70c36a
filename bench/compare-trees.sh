#!/usr/bin/env bash
# pens against the PyTorch peers of bench/torch_trees.py on the compact tensor network over
# SST training trees, for the four models of Table 2 (ctn, ctn+f, ctn+s, ctn+f+s) on 1 and
# 2 threads: nodes per second for training (a step of 27 trees: forward, backward, AdaGrad
# with l2) and for evaluation (the clean network, forward only).
#
#   level      the step's trees batched by height, one product per height; noise drawn once
#              per step (the easier protocol: one set of fuzzed or sliced weights per step)
#   recursive  one node at a time; noise drawn per tree, as pens and the paper draw it
#
# First checks the peers: their objective is pens' on pens' parameters and trees (1e-4),
# and in float64 the level and recursive forms agree on objective and gradients under the
# same draws, for every model. Then, per model and thread count, runs pens and the peers in
# their own processes, alternating, --reps times, and prints one JSON line per side with
# the median figures, and one per model and thread count with pens' ratios: against the
# level peer (its noise per step; pens' per tree) and against the recursive peer (the same
# protocol), and the ceilings over the level peer: the ratios pens would reach if all its
# useful work (build/bench/trees' flop counts) ran at its bilinear kernel's best
# one-thread rate on every thread. pens' evaluation figure is its second pass over the
# trees, which finds the TreeTapes of their level widths compiled (as a run's evaluations
# after its first); the first pass's is in its line as eval_first_nodes_per_s. Its training
# figure is its first pass over the steps' trees, compiling the TreeTapes of level widths as
# it meets them; its line's train_again_nodes_per_s runs the same steps again, compiled.
#
# --precision float32-onednn runs pens' tree products on oneDNN's float kernel (ops/precision.h).
#
#   bench/compare-trees.sh [--reps N] [--steps S] [--threads "1 2"] [--models "ctn ..."]
#                          [--precision float32|float32-onednn] [--data DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

reps=3 steps=20 threads="1 2" models="ctn ctn+f ctn+s ctn+f+s" precision=float32 data=../shared/data/sst
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --precision) precision="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-trees: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

scripts/setup.sh >&2
scripts/ensure-packages.sh python3-torch python3-numpy libopenblas0-openmp >&2
scripts/check-sst.sh "$data" >&2
source bench/torch-env.sh

dump=$(mktemp -d)
out=$(mktemp)
trap 'rm -rf "$dump" "$out"' EXIT
build/bench/trees --data "$data" --steps 1 --dump "$dump" > /dev/null
env "${torch_env[@]}" OMP_NUM_THREADS=1 /usr/bin/python3 bench/torch_trees.py check "$dump" --data "$data"

for t in $threads; do
  peer=(env "${torch_env[@]}" OMP_NUM_THREADS="$t" /usr/bin/python3 bench/torch_trees.py time --steps "$steps"
        --threads "$t" --data "$data")
  for m in $models; do
    for ((r = 0; r < reps; ++r)); do
      OMP_NUM_THREADS="$t" build/bench/trees --data "$data" --model "$m" --steps "$steps" --threads "$t" \
        --precision "$precision" >> "$out"
      "${peer[@]}" --peer level --model "$m" >> "$out"
      "${peer[@]}" --peer recursive --model "$m" >> "$out"
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    r.setdefault("peer", "pens")
keys = ("train_nodes_per_s", "eval_nodes_per_s")
cells = sorted({(r["model"], r["threads"]) for r in rows}, key=lambda c: (c[1], ["ctn", "ctn+f", "ctn+s", "ctn+f+s"].index(c[0])))
for model, threads in cells:
    median = {}
    for side in ("pens", "level", "recursive"):
        runs = [r for r in rows if r["model"] == model and r["threads"] == threads and r["peer"] == side]
        median[side] = {k: statistics.median(r[k] for r in runs) for k in keys}
        # pens' steps run again over the same trees, their TreeTapes compiled (bench/trees.cpp).
        again = {"train_again_nodes_per_s": statistics.median(r["train_again_nodes_per_s"] for r in runs)} \
            if side == "pens" else {}
        print(json.dumps({"model": model, "threads": threads, "side": side, **median[side], **again,
                          "runs": len(runs)}))
    ratios = {f"{k}_over_{side}": round(median["pens"][k] / median[side][k], 2)
              for k in keys for side in ("level", "recursive")}
    # The ratio over the level peer that pens would reach if all its useful work ran at
    # its bilinear kernel's best one-thread rate on every thread: what no schedule of
    # pens' products can pass (training: the full-width models alone, whose products
    # are all at n).
    pens = [r for r in rows if r["model"] == model and r["threads"] == threads and r["peer"] == "pens"]
    rate = statistics.median(r["bilinear_gflops"] for r in pens) * 1e9 * threads
    ceilings = {"eval_ceiling_over_level": round(
        rate / statistics.median(r["eval_flop_per_node"] for r in pens) / median["level"]["eval_nodes_per_s"], 2)}
    if "+s" not in model:
        ceilings["train_ceiling_over_level"] = round(
            rate / statistics.median(r["train_flop_per_node"] for r in pens) / median["level"]["train_nodes_per_s"], 2)
    print(json.dumps({"model": model, "threads": threads, "ratios": ratios,
                      "bilinear_gflops": round(rate / 1e9 / threads, 1), **ceilings}))
PY
