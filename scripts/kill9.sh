#!/usr/bin/env bash
# The kill -9 campaign: a short training run is killed with SIGKILL at random moments
# (every third kill as soon as a checkpoint or model write has begun) and resumed each
# time, until it has been killed --kills times; then it runs to the end. After every kill: every model file in the folder must
# read (`pens fmt`), and the next resume reads the checkpoint. At the end the trained
# parameters must equal, bit for bit, those of the same run never interrupted. Prints one
# line per kill and a verdict; exit status 1 on any corrupt file, a different result, or
# (MPI) a process that outlives its killed partner by more than 30 s.
#
#   scripts/kill9.sh [--kind mnist|tree|mpi] [--kills N] [--seed S]
#
# mnist: semi-supervised PEA on MNIST (examples/mnist/pea-600.json cut to 12 epochs of 25
#   steps, a checkpoint every epoch, evaluations every 4).
# tree: CTN with fuzzing and subspace sampling (n = 30) on a slice of the Stanford
#   Sentiment Treebank (3,000 training trees, 200 dev and test; ../shared/data/sst or
#   PENS_SST), 12 epochs, a checkpoint every epoch.
# mpi: the mnist run as `mpirun -np 2 pens train`, one thread each; a kill takes one rank
#   (the other must stop on its own) or both, in turn.
set -euo pipefail
cd "$(dirname "$0")/.."

kind=mnist kills=50 seed=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kind) kind="$2"; shift 2 ;;
    --kills) kills="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "kill9: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$kind" in
  mnist|tree|mpi) ;;
  *) echo "kill9: --kind must be mnist, tree or mpi, got '$kind'" >&2; exit 2 ;;
esac

scripts/setup.sh >&2
work=$(mktemp -d)
trap 'pkill -9 -f -- "--out $work/" 2>/dev/null || true; rm -rf "$work"' EXIT
# A copy of the tool, so that a build during the campaign does not change what it runs.
pens=$work/pens
cp build/pens "$pens"
if [[ $kind == tree ]]; then
  sst=${PENS_SST:-../shared/data/sst}
  scripts/check-sst.sh "$sst" >&2
  mkdir -p "$work/sst"
  head -n 3000 "$sst/train.txt" > "$work/sst/train.txt"
  head -n 200 "$sst/dev.txt" > "$work/sst/dev.txt"
  head -n 200 "$sst/test.txt" > "$work/sst/test.txt"
  "$pens" new ctn --sst "$work/sst" --dim 30 --classes 5 --leaf-tanh --init authors --fuzz 0.02 --subspace 15 \
    --activation-noise 0.05 --output "$work/ctn.model.json" > /dev/null
  cat > "$work/config.json" <<JSON
{"model": "ctn.model.json", "task": "fine", "data": {"dir": "$work/sst"}, "batch": {"trees": 27},
 "optimizer": {"kind": "adagrad", "learning_rate": 0.01}, "l2": {"T": 4e-3, "Ml": 4e-3, "Mr": 4e-3, "C": 2e-4},
 "run": {"epochs": 12, "threads": 2}, "eval": {"samples": 3, "train_trees": 100},
 "checkpoint": {"every_epochs": 1}}
JSON
else
  scripts/fetch-mnist.sh >&2
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
fi

set_command() {  # set_command OUT [ARGS...]: cmd=(one run into folder OUT, ARGS added)
  local out=$1
  shift
  cmd=("$pens" train "$work/config.json" --out "$out" "$@")
  if [[ $kind == mpi ]]; then
    cmd=(mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -np 2
         "${cmd[@]}" --threads 1)
  fi
}
train() {  # train OUT [--resume]: one run to its end, output to OUT.log
  set_command "$@"
  "${cmd[@]}" >> "$1.log" 2>&1
}

echo "kill9 ($kind): the uninterrupted run"
train "$work/straight"
RANDOM=$seed
killed=0 corrupt=0 during_write=0 partner_ms_max=0
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
  # The program itself in the background (not a shell function, whose subshell would take
  # the signal while pens ran on).
  set_command "$work/killed" "${args[@]}"
  "${cmd[@]}" >> "$work/killed.log" 2>&1 &
  pid=$!
  if (( killed % 3 == 2 )); then
    # Every third kill aims at a write: as soon as a temporary file of an atomic write
    # appears in the folder (or after 10 s, or when the run ends first).
    deadline=$(( $(date +%s) + 10 ))
    until compgen -G "$work/killed/.*.tmp-*" > /dev/null || ! kill -0 "$pid" 2>/dev/null ||
          (( $(date +%s) > deadline )); do :; done
  else
    # A moment within the run's few seconds, in milliseconds.
    sleep "$(printf '0.%03d' $((RANDOM % 1000)))"
    sleep $((RANDOM % 3))
  fi
  verdict=""
  if [[ $kind == mpi ]]; then
    ranks=$(pgrep -P "$pid" -f -- "^$pens train" || true)
    if [[ -n $ranks ]]; then
      if (( killed % 2 == 0 )); then
        # One rank: its partner and mpirun must stop on their own.
        victim=$(sed -n "$((RANDOM % $(wc -l <<<"$ranks") + 1))p" <<<"$ranks")
        kill -9 "$victim" 2>/dev/null || true
        verdict="killed one rank"
      else
        kill -9 $ranks 2>/dev/null || true
        verdict="killed both ranks"
      fi
      started=$(date +%s%N)
      while kill -0 "$pid" 2>/dev/null; do
        if (( $(date +%s%N) - started > 30000000000 )); then
          echo "kill9: mpirun and the other rank still running 30 s after the kill"
          exit 1
        fi
        sleep 0.05
      done
      ms=$(( ($(date +%s%N) - started) / 1000000 ))
      (( ms > partner_ms_max )) && partner_ms_max=$ms
      verdict="$verdict (all stopped in $ms ms)"
      wait "$pid" 2>/dev/null || true
    fi
  elif kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    verdict="killed"
  fi
  if [[ -n $verdict ]]; then
    killed=$((killed + 1))
    # A write cut short leaves its temporary file (the target is untouched).
    if [ "$(temp_files)" -gt "$temps_before" ]; then
      during_write=$((during_write + 1))
      verdict="$verdict during a write"
    fi
  else
    wait "$pid" 2>/dev/null || { echo "kill9: a run failed on its own:"; tail -3 "$work/killed.log"; exit 1; }
    verdict="ended before the kill"
  fi
  for model in "$work"/killed/*model.json; do
    [ -e "$model" ] || continue
    if ! "$pens" fmt "$model" > /dev/null 2>> "$work/corrupt.log"; then corrupt=$((corrupt + 1)); fi
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
# The model files: their values inline, or the SHA-256 and name of their sidecar.
cmp -s "$work/straight/model.json" "$work/killed/model.json" && same=1
partners=""
[[ $kind == mpi ]] && partners=", every process stopped within $partner_ms_max ms of a kill"
echo "kill9 ($kind): $killed kills ($during_write during a write)$partners, $corrupt model files that did not read, final parameters $( ((same)) && echo "bit-identical to" || echo "DIFFERENT from") the uninterrupted run's"
[ "$corrupt" -eq 0 ] && [ "$same" -eq 1 ]
