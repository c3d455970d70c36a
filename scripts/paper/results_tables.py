#!/usr/bin/python3
"""Writes the opening of docs/results.md from docs/results.json: the paper's Table 1, its
successors and Table 2 in the papers' layouts (pens' best recipe per method, the published
figure beside it), one figure per table (drawn with matplotlib into the img folder beside
the markdown file), and which record each cell comes from. Everything between the markers
below is rewritten (a page without them gets them at its end); the rest of the page is
left as it is.

usage: results_tables.py RESULTS.json RESULTS.md [README.md] [--check]

With README.md, its headline table (between the same markers) is written too. --check
writes nothing and exits 1 if a page differs from what would be written.

scripts/paper/table1.sh and scripts/paper/table2.sh run it after recording their runs; the test suite
runs it with --check (tests/python/test_docs.py).
"""
import json
import re
import statistics
import sys
from pathlib import Path

from results_trees import FOLDED  # the suffix of a "fine read as binary" record's method
from table1_methods import NAMES, family

BEGIN = "<!-- tables: written by scripts/paper/results_tables.py from docs/results.json -->"
END = "<!-- /tables -->"
HISTORY = "results-history.md"

# Table 1 of the paper: MNIST test error (%) by labeled-set size; "all" is the fully
# supervised figure of its section 5.1 (dropout 1.05, PEA 1.08). pens' records of each
# row are the recipes the registry puts in its family (table1-methods.json); the best of
# them stands for it.
LABELS = [100, 600, 1000, 3000, 60000]
TABLE1 = [(name, family(name), figures) for name, figures in [
    ("NN", {100: 25.81, 600: 11.44, 1000: 10.70, 3000: 6.04}),
    ("SDE (dropout)", {100: 22.89, 600: 7.59, 1000: 5.80, 3000: 3.60, 60000: 1.05}),
    ("SDE+", {100: 13.54, 600: 5.68, 1000: 4.71, 3000: 3.00}),
    ("PEA", {100: 10.79, 600: 2.44, 1000: 2.23, 3000: 1.91, 60000: 1.08}),
    ("PEA+", {100: 5.21, 600: 2.87, 1000: 2.64, 3000: 2.30}),
]]
# The methods that came after the paper, as pens declares them, with their own papers'
# figures where those papers report permutation-invariant MNIST at these sizes (VAT:
# Miyato et al. 2018; ladder networks: Rasmus et al. 2015). Consistency records count
# whatever their variant.
SUCCESSORS = [(name, family(name), figures) for name, figures in [
    ("supervised, batch norm", {}),
    ("Π-model", {}),
    ("mean teacher", {}),
    ("pseudo-label", {}),
    ("VAT", {100: 1.36, 1000: 1.27}),
    ("ladder network", {100: 1.06, 1000: 0.84, 60000: 0.57}),
    # Combinations no single paper ran, declared on the same graph (docs/pseudo-ensembles.md).
    ("ladder + VAT's adversarial child", {}),
    ("ladder's child beside VAT's child", {}),
    ("ladder + PEA's V^x between two children", {}),
]]
# Every registered method is in a row.
assert {m for _, recipes, _ in TABLE1 + SUCCESSORS for m in recipes} == set(NAMES), "a method's family is no row"
# The splits a cell needs to stand as the best of pens at a label count: 5 at 100 labels
# (whose splits differ most), 3 above.
PROTOCOL_SPLITS = {100: 5}
# What pens aims at, at each label count: targets set from the best published
# permutation-invariant figures (ladder networks 1.06 / 0.84 / 0.57 at 100 / 1,000 / all
# labels, Improved GAN 0.93 at 100); at 600 and 3,000 labels, where the ladder paper reports
# none, between their neighbours'.
GOAL = {100: 1.00, 600: 1.00, 1000: 0.85, 3000: 0.80, 60000: 0.70}
# Table 2 of the paper: root accuracy (%) on the Stanford Sentiment Treebank's test set.
# pens runs the compact tensor network's four columns (scripts/paper/table2.sh's cells); the
# other three are other papers' models, shown as the paper shows them. Past the paper, the
# constituency Tree-LSTM (Tai, Socher, Manning 2015), which pens runs from a model file.
TABLE2 = [
    ("RNTN", None, {"fine": 45.7, "binary": 85.4}),
    ("PV", None, {"fine": 48.7, "binary": 87.8}),
    ("DCNN", None, {"fine": 48.5, "binary": 86.8}),
    ("CTN", "ctn", {"fine": 43.1, "binary": 83.4}),
    ("CTN+F", "ctn+f", {"fine": 46.1, "binary": 85.3}),
    ("CTN+S", "ctn+s", {"fine": 47.5, "binary": 87.8}),
    ("CTN+F+S", "ctn+f+s", {"fine": 48.4, "binary": 88.9}),
    ("Tree-LSTM", "tree-lstm", {"fine": 51.0, "binary": 88.0}),
    ("Tree-LSTM, GloVe", "tree-lstm-glove", {"fine": 51.0, "binary": 88.0}),
    ("Tree-LSTM, GloVe, averaged weights", "tree-lstm-glove+ema", {"fine": 51.0, "binary": 88.0}),
    ("Tree-LSTM, GloVe, words on SGD, averaged weights", "tree-lstm-glove+sgd-words+ema", {"fine": 51.0, "binary": 88.0}),
]
TABLE2_METHOD = {name: method for name, method, _ in TABLE2}  # "CTN+F" -> "ctn+f"
TASKS = [("fine", "Fine-grained"), ("binary", "Binary")]
# pens' rows of Table 2: (task, label, suffix of the records' method). The binary task has
# two: models trained on it (the paper's protocol, and the table's cells the README
# quotes), and the fine-grained runs' models read as binary (scripts/paper/results_trees.py's
# "fine read as binary" records), measured beside them (docs/results.md).
TABLE2_ROWS = [("fine", "pens", ""), ("binary", "pens, trained on binary", ""),
               ("binary", "pens, fine read as binary", FOLDED)]
# The README's headline: (what, which table, row, column).
HEADLINE = [
    ("PEA, MNIST, 100 labels", "table1", "PEA", 100),
    ("PEA, MNIST, 600 labels", "table1", "PEA", 600),
    ("PEA+, MNIST, 100 labels", "table1", "PEA+", 100),
    ("PEA, MNIST, all labels", "table1", "PEA", 60000),
    ("ladder network, MNIST, 100 labels", "successors", "ladder network", 100),
    ("CTN+F+S, SST fine-grained (accuracy)", "table2", "CTN+F+S", ("fine", "")),
    ("CTN+F+S, SST binary (accuracy)", "table2", "CTN+F+S", ("binary", "")),
    ("Tree-LSTM, GloVe 6B vectors, averaged weights (published: 840B vectors), SST fine-grained (accuracy)", "table2",
     "Tree-LSTM, GloVe, averaged weights", ("fine", "")),
]


def label_name(labels):
    return "all" if labels == 60000 else f"{labels:,}"


def mnist_records(records):
    """Records of MNIST cells that stand in the tables: table1.sh's and the consistency
    family's (not the demo's, nor the data-parallel checks)."""
    return [r for r in records if "labels" in r and r.get("kind") in (None, "consistency")]


def best(candidates):
    """The recipe that stands for a method: the most splits (the protocol's 5 at 100 labels,
    3 above; a one-split trial does not outrank them), then the lowest mean."""
    return min(candidates, key=lambda r: (-r["splits"], r["mean"])) if candidates else None


def mnist_cells(records, families, label_list):
    cells = {}
    for name, methods, _ in families:
        for labels in label_list:
            found = best([r for r in records if r["method"] in methods and r["labels"] == labels])
            if found:
                cells[(name, labels)] = found
    return cells


def config_of(command):
    """The config file a record's command trains, when it names one."""
    m = re.search(r"\b(examples/\S+\.json)", command or "")
    return m.group(1) if m else None


def recipe(record):
    """How a cell's recipe is named in the tables: its record, with its variant if any."""
    variant = record.get("variant")
    return record["method"] + (f" ({variant})" if variant else "")


def spread(mean, std, n):
    """A cell's figure: mean ± std (n), or the one run's figure (1)."""
    return f"{mean:.2f} ({n})" if n == 1 else f"{mean:.2f} ± {std:.2f} ({n})"


def error_cell(record):
    return spread(record["mean"], record["std"], record["splits"])


def mnist_table(groups, label_list, cells):
    """Rows of pens' cells and the published figures for each family of each group
    (families, the published row's name), then the best of pens at each label count."""
    lines = ["| method | | " + " | ".join(label_name(n) for n in label_list) + " |",
             "|---|---|" + "---|" * len(label_list)]
    for families, published_name in groups:
        for name, _, published in families:
            ours = [error_cell(cells[(name, n)]) if (name, n) in cells else "—" for n in label_list]
            theirs = [f"{published[n]:.2f}" if n in published else "—" for n in label_list]
            lines.append(f"| {name} | pens | " + " | ".join(ours) + " |")
            lines.append(f"| | {published_name} | " + " | ".join(theirs) + " |")
    best_cells = []
    for n in label_list:
        best = best_of_pens(n, cells)
        best_cells.append(f"{error_cell(cells[(best, n)])}, {best}" if best else "—")
    lines.append("| **best of pens** | | " + " | ".join(best_cells) + " |")
    lines.append("| **goal** | | " + " | ".join(goal_cell(n, cells) for n in label_list) + " |")
    return lines


def best_of_pens(n, cells):
    """The family whose cell has the lowest mean at n labels among the cells with the
    protocol's splits; None where there is none."""
    standing = [(r["mean"], name) for (name, labels), r in cells.items()
                if labels == n and r["splits"] >= PROTOCOL_SPLITS.get(n, 3)]
    return min(standing)[1] if standing else None


def goal_cell(n, cells):
    """The goal at a label count, and whether the best of pens meets it (by how much not)."""
    if n not in GOAL:
        return "—"
    best = best_of_pens(n, cells)
    if not best:
        return f"≤ {GOAL[n]:.2f}"
    mean = cells[(best, n)]["mean"]
    miss = mean - GOAL[n]
    if miss <= 1e-9:
        return f"≤ {GOAL[n]:.2f}: met"
    # A miss that two decimals would show as 0.00 is shown to the record's three.
    shown = f"{miss:.2f}" if miss >= 0.005 else f"{miss:.3f} ({mean:.3f} before rounding)"
    return f"≤ {GOAL[n]:.2f}: missed by {shown}"


def recipe_table(families, label_list, cells):
    lines = ["| method | labels | recipe | config | epochs | minutes per run |", "|---|---|---|---|---|---|"]
    for name, _, _ in families:
        for n in label_list:
            r = cells.get((name, n))
            if not r:
                continue
            config = config_of(r.get("command"))
            config_link = f"[{Path(config).name}](../{config})" if config else "—"
            epochs = f"{statistics.fmean(r['epochs']):.0f}" if r.get("epochs") else "—"
            lines.append(f"| {name} | {label_name(n)} | {recipe(r)} | {config_link} | {epochs} "
                         f"| {statistics.fmean(r['minutes']):.1f} |")
    return lines


def tree_cells(records):
    """Table 2's cells: the records scripts/paper/table2.sh keeps (task and one of the four
    methods); the variants measured beside them are in the history page."""
    names = {method + suffix for _, method, _ in TABLE2 if method for _, _, suffix in TABLE2_ROWS}
    return {(r["task"], r["method"]): r for r in records if r.get("task") and r["method"] in names}


def table2(cells):
    lines = ["| task | | " + " | ".join(name for name, _, _ in TABLE2) + " |",
             "|---|---|" + "---|" * len(TABLE2)]
    for task, title in TASKS:
        for row_task, label, suffix in TABLE2_ROWS:
            if row_task != task:
                continue
            ours = []
            for _, method, _ in TABLE2:
                r = cells.get((task, method + suffix)) if method else None
                ours.append(spread(r["mean"], r.get("std", 0.0), r.get("runs", 1)) if r else "—")
            lines.append(f"| {title} | {label} | " + " | ".join(ours) + " |")
            title = ""
        lines.append(f"| | paper | " + " | ".join(f"{paper[task]:.1f}" for _, _, paper in TABLE2) + " |")
    return lines


def table2_runs(cells):
    def mean_of(values):
        return f"{statistics.fmean(values):.1f}" if values else "—"

    lines = ["| task | method | seeds | epochs | minutes per run | test draws |", "|---|---|---|---|---|---|"]
    titles = dict(TASKS)
    for task, label, suffix in TABLE2_ROWS:
        title = titles[task] + (", fine read as binary" if suffix else "")
        for name, method, _ in TABLE2:
            r = cells.get((task, method + suffix)) if method else None
            if not r:
                continue
            draws = sorted(set(r.get("test_draws", [])))
            draws_text = "clean parent" if draws == [0] else ", ".join(map(str, draws)) or "—"
            epochs = f"{statistics.fmean(r['epochs']):.0f}" if r.get("epochs") else "—"
            lines.append(f"| {title} | {name} | {', '.join(map(str, r.get('seeds', []))) or '—'} | {epochs} "
                         f"| {mean_of(r.get('minutes'))} | {draws_text} |")
    return lines


def precision_table(records):
    """The runs that compare the products' precisions and kernels (kind "precision", each
    naming its config and precision): the same config and seeds in each, side by side."""
    lines = ["| config | precision | seeds | test error per seed (%) | mean ± std |", "|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: r["config"]):
        lines.append(f"| {r['config']} | {r['precision']} | {', '.join(map(str, r['seeds']))} "
                     f"| {', '.join(f'{e:.2f}' for e in r['errors'])} | {spread(r['mean'], r['std'], r['splits'])} |")
    return lines


def cells_of(records):
    """The record each table cell stands for, by table: the tables, the README's headline
    and the figures all read these."""
    mnist = mnist_records(records)
    return {"table1": mnist_cells(mnist, TABLE1, LABELS),
            "successors": mnist_cells(mnist, SUCCESSORS, LABELS),
            "table2": tree_cells(records),
            "precision": [r for r in records if r.get("kind") == "precision"]}


def markdown(cells):
    t1, successors, t2 = cells["table1"], cells["successors"], cells["table2"]
    mnist = {**t1, **successors}  # one table of both; the families' names are distinct
    return "\n".join([
        BEGIN,
        "## Table 1 and its successors: semi-supervised MNIST",
        "",
        "Test error (%) on MNIST's 10,000 test images at the epoch of best validation error,",
        "mean ± standard deviation over labeled-set splits (their number in brackets; 5 at 100",
        "labels, 3 above), the published figure below each: the paper's for its own methods,",
        "their own papers' for the methods that came after it, declared on the same graph",
        "([pseudo-ensembles.md](pseudo-ensembles.md)), where those report permutation-invariant",
        "MNIST at these sizes. A method's cell is its best recipe in docs/results.json (the most",
        "splits, then the lowest mean); the recipes are listed after the figures, every recipe",
        "and split in [the history](" + HISTORY + "). The best of pens is the lowest mean among",
        "the cells with the protocol's splits (5 at 100 labels, 3 above); the goal is what pens",
        "aims at, set from the best published permutation-invariant figures (at 600 and 3,000",
        "labels, where the ladder paper reports none, between their neighbours'). The paper's other",
        "columns (TSVM, CNN, EmbedNN, MTC+, PL+) are other papers' methods; its NN and SDE+ rows",
        "are shown for the layout, pens ran NN fully supervised only and SDE+ not at all.",
        "",
        *mnist_table([(TABLE1, "paper"), (SUCCESSORS, "published")], LABELS, mnist),
        "",
        "![Table 1: pens against the paper, by labeled-set size](img/results-table1.png)",
        "",
        "![The successors: pens against the published figures](img/results-successors.png)",
        "",
        *recipe_table(TABLE1 + SUCCESSORS, LABELS, mnist),
        "",
        "## Table 2: Stanford Sentiment Treebank",
        "",
        "Root accuracy (%) on the test set, mean ± standard deviation over seeds (their number",
        "in brackets), each run's model taken at its best dev epoch; the paper's figure below.",
        "pens runs the compact tensor network's four columns; RNTN, PV and DCNN are other",
        "papers' models, as the paper lists them. The Tree-LSTM columns are past the paper: Tai,",
        "Socher and Manning's constituency Tree-LSTM (their figure, from tuned GloVe vectors of",
        "840B tokens and 300 dimensions) and pens' runs of it from",
        "examples/sst/tree-lstm.model.json, its word vectors learned from the treebank alone,",
        "and from examples/sst/tree-lstm-glove.model.json, started from GloVe's 6B-token",
        "100-dimensional vectors (scripts/fetch-glove.sh); \"averaged weights\" is the same training",
        "evaluated with a moving average (decay 0.999) of every trained parameter",
        "(`pens average`), and \"words on SGD\" updates the word vectors by plain",
        "SGD at 0.1 beside AdaGrad for the rest, as Tai et al.'s code does (optimizer.groups).",
        "",
        *table2(t2),
        "",
        "![Table 2: pens against the paper](img/results-table2.png)",
        "",
        *table2_runs(t2),
        *([
            "",
            "## The products' precision",
            "",
            "The same configs and seeds with the step's matrix products in float32 on Eigen's",
            "kernel (pens' default), in float32 on oneDNN's and in bfloat16 on oneDNN's",
            "([performance.md](performance.md#bfloat16-products)): test error (%) at the epoch",
            "of best validation error.",
            "",
            *precision_table(cells["precision"]),
        ] if cells["precision"] else []),
        END,
    ]) + "\n"


def headline(cells):
    """The README's table: a few cells of the three tables, pens beside the published figure."""
    published = {"table1": {n: p for n, _, p in TABLE1}, "successors": {n: p for n, _, p in SUCCESSORS},
                 "table2": {n: p for n, _, p in TABLE2}}
    lines = [BEGIN, "| result | pens | published |", "|---|---|---|"]
    for what, table, row, column in HEADLINE:
        if table == "table2":
            task, suffix = column
            r = cells["table2"].get((task, TABLE2_METHOD[row] + suffix))
            ours = spread(r["mean"], r.get("std", 0.0), r.get("runs", 1)) if r else "—"
            theirs = f"{published[table][row][task]:.1f}"
        else:
            r = cells[table].get((row, column))
            ours = error_cell(r) if r else "—"
            theirs = f"{published[table][row][column]:.2f}"
        lines.append(f"| {what} | {ours} | {theirs} |")
    return "\n".join(lines + [END]) + "\n"


def replace_section(page, section):
    """The page with its section between the markers replaced (appended where absent)."""
    if BEGIN in page and END in page:
        before, rest = page.split(BEGIN, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
        return before + section + ("\n" + after if after else "")
    return page + ("\n" if page else "") + section


def draw(cells, img_dir):
    """One figure per table: pens' mean with its standard deviation beside the published
    figure, a panel per column of the table."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    def panels(title, columns, rows, value, published, published_name, ylabel, path, log):
        fig, axes = plt.subplots(1, len(columns), figsize=(2.6 * len(columns) + 0.6, 3.4), squeeze=False)
        for ax, (column, column_title) in zip(axes[0], columns):
            names = [name for name in rows if value(name, column) or published(name, column)]
            for i, name in enumerate(names):
                ours = value(name, column)
                if ours:
                    ax.errorbar(i - 0.12, ours[0], yerr=ours[1], fmt="o", color="tab:blue", capsize=3,
                                label="pens, mean ± std")
                theirs = published(name, column)
                if theirs is not None:
                    ax.plot(i + 0.12, theirs, "D", mfc="none", color="tab:red", label=published_name)
            ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
            ax.set_xlim(-0.6, len(names) - 0.4)
            ax.set_title(column_title, fontsize=9)
            if log:
                ax.set_yscale("log")
                ax.set_yticks([1, 2, 5, 10, 20, 30])
                ax.yaxis.set_major_formatter(ScalarFormatter())
                ax.yaxis.set_minor_formatter(NullFormatter())
            ax.grid(axis="y", alpha=0.3, which="both")
        axes[0][0].set_ylabel(ylabel)
        handles = {}
        for ax in axes[0]:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(label, handle)
        fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=2, fontsize=8)
        fig.suptitle(title, fontsize=10)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)

    # Table 1's panels each span a few points; the successors' span 1 % to 30 % (log scale).
    for table, families, label_list, name, title, published_name, log in (
            ("table1", TABLE1, LABELS, "results-table1.png", "Table 1: MNIST test error by labeled-set size",
             "paper", False),
            ("successors", SUCCESSORS, LABELS, "results-successors.png", "The successors: MNIST test error",
             "published", True)):
        mnist = cells[table]
        published = {n: p for n, _, p in families}
        panels(title, [(n, f"{label_name(n)} labels") for n in label_list], [n for n, _, _ in families],
               lambda m, n: (mnist[(m, n)]["mean"], mnist[(m, n)]["std"]) if (m, n) in mnist else None,
               lambda m, n: published[m].get(n), published_name, "test error (%)", img_dir / name, log)
    t2 = cells["table2"]
    paper = {name: p for name, _, p in TABLE2}
    titles = dict(TASKS)
    rows = {i: (task, suffix) for i, (task, _, suffix) in enumerate(TABLE2_ROWS)}

    def ours(m, i):
        task, suffix = rows[i]
        r = t2.get((task, TABLE2_METHOD[m] + suffix)) if TABLE2_METHOD[m] else None
        return (r["mean"], r.get("std", 0.0)) if r else None

    panels("Table 2: SST root accuracy",
           [(i, titles[task] + (", trained on binary" if task == "binary" and not suffix else "")
             + (", fine read as binary" if suffix else "")) for i, (task, suffix) in rows.items()],
           [n for n, _, _ in TABLE2], ours, lambda m, i: paper[m][rows[i][0]], "paper", "test accuracy (%)",
           img_dir / "results-table2.png", False)


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    cells = cells_of(json.loads(Path(args[0]).read_text()))
    pages = [(Path(args[1]), markdown(cells))]
    if len(args) == 3:
        pages.append((Path(args[2]), headline(cells)))
    stale = []
    for path, section in pages:
        page = path.read_text() if path.exists() else ""
        updated = replace_section(page, section)
        if updated != page:
            stale.append(path)
            if not check:
                path.write_text(updated)
    if check:
        if stale:
            sys.exit(f"{', '.join(map(str, stale))}: the tables differ from what scripts/paper/results_tables.py "
                     f"writes from {args[0]}; run it to update them")
        return
    img_dir = pages[0][0].parent / "img"
    img_dir.mkdir(exist_ok=True)
    draw(cells, img_dir)
    print(f"results_tables: wrote the tables of {', '.join(str(p) for p, _ in pages)} and their figures in {img_dir}")


if __name__ == "__main__":
    main()
