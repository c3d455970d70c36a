#!/usr/bin/env python3
"""A training loop written in Python against pens train: the same config, the same
test error, and the time each takes.

The loop is the one a PyTorch user writes (docs/api.md, "A training loop in Python"):
pens.TrainingPlan gives the model as the run starts it, each step's batch and settings;
pens.compile the training graph; pens.optim the config's optimizer; forward, backward,
step. Both train the config for --epochs epochs (evaluating only at the end: the loop
evaluates once, so pens train is cut to one evaluation too), alternating --rounds times,
and the script prints one JSON line per run, then
  {"same_test_error": ..., "python_over_pens": median loop seconds / median pens seconds}.
Training seconds: pens train's clock of metrics.jsonl (steps and the one evaluation)
against the loop's steps and the same evaluation (training, validation and test error),
both without start-up and file writing.

  bench/python_loop.py [CONFIG] [--epochs 10] [--rounds 2] [--pens build/pens]
                       (default examples/mnist/pea-600.json; MNIST in data/mnist)
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "python"))
import pens  # noqa: E402


def cut_config(config, epochs, folder):
    """The config with its evaluation and checkpoint at the end of the run only, its
    paths absolute (the copy lives elsewhere)."""
    c = pens.read_config(config)  # its bases resolved: the copy lives elsewhere
    c["model"] = str((config.parent / c["model"]).resolve())
    if "dir" in c.get("data", {}):
        c["data"]["dir"] = str((config.parent / c["data"]["dir"]).resolve())
    c.setdefault("run", {})["epochs"] = epochs
    c.setdefault("eval", {})["every_epochs"] = epochs
    c.setdefault("checkpoint", {})["every_epochs"] = epochs
    path = folder / "config.json"
    path.write_text(json.dumps(c))
    return path


def pens_train(binary, config, out):
    subprocess.run([binary, "train", str(config), "--out", str(out)], check=True, capture_output=True)
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    return {"run": "pens train", "test_error": last["test_error"], "seconds": last["elapsed_seconds"]}


def train_by_plan(plan):
    """The loop: plan.model trained as pens train would (tests/python runs it too)."""
    model = plan.model
    net = pens.compile(model, batch=plan.batch_labeled + plan.batch_unlabeled, graph="training",
                       labeled=plan.batch_labeled if plan.batch_unlabeled else None)
    opt = plan.optimizer(net)
    for step in range(plan.total_steps):
        at = plan.at(step)
        if at["restart"]:
            opt.restart()
        opt.lr, opt.momentum = at["learning_rate"], at["momentum"]
        net.set_lambda_scale(at["lambda_scale"])
        net.set_noise_key(plan.seed, at["optimizer_step"])
        net.forward(plan.batch(step))
        net.backward(return_grads=False)
        opt.step()
    net.copy_to(model)
    return model


def python_loop(config):
    plan = pens.TrainingPlan(config)
    pens.set_threads(plan.threads)
    start = time.perf_counter()
    model = train_by_plan(plan)
    # The evaluation pens train makes: training error (the labeled examples), validation
    # and test error.
    errors = {part: model.evaluate(*plan.data(part), batch=plan.eval_batch)["error"]
              for part in ("labeled", "validation", "test")}
    return {"run": "python loop", "test_error": errors["test"], "seconds": time.perf_counter() - start}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(ROOT / "examples" / "mnist" / "pea-600.json"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pens", default=str(ROOT / "build" / "pens"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        work = pathlib.Path(work)
        config = cut_config(pathlib.Path(args.config).resolve(), args.epochs, work)
        runs = []
        for round_ in range(args.rounds):
            for run in (lambda: pens_train(args.pens, config, work / f"pens-{round_}"), lambda: python_loop(config)):
                result = dict(run(), round=round_, epochs=args.epochs, config=args.config)
                print(json.dumps(result), flush=True)
                runs.append(result)
    seconds = {name: statistics.median(r["seconds"] for r in runs if r["run"] == name)
               for name in ("pens train", "python loop")}
    errors = {r["test_error"] for r in runs}
    print(json.dumps({"same_test_error": len(errors) == 1, "test_errors": sorted(errors),
                      "python_over_pens": round(seconds["python loop"] / seconds["pens train"], 4)}))


if __name__ == "__main__":
    main()
