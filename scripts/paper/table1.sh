#!/usr/bin/env bash
# Reproduces the cells of the paper's Table 1 (MNIST test error by number of labels,
# SDE, PEA and PEA+) and the fully supervised figures, then writes docs/results.json,
# docs/results.md and docs/results-history.md from every finished run under the runs folder.
#
#   scripts/paper/table1.sh [--splits N] [--split-seeds LIST] [--labels LIST] [--methods LIST]
#                     [--list-methods] [--budget-minutes M]
#                     [--supervised] [--supervised-methods LIST] [--supervised-epochs E]
#                     [--supervised-splits N]
#                     [--runs DIR] [--report-only]
#                     [--configs DIR] [--data-dir DIR] [--pens BINARY] [--report DIR] [--jobs J]
#
#   --splits N          splits (labeled-set seeds 1..N) per cell (default 3; the
#                       100-label cell gets max(N, 5))
#   --split-seeds LIST  run only these splits of each cell (comma-separated seeds, say
#                       1 for a first measurement of a recipe at 100 labels); the cells
#                       are reported with every split they hold
#   --labels LIST       comma-separated labeled-set sizes (default 100,600,1000,3000)
#   --methods LIST      comma-separated methods (default sde,pea), each a line of
#                       scripts/paper/table1-methods.json: its config (--configs DIR), the
#                       pre-training it fine-tunes from, run once into RUNS/NAME, and its
#                       row in docs/results.md
#   --list-methods      print every method with its config and what it is, then exit
#   --budget-minutes M  wall-clock budget of each run (default: none, the config's epochs)
#   --supervised        also the fully supervised cells (raw, sde, pea on 50,000 labels)
#   --supervised-methods LIST  which of them (comma-separated; default raw,sde,pea; also
#                       ladder): methods with a "supervised" config in the registry
#   --supervised-epochs E  their length (default: the configs', the paper's 1000 epochs)
#   --supervised-splits N  runs per supervised cell (default 1), run S holding out the
#                       validation images of split seed S
#   --runs DIR          where runs live (default runs/table1)
#   --report-only       run nothing; rebuild the report from the runs that exist
#   --configs DIR       the configs' folder (default examples/mnist; same file names)
#   --data-dir DIR      MNIST's IDX files (default data/mnist, fetched when missing)
#   --pens BINARY       the pens to run (default: a copy of build/pens, set up and built)
#   --report DIR        where results.json, results.md (the tables),
#                       results-history.md (every recipe) and img/table1-curves.png
#                       (every run's validation error by epoch) go (default docs)
#   --jobs J            runs at once (default 1), each on nproc / J threads (at least 1):
#                       on a few cores, two one-thread runs side by side finish more runs
#                       an hour than one two-thread run at a time (docs/results-history.md)
#
# A campaign can be stopped and taken up again: run the same command again. A run whose summary.json
# says it finished (or diverged) is not run again; a run that was interrupted resumes
# from its checkpoint.pens (pens train --resume), or starts over if it wrote none. A split
# recorded in REPORT/results.json whose run folder is gone (a campaign on another machine,
# or one whose runs folder was removed) is not run again either: the report keeps it as
# recorded. To run such a split again, make its folder (mkdir RUNS/METHOD-LABELS/splitK):
# the new run then replaces the recorded split.
# The report is rewritten after every run, so finished cells are recorded as they
# finish, and the script says what remains before it starts and after each run.
set -euo pipefail
# The body is one brace group ending in exit: bash reads it whole before running it, so a
# campaign of hours is not derailed when this file is edited while it runs.
{
cd "$(dirname "$0")/../.."

splits=3 split_seeds="" labels=100,600,1000,3000 methods=sde,pea budget="" supervised=0 supervised_methods=raw,sde,pea supervised_epochs="" supervised_splits=1 runs=runs/table1
report_only=0 configs=examples/mnist data_dir="" pens="" report=docs jobs=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --splits) splits="$2"; shift 2 ;;
    --split-seeds) split_seeds="$2"; shift 2 ;;
    --labels) labels="$2"; shift 2 ;;
    --methods) methods="$2"; shift 2 ;;
    --budget-minutes) budget="$2"; shift 2 ;;
    --supervised) supervised=1; shift ;;
    --supervised-methods) supervised_methods="$2"; shift 2 ;;
    --supervised-epochs) supervised_epochs="$2"; shift 2 ;;
    --supervised-splits) supervised_splits="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    --configs) configs="$2"; shift 2 ;;
    --data-dir) data_dir="$2"; shift 2 ;;
    --pens) pens="$2"; shift 2 ;;
    --report) report="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --list-methods) exec python3 scripts/paper/table1_methods.py list ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "table1: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $report_only == 0 ]]; then
  [[ -n $pens ]] || scripts/setup.sh
  [[ -n $data_dir ]] || scripts/fetch-mnist.sh
fi
command -v python3 > /dev/null || scripts/ensure-packages.sh python3
data_args=()
[[ -n $data_dir ]] && data_args=(--data-dir "$data_dir")

# Every run uses one copy of the tool, so rebuilding build/ meanwhile cannot break a run.
mkdir -p "$runs"
if [[ $report_only == 0 ]]; then
  cp "${pens:-build/pens}" "$runs/pens.tmp" && mv "$runs/pens.tmp" "$runs/pens"
fi

report() {
  mkdir -p "$report"
  python3 scripts/paper/results.py "$runs" "$report/results-history.md" "$report/results.json"
  # The README's headline table is drawn from the repository's record only.
  local readme=()
  [[ $report -ef docs ]] && readme=(README.md)
  /usr/bin/python3 scripts/paper/results_tables.py "$report/results.json" "$report/results.md" "${readme[@]}"
}

# The runs the record holds (METHOD-LABELS/splitK, one a line), read once before a
# campaign: its own runs join the record as they finish, and those have folders.
recorded=""
if [[ $report_only == 0 ]]; then
  recorded=$'\n'$(python3 scripts/paper/results.py --recorded "$report/results.json")$'\n'
fi

# The state of run $1 (its folder under $runs): finished, diverged, resume (a checkpoint
# to go on from), recorded (in the report, its folder gone) or new.
state_of() {
  local out="$runs/$1"
  if [[ -f "$out/summary.json" ]] && grep -q '"status": "finished"' "$out/summary.json"; then echo finished
  elif [[ -f "$out/summary.json" ]] && grep -q '"status": "diverged"' "$out/summary.json"; then echo diverged
  elif [[ -f "$out/checkpoint.pens" ]]; then echo resume
  elif [[ ! -e "$out" && $recorded == *$'\n'"$1"$'\n'* ]]; then echo recorded
  else echo new; fi
}

# The campaign: one entry per run, its name, config, the pre-training it starts from
# ("" for none) and pens train options (separated by the unit separator, so that paths
# may hold spaces).
plan_names=() plan_configs=() plan_pretrained=() plan_options=()
sep=$'\x1f'
plan() {  # plan NAME CONFIG PRETRAINED [pens train options...]
  plan_names+=("$1")
  plan_configs+=("$2")
  plan_pretrained+=("$3")
  shift 3
  local IFS=$sep
  plan_options+=("$*")
}

# registry_plan METHOD LABELS: sets config (under --configs) and pretrained from METHOD's
# registry line at LABELS labels ("supervised": its fully supervised cell), or stops the
# campaign before any run with why.
registry_plan() {
  local line
  line=$(python3 scripts/paper/table1_methods.py plan "$1" "$2") || exit 2
  IFS=$'\t' read -r config pretrained <<< "$line"
  config=$configs/$config
  [[ -f $config ]] || { echo "table1: no config $config for $1 at $2 labels" >&2; exit 2; }
}

if [[ $report_only == 0 ]]; then
  IFS=, read -ra label_list <<< "$labels"
  IFS=, read -ra method_list <<< "$methods"
  IFS=, read -ra seed_list <<< "$split_seeds"
  for s in "${seed_list[@]}"; do
    [[ $s =~ ^[1-9][0-9]*$ ]] || { echo "table1: --split-seeds takes positive integers, got '$split_seeds'" >&2; exit 2; }
  done
  [[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "table1: --jobs takes a positive integer, got '$jobs'" >&2; exit 2; }
  for n in "${label_list[@]}"; do
    cell_splits=$splits
    [[ $n == 100 && $cell_splits -lt 5 ]] && cell_splits=5
    for method in "${method_list[@]}"; do
      registry_plan "$method" "$n"
      init=()
      [[ -n $pretrained ]] && init=(--init "$runs/$pretrained/model.json")
      seeds=("${seed_list[@]}")
      (( ${#seeds[@]} > 0 )) || seeds=($(seq 1 "$cell_splits"))
      for s in "${seeds[@]}"; do
        plan "$method-$n/split$s" "$config" "$pretrained" --labels "$n" --split-seed "$s" "${init[@]}"
      done
    done
  done
  if [[ $supervised == 1 ]]; then
    IFS=, read -ra supervised_list <<< "$supervised_methods"
    for method in "${supervised_list[@]}"; do
      registry_plan "$method" supervised
      for s in $(seq 1 "$supervised_splits"); do
        plan "$method-supervised/split$s" "$config" "" --split-seed "$s" \
          ${supervised_epochs:+--epochs "$supervised_epochs"}
      done
    done
  fi
fi

# Prints the runs not finished yet, with what will happen to each.
remaining() {
  local left=() i state
  for i in "${!plan_names[@]}"; do
    state=$(state_of "${plan_names[$i]}")
    case $state in
      finished|diverged|recorded) ;;
      resume) left+=("${plan_names[$i]} (resumes)") ;;
      new) left+=("${plan_names[$i]}") ;;
    esac
  done
  echo "table1: $(( ${#plan_names[@]} - ${#left[@]} )) of ${#plan_names[@]} runs done; remaining: ${left[*]:-none}"
}

# pretrain NAME: the pre-trained network of a PEA+ method's cells, made once by
# CONFIGS/NAME.json into RUNS/NAME.
pretrain() {
  local out="$runs/$1" config="$configs/$1.json"
  if [[ -f "$out/summary.json" ]] && grep -q '"status": "finished"' "$out/summary.json"; then return; fi
  echo "table1: $runs/pens pretrain $config --out $out"
  mkdir -p "$out"
  "$runs/pens" pretrain "$config" --out "$out" "${data_args[@]}" > "$out/pretrain.log" 2>&1 ||
    { echo "table1: pre-training failed (see $out/pretrain.log)" >&2; exit 1; }
  tail -n 3 "$out/pretrain.log"
}

# run NAME STATE CONFIG [pens train options...]: one run, new or resumed (STATE, as
# state_of gives it).
run() {
  local name="$1" state="$2" config="$3"; shift 3
  local out="$runs/$name"
  local cmd=("$runs/pens" train "$config" --out "$out" "$@" "${data_args[@]}")
  [[ -n "$budget" ]] && cmd+=(--budget-minutes "$budget")
  mkdir -p "$out"
  # The run's command as it would be typed afresh; --resume is how an interrupted run goes on.
  printf '%s\n' "${cmd[*]}" > "$out/command.txt"
  [[ $state == resume ]] && cmd+=(--resume)
  echo "table1: ${cmd[*]}"
  "${cmd[@]}" >> "$out/train.log" 2>&1 || echo "table1: $name failed (see $out/train.log)"
  tail -n 3 "$out/train.log"
}

if [[ $report_only == 0 ]]; then
  threads=()
  (( jobs > 1 )) && threads=(--threads $(( $(nproc) / jobs > 1 ? $(nproc) / jobs : 1 )))
  # The report is written by this shell alone, after each run that ends.
  ended() { wait -n || true; report; remaining; }
  remaining
  for i in "${!plan_names[@]}"; do
    name=${plan_names[$i]}
    state=$(state_of "$name")
    # A run that will not start says so here, without a job slot, a pre-training or a
    # rewrite of the report.
    case $state in
      finished) echo "table1: $name already finished"; continue ;;
      recorded) echo "table1: $name already recorded in $report/results.json (its folder is gone); not run again"; continue ;;
      diverged) echo "table1: $name diverged (see $runs/$name/summary.json); not run again: remove the folder to rerun"; continue ;;
    esac
    IFS=$sep read -ra options <<< "${plan_options[$i]}"
    [[ -n ${plan_pretrained[$i]} ]] && pretrain "${plan_pretrained[$i]}"
    while (( $(jobs -rp | wc -l) >= jobs )); do ended; done
    run "$name" "$state" "${plan_configs[$i]}" "${options[@]}" "${threads[@]}" &
  done
  while (( $(jobs -rp | wc -l) > 0 )); do ended; done
fi

report
echo "table1: wrote $report/results.json, $report/results.md and $report/results-history.md"
if [[ -f $report/img/table1-curves.tsv ]]; then
  echo "table1: the runs' validation error by epoch is in $report/img/table1-curves.tsv (drawn in .png by gnuplot)"
fi
exit
}
