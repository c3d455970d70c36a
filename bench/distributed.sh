#!/usr/bin/env bash
# Data-parallel scaling on this machine (docs/distributed.md): the training step of
# examples/mnist/pea-600.json's network at several global batches, as 1 process x 1
# thread, 1 process x 2 threads, and 2 processes x 1 thread with and without overlapping
# the gradient sums with the backward pass; and the blocking allreduce of every gradient
# alone. Prints one JSON object per line, then a table. Medians; the machine is shared, so
# compare figures of the same run.
#
#   bench/distributed.sh [--reps N]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
reps=40
if [ "${1:-}" = "--reps" ]; then reps=$2; fi
bin=build/bench/data_parallel
mpirun=(mpirun --allow-run-as-root)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for half in 32 64 128 256; do
  common=(--labeled "$half" --unlabeled "$half" --reps "$reps")
  "$bin" --threads 1 "${common[@]}" | tee -a "$out"
  "$bin" --threads 2 "${common[@]}" | tee -a "$out"
  "${mpirun[@]}" -np 2 "$bin" --threads 1 "${common[@]}" | tee -a "$out"
  "${mpirun[@]}" -np 2 "$bin" --threads 1 --no-overlap "${common[@]}" | tee -a "$out"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print("global batch | 1p x 1t ms | 1p x 2t ms | 2p x 1t ms | no overlap ms | allreduce ms | 2p speed-up over 1p x 1t | 2p / (1p x 2t)")
for b in sorted({r["labeled"] + r["unlabeled"] for r in rows}):
    pick = lambda p, t, o=True: next(r for r in rows if r["labeled"] + r["unlabeled"] == b and r["processes"] == p
                                     and r["threads"] == t and r["overlap"] == o)
    one, two_threads, two, serial = pick(1, 1), pick(1, 2), pick(2, 1), pick(2, 1, False)
    print(f"{b:12d} | {one['ms']:10.2f} | {two_threads['ms']:10.2f} | {two['ms']:10.2f} | {serial['ms']:13.2f} | "
          f"{two['allreduce_ms']:12.2f} | {one['ms'] / two['ms']:24.2f} | {two_threads['ms'] / two['ms']:14.2f}")
PY
