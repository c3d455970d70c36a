#!/usr/bin/env bash
# pens against the two PyTorch peers of bench/torch_trees.py (recursive per node, and
# batched by level across the step's trees) on the compact tensor network over SST
# training trees: nodes per second for training (a step of 27 trees: forward, backward,
# AdaGrad with l2) and for evaluation (forward only). First checks that both peers compute
# pens' objective on pens' parameters and trees (within 1e-4), then runs each side in its
# own processes, alternating, --reps times, and prints one JSON line per side with the
# median figures and, for pens, the ratios against the faster peer.
#
#   bench/compare-trees.sh [--reps N] [--steps S] [--threads T] [--data DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

reps=3 steps=20 threads=1 data=../shared/data/sst
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-trees: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

scripts/setup.sh >&2
scripts/ensure-packages.sh python3-torch python3-numpy libopenblas0-openmp >&2
scripts/check-sst.sh "$data" >&2
source bench/torch-env.sh
peer=(env "${torch_env[@]}" OMP_NUM_THREADS="$threads" /usr/bin/python3 bench/torch_trees.py)

dump=$(mktemp -d)
out=$(mktemp)
trap 'rm -rf "$dump" "$out"' EXIT
build/bench/trees --data "$data" --steps 1 --dump "$dump" > /dev/null
"${peer[@]}" check "$dump" --data "$data"

for ((r = 0; r < reps; ++r)); do
  OMP_NUM_THREADS="$threads" build/bench/trees --data "$data" --steps "$steps" --threads "$threads" >> "$out"
  "${peer[@]}" time --peer recursive --steps "$steps" --threads "$threads" --data "$data" >> "$out"
  "${peer[@]}" time --peer level --steps "$steps" --threads "$threads" --data "$data" >> "$out"
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def median(side, key):
    return statistics.median(r[key] for r in rows if r.get("peer", "pens") == side)
sides = {s: {k: median(s, k) for k in ("train_nodes_per_s", "eval_nodes_per_s")} for s in ("pens", "recursive", "level")}
for s, v in sides.items():
    print(json.dumps({"side": s, **v, "runs": sum(1 for r in rows if r.get("peer", "pens") == s)}))
for key in ("train_nodes_per_s", "eval_nodes_per_s"):
    best = max(sides["recursive"][key], sides["level"][key])
    print(json.dumps({"ratio": key, "pens_over_faster_peer": round(sides["pens"][key] / best, 2)}))
PY
