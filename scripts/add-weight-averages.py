#!/usr/bin/env python3
"""Adds a moving average of every trained parameter to a model file, read at inference:
the model trains as before and is evaluated with its averaged weights (Polyak averaging).
Each parameter P gets a frozen parameter PREFIX + P of its shape and a moving average
{param: PREFIX + P, source: P, decay: D, at_inference: true}; parameters already frozen,
and those that are averages themselves, get none.

usage: add-weight-averages.py IN.model.json OUT.model.json --decay D [--prefix average/]
                              [--params REGEX]

--params averages only the parameters whose whole name matches REGEX: a ladder's
decoder, which inference never reads, need not be averaged.

The averages start at their sources when the model's values are drawn (and a tree run's
word_vectors restart the word table's); a step moves each once after the optimizer
(docs/architecture.md, "State that is not trained: moving averages"). `pens fmt OUT` checks
the result.
"""
import argparse
import json
import os
import re


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("--decay", type=float, required=True)
    parser.add_argument("--prefix", default="average/")
    parser.add_argument("--params", default=".*", help="average only the parameters whose whole name matches")
    args = parser.parse_args()
    if not 0 < args.decay < 1:
        parser.error(f"--decay must lie strictly between 0 and 1, got {args.decay}")
    with open(args.source) as f:
        model = json.load(f)
    averages = model.setdefault("moving_averages", [])
    averaged = {a["param"] for a in averages}
    names = {p["name"] for p in model["parameters"]}
    added = []
    for p in list(model["parameters"]):
        if "frozen" in p.get("flags", []) or p["name"] in averaged or not re.fullmatch(args.params, p["name"]):
            continue
        name = args.prefix + p["name"]
        if name in names:
            raise SystemExit(f"add-weight-averages: {args.source} already has a parameter '{name}'")
        model["parameters"].append({"dtype": p.get("dtype", "float32"), "flags": ["frozen"],
                                    "init": {"kind": "zeros"}, "name": name, "shape": p["shape"]})
        averages.append({"at_inference": True, "decay": args.decay, "param": name, "source": p["name"]})
        added.append(p["name"])
    if not added:
        raise SystemExit(f"add-weight-averages: {args.source} has no trained parameter matching '{args.params}' to average")
    metadata = model.setdefault("metadata", {})
    note = (f"{os.path.basename(args.source)} with a moving average (decay {args.decay}) of each trained "
            f"parameter ({', '.join(added)}), read at inference")
    metadata["description"] = note + (": " + metadata["description"] if metadata.get("description") else "")
    temporary = args.output + ".tmp"
    with open(temporary, "w") as f:
        json.dump(model, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(temporary, args.output)
    print(f"add-weight-averages: {args.output}: averages of {len(added)} parameters, decay {args.decay}")


if __name__ == "__main__":
    main()
