#!/usr/bin/env python3
"""The methods of scripts/paper/table1.sh, read from table1-methods.json beside this file:
one line per method, the only place a method is registered. Each line names

  method            the name of its cells (run folders METHOD-LABELS, results.json "method")
  config            its training config under the configs folder; "{labels}" stands for the
                    labeled-set size, and config_by_labels names another config for a size
  supervised        (optional) its fully supervised config (every label, table1.sh
                    --supervised); a method without "config" runs only that way
  pretrained        (optional) the pre-training config it fine-tunes from, run once
  family            its row in docs/results.md's table (a row of the paper's Table 1 or of
                    its successors, scripts/paper/results_tables.py)
  about             what it is, for table1.sh --list-methods

Their order is the order of the history's tables (scripts/paper/results.py): a new method
goes at the end.

usage: table1_methods.py plan METHOD LABELS   the config and pre-training (tab-separated);
                                              LABELS "supervised": the fully supervised cell
       table1_methods.py list                 every method with its config and what it is
"""
import json
import sys
from pathlib import Path

REGISTRY = Path(__file__).parent / "table1-methods.json"


def read(path):
    """The registry's methods, or SystemExit naming the file, where in it and what is wrong."""
    try:
        methods = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"{path}: not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}")
    for number, entry in enumerate(methods, start=1):
        missing = [key for key in ("method", "family", "about") if key not in entry]
        if missing:
            raise SystemExit(f"{path}: entry {number} ({entry.get('method', 'unnamed')}) has no {', '.join(missing)}")
    return methods


METHODS = read(REGISTRY)
NAMES = [m["method"] for m in METHODS]


def family(name):
    """The methods of a row of the results table, in registry order."""
    return [m["method"] for m in METHODS if m["family"] == name]


def entry(method):
    """METHOD's line of the registry, or a ValueError naming the method."""
    found = next((m for m in METHODS if m["method"] == method), None)
    if found is None:
        raise ValueError(f"unknown method {method} (table1.sh --list-methods lists them)")
    return found


def config(method, labels):
    """The config file name METHOD trains with at LABELS labels ("supervised": on every label),
    or a ValueError that says why none."""
    line = entry(method)
    if labels == "supervised":
        if "supervised" not in line:
            raise ValueError(f"{method} has no fully supervised config (the registry's \"supervised\")")
        return line["supervised"]
    if "config" not in line:
        raise ValueError(f"{method} runs fully supervised only (--supervised --supervised-methods {method})")
    return line.get("config_by_labels", {}).get(str(labels), line["config"]).replace("{labels}", str(labels))


def main(argv):
    if argv[:1] == ["plan"] and len(argv) == 3:
        try:
            print(f"{config(argv[1], argv[2])}\t{entry(argv[1]).get('pretrained', '')}")
        except ValueError as e:
            print(f"table1: {e}", file=sys.stderr)
            return 2
        return 0
    if argv == ["list"]:
        for m in METHODS:
            configs = [m.get("config", "(supervised only)"), *m.get("config_by_labels", {}).values()]
            if "supervised" in m:
                configs.append(f"{m['supervised']} (supervised)")
            print(f"{m['method']:30} {', '.join(configs)}\n{'':30} {m['about']}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
