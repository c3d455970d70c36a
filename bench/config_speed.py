#!/usr/bin/env python3
"""Training speed of a config, pens binary against pens binary.

Runs `pens train` on CONFIG cut to --steps steps (one epoch, one evaluation at its end),
with each binary in turn, --rounds times, and prints one JSON line per binary:
  {"binary", "config", "steps", "threads", "seconds" (each round: the training clock of
   metrics.jsonl, the steps and the evaluation, without start-up and the files written
   at the end), "median_seconds", "min_seconds", "examples_per_second" (of the median),
   "objective" (at the last step)}
then, with two or more binaries, {"speedup_of_median": first's median / each one's}.
The machine is shared and its speed drifts from minute to minute: the binaries alternate
within each round so that they see the same drift; compare figures of one run only. The
objectives must agree where the binaries compute the same bits (the check of a change
that claims to).

  bench/config_speed.py CONFIG.json BINARY [BINARY...] [--steps 200] [--rounds 5]
      [--threads 2] [--data-dir data/mnist]

Example: an old build against the current one on the best 100-label recipe:
  bench/config_speed.py examples/mnist/ladder-clean-100-anneal-24.json old/pens build/pens
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
import pens  # noqa: E402  (the build's: pens.read_config resolves a config's bases)


def cut_config(path, steps, data_dir, out_dir):
    """A copy of the config whose run is one epoch of `steps` steps, next to copies of the
    model files it names (paths in a config are relative to the config's folder). The
    copy is the config with its bases resolved, so that a binary older than bases reads it."""
    config = pens.read_config(path)
    here = os.path.dirname(os.path.abspath(path))
    if "model" in config:
        shutil.copy(os.path.join(here, config["model"]), out_dir)
        config["model"] = os.path.basename(config["model"])
    config.setdefault("data", {})["dir"] = os.path.abspath(data_dir)
    config.setdefault("run", {}).update({"epochs": 1, "steps_per_epoch": steps})
    config.setdefault("eval", {})["every_epochs"] = 1
    optimizer = config.get("optimizer", {})
    # An annealing window of the original epochs would not fit in one: anneal within it.
    if "anneal_start_epoch" in optimizer:
        optimizer.update({"anneal_start_epoch": 0.5, "anneal_end_epoch": 1})
    cut = os.path.join(out_dir, "config.json")
    with open(cut, "w") as f:
        json.dump(config, f, indent=1)
    return cut


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config")
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", default="data/mnist")
    args = parser.parse_args()
    for b in args.binaries:
        if not os.access(b, os.X_OK):
            sys.exit(f"config_speed: {b} is not an executable pens binary")
    work = tempfile.mkdtemp(prefix="pens-speed-")
    try:
        config = cut_config(args.config, args.steps, args.data_dir, work)
        seconds = {b: [] for b in args.binaries}
        objective, examples = {}, 0
        for _ in range(args.rounds):
            for i, b in enumerate(args.binaries):
                out = os.path.join(work, f"run{i}")
                done = subprocess.run([os.path.abspath(b), "train", config, "--out", out,
                                       "--threads", str(args.threads)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if done.returncode != 0:
                    sys.exit(f"config_speed: {b} failed:\n{done.stderr}")
                with open(os.path.join(out, "metrics.jsonl")) as f:
                    last = json.loads(f.readlines()[-1])
                seconds[b].append(last["elapsed_seconds"])
                examples = round(last["examples_per_second"] * last["elapsed_seconds"])  # the steps' rows
                objective[b] = last["objective"]
                shutil.rmtree(out)
        for b in args.binaries:
            print(json.dumps({"binary": b, "config": args.config, "steps": args.steps,
                              "threads": args.threads,
                              "seconds": [round(s, 2) for s in seconds[b]],
                              "median_seconds": round(statistics.median(seconds[b]), 2),
                              "min_seconds": round(min(seconds[b]), 2),
                              "examples_per_second": round(examples / statistics.median(seconds[b])),
                              "objective": objective[b]}))
        if len(args.binaries) > 1:
            first = statistics.median(seconds[args.binaries[0]])
            print(json.dumps({"speedup_of_median": {
                b: round(first / statistics.median(seconds[b]), 3) for b in args.binaries}}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
