#!/usr/bin/env python3
"""Prints where a build's time went, from its ninja log: the seconds of every compile and
link summed (the latest run of each output), by target, and the slowest units.

    scripts/build-times.py [BUILD_DIR] [--top N]      (default: build, 10)

Each job's seconds are wall time, which is CPU time when ninja ran one job per core
(scripts/setup.sh does); with more jobs than cores they overstate it.
"""
import argparse
import collections
import os
import sys


def target_of(output):
    # "libpens.a.p/x.o" -> "libpens.a"; "tests/pens_tests.p/x.o" -> "tests/pens_tests"
    return output.split(".p/")[0] if ".p/" in output else "links and other steps"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    path = os.path.join(args.build, ".ninja_log")
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        sys.exit(f"build-times: cannot read {path}: {e.strerror}")
    seconds = {}
    for line in lines[1:]:  # the first line is the log's version
        start, end, _, output, _ = line.split("\t")
        seconds[output] = (int(end) - int(start)) / 1000  # a later run replaces an earlier one
    by_target = collections.defaultdict(float)
    for output, s in seconds.items():
        by_target[target_of(output)] += s
    print(f"{sum(seconds.values()):.0f} s in {len(seconds)} steps")
    for target, s in sorted(by_target.items(), key=lambda t: -t[1]):
        print(f"  {s:7.1f} s  {target}")
    print(f"the {args.top} slowest:")
    for output, s in sorted(seconds.items(), key=lambda t: -t[1])[:args.top]:
        print(f"  {s:7.1f} s  {output}")


if __name__ == "__main__":
    main()
