#!/usr/bin/env bash
# The kill -9 campaign: a short semi-supervised PEA run on MNIST (examples/mnist/pea-600.json
# cut to 12 epochs of 25 steps, a checkpoint every epoch, evaluations every 4) is killed
# with SIGKILL at random moments, checkpoint writes included, and resumed each time, until
# it has been killed --kills times; then it runs to the end. After every kill: the
# checkpoint on disk must load (the resume reads it) and every model file in the folder
# must read (`pens fmt`). At the end the trained parameters must equal, bit for bit, those
# of the same run never interrupted. Prints one line per kill and a verdict; exit status
# 1 on any corrupt file or a different result.
#
#   scripts/kill9.sh [--kills N] [--seed S]
set -euo pipefail
cd "$(dirname "$0")/.."

kills=50 seed=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kills) kills="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "kill9: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

scripts/setup.sh >&2
scripts/fetch-mnist.sh >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/config.json" "$PWD" <<'EOF'
import json, sys
config = json.load(open(sys.argv[2] + "/examples/mnist/pea-600.json"))
config["model"] = sys.argv[2] + "/examples/mnist/" + config["model"]
config["data"]["dir"] = sys.argv[2] + "/data/mnist"
config["run"].update({"epochs": 12, "steps_per_epoch": 25})
config["eval"]["every_epochs"] = 4
config["checkpoint"]["every_epochs"] = 1
json.dump(config, open(sys.argv[1], "w"), indent=1)
EOF

train() {  # train OUT [--resume]: one pens train, output to OUT.log
  local out=$1
  shift
  build/pens train "$work/config.json" --out "$out" "$@" >> "$out.log" 2>&1
}

echo "kill9: the uninterrupted run"
train "$work/straight"
RANDOM=$seed
killed=0 corrupt=0 during_write=0
temp_files() {  # temporary files of atomic writes in the run folder
  if [ -d "$work/killed" ]; then find "$work/killed" -maxdepth 1 -name '.*.tmp-*' | wc -l; else echo 0; fi
}
while [ "$killed" -lt "$kills" ]; do
  if [ -f "$work/killed/summary.json" ] && grep -q '"finished"' "$work/killed/summary.json"; then
    # Finished before all kills were spent: start the run over (a fresh folder).
    rm -rf "$work/killed" "$work/killed.log"
  fi
  args=()
  [ -f "$work/killed/checkpoint.pens" ] && args=(--resume)
  temps_before=$(temp_files)
  # pens itself in the background (not a shell function, whose subshell would take the
  # signal while pens ran on).
  build/pens train "$work/config.json" --out "$work/killed" "${args[@]}" >> "$work/killed.log" 2>&1 &
  pid=$!
  # A moment within the run's few seconds, in milliseconds.
  sleep "$(printf '0.%03d' $((RANDOM % 1000)))"
  sleep $((RANDOM % 3))
  if kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    killed=$((killed + 1))
    verdict="killed"
    # A write cut short leaves its temporary file (the target is untouched).
    if [ "$(temp_files)" -gt "$temps_before" ]; then
      during_write=$((during_write + 1))
      verdict="killed during a write"
    fi
  else
    wait "$pid" 2>/dev/null || { echo "kill9: a run failed on its own:"; tail -3 "$work/killed.log"; exit 1; }
    verdict="ended before the kill"
  fi
  for model in "$work"/killed/*model.json; do
    [ -e "$model" ] || continue
    if ! build/pens fmt "$model" > /dev/null 2>> "$work/corrupt.log"; then corrupt=$((corrupt + 1)); fi
  done
  step=""
  [ -f "$work/killed/checkpoint.pens" ] && step=$(head -n 1 "$work/killed/checkpoint.pens" | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
  echo "kill9: $verdict ($killed of $kills), checkpoint at step ${step:-none}"
done
# Resumes until the run has finished (a resume reads the checkpoint: a corrupt one fails it).
until [ -f "$work/killed/summary.json" ] && grep -q '"finished"' "$work/killed/summary.json"; do
  args=()
  [ -f "$work/killed/checkpoint.pens" ] && args=(--resume)
  train "$work/killed" "${args[@]}" || { echo "kill9: resuming failed:"; tail -3 "$work/killed.log"; exit 1; }
done
same=0
cmp -s "$work/straight/model.weights.bin" "$work/killed/model.weights.bin" && same=1
echo "kill9: $killed kills ($during_write during a write), $corrupt model files that did not read, final parameters $( ((same)) && echo "bit-identical to" || echo "DIFFERENT from") the uninterrupted run's"
[ "$corrupt" -eq 0 ] && [ "$same" -eq 1 ]
