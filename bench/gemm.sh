#!/usr/bin/env bash
# Matrix-product rates: pens' (Eigen's GEMM, bench/gemm.cpp) against the peer's BLAS
# (torch.mm on the OpenMP OpenBLAS) at the shapes of a training step and at 1024³, on 1
# and 2 threads. One JSON line per shape and thread count:
#   {"case", "m", "k", "n", "threads", "pens_gflops", "torch_gflops", "ratio" (pens / torch)}
#
#   bench/gemm.sh [--batch B] [--reps N]
set -euo pipefail
cd "$(dirname "$0")/.."
batch=100 reps=30
while [[ $# -gt 0 ]]; do
  case "$1" in
    --batch) batch="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gemm: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
scripts/setup.sh >&2
scripts/ensure-packages.sh python3-torch python3-numpy libopenblas0-openmp >&2
source bench/torch-env.sh
for threads in 1 2; do
  pens=$(build/bench/gemm --threads "$threads" --batch "$batch" --reps "$reps")
  torch=$(env "${torch_env[@]}" OMP_NUM_THREADS="$threads" \
    /usr/bin/python3 bench/torch_peer.py gemm --threads "$threads" --batch "$batch" --reps "$reps")
  /usr/bin/python3 - "$pens" "$torch" <<'PY'
import json, sys
pens = [json.loads(l) for l in sys.argv[1].splitlines()]
torch = [json.loads(l) for l in sys.argv[2].splitlines()]
for p, t in zip(pens, torch):
    print(json.dumps({"case": p["case"], "m": p["m"], "k": p["k"], "n": p["n"], "threads": p["threads"],
                      "pens_gflops": p["gflops"], "torch_gflops": t["gflops"],
                      "ratio": round(p["gflops"] / t["gflops"], 2)}, ensure_ascii=False))
PY
done
