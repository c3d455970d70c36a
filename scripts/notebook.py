#!/usr/bin/env python3
"""Writes a Jupyter notebook from a script in cells ("# %% Title" lines start a cell), so
that the script stays the one source a reviewer reads and the tests run:

    scripts/notebook.py examples/python/train_pea.py            # writes train_pea.ipynb beside it
    scripts/notebook.py --check examples/python/train_pea.py    # exit 1 when the notebook differs

The script's docstring becomes the first (markdown) cell; each cell's title a markdown
heading above its code. Outputs are not stored: a notebook is run to see them.
"""
import argparse
import ast
import json
import pathlib
import sys


def cells_of(source):
    module = ast.parse(source)
    doc = ast.get_docstring(module, clean=True) or ""
    body = source.split('"""', 2)[2] if doc else source
    cells = [markdown(doc)] if doc else []
    title, code = None, []
    for line in body.splitlines():
        if line.startswith("# %%"):
            flush(cells, title, code)
            title, code = line[4:].strip(), []
        else:
            code.append(line)
    flush(cells, title, code)
    return cells


def markdown(text):
    return {"cell_type": "markdown", "metadata": {}, "source": lines(text)}


def flush(cells, title, code):
    while code and not code[0].strip():
        code.pop(0)
    while code and not code[-1].strip():
        code.pop()
    if title:
        cells.append(markdown(f"### {title}"))
    if code:
        cells.append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                      "source": lines("\n".join(code))})


def lines(text):
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + [parts[-1]]


def notebook(source):
    cells = cells_of(source)
    for number, cell in enumerate(cells):
        cell["id"] = f"cell-{number}"  # nbformat 4.5's cell ids, stable from run to run
    return {"cells": cells,
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", type=pathlib.Path)
    parser.add_argument("--check", action="store_true", help="exit 1 when the notebook is not the script's")
    args = parser.parse_args()
    target = args.script.with_suffix(".ipynb")
    text = json.dumps(notebook(args.script.read_text()), indent=1, ensure_ascii=False) + "\n"
    if args.check:
        if not target.exists() or target.read_text() != text:
            print(f"notebook: {target} is not {args.script}'s: run scripts/notebook.py {args.script}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    print(f"notebook: wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
