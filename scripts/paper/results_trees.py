#!/usr/bin/env python3
"""Collects the finished runs of scripts/paper/table2.sh into docs/results-history.md (its Table 2
section) and docs/results.json (records of Table 2's cells; other records are kept, and so is
the record of a cell that has no finished run under RUNS_DIR; a cell's record that new
runs replace is kept in the new record's "superseded" list: results accumulate; runs of new
seeds made with the same config and model files as a cell's record join it, so a campaign
finished on another machine adds to its record). Each fine-grained cell has a binary
sibling, METHOD-fine-folded: the same runs' best models read as binary (the evaluation
table2.sh writes beside each run, seedS/binary-test.txt). Draws
the cells' learning curves into the img folder beside the markdown file (docs/img:
table2-curves.png with gnuplot, from table2-curves.tsv): root accuracy on dev and on the
training sample by epoch, mean over the cell's finished runs.

usage: results_trees.py RUNS_DIR HISTORY.md RESULTS.json [COMMAND]
       results_trees.py --recorded RUNS_DIR RESULTS.json

COMMAND is the scripts/paper/table2.sh invocation that made the runs (recorded with them).
--recorded prints the run folders (TASK-METHOD/seedS) RESULTS.json holds runs of, made with
the config and model files the cell has under RUNS_DIR: what table2.sh need not run again.
"""
import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import curves_table

# The cells and the published figure of each: the paper's Table 2, and past it the
# constituency Tree-LSTM's (Tai, Socher, Manning 2015, tuned GloVe vectors: the figure both pens
# Tree-LSTM cells, with and without pre-trained vectors, stand beside); None for PEA
# on trees, which no paper reports.
PAPER = {("fine", "ctn"): 43.1, ("fine", "ctn+f"): 46.1, ("fine", "ctn+s"): 47.5, ("fine", "ctn+f+s"): 48.4,
         ("binary", "ctn"): 83.4, ("binary", "ctn+f"): 85.3, ("binary", "ctn+s"): 87.8, ("binary", "ctn+f+s"): 88.9,
         ("fine", "tree-lstm"): 51.0, ("binary", "tree-lstm"): 88.0,
         ("fine", "tree-lstm-glove"): 51.0, ("binary", "tree-lstm-glove"): 88.0,
         ("fine", "tree-lstm-glove+ema"): 51.0, ("binary", "tree-lstm-glove+ema"): 88.0,
         ("fine", "tree-lstm-glove+sgd-words+ema"): 51.0, ("binary", "tree-lstm-glove+sgd-words+ema"): 88.0,
         ("fine", "ctn+s+pea"): None, ("binary", "ctn+s+pea"): None,
         ("fine", "ctn+f+s+pea"): None, ("binary", "ctn+f+s+pea"): None}
# A fine-grained model read as binary: its cell's runs, evaluated on the binary task.
FOLDED = "-fine-folded"
PAPER.update({("binary", method + FOLDED): PAPER[("binary", method)]
              for task, method in list(PAPER) if task == "fine"})
METHODS = ["ctn", "ctn+f", "ctn+s", "ctn+f+s", "ctn+s+pea", "ctn+f+s+pea", "tree-lstm", "tree-lstm-glove",
           "tree-lstm-glove+ema", "tree-lstm-glove+sgd-words+ema"]
METHODS += [method + FOLDED for method in METHODS]
BEGIN, END = "<!-- table2: written by scripts/paper/table2.sh -->", "<!-- /table2 -->"


def model_cell(cell):
    """Which CTN cell table2.sh's --cell made the folder's model.json: "authors" (M started
    at the identity: its Ml has an init diagonal; tanh leaves come with it) or "scaled"
    (every record from before --cell existed); "file" for a model with no M (the shipped
    Tree-LSTM's)."""
    model = cell / "model.json"
    if not model.exists():
        return "scaled"
    params = {p["name"]: p for p in json.loads(model.read_text()).get("parameters", [])}
    if params and "Ml" not in params:
        return "file"
    return "authors" if "diagonal" in params.get("Ml", {}).get("init", {}) else "scaled"


def config_choices(cell):
    """What table2.sh's --optimizer and --lowercase wrote into the folder's config.json:
    (AdaGrad, words). AdaGrad "authors" (restarts every 9 epochs, epsilon 1e-3) or
    "plain"; words "lowercase" or "exact". Records from before the options existed: plain
    and exact."""
    path = cell / "config.json"
    config = json.loads(path.read_text()) if path.exists() else {}
    adagrad = "authors" if config.get("optimizer", {}).get("restart_every_epochs") else "plain"
    words = "lowercase" if config.get("data", {}).get("lowercase") else "exact"
    return adagrad, words


def test_evaluation(summary):
    """The evaluation a run's test figure comes from: the best dev epoch's model evaluated
    again with eval.final_samples subspace draws where the run did so, else the best dev
    epoch's own evaluation."""
    return summary["best_dev"].get("final_evaluation", summary["best_dev"])


def test_draws(method, summary):
    """Subspace draws averaged in a run's test figure; 0 for a model evaluated by its clean
    parent (no subspace sampling)."""
    if "s" not in method.split("+")[1:]:
        return 0
    return test_evaluation(summary).get("samples", summary["config"]["eval"]["samples"])


def cell_folder(runs_dir, task, method):
    """Where a cell's runs are: TASK-METHOD, or for a folded cell the fine cell's."""
    if method.endswith(FOLDED):
        return Path(runs_dir) / f"fine-{method.removesuffix(FOLDED)}"
    return Path(runs_dir) / f"{task}-{method}"


def folded_evaluation(run):
    """(root accuracy %, subspace draws or 0) of a fine run's best model read as binary,
    from the `pens eval --task binary` output table2.sh writes beside it; None before it
    has been written."""
    path = run / "binary-test.txt"
    if not path.exists():
        return None
    text = path.read_text()
    accuracy = re.search(r"root accuracy ([0-9.]+)%", text)
    if not accuracy:
        sys.exit(f"results_trees: {path} has no root accuracy line (a failed pens eval? remove it to run it again)")
    draws = re.search(r"mean of ([0-9]+) subspace draws", text)
    return float(accuracy.group(1)), int(draws.group(1)) if draws else 0


def fingerprint(cell):
    """What makes a cell's runs comparable across machines: its config.json and model.json,
    parsed (their layout aside), less what does not change a run's results (its thread
    count and wall-clock budget: a tree run gives the same bits on any number of threads
    and resumes exactly). Runs are `pens train config.json --seed S`."""
    parts = []
    for name in ("config.json", "model.json"):
        path = cell / name
        content = json.loads(path.read_text()) if path.exists() else {}
        for key in ("threads", "budget_minutes"):
            content.get("run", {}).pop(key, None)
        parts.append(json.dumps(content, sort_keys=True))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cells(runs_dir, invocation):
    rows = []
    for (task, method), paper in PAPER.items():
        cell = cell_folder(runs_dir, task, method)
        folded = method.endswith(FOLDED)
        runs = []
        for summary in sorted(cell.glob("seed*/summary.json")):
            s = json.loads(summary.read_text())
            if s.get("status") != "finished" or "best_dev" not in s:
                continue
            evaluation = folded_evaluation(summary.parent) if folded else None
            if folded and evaluation is None:
                continue
            runs.append((int(summary.parent.name[4:]), s, evaluation))
        if not runs:
            continue
        if folded:
            acc = [e[0] for _, _, e in runs]
            draws = [e[1] for _, _, e in runs]
        else:
            acc = [round(100 * test_evaluation(s)["test_root_accuracy"], 2) for _, s, _ in runs]
            draws = [test_draws(method, s) for _, s, _ in runs]
        adagrad, words = config_choices(cell)
        rows.append({
            "method": method, "task": task, "cell": model_cell(cell), "optimizer": adagrad, "words": words,
            "runs": len(runs),
            "mean": round(statistics.mean(acc), 2),
            "std": round(statistics.stdev(acc), 2) if len(acc) > 1 else 0.0,
            "accuracies": acc, "seeds": [seed for seed, _, _ in runs],
            "minutes": [round(s["wall_seconds"] / 60, 1) for _, s, _ in runs],
            "epochs": [s["epochs"] for _, s, _ in runs],
            "best_dev_epochs": [s["best_dev"]["epoch"] for _, s, _ in runs],
            "test_draws": draws,
            "paper": paper,
            "command": invocation,
            "run_command": f"build/pens train {cell}/config.json --seed S --out {cell}/seedS"
                           + (f"; build/pens eval {cell}/seedS --task binary" if folded else ""),
            "config_sha256": fingerprint(cell),
        })
        if folded:
            rows[-1]["protocol"] = ("the fine-grained runs' best models (picked on fine dev) read as binary: "
                                    "positive where P(3) + P(4) > P(0) + P(1), on the non-neutral test roots")
    return rows


# A record's entries that hold one value per run, in the order of its seeds.
PER_RUN = ["accuracies", "seeds", "minutes", "epochs", "best_dev_epochs", "test_draws"]


def joined(old, new):
    """A cell's record with the runs of new seeds added (same config and model files, no
    seed in common): per-run entries in seed order, the statistics over all of them, and
    both commands."""
    order = sorted(range(len(old["seeds"]) + len(new["seeds"])), key=lambda i: (old["seeds"] + new["seeds"])[i])
    record = {**old, **new}
    for key in PER_RUN:
        values = old.get(key, []) + new.get(key, [])
        if len(values) == len(order):
            record[key] = [values[i] for i in order]
    acc = record["accuracies"]
    record.update(runs=len(acc), mean=round(statistics.mean(acc), 2),
                  std=round(statistics.stdev(acc), 2) if len(acc) > 1 else 0.0)
    if old["command"] != new["command"]:
        record["command"] = f"{old['command']}; {new['command']}"
    return record


def curves(runs_dir):
    """{(task, method): {epoch: (dev, train)}}, each the mean over the cell's finished
    runs, at the epochs every one of them reached."""
    out = {}
    for task, method in PAPER:
        if method.endswith(FOLDED):  # the fine cell's curve
            continue
        per_run = []
        for summary in sorted((Path(runs_dir) / f"{task}-{method}").glob("seed*/summary.json")):
            metrics = summary.parent / "metrics.jsonl"
            if json.loads(summary.read_text()).get("status") == "finished" and metrics.exists():
                per_run.append(curves_table.from_metrics(metrics, "dev_root_accuracy", "train_root_accuracy"))
        if not per_run:
            continue
        epochs = sorted(set.intersection(*(set(c) for c in per_run)))
        out[(task, method)] = {e: tuple(statistics.mean(c[e][i] for c in per_run) for i in (0, 1)) for e in epochs}
    return out


def drawn_curves(data):
    """The curves an earlier report drew ({(task, method): {epoch: (dev, train)}}, from its
    .tsv): a cell whose runs are not under RUNS_DIR keeps its curve, as it keeps its record."""
    return {tuple(name.split("-", 1)): points for name, points in curves_table.read(data, ("dev", "train")).items()}


def draw_curves(cell_curves, image):
    """Writes image's .tsv (one column pair a cell, '?' where it has no epoch) and, where
    gnuplot is installed, the image: fine and binary side by side, dev solid, training
    dashed."""
    if not cell_curves:
        return
    keys = list(cell_curves)
    data = image.with_suffix(".tsv")
    curves_table.write(data, {f"{t}-{m}": cell_curves[(t, m)] for t, m in keys}, ("dev", "train"))
    if not shutil.which("gnuplot"):
        print(f"results_trees: gnuplot not found, {image.name} not drawn ({data.name} written)", file=sys.stderr)
        return
    colors = {"ctn": "#1b9e77", "ctn+f": "#d95f02", "ctn+s": "#7570b3", "ctn+f+s": "#e7298a", "tree-lstm": "#666666", "tree-lstm-glove": "#000000",
              "tree-lstm-glove+ema": "#a6761d", "tree-lstm-glove+sgd-words+ema": "#1f78b4",
              "ctn+s+pea": "#66a61e", "ctn+f+s+pea": "#e6ab02"}
    script = ["set terminal pngcairo size 1200,560 noenhanced", f"set output '{image}'",
              "set datafile missing '?'", "set multiplot layout 1,2", "set grid", "set xlabel 'epoch'",
              "set ylabel 'root accuracy (%)'", "set key below maxrows 2"]
    for task in ["fine", "binary"]:
        plots = []
        for i, (t, method) in enumerate(keys):
            if t != task:
                continue
            plots.append(f"'{data}' using 1:{2 + 2 * i} with lines lw 2 lc rgb '{colors[method]}' "
                         f"title '{method.upper()} dev'")
            plots.append(f"'{data}' using 1:{3 + 2 * i} with lines lw 1 dt 2 lc rgb '{colors[method]}' "
                         f"title '{method.upper()} train'")
        if plots:
            script += [f"set title '{task}: dev (solid) and training sample (dashed), mean over seeds'",
                       "plot " + ", ".join(plots)]
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)


def label(method):
    """A method's name in the tables."""
    if method.endswith(FOLDED):
        return method.removesuffix(FOLDED).upper() + ", fine read as binary"
    return method.upper()


def draws_of(record):
    """A record's test draws for the table: "parent", one count, or the runs' counts
    joined by "+" where they differ (older records lack them: "?")."""
    draws = sorted(set(record.get("test_draws", [])))
    if not draws:
        return "?"
    return "+".join("parent" if d == 0 else str(d) for d in draws)


def markdown(rows):
    lines = [BEGIN, "## Table 2: root accuracy on the Stanford Sentiment Treebank (test set, %)", "",
             "Mean ± std over runs (seeds), each the model of its best dev epoch; the paper's figure beside it "
             "(for the Tree-LSTM, past the paper, Tai, Socher and Manning's with tuned GloVe vectors of 840B tokens "
             "and 300 dimensions; pens' TREE-LSTM learns its word vectors from the treebank alone, its "
             "TREE-LSTM-GLOVE starts from GloVe's 6B-token 100-dimensional vectors; +PEA, the paper's PEA on trees, a KL penalty on "
             "every node's scores between two children, λ ramped as in the MNIST recipes: no paper has it). "
             "A row \"fine read as binary\": the fine-grained runs of its method, each best model (picked on fine "
             "dev) read as binary, positive where P(3) + P(4) > P(0) + P(1), on the non-neutral test roots; its "
             "minutes and epochs are the fine runs'. "
             "Test draws (fine/binary): subspace draws averaged per test tree (the paper: 50; where the epochs' "
             "evaluations used fewer, the best dev epoch's model evaluated again, eval.final_samples); parent, "
             "the clean parent predicts. "
             "Cell (fine/binary): authors, tanh leaves and M started at the identity as in the authors' code; "
             "scaled, leaves E[word] and every weight drawn around zero (scripts/paper/table2.sh --cell); file, "
             "the shipped model file (the Tree-LSTM's). "
             "AdaGrad (fine/binary): plain, pens' defaults; authors, the authors' epsilon of 1e-3 and "
             "restarts every 9 epochs, and from 2026-11-30 their decay of 0.99 an epoch after epoch 250 "
             "(scripts/paper/table2.sh --optimizer). Words: exact, or lowercase (one word "
             "whatever the case, scripts/paper/table2.sh --lowercase).", "",
             "| method | fine | paper | binary | paper | runs | mean epochs | minutes per run | test draws | cell "
             "| AdaGrad | words |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for method in METHODS:
        by = {r["task"]: r for r in rows if r["method"] == method}
        if not by:
            continue
        def cell(task):
            r = by.get(task)
            return f"{r['mean']:.2f} ± {r['std']:.2f}" if r else "-"
        runs = "/".join(str(by[t]["runs"]) if t in by else "-" for t in ["fine", "binary"])
        epochs = "/".join(f"{statistics.mean(by[t]['epochs']):.1f}" if t in by else "-" for t in ["fine", "binary"])
        minutes = "/".join(f"{statistics.mean(by[t]['minutes']):.0f}" if t in by else "-" for t in ["fine", "binary"])
        draws = "/".join(draws_of(by[t]) if t in by else "-" for t in ["fine", "binary"])
        kinds = "/".join(by[t].get("cell", "scaled") if t in by else "-" for t in ["fine", "binary"])
        adagrad = "/".join(by[t].get("optimizer", "plain") if t in by else "-" for t in ["fine", "binary"])
        words = "/".join(by[t].get("words", "exact") if t in by else "-" for t in ["fine", "binary"])
        def paper(task):
            return "-" if PAPER.get((task, method)) is None else PAPER[(task, method)]
        lines.append(f"| {label(method)} | {cell('fine')} | {paper('fine')} | {cell('binary')} | "
                     f"{paper('binary')} | {runs} | {epochs} | {minutes} | {draws} | {kinds} | {adagrad} | {words} |")
    invocations = sorted({r["command"] for r in rows})
    lines += ["", "Made by " + ", ".join(f"`{c}`" for c in invocations) + "; each run is "
              "`build/pens train runs/table2/TASK-METHOD/config.json --seed S --out runs/table2/TASK-METHOD/seedS` "
              "(seeds in docs/results.json)."]
    return "\n".join(lines + [END]) + "\n"


def same_runs(record):
    """What identifies the runs behind a cell's record."""
    return record["accuracies"], record.get("seeds"), record["epochs"]


def recorded_runs(runs_dir, json_path):
    """The run folders (TASK-METHOD/seedS) of the seeds a record holds, for each cell whose
    config and model files under runs_dir are the ones its runs were made with (the same
    fingerprint). A record without a fingerprint cannot say, so its seeds are not listed."""
    records = json.loads(json_path.read_text()) if json_path.exists() else []
    folders = []
    for r in records:
        key = (r.get("task"), r["method"])
        if key not in PAPER or r["method"].endswith(FOLDED) or "config_sha256" not in r:
            continue
        cell = cell_folder(runs_dir, *key)
        if (cell / "config.json").exists() and fingerprint(cell) == r["config_sha256"]:
            folders += [f"{cell.name}/seed{seed}" for seed in r["seeds"]]
    return folders


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--recorded":
        print("\n".join(recorded_runs(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    measured = cells(sys.argv[1], sys.argv[4] if len(sys.argv) == 5 else "scripts/paper/table2.sh")
    json_path = Path(sys.argv[3])
    records = json.loads(json_path.read_text()) if json_path.exists() else []
    # Records this report does not own: MNIST's, and tree runs outside Table 2's cells
    # (other methods, written by hand from runs that finished).
    others = [r for r in records if (r.get("task"), r["method"]) not in PAPER]
    recorded = {(r["task"], r["method"]): r for r in records if (r.get("task"), r["method"]) in PAPER}
    rows = []
    for key in PAPER:  # the paper's order; a cell measured now replaces its record
        fresh = [r for r in measured if (r["task"], r["method"]) == key]
        old = recorded.get(key)
        if fresh and old and same_runs(old) == same_runs(fresh[0]):
            # The same runs reported again (a campaign over other cells reports every
            # cell): the record stays, with the command that made them; what it lacks
            # from before the report wrote it (test draws) is added.
            fresh = [{**old, "test_draws": old.get("test_draws", fresh[0]["test_draws"]),
                      "config_sha256": fresh[0]["config_sha256"]}]
        elif fresh and old and old.get("config_sha256") == fresh[0]["config_sha256"] \
                and not set(old.get("seeds", [])) & set(fresh[0]["seeds"]):
            # New seeds of the same cell (runs from another machine, whose earlier runs are
            # gone): they join the record.
            fresh = [joined(old, fresh[0])]
        elif fresh and old:
            # The record it replaces goes with it (results accumulate).
            fresh[0]["superseded"] = [{k: v for k, v in old.items() if k != "superseded"}] + old.get("superseded", [])
        rows += fresh or ([old] if old else [])
    json_path.write_text(json.dumps(others + rows, indent=2) + "\n")
    md_path = Path(sys.argv[2])
    text = md_path.read_text() if md_path.exists() else ""
    section = markdown(rows)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    md_path.write_text(text)
    image = md_path.parent / "img" / "table2-curves.png"
    measured_curves = curves(sys.argv[1])
    kept = drawn_curves(image.with_suffix(".tsv"))
    draw_curves({key: measured_curves.get(key) or kept[key] for key in PAPER if key in measured_curves or key in kept},
                image)


if __name__ == "__main__":
    main()
