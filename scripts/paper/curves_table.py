"""Learning curves kept as a tab-separated table beside their figure, so that a report can
draw again the curve of a run whose folder is gone: a column pair per curve (NAME A, NAME
B: two figures of each epoch), a row per epoch any curve has, '?' where one has none.
results.py (Table 1's runs) and results_trees.py (Table 2's cells) write them."""
import json
from pathlib import Path


def from_metrics(metrics: Path, first, second):
    """One run's curve, {epoch: (a, b)} in %, from the fields `first` and `second` (a
    fraction; NaN where a line lacks it) of the lines of its metrics.jsonl that hold
    `first`; a run resumed from a checkpoint logs some epochs twice: the last counts."""
    by_epoch = {}
    for line in metrics.read_text().splitlines():
        m = json.loads(line)
        if first in m and "epoch" in m:
            by_epoch[m["epoch"]] = (100.0 * m[first], 100.0 * m.get(second, float("nan")))
    return by_epoch


def write(path: Path, curves, suffixes):
    """curves: {name: {epoch: (a, b)}}, in column order; suffixes: the pair's names (a, b)."""
    epochs = sorted(set().union(*(set(c) for c in curves.values())))
    rows = ["# epoch\t" + "\t".join(f"{name} {suffixes[0]}\t{name} {suffixes[1]}" for name in curves)]
    for e in epochs:
        fields = [f"{e:g}"]
        for curve in curves.values():
            point = curve.get(e)
            fields += [f"{v:.2f}" for v in point] if point else ["?", "?"]
        rows.append("\t".join(fields))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n")


def read(path: Path, suffixes):
    """{name: {epoch: (a, b)}} as write() wrote them; {} where there is no table."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    names = [column.removesuffix(" " + suffixes[0]) for column in lines[0].lstrip("# ").split("\t")[1::2]]
    out = {}
    for i, name in enumerate(names):
        points = {}
        for line in lines[1:]:
            fields = line.split("\t")
            if fields[1 + 2 * i] != "?":
                epoch = float(fields[0])
                points[int(epoch) if epoch.is_integer() else epoch] = (float(fields[1 + 2 * i]), float(fields[2 + 2 * i]))
        out[name] = points
    return out
