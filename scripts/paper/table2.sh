#!/usr/bin/env bash
# Runs the cells of the paper's Table 2 (root accuracy on the Stanford Sentiment Treebank:
# CTN, CTN+F, CTN+S, CTN+F+S on the fine-grained and binary tasks) and writes the tree
# records of docs/results.json, the Table 2 section of docs/results-history.md and the
# tables of docs/results.md from every finished run under the runs folder.
#
#   scripts/paper/table2.sh [--seeds LIST] [--tasks LIST] [--methods LIST] [--epochs E]
#                     [--budget-minutes M] [--patience P] [--cell C] [--optimizer O] [--lowercase]
#                     [--eval-samples K] [--jobs J] [--data-dir DIR]
#                     [--runs DIR] [--report-only]
#
#   --seeds LIST        comma-separated run seeds per cell (default 1,2,3)
#   --tasks LIST        from fine, binary (default both)
#   --methods LIST      from ctn, ctn+f, ctn+s, ctn+f+s (default all four), and past the
#                       paper tree-lstm: examples/sst/tree-lstm.model.json, the
#                       constituency Tree-LSTM, with Tai et al.'s AdaGrad 0.05, 25 trees
#                       a step and l2 1e-4 (--cell does not apply to it); tree-lstm-glove:
#                       the same cell over GloVe's 100-dimensional 6B-token word vectors
#                       (examples/sst/tree-lstm-glove.model.json, scripts/fetch-glove.sh),
#                       tuned, without l2 on them, words lowercased; and a method
#                       with +pea after it (ctn+s+pea, ctn+f+s+pea): the paper's PEA on
#                       trees, a KL penalty on every node's scores between two children,
#                       its lambda of 1 ramped as the MNIST recipes ramp theirs (scale 0,
#                       0.5, 0.75, 1 over epochs 1-2, 3-6, 7-10, 11-16, then 1.5); and
#                       a method with +ema after it (tree-lstm-glove+ema): the same
#                       training, evaluated with a moving average (decay 0.999) of every
#                       trained parameter (pens average); and +sgd-words before it or
#                       alone (tree-lstm-glove+sgd-words+ema): the word vectors updated by
#                       plain SGD at 0.1 beside AdaGrad for the rest, as Tai et al.'s code
#                       trains them (optimizer.groups)
#   --epochs E          epochs per run (default 400, the paper's)
#   --budget-minutes M  wall-clock budget per run (default: none)
#   --patience P        end a run once its best dev epoch is P epochs old (run.patience_epochs;
#                       default 0: every run takes its --epochs); such a run counts as done
#   --eval-samples K    subspace draws averaged at each epoch's evaluation (default 50);
#                       with fewer, the best dev epoch's model is evaluated again with
#                       50 when the run ends (eval.final_samples), the figure reported
#   --cell C            authors (default): the authors' code's cell, tanh at the leaves
#                       and M started at the identity (pens new ctn --leaf-tanh --init
#                       authors); scaled: leaves E[word], every weight drawn around zero
#   --optimizer O       plain (default): AdaGrad with its defaults; authors: the authors'
#                       AdaGrad (epsilon 1e-3 added to the root, sums of squares started
#                       at 1e-3 and reset every 9 epochs before epoch 250, the learning
#                       rate times 0.99 per epoch from epoch 250 on); the table in
#                       docs/results-history.md: authors for CTN+S and CTN+F+S, plain for the rest
#   --lowercase         words that differ only in case are one word (data.lowercase),
#                       as in the authors' code; default: words matched exactly
#   --jobs J            runs at once, each on nproc / J threads, at least 1 (default 2)
#   --threads T         threads per run instead (the bits do not depend on it)
#   --data-dir DIR      the treebank (default ../shared/data/sst)
#   --runs DIR          where runs live (default runs/table2); a run that finished all
#                       --epochs is not run again, one its budget stopped is resumed, and
#                       one docs/results.json holds, made with the same config and model
#                       files, whose folder is gone (a campaign on another machine) is not
#                       run again either (to run it again, make its folder: mkdir
#                       RUNS/TASK-METHOD/seedS; the cell's record then gives way to the
#                       new runs and is kept in their record's superseded list)
#   --report-only       run nothing; rebuild the report from the runs that exist
#
# Every finished fine-grained run is also read as binary (pens eval RUN --task binary, on
# the test and dev roots, written beside it as binary-test.txt and binary-dev.txt): the
# report's "fine read as binary" cells, a binary row of Table 2 beside the models trained
# on the binary task (docs/results.md says which the table's cells are, and why).
set -euo pipefail
# The body is one brace group ending in exit: bash reads it whole before running it, so a
# campaign of hours is not derailed when this file is edited while it runs.
{
cd "$(dirname "$0")/../.."
invocation="scripts/paper/table2.sh $*"

seeds=1,2,3 tasks=fine,binary methods=ctn,ctn+f,ctn+s,ctn+f+s epochs=400 budget=0 patience=0 samples=50 jobs=2
model_cell=authors optimizer=plain lowercase=false threads=""
data=../shared/data/sst runs=runs/table2 report_only=0
pens="${PENS:-build/pens}"  # another binary (a copy, while build/ is rebuilt)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --tasks) tasks="$2"; shift 2 ;;
    --methods) methods="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --budget-minutes) budget="$2"; shift 2 ;;
    --patience) patience="$2"; shift 2 ;;
    --eval-samples) samples="$2"; shift 2 ;;
    --cell) model_cell="$2"; shift 2 ;;
    --optimizer) optimizer="$2"; shift 2 ;;
    --lowercase) lowercase=true; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --data-dir) data="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "table2: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $model_cell != authors && $model_cell != scaled ]]; then
  echo "table2: --cell is authors or scaled, got $model_cell" >&2
  exit 2
fi
if [[ $optimizer != plain && $optimizer != authors ]]; then
  echo "table2: --optimizer is plain or authors, got $optimizer" >&2
  exit 2
fi
adagrad=""
[[ $optimizer == authors ]] &&
  adagrad=', "epsilon": 1e-3, "initial_accumulator": 1e-3, "restart_every_epochs": 9, "restart_before_epoch": 250, "decay": 0.99, "decay_start_epoch": 250'
if [[ $report_only == 0 ]]; then
  scripts/check-sst.sh "$data"
  data=$(cd "$data" && pwd)  # the cells' configs name it: a path in a config is read from the config's folder
  [[ -n $threads ]] || threads=$(( $(nproc) / jobs > 1 ? $(nproc) / jobs : 1 ))
  [[ -x $pens ]] || scripts/setup.sh
  mkdir -p "$runs"
  # One model file and config per cell: the paper's settings (its section 5 and the authors' code).
  for task in ${tasks//,/ }; do
    if [[ $task == fine ]]; then classes=5 lr=0.01 l2w=4e-3; else classes=2 lr=0.005 l2w=2e-3; fi
    for method in ${methods//,/ }; do
      base=${method%+ema}  # the method whose training +ema evaluates with averaged weights
      groups=""
      if [[ $base == *+sgd-words ]]; then
        base=${base%+sgd-words}
        groups=', "groups": [{"params": ["E"], "kind": "sgd", "learning_rate": 0.1}]'
      fi
      options=()  # pens new ctn's
      [[ $model_cell == authors ]] && options+=(--leaf-tanh --init authors)
      words_lowercase=$lowercase vectors=""
      [[ $base == tree-lstm-glove ]] && words_lowercase=true  # GloVe's words are lowercase
      [[ $words_lowercase == true ]] && options+=(--lowercase)
      [[ $method == *+f* ]] && options+=(--fuzz 0.02)
      [[ $method == *+s* ]] && options+=(--subspace 35 --activation-noise 0.05)
      lambdas=""
      if [[ $method == *+pea ]]; then
        options+=(--penalty scores:kl:1)
        lambdas=$'\n  "lambda_schedule": [{"epochs": 2, "scale": 0}, {"epochs": 4, "scale": 0.5}, {"epochs": 4, "scale": 0.75}, {"epochs": 6, "scale": 1}, {"epochs": 1, "scale": 1.5}],'
      fi
      cell="$runs/$task-$method"
      mkdir -p "$cell"
      "$pens" new ctn --sst "$data" --classes "$classes" "${options[@]}" --output "$cell/model.json" 2>/dev/null
      batch=27 rate=$lr
      l2='"T": '$l2w', "Ml": '$l2w', "Mr": '$l2w', "m": '$l2w', "C": 2e-4, "c": 2e-4, "E": 2e-4'
      if [[ $base == tree-lstm* ]]; then
        # The shipped model file, its word table and classifier sized as the CTN's for this
        # task and vocabulary; Tai et al.'s settings: AdaGrad 0.05, 25 trees, l2 1e-4.
        python3 - "$cell/model.json" "examples/sst/$base.model.json" <<'PY'
import json, sys
ctn = {p["name"]: p["shape"] for p in json.load(open(sys.argv[1]))["parameters"]}
model = json.load(open(sys.argv[2]))
for p in model["parameters"]:
    if p["name"] == "E":
        p["shape"][0] = ctn["E"][0]
    elif p["name"] == "C":
        p["shape"][1] = ctn["C"][1]
    elif p["name"] == "c_out":
        p["shape"][0] = ctn["c"][0]
json.dump(model, open(sys.argv[1], "w"), indent=1)
PY
        batch=25 rate=0.05 l2='"Wx": 1e-4, "Ul": 1e-4, "Ur": 1e-4, "C": 1e-4, "E": 1e-4'
      fi
      if [[ $base == tree-lstm-glove ]]; then
        # Tuned as Tai et al. tune theirs, without l2: under AdaGrad with its defaults an l2
        # on every row moves each vector its words do not reach by a whole step.
        scripts/fetch-glove.sh > /dev/null
        l2='"Wx": 1e-4, "Ul": 1e-4, "Ur": 1e-4, "C": 1e-4'
        vectors=$'\n  "word_vectors": "'"$PWD"'/data/glove/glove-6b-100d.txt",'
      fi
      if [[ $method == *+ema ]]; then
        "$pens" average "$cell/model.json" --decay 0.999 --output "$cell/model.json"
      fi
      cat > "$cell/config.json" <<JSON
{
  "description": "Table 2, $method on the $task task",
  "model": "model.json",$vectors
  "task": "$task",
  "data": {"dir": "$data", "min_count": 1, "lowercase": $words_lowercase},
  "batch": {"trees": $batch},
  "optimizer": {"kind": "adagrad", "learning_rate": $rate$adagrad$groups},
  "l2": {$l2},$lambdas
  "run": {"epochs": $epochs, "budget_minutes": $budget, "patience_epochs": $patience, "threads": $threads},
  "eval": {"samples": $samples, "train_trees": 500}
}
JSON
    done
  done
  # The runs, `jobs` at a time; recorded: those docs/results.json holds for these very cells.
  recorded=$'\n'$(python3 scripts/paper/results_trees.py --recorded "$runs" docs/results.json)$'\n'
  for seed in ${seeds//,/ }; do
    for task in ${tasks//,/ }; do
      for method in ${methods//,/ }; do
        out="$runs/$task-$method/seed$seed"
        if [[ ! -e $out && $recorded == *$'\n'"$task-$method/seed$seed"$'\n'* ]]; then
          echo "table2: $task $method seed $seed already recorded in docs/results.json (its folder is gone); not run again"
          continue
        fi
        # Done: finished all its epochs, or ended by its patience. A run stopped by its budget
        # resumes from its checkpoint.
        if [[ -f $out/summary.json ]] && python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
done = s.get("epochs", 0) >= float(sys.argv[2]) or "stopped_early" in s
sys.exit(0 if s.get("status") == "finished" and done else 1)' \
             "$out/summary.json" "$epochs"; then
          continue
        fi
        while (( $(jobs -rp | wc -l) >= jobs )); do wait -n; done
        resume=()
        [[ -f $out/checkpoint.pens ]] && resume=(--resume)
        echo "table2: $task $method seed $seed -> $out"
        "$pens" train "$runs/$task-$method/config.json" --seed "$seed" --out "$out" "${resume[@]}" \
          >> "$out.log" 2>&1 || echo "table2: $out failed (see $out.log)" &
      done
    done
  done
  wait
  # Each finished fine-grained run's best model read as binary (its cell's "fine read as
  # binary" record), once: on the test roots and, to compare protocols on, the dev roots.
  for run in "$runs"/fine-*/seed*/; do
    run=${run%/}
    [[ -f $run/summary.json && -f $run/best.model.json ]] || continue
    python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])).get("status") != "finished")' \
      "$run/summary.json" || continue
    for part in test dev; do
      [[ -f $run/binary-$part.txt ]] && continue
      "$pens" eval "$run" --task binary --data "$part" > "$run/binary-$part.txt.part" &&
        mv "$run/binary-$part.txt.part" "$run/binary-$part.txt"
    done
  done
fi
python3 scripts/paper/results_trees.py "$runs" docs/results-history.md docs/results.json "$invocation"
/usr/bin/python3 scripts/paper/results_tables.py docs/results.json docs/results.md README.md
exit
}
