#!/usr/bin/env python3
"""Collects the finished runs of scripts/paper/table1.sh into docs/results.json and the list of
every recipe in docs/results-history.md (the tables of docs/results.md are drawn from the
JSON by scripts/paper/results_tables.py).

usage: scripts/paper/results.py RUNS_DIR HISTORY.md RESULTS.json
       scripts/paper/results.py --recorded RESULTS.json

A run is a folder RUNS_DIR/<method>-<labels>/split<k>/ holding summary.json (written by
pens train) and command.txt. Cells group the runs of one method and label count, by split
seed k; the splits of a cell already in RESULTS.json whose runs are not under RUNS_DIR
stay as recorded, so a cell can grow over campaigns whose runs folders are gone.

In the img folder beside the history it writes table1-curves.tsv, every finished run's
validation and test error by epoch (from its metrics.jsonl), and table1-curves.png (with
gnuplot where it is installed): the validation curves, a panel per label count. A run
whose folder is gone keeps the curve the .tsv holds, as its cell keeps its record.
"""
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import curves_table
import table1_methods
from results_tables import SUCCESSORS, TABLE1

# The order of the methods in the history's tables: the registry's (a new method goes at its end).
METHOD_ORDER = {method: rank for rank, method in enumerate(table1_methods.NAMES)}

# The published figure each recipe is measured against: its method's row in the tables of
# docs/results.md (the paper's Table 1, and for the methods after it their own papers'),
# and for the combinations built on the ladder, whose rows have no published figure, the
# published ladder's.
PUBLISHED = [(recipes, figures) for _, recipes, figures in TABLE1 + SUCCESSORS if figures]
PAPER = {(recipe, n): figure for recipes, figures in PUBLISHED for recipe in recipes for n, figure in figures.items()}
LADDER = next(figures for name, _, figures in SUCCESSORS if name == "ladder network")
PAPER.update({(m, n): figure for m in METHOD_ORDER
              if m.startswith("ladder-") and not any(m in recipes for recipes, _ in PUBLISHED)
              for n, figure in LADDER.items()})

# A run folder's name is METHOD-LABELS (matched whole, so pea+-long is not read as pea+).
CELL = re.compile("(" + "|".join(map(re.escape, METHOD_ORDER)) + r")-(\d+|supervised)")


def folder(method, labels):
    """A cell's folder name, as CELL reads it: METHOD-LABELS, METHOD-supervised with every label."""
    return f"{method}-{'supervised' if labels == 60000 else labels}"


def read_record(json_path):
    """The record at json_path (none where there is no file), as (Table 1's cells, the
    records of other kinds: tree cells, data-parallel runs, cells measured run by run)."""
    records = json.loads(json_path.read_text()) if json_path.exists() else []
    def other(r):
        return "task" in r or "kind" in r
    return [r for r in records if not other(r)], [r for r in records if other(r)]


def typed(command):
    """A run's command as a user types it: build/pens for table1.sh's copy of it."""
    return re.sub(r"^\S*/pens ", "build/pens ", command)


def template(command):
    """One command standing for a cell's runs: the split seed is S."""
    return re.sub(r"/split\d+", "/splitS", re.sub(r"--split-seed \d+", "--split-seed S", command))


def measured_splits(runs_dir):
    """The finished runs under runs_dir, by cell and split seed: {(method, labels): {seed: split}}."""
    found = {}
    for summary_path in sorted(Path(runs_dir).glob("*/split*/summary.json")):
        m = CELL.fullmatch(summary_path.parent.parent.name)
        seed = re.fullmatch(r"split(\d+)", summary_path.parent.name)
        if not m or not seed:
            continue
        summary = json.loads(summary_path.read_text())
        if summary.get("status") != "finished" or "test_error" not in summary:
            continue
        labels = 60000 if m.group(2) == "supervised" else int(m.group(2))
        command_file = summary_path.parent / "command.txt"
        found.setdefault((m.group(1), labels), {})[int(seed.group(1))] = {
            "error": 100.0 * summary["test_error"],
            "minutes": summary["wall_seconds"] / 60.0,
            "epochs": summary["epochs"],
            "best_validation_epoch": summary.get("best_validation", {}).get("epoch"),
            "command": typed(command_file.read_text().strip()) if command_file.exists() else "",
            "metrics": summary_path.parent / "metrics.jsonl",
        }
    return found


def measured_curves(measured):
    """{(method, labels, seed): curve} of the finished runs measured_splits found."""
    return {(method, labels, seed): curves_table.from_metrics(split["metrics"], "validation_error", "test_error")
            for (method, labels), splits in measured.items() for seed, split in splits.items()
            if split["metrics"].exists()}


RUN_CURVE = re.compile(r"(.+)-(\d+) split(\d+)")  # a curve's name in the .tsv: METHOD-LABELS splitK
CURVE_SUFFIXES = ("validation", "test")


def drawn_curves(data):
    """The curves an earlier report wrote ({(method, labels, seed): curve}, from its .tsv)."""
    out = {}
    for name, points in curves_table.read(data, CURVE_SUFFIXES).items():
        method, labels, seed = RUN_CURVE.fullmatch(name).groups()
        out[(method, int(labels), int(seed))] = points
    return out


def draw_curves(curves, image):
    """Writes image's .tsv (a column pair a run) and, where gnuplot is installed, the image:
    validation error by epoch (log scale), a panel per label count, a colour per method,
    beside the published figure of the cell where there is one."""
    if not curves:
        return
    def order(method):  # a method no longer registered (its curve kept from before) goes last
        return METHOD_ORDER.get(method, len(METHOD_ORDER))

    keys = sorted(curves, key=lambda k: (k[1], order(k[0]), k[2]))
    data = image.with_suffix(".tsv")
    curves_table.write(data, {f"{m}-{n} split{k}": curves[(m, n, k)] for m, n, k in keys}, CURVE_SUFFIXES)
    if not shutil.which("gnuplot"):
        print(f"results: gnuplot not found, {image.name} not drawn ({data.name} written)", file=sys.stderr)
        return
    label_counts = sorted({n for _, n, _ in keys})
    methods = sorted({m for m, _, _ in keys}, key=order)
    palette = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
    colour = {m: palette[i % len(palette)] for i, m in enumerate(methods)}
    script = ["set terminal pngcairo size " + f"{420 * len(label_counts) + 80},520 noenhanced", f"set output '{image}'",
              "set datafile missing '?'", f"set multiplot layout 1,{len(label_counts)}", "set grid",
              "set xlabel 'epoch'", "set ylabel 'validation error (%)'", "set logscale y",
              "set ytics (0.5, 0.7, 1, 1.5, 2, 3, 5, 10, 20)", "set yrange [0.5:20]", "set key top right"]
    for n in label_counts:
        plots = []
        for i, (m, labels, k) in enumerate(keys):
            if labels == n:
                plots.append(f"'{data}' using 1:{2 + 2 * i} with lines lw 1.5 lc rgb '{colour[m]}' title '{m} split {k}'")
        published = sorted({PAPER[(m, n)] for m, labels, _ in keys if labels == n and PAPER.get((m, n))})
        if published:
            plots.append(f"{published[0]} with lines dt 2 lw 1.5 lc rgb 'black' title 'published {published[0]:.2f} (test)'")
        script += [f"set title '{'all' if n == 60000 else n} labels'", "plot " + ", ".join(plots)]
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)


def recorded_splits(record):
    """A cell's record split by split seed, as measured_splits gives them. Records written
    before split seeds were kept hold splits 1..N, with one command for all."""
    seeds = record.get("split_seeds") or list(range(1, record["splits"] + 1))
    n = len(seeds)
    commands = record.get("commands") or [record["command"].replace("splitS", f"split{k}")
                                          .replace("--split-seed S", f"--split-seed {k}") for k in seeds]
    best = record.get("best_validation_epochs") or [None] * n
    # What a record says of its splits in words: per split, or one note of a one-split record.
    notes = record.get("notes") or ({str(seeds[0]): record["note"]} if "note" in record and n == 1 else {})
    return {k: {"error": record["errors"][i], "minutes": record["minutes"][i], "epochs": record["epochs"][i],
                "best_validation_epoch": best[i], "command": commands[i], "note": notes.get(str(k))}
            for i, k in enumerate(seeds)}


def cell(method, labels, splits):
    """The record of one cell from its splits {seed: split}."""
    seeds = sorted(splits)
    runs = [splits[k] for k in seeds]
    errors = [r["error"] for r in runs]
    out = {
        "method": method,
        "labels": labels,
        "splits": len(runs),
        "split_seeds": seeds,
        "mean": round(statistics.fmean(errors), 3),
        "std": round(statistics.stdev(errors), 3) if len(errors) > 1 else 0.0,
        "errors": [round(e, 3) for e in errors],
        "minutes": [round(r["minutes"], 2) for r in runs],
        "epochs": [round(r["epochs"], 2) for r in runs],
        "paper": PAPER.get((method, labels)),
        "command": template(runs[-1]["command"]),
        "commands": [r["command"] for r in runs],
    }
    if all(r["best_validation_epoch"] is not None for r in runs):
        out["best_validation_epochs"] = [r["best_validation_epoch"] for r in runs]
    notes = {str(k): splits[k]["note"] for k in seeds if splits[k].get("note")}
    if notes:
        out["notes"] = notes
    return out


def consistency_table(records):
    """The consistency family's cells run one by one (records of kind "consistency", written
    by hand with their notes), as rows beside the table's."""
    lines = [
        "",
        "The consistency family's cells measured run by run rather than by `scripts/paper/table1.sh`",
        "(records of kind `consistency` in results.json, each with its note and command; the",
        "prose is under \"Beyond the paper\" below):",
        "",
        "| method | variant | labels | splits | test error (%) | published | gap | minutes per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (r["labels"], METHOD_ORDER.get(r["method"], 99))):
        published = r.get("published")
        paper = "" if published is None else f"{published:.2f}"
        gap = "" if published is None else f"{r['mean'] - published:+.2f}"
        lines.append(f"| {r['method']} | {r.get('variant', '')} | {r['labels']} | {r['splits']} "
                     f"| {r['mean']:.2f} ± {r['std']:.2f} | {paper} | {gap} | {statistics.fmean(r['minutes']):.1f} |")
    return lines


def markdown(rows, consistency):
    lines = [
        "# Results: every recipe, every run",
        "",
        "The tables in the papers' layouts, with pens' best recipe per method, are in",
        "[results.md](results.md); this page holds every recipe that was run, split by split,",
        "and what was measured about them. Table 2's records (sentiment trees) are further down.",
        "The table below is written by `scripts/paper/results.py` from the runs of `scripts/paper/table1.sh`;",
        "every figure is MNIST test error (%) at the epoch of best validation error (10,000",
        "validation images held out of the training set), mean ± standard deviation over the",
        "labeled-set splits. The paper's figure stands beside each cell (for VAT and ladder",
        "networks, their own papers'); \"gap\" is ours minus it.",
        "",
        "| method | labels | splits | test error (%) | paper | gap | epochs per run | minutes per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        labels = "all (supervised)" if r["labels"] == 60000 else str(r["labels"])
        paper = "" if r["paper"] is None else f"{r['paper']:.2f}"
        gap = "" if r["paper"] is None else f"{r['mean'] - r['paper']:+.2f}"
        lines.append(
            f"| {r['method']} | {labels} | {r['splits']} | {r['mean']:.2f} ± {r['std']:.2f} | {paper} | {gap} "
            f"| {statistics.fmean(r['epochs']):.1f} | {statistics.fmean(r['minutes']):.1f} |")
    if consistency:
        lines += consistency_table(consistency)
    lines += ["", "## Per split, and the command of each cell", ""]
    for r in rows:
        seeds = r.get("split_seeds") or list(range(1, r["splits"] + 1))
        lines.append(f"- **{r['method']}, {r['labels']} labels**: "
                     + ", ".join(f"{e:.2f}%" for e in r["errors"])
                     + f"  \n  `{r['command']}` (S = {', '.join(map(str, seeds))})")
    return "\n".join(lines) + "\n"


def recorded_runs(json_path):
    """The run folder names (METHOD-LABELS/splitK) of the splits the record at json_path holds."""
    cells, _ = read_record(json_path)
    return [f"{folder(r['method'], r['labels'])}/split{k}" for r in cells for k in recorded_splits(r)]


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--recorded":
        print("\n".join(recorded_runs(Path(sys.argv[2]))))
        return
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    measured = measured_splits(sys.argv[1])
    curves = measured_curves(measured)  # before the recorded splits, which have no runs, join them
    json_path = Path(sys.argv[3])
    # Records of other kinds are kept, and so are the splits whose runs are not in this
    # runs folder (measured by an earlier campaign whose folder is gone, or on another
    # machine): the record accumulates, a campaign only adds splits or updates them. A cell
    # with no new split stays exactly as it was recorded.
    cells, others = read_record(json_path)
    rows = []
    for r in cells:
        key = (r["method"], r["labels"])
        if key not in measured:
            rows.append(r)
            continue
        recorded = recorded_splits(r)
        for seed, split in measured[key].items():
            # The same run recorded before keeps what its record says of it in words.
            was = recorded.get(seed)
            if was and (round(was["error"], 3), round(was["minutes"], 2)) == (round(split["error"], 3),
                                                                               round(split["minutes"], 2)):
                split["note"] = was["note"]
        measured[key] = {**recorded, **measured[key]}
    rows += [cell(method, labels, splits) for (method, labels), splits in measured.items()]
    rows.sort(key=lambda r: (r["labels"], METHOD_ORDER[r["method"]]))
    json_path.write_text(json.dumps(rows + others, indent=2) + "\n")
    md_path = Path(sys.argv[2])
    # Hand-written notes below the marker survive regeneration.
    marker = "<!-- notes: kept when the table is regenerated -->"
    notes = ""
    if md_path.exists() and marker in md_path.read_text():
        notes = md_path.read_text().split(marker, 1)[1]
    consistency = [r for r in others if r.get("kind") == "consistency"]
    md_path.write_text(markdown(rows, consistency) + "\n" + marker + notes)
    image = md_path.parent / "img" / "table1-curves.png"
    draw_curves({**drawn_curves(image.with_suffix(".tsv")), **curves}, image)


if __name__ == "__main__":
    main()
