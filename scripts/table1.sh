#!/usr/bin/env bash
# Reproduces the cells of the paper's Table 1 (MNIST test error by number of labels,
# SDE, PEA and PEA+) and the fully supervised figures, then writes docs/results.md and
# docs/results.json from every finished run under the runs folder.
#
#   scripts/table1.sh [--splits N] [--labels LIST] [--methods LIST] [--budget-minutes M]
#                     [--supervised] [--supervised-epochs E] [--runs DIR] [--report-only]
#
#   --splits N          splits (labeled-set seeds 1..N) per cell (default 3; the
#                       100-label cell gets max(N, 5))
#   --labels LIST       comma-separated labeled-set sizes (default 100,600,1000,3000)
#   --methods LIST      comma-separated, from sde, pea, pea+, and the consistency
#                       methods vat, vat-ema, pi, mean-teacher, pseudo-label and their
#                       supervised baseline supervised-bn (their *-100.json configs, with
#                       --labels N) (default sde,pea); pea+ first pre-trains once (pens
#                       pretrain, into RUNS/pretrain)
#   --budget-minutes M  wall-clock budget of each run (default: none, the config's epochs)
#   --supervised        also the fully supervised cells (raw, sde, pea on 50,000 labels)
#   --supervised-epochs E  their length (default: the configs', the paper's 1000 epochs)
#   --runs DIR          where runs live (default runs/table1); a run whose summary.json
#                       says "finished" is not run again
#   --report-only       run nothing; rebuild the report from the runs that exist
set -euo pipefail
cd "$(dirname "$0")/.."

splits=3 labels=100,600,1000,3000 methods=sde,pea budget="" supervised=0 supervised_epochs="" runs=runs/table1
report_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --splits) splits="$2"; shift 2 ;;
    --labels) labels="$2"; shift 2 ;;
    --methods) methods="$2"; shift 2 ;;
    --budget-minutes) budget="$2"; shift 2 ;;
    --supervised) supervised=1; shift ;;
    --supervised-epochs) supervised_epochs="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "table1: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $report_only == 0 ]]; then
  scripts/setup.sh
  scripts/fetch-mnist.sh
fi
command -v python3 > /dev/null || scripts/ensure-packages.sh python3

# Every run uses one copy of the tool, so rebuilding build/ meanwhile cannot break a run.
mkdir -p "$runs"
if [[ $report_only == 0 ]]; then
  cp build/pens "$runs/pens.tmp" && mv "$runs/pens.tmp" "$runs/pens"
fi

# run NAME CONFIG [pens train options...]: one run, skipped when it already finished.
run() {
  local name="$1" config="$2"; shift 2
  local out="$runs/$name"
  if [[ -f "$out/summary.json" ]] && grep -q '"status": "finished"' "$out/summary.json"; then
    echo "table1: $name already finished"
    return
  fi
  local cmd=("$runs/pens" train "$config" --out "$out" "$@")
  [[ -n "$budget" ]] && cmd+=(--budget-minutes "$budget")
  echo "table1: ${cmd[*]}"
  mkdir -p "$out"
  printf '%s\n' "${cmd[*]}" > "$out/command.txt"
  "${cmd[@]}" > "$out/train.log" 2>&1 || echo "table1: $name failed (see $out/train.log)"
  tail -n 3 "$out/train.log"
}

# The pre-trained network of the PEA+ cells, made once.
pretrain() {
  local out="$runs/pretrain"
  if [[ -f "$out/summary.json" ]] && grep -q '"status": "finished"' "$out/summary.json"; then return; fi
  echo "table1: $runs/pens pretrain examples/mnist/pretrain.json --out $out"
  mkdir -p "$out"
  "$runs/pens" pretrain examples/mnist/pretrain.json --out "$out" > "$out/pretrain.log" 2>&1 ||
    { echo "table1: pre-training failed (see $out/pretrain.log)" >&2; exit 1; }
  tail -n 3 "$out/pretrain.log"
}

if [[ $report_only == 0 ]]; then
  IFS=, read -ra label_list <<< "$labels"
  IFS=, read -ra method_list <<< "$methods"
  for n in "${label_list[@]}"; do
    cell_splits=$splits
    [[ $n == 100 && $cell_splits -lt 5 ]] && cell_splits=5
    for method in "${method_list[@]}"; do
      case "$method" in
        sde) config=examples/mnist/sde-semi.json ;;
        pea) config=examples/mnist/pea-$n.json ;;
        pea+) config=examples/mnist/pea-plus-$n.json ;;
        vat) config=examples/mnist/vat-bn-100.json ;;
        vat-ema) config=examples/mnist/vat-bn-ema-100.json ;;
        supervised-bn) config=examples/mnist/supervised-bn-100.json ;;
        pi) config=examples/mnist/pi-100.json ;;
        mean-teacher) config=examples/mnist/mean-teacher-100.json ;;
        pseudo-label) config=examples/mnist/pseudo-label-100.json ;;
        *) echo "table1: unknown method $method" >&2; exit 2 ;;
      esac
      [[ -f $config ]] || { echo "table1: no config $config for $method at $n labels" >&2; exit 2; }
      init=()
      if [[ $method == pea+ ]]; then
        pretrain
        init=(--init "$runs/pretrain/model.json")
      fi
      for s in $(seq 1 "$cell_splits"); do
        run "$method-$n/split$s" "$config" --labels "$n" --split-seed "$s" "${init[@]}"
      done
    done
  done
  if [[ $supervised == 1 ]]; then
    for method in raw sde pea; do
      run "$method-supervised/split1" "examples/mnist/$method-supervised.json" \
        ${supervised_epochs:+--epochs "$supervised_epochs"}
    done
  fi
fi

python3 scripts/results.py "$runs" docs/results.md docs/results.json
echo "table1: wrote docs/results.md and docs/results.json"
