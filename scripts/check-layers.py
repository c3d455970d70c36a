#!/usr/bin/env python3
"""Checks that every #include in pens points down the layer stack (or within a layer).

pens is built in layers, one folder each, and a layer may use only the layers below it:

    ops/ir         the IR: shapes, attributes, nodes, errors
    ops            the op contract, the op registry and the ops, random numbers
    graph          the graph, its verification, printers, noise and penalty kinds, passes
    autodiff       parameter store, tape, gradient checker
    serialization  model files, checkpoints, atomic files, IDX, PNG
    models         builders (MLP, autoencoder), data sets and data sources
    train/optim    optimizers, constraints, schedules
    train/dist     the communicator of data-parallel runs (and MPI's)
    train/config   config readers
    train/loop     the training step, the run folder, the run loop, kinds of run, reports
    train/tasks    the kinds of run: classifier, trees, pre-training, skip-gram
    cli examples bench tests python    programs built on the library (any layer below)

The library's headers are included as "pens/<layer>/<file>.h" (the include root pens
installs); programs include their own headers by their path in the tree.

The meson build runs this script as a default target, so an include that points up
fails the build. Run by hand: scripts/check-layers.py [--root DIR]. Exit status 1 lists
every include that points up, or that names a header outside every layer.
"""
import argparse
import os
import re
import sys

# (folder, rank): a file may include headers of its own rank or lower. The longest
# matching folder decides (ops/ir is below the rest of ops).
LAYERS = [
    ("ops/ir", 0),
    ("ops", 1),
    ("graph", 2),
    ("autodiff", 3),
    ("serialization", 4),
    ("models", 5),
    ("train/optim", 6),
    ("train/dist", 6),
    ("train/config", 7),
    ("train/loop", 8),
    ("train/tasks", 9),
    ("cli", 10),
    ("examples", 10),
    ("bench", 10),
    ("tests", 10),
    ("python", 10),
]
SOURCE_SUFFIXES = (".h", ".cpp")
# The library's headers are included through one root, as they are installed:
# #include "pens/graph/graph.h". The programs' own headers (cli/, tests/support/, ...) are
# included by their path in the tree.
PREFIX = "pens/"
LIBRARY_TOP = 9  # train/tasks: the highest layer of the library
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    best = None
    for folder, rank in LAYERS:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best[0]):
                best = (folder, rank)
    return best


def source_files(root):
    for folder, _ in LAYERS:
        top = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def check(root):
    problems = []
    # ops/ir is walked twice (as itself and under ops): each file once.
    for path in sorted(set(source_files(root))):
        folder, rank = layer_of(path)
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = m.group(1)
                if header.startswith(PREFIX):
                    header = header[len(PREFIX):]
                    target = layer_of(header)
                    if target is None or target[1] > LIBRARY_TOP:
                        problems.append(f"{path}:{number}: includes \"{m.group(1)}\", which is no header of the library")
                        continue
                else:
                    target = layer_of(header)
                    if target is not None and target[1] <= LIBRARY_TOP:
                        problems.append(f"{path}:{number}: includes \"{header}\": the library's headers are "
                                        f"included as \"{PREFIX}{header}\" (the include root pens installs)")
                        continue
                if target is None:
                    # A header next to the file (tests' support files use full paths too).
                    if os.path.exists(os.path.join(root, os.path.dirname(path), header)):
                        continue
                    problems.append(f"{path}:{number}: includes \"{header}\", which is in no layer")
                elif target[1] > rank:
                    problems.append(
                        f"{path}:{number}: includes \"{m.group(1)}\": {folder} (layer {rank}) may not use "
                        f"{target[0]} (layer {target[1]}), which is above it")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--stamp", help="file to write when the check passes (for the build)")
    args = parser.parse_args()
    problems = check(os.path.abspath(args.root))
    if problems:
        print("check-layers: includes that point up the layer stack (see docs/architecture.md):", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w") as f:
            f.write("layers ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
