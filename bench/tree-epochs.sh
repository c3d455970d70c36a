#!/usr/bin/env bash
# The cost of a Table 2 run: `pens train` for a few epochs of each model (CTN, CTN+F,
# CTN+S, CTN+F+S; the fine task, the authors' cell, the paper's ℓ2, AdaGrad) and one line
# per model with each epoch's seconds, training nodes per second and evaluation nodes per
# second, from the run's metrics.jsonl, the time 400 such epochs would take, and the run's
# peak resident memory.
#
#   bench/tree-epochs.sh [--epochs 3] [--threads 2] [--eval-samples 5] [--models "ctn ..."]
#                        [--data DIR] [--pens BINARY]
#
# --eval-samples: subspace draws averaged at each epoch's evaluation (table2.sh's option;
# the paper tests with 50, which a run may leave to its best epoch's model at the end).
# --pens: the binary that trains (default build/pens), e.g. an earlier commit's, to compare.
set -euo pipefail
cd "$(dirname "$0")/.."

epochs=3 threads=2 samples=5 models="ctn ctn+f ctn+s ctn+f+s" data=../shared/data/sst pens=build/pens
while [[ $# -gt 0 ]]; do
  case "$1" in
    --epochs) epochs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --eval-samples) samples="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --pens) pens="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tree-epochs: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

scripts/setup.sh >&2
scripts/check-sst.sh "$data" >&2
data=$(cd "$data" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for m in $models; do
  options=(--leaf-tanh --init authors)
  [[ $m == *+f* ]] && options+=(--fuzz 0.02)
  [[ $m == *+s* ]] && options+=(--subspace 35 --activation-noise 0.05)
  build/pens new ctn --sst "$data" --classes 5 "${options[@]}" --output "$work/$m.model.json" > /dev/null 2>&1
  cat > "$work/$m.json" <<JSON
{"description": "tree-epochs: $m", "model": "$m.model.json", "task": "fine",
 "data": {"dir": "$data", "min_count": 1},
 "batch": {"trees": 27},
 "optimizer": {"kind": "adagrad", "learning_rate": 0.01},
 "l2": {"T": 4e-3, "Ml": 4e-3, "Mr": 4e-3, "m": 4e-3, "C": 2e-4, "c": 2e-4, "E": 2e-4},
 "run": {"epochs": $epochs, "threads": $threads},
 "eval": {"samples": $samples, "final_samples": $samples, "train_trees": 500}}
JSON
  # The run's peak resident memory (kB), as the kernel counts it for a waited-for child.
  python3 -c 'import resource, subprocess, sys
status = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1] + ".log", "w"), stderr=subprocess.STDOUT).returncode
open(sys.argv[1] + ".rss", "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(status)' "$work/$m" "$pens" train "$work/$m.json" --out "$work/run-$m" || { cat "$work/$m.log" >&2; exit 1; }
  python3 - "$work/run-$m/metrics.jsonl" "$m" "$threads" "$samples" "$(cat "$work/$m.rss")" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
ends = [r["elapsed_seconds"] for r in rows]
epochs = [round(b - a, 1) for a, b in zip([0.0] + ends, ends)]
print(json.dumps({"model": sys.argv[2], "threads": int(sys.argv[3]), "eval_samples": int(sys.argv[4]),
                  "epoch_seconds": epochs,
                  "train_nodes_per_s": [round(r["train_nodes_per_second"]) for r in rows],
                  "eval_nodes_per_s": [round(r["eval_nodes_per_second"]) for r in rows],
                  "minutes_for_400_epochs": round(400 * statistics.median(epochs) / 60),
                  "peak_rss_mb": round(int(sys.argv[5]) / 1024, 1)}))
PY
done
