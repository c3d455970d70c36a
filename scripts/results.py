#!/usr/bin/env python3
"""Collects the finished runs of scripts/table1.sh into docs/results.md and docs/results.json.

usage: scripts/results.py RUNS_DIR RESULTS.md RESULTS.json

A run is a folder RUNS_DIR/<method>-<labels>/split<k>/ holding summary.json (written by
pens train) and command.txt. Cells group the runs of one method and label count; a
cell already in RESULTS.json whose runs are not under RUNS_DIR stays as it was.
"""
import json
import re
import statistics
import sys
from pathlib import Path

# The paper's Table 1 (test error %, MNIST) and its fully supervised figures; for the
# methods after it, their own papers' figures (VAT: Miyato et al. 2018).
PAPER = {
    ("vat", 100): 1.36, ("vat", 1000): 1.27, ("vat-ema", 100): 1.36, ("vat-ema", 1000): 1.27,
    ("pea", 100): 10.79, ("pea", 600): 2.44, ("pea", 1000): 2.23, ("pea", 3000): 1.91,
    ("pea-authors", 600): 2.44, ("pea-authors", 1000): 2.23, ("pea-authors", 3000): 1.91,
    ("pea+", 100): 5.21, ("pea+", 600): 2.87, ("pea+", 1000): 2.64, ("pea+", 3000): 2.30,
    ("sde", 100): 22.89, ("sde", 600): 7.59, ("sde", 1000): 5.80, ("sde", 3000): 3.60,
    ("pea", 60000): 1.08, ("sde", 60000): 1.05,
}
METHOD_ORDER = {"raw": 0, "sde": 1, "pea": 2, "pea-authors": 3, "pea+": 4, "supervised-bn": 5, "pi": 6,
                "mean-teacher": 7, "pseudo-label": 8, "vat": 9, "vat-ema": 10}


def cells(runs_dir):
    found = {}
    for summary_path in sorted(Path(runs_dir).glob("*/split*/summary.json")):
        m = re.fullmatch(r"(raw|sde|pea\+?|pea-authors|supervised-bn|pi|mean-teacher|pseudo-label|vat|vat-ema)-(\d+|supervised)", summary_path.parent.parent.name)
        if not m:
            continue
        summary = json.loads(summary_path.read_text())
        if summary.get("status") != "finished" or "test_error" not in summary:
            continue
        labels = 60000 if m.group(2) == "supervised" else int(m.group(2))
        command_file = summary_path.parent / "command.txt"
        command = command_file.read_text().strip() if command_file.exists() else ""
        found.setdefault((m.group(1), labels), []).append((summary_path.parent.name, summary, command))
    out = []
    for (method, labels), runs in sorted(found.items(), key=lambda kv: (kv[0][1], METHOD_ORDER[kv[0][0]])):
        errors = [100.0 * s["test_error"] for _, s, _ in runs]
        minutes = [s["wall_seconds"] / 60.0 for _, s, _ in runs]
        # One command stands for the cell: the split seed varies over the splits.
        command = re.sub(r"--split-seed \d+", "--split-seed S", runs[0][2])
        # table1.sh runs a copy of build/pens kept in the runs folder.
        command = re.sub(r"^\S*/pens ", "build/pens ", command)
        command = re.sub(r"/split\d+", "/splitS", command)
        out.append({
            "method": method,
            "labels": labels,
            "splits": len(runs),
            "mean": round(statistics.fmean(errors), 3),
            "std": round(statistics.stdev(errors), 3) if len(errors) > 1 else 0.0,
            "errors": [round(e, 3) for e in errors],
            "minutes": [round(x, 2) for x in minutes],
            "epochs": [round(s["epochs"], 2) for _, s, _ in runs],
            "paper": PAPER.get((method, labels)),
            "command": command,
        })
    return out


def markdown(rows):
    lines = [
        "# Results: the paper's Tables 1 and 2 on this machine",
        "",
        "Table 2 (sentiment trees) is further down. Table 1 is written by `scripts/results.py` from",
        "the runs of `scripts/table1.sh`; every figure is",
        "MNIST test error (%) at the epoch of best validation error (10,000 validation images",
        "held out of the training set), mean ± standard deviation over the labeled-set splits.",
        "The paper's figure stands beside each cell (for VAT, its own paper's); \"gap\" is ours minus it.",
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
    lines += ["", "## Per split, and the command of each cell", ""]
    for r in rows:
        lines.append(f"- **{r['method']}, {r['labels']} labels**: "
                     + ", ".join(f"{e:.2f}%" for e in r["errors"])
                     + f"  \n  `{r['command']}` (S = 1..{r['splits']})")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    rows = cells(sys.argv[1])
    json_path = Path(sys.argv[3])
    records = json.loads(json_path.read_text()) if json_path.exists() else []
    # Records of other kinds (tree cells, data-parallel runs) are kept, and so are the
    # cells whose runs are not in this runs folder (measured on another machine, or in a
    # folder since removed): the record accumulates, a campaign only adds or updates.
    others = [r for r in records if "task" in r or "kind" in r]
    measured = {(r["method"], r["labels"]) for r in rows}
    rows += [r for r in records if r not in others and (r["method"], r["labels"]) not in measured]
    rows.sort(key=lambda r: (r["labels"], METHOD_ORDER[r["method"]]))
    json_path.write_text(json.dumps(rows + others, indent=2) + "\n")
    md_path = Path(sys.argv[2])
    # Hand-written notes below the marker survive regeneration.
    marker = "<!-- notes: kept when the table is regenerated -->"
    notes = ""
    if md_path.exists() and marker in md_path.read_text():
        notes = md_path.read_text().split(marker, 1)[1]
    md_path.write_text(markdown(rows) + "\n" + marker + notes)


if __name__ == "__main__":
    main()
