#!/usr/bin/env bash
# pens against PyTorch (Debian's python3-torch on the OpenMP build of OpenBLAS) on the
# same training steps: the three modes of bench/modes.cpp and bench/torch_peer.py (sde,
# pea, pea-ss) at batch 100 and 256, on 1 and 2 threads. First checks that both compute
# the same objective on the same parameters, inputs and noise (within 1e-4; the peer in
# each of its variants), then times each case in its own processes (5 warm-up steps,
# median of --reps): pens in each --precision, then the peer in each variant (stacked and
# unstacked passes, each in float32 and under bfloat16 autocast: bench/torch_peer.py), and
# prints one JSON line per case and pens precision:
#   {"mode", "batch", "threads", "precision" (pens'), "pens_ms", "torch_ms" (the fastest
#    variant's, either precision), "torch_variant", "torch_precision",
#    "torch_ms_by_variant" ("stacked/float32": ms, ...), "ratio" (torch_ms / pens_ms),
#    "pens_peak_rss_mb", "torch_peak_rss_mb" (of the faster variant),
#    "useful_gflop" (the step's matrix products over the rows its objective needs: sde B,
#    pea 2B, pea-ss 3B; forward, weight gradients, input gradients of layers 2 and 3),
#    "pens_gflops" (useful_gflop over pens_ms), "peak_gflops" (the faster 1024³ product of
#    bench/gemm.cpp and torch.mm on that many threads, timed with the products below),
#    "pens_of_peak",
#    "ratio_at_peak" (the ratio a step doing its useful work at the GEMM peak would reach:
#    no implementation's ratio can exceed it), "products_ms" (the step's eight useful
#    products alone, each at its own shape and timed apart, by the faster of pens' GEMM
#    and torch.mm: bench/gemm.cpp at --batch = the rows), "pens_of_products"
#    (products_ms / pens_ms: the share of pens' step its products' own time would take),
#    "ratio_ceiling" (torch_ms / products_ms: the ratio a step with nothing but its
#    products, run by these kernels, would reach)}; the product figures are float32 ones,
#    and include oneDNN's float kernel where float32-onednn is among the precisions.
#    A bfloat16 line adds "bf16_peak_gflops" (pens' bfloat16 1024³ product, oneDNN, on
#    that many threads) and "pens_of_bf16_peak" (pens_gflops over it).
#
#   bench/compare-torch.sh [--reps N] [--modes LIST] [--batches LIST] [--threads LIST]
#                          [--precision LIST]   (pens': float32, float32-onednn, bfloat16;
#                                                default float32)
set -euo pipefail
cd "$(dirname "$0")/.."

reps=30 modes=sde,pea,pea-ss batches=100,256 thread_counts=1,2 precisions=float32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --threads) thread_counts="$2"; shift 2 ;;
    --precision) precisions="$2"; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare-torch: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

scripts/setup.sh >&2
scripts/ensure-packages.sh python3-torch python3-numpy libopenblas0-openmp >&2
# Debian's interpreter, whatever python3 comes first on PATH; the OpenMP OpenBLAS first
# on the library path, whichever BLAS the alternatives system selects.
source bench/torch-env.sh
peer=(env "${torch_env[@]}" /usr/bin/python3 bench/torch_peer.py)

IFS=, read -ra mode_list <<< "$modes"
IFS=, read -ra batch_list <<< "$batches"
IFS=, read -ra thread_list <<< "$thread_counts"
IFS=, read -ra precision_list <<< "$precisions"

dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
for mode in "${mode_list[@]}"; do
  build/bench/modes --mode "$mode" --batch 100 --threads 1 --reps 1 --dump "$dump/$mode" > /dev/null
  "${peer[@]}" check "$dump/$mode" >&2
done

# The step's products alone at the rows each mode's objective needs, and 1024³: each
# kernel's rate per product (pens' own, oneDNN's float one where it runs, torch.mm's), one
# JSON line each, per rows and thread count.
declare -A row_factor=([sde]=1 [pea]=2 [pea-ss]=3)
declare -A products
for threads in "${thread_list[@]}"; do
  for mode in "${mode_list[@]}"; do
    for batch in "${batch_list[@]}"; do
      key=$((row_factor[$mode] * batch))/$threads
      [[ -n ${products[$key]:-} ]] && continue
      products[$key]=$( { build/bench/gemm --threads "$threads" --batch "${key%/*}" --reps "$reps"
                          if [[ ,$precisions, == *,float32-onednn,* ]]; then
                            build/bench/gemm --threads "$threads" --batch "${key%/*}" --reps "$reps" \
                              --precision float32-onednn
                          fi
                          OMP_NUM_THREADS="$threads" "${peer[@]}" gemm --threads "$threads" --batch "${key%/*}" \
                            --reps "$reps"; })
    done
  done
done
# The machine's limit: the faster 1024³ GEMM, pens' or the peer's, over those runs, per thread count.
declare -A peak
for threads in "${thread_list[@]}"; do
  peak[$threads]=$(for key in "${!products[@]}"; do if [[ ${key#*/} == "$threads" ]]; then echo "${products[$key]}"; fi; done |
                   /usr/bin/python3 -c 'import json, sys
print(max(g["gflops"] for g in map(json.loads, sys.stdin) if g["case"].startswith("square")))')
done

# bfloat16's limit, where pens runs in it: its 1024³ product on oneDNN.
declare -A bf16_peak
for threads in "${thread_list[@]}"; do
  bf16_peak[$threads]=0
  if [[ ,$precisions, == *,bfloat16,* ]]; then
    bf16_peak[$threads]=$(build/bench/gemm --threads "$threads" --batch 1 --reps "$reps" --precision bfloat16 |
                          /usr/bin/python3 -c 'import json, sys
print(next(g["gflops"] for g in map(json.loads, sys.stdin) if g["case"].startswith("square")))')
  fi
done

for mode in "${mode_list[@]}"; do
  for batch in "${batch_list[@]}"; do
    for threads in "${thread_list[@]}"; do
      pens=()
      for precision in "${precision_list[@]}"; do
        pens+=("$(OMP_NUM_THREADS="$threads" build/bench/modes --mode "$mode" --batch "$batch" --threads "$threads" \
                  --reps "$reps" --precision "$precision")")
      done
      torch=()
      variants=(stacked unstacked)
      [ "$mode" = sde ] && variants=(stacked)  # one network: nothing to stack
      for variant in "${variants[@]}"; do
        for autocast in float32 bfloat16; do
          torch+=("$(OMP_NUM_THREADS="$threads" "${peer[@]}" time --mode "$mode" --batch "$batch" \
                     --threads "$threads" --reps "$reps" --variant "$variant" --precision "$autocast")")
        done
      done
      for p in "${pens[@]}"; do
        /usr/bin/python3 - "${peak[$threads]}" "${bf16_peak[$threads]}" "${products[$((row_factor[$mode] * batch))/$threads]}" \
            "$p" "${torch[@]}" <<'EOF'
import json, sys
peak, bf16_peak, products, pens, *torch = sys.argv[1:]
peak, bf16_peak = float(peak), float(bf16_peak)
best = {}  # product -> (flop, the faster kernel's GFLOP/s)
for g in map(json.loads, products.splitlines()):
    if not g["case"].startswith("square"):
        best[g["case"]] = (2.0 * g["m"] * g["k"] * g["n"], max(g["gflops"], best.get(g["case"], (0, 0))[1]))
# The useful work: the eight products over the rows the objective needs.
flop = sum(f for f, _ in best.values())
products_ms = sum(f / (gflops * 1e9) * 1000 for f, gflops in best.values())
p = json.loads(pens)
variants = [json.loads(a) for a in torch]
t = min(variants, key=lambda v: v["ms"])
gflops = flop / 1e9 / (p["ms"] / 1000)
print(json.dumps({"mode": p["mode"], "batch": p["batch"], "threads": p["threads"], "precision": p["precision"],
                  "pens_ms": p["ms"], "torch_ms": t["ms"], "torch_variant": t["variant"],
                  "torch_precision": t["precision"],
                  "torch_ms_by_variant": {f'{v["variant"]}/{v["precision"]}': v["ms"] for v in variants},
                  "ratio": round(t["ms"] / p["ms"], 2),
                  "pens_peak_rss_mb": p["peak_rss_mb"], "torch_peak_rss_mb": t["peak_rss_mb"],
                  "useful_gflop": round(flop / 1e9, 3), "pens_gflops": round(gflops, 1), "peak_gflops": peak,
                  "pens_of_peak": round(gflops / peak, 2),
                  "ratio_at_peak": round(t["ms"] / (flop / 1e9 / peak * 1000), 2),
                  "products_ms": round(products_ms, 2), "pens_of_products": round(products_ms / p["ms"], 2),
                  "ratio_ceiling": round(t["ms"] / products_ms, 2),
                  **({"bf16_peak_gflops": bf16_peak, "pens_of_bf16_peak": round(gflops / bf16_peak, 2)}
                     if p["precision"] == "bfloat16" else {})}))
EOF
      done
    done
  done
done
