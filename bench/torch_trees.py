#!/usr/bin/env python3
"""The PyTorch peers of bench/trees.cpp: the compact tensor network on SST training trees,
written as a careful PyTorch user would, two ways:

  recursive  one node at a time, in post-order (F.bilinear and F.linear on one row)
  level      the step's trees together, the nodes of equal height across all trees in one
             product (F.bilinear / F.linear on [nodes, n]), children gathered with
             index_select from the levels below, every node classified at once

Both train with torch.optim.Adagrad (eps 1e-8, the paper's l2 as weight decay per group)
and evaluate under torch.no_grad().

  torch_trees.py check DIR                      same objective as pens on its dump (1e-4)
  torch_trees.py time --peer recursive|level [--steps 20] [--batch 27] [--threads 1]
                 [--dim 70] [--data DIR]        one JSON line: train/eval nodes per second
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

L2 = {"T": 4e-3, "Ml": 4e-3, "Mr": 4e-3, "m": 4e-3, "C": 2e-4, "c": 2e-4, "E": 2e-4}


def parse_tree(line):
    """Post-order nodes of one PTB line: (label, left, right, word)."""
    nodes, stack, i = [], [], 0
    while i < len(line):
        ch = line[i]
        if ch == "(":
            j = line.index(" ", i)
            stack.append([int(line[i + 1:j]), []])
            i = j + 1
            if line[i] != "(":
                k = line.index(")", i)
                label, _ = stack.pop()
                nodes.append((label, -1, -1, line[i:k]))
                (stack[-1][1] if stack else []).append(len(nodes) - 1)
                i = k + 1
        elif ch == ")":
            label, kids = stack.pop()
            nodes.append((label, kids[0], kids[1], None))
            (stack[-1][1] if stack else []).append(len(nodes) - 1)
            i += 1
        else:
            i += 1
    return nodes


class Tree:
    def __init__(self, nodes, vocab):
        self.labels = torch.tensor([n[0] for n in nodes])
        self.left = [n[1] for n in nodes]
        self.right = [n[2] for n in nodes]
        self.words = [vocab.get(n[3], 0) if n[3] is not None else -1 for n in nodes]
        self.height = []
        for l, r in zip(self.left, self.right):
            self.height.append(0 if l < 0 else 1 + max(self.height[l], self.height[r]))


class Ctn(torch.nn.Module):
    """Parameters in PyTorch's layouts: F.bilinear's [out, in1, in2], F.linear's [out, in]."""

    def __init__(self, p):
        super().__init__()
        self.E = torch.nn.Parameter(torch.as_tensor(p["E"]))
        self.T = torch.nn.Parameter(torch.as_tensor(p["T"]))
        self.Ml = torch.nn.Parameter(torch.as_tensor(p["Ml"]).t().contiguous())
        self.Mr = torch.nn.Parameter(torch.as_tensor(p["Mr"]).t().contiguous())
        self.m = torch.nn.Parameter(torch.as_tensor(p["m"]))
        self.C = torch.nn.Parameter(torch.as_tensor(p["C"]).t().contiguous())
        self.c = torch.nn.Parameter(torch.as_tensor(p["c"]))

    def compose(self, a, b):
        return torch.tanh(F.bilinear(a, b, self.T) + F.linear(a, self.Ml, self.m) + F.linear(b, self.Mr))

    def recursive(self, tree):
        vectors = []
        for w, l, r in zip(tree.words, tree.left, tree.right):
            if l < 0:
                vectors.append(self.E[w:w + 1])
            else:
                vectors.append(self.compose(vectors[l], vectors[r]))
        scores = F.linear(torch.cat(vectors), self.C, self.c)
        return scores, tree.labels

    def level(self, trees):
        """All trees of a step at once: rows are (height, tree, node)."""
        where, by_height = {}, {}
        for t_index, t in enumerate(trees):
            for node, h in enumerate(t.height):
                by_height.setdefault(h, []).append((t_index, node))
        levels, row = [], 0
        for h in sorted(by_height):
            members = by_height[h]
            if h == 0:
                ids = torch.tensor([trees[t].words[n] for t, n in members])
                out = self.E.index_select(0, ids)
            else:
                below = torch.cat(levels)
                li = torch.tensor([where[(t, trees[t].left[n])] for t, n in members])
                ri = torch.tensor([where[(t, trees[t].right[n])] for t, n in members])
                out = self.compose(below.index_select(0, li), below.index_select(0, ri))
            for k, key in enumerate(members):
                where[key] = row + k
            row += len(members)
            levels.append(out)
        scores = F.linear(torch.cat(levels), self.C, self.c)
        labels = torch.empty(row, dtype=torch.long)
        for (t, n), r in where.items():
            labels[r] = trees[t].labels[n]
        return scores, labels


def load_params(dump):
    manifest = json.loads((dump / "manifest.json").read_text())
    return manifest, {name: np.fromfile(dump / f"{name}.f32", dtype="<f4").reshape(shape)
                      for name, shape in manifest["params"].items()}


def vocabulary(train_lines):
    words = sorted({n[3] for line in train_lines for n in parse_tree(line) if n[3] is not None})
    return {w: i + 1 for i, w in enumerate(words)}


def check(args):
    dump = Path(args.dump)
    manifest, params = load_params(dump)
    lines = Path(args.data, "train.txt").read_text().splitlines()
    vocab = vocabulary(lines)
    assert len(vocab) + 1 == manifest["vocabulary"], "vocabulary sizes differ"
    model = Ctn(params)
    trees = [Tree(parse_tree(lines[i - 1]), vocab) for i in manifest["trees"]]
    for t, ids in zip(trees, manifest["leaf_ids"]):
        assert [w for w in t.words if w >= 0] == ids, "leaf ids differ"
    batch = manifest["batch"]
    with torch.no_grad():
        rec = sum(F.cross_entropy(*model.recursive(t), reduction="sum") for t in trees) / batch
        s, y = model.level(trees)
        lev = F.cross_entropy(s, y, reduction="sum") / batch
    for name, value in [("recursive", rec.item()), ("level", lev.item())]:
        rel = abs(value - manifest["objective"]) / abs(manifest["objective"])
        print(f"torch_trees: {name} objective {value:.6f}, pens {manifest['objective']:.6f}, relative difference {rel:.2e}",
              file=sys.stderr)
        if rel > 1e-4:
            sys.exit(f"torch_trees: the {name} peer computes a different objective")


def time_peer(args):
    torch.set_num_threads(args.threads)
    lines = Path(args.data, "train.txt").read_text().splitlines()
    vocab = vocabulary(lines)
    trees = [Tree(parse_tree(line), vocab) for line in lines]
    n, rng = args.dim, np.random.default_rng(1)
    init = {"E": rng.normal(0, 0.1, (len(vocab) + 1, n)), "T": rng.normal(0, 0.5 / n, (n, n, n)),
            "Ml": rng.normal(0, (2 * n) ** -0.5, (n, n)), "Mr": rng.normal(0, (2 * n) ** -0.5, (n, n)),
            "m": np.zeros(n), "C": rng.normal(0, n ** -0.5, (n, 5)), "c": np.zeros(5)}
    model = Ctn({k: v.astype(np.float32) for k, v in init.items()})
    groups = [{"params": [getattr(model, k)], "weight_decay": v} for k, v in L2.items()]
    opt = torch.optim.Adagrad(groups, lr=0.01, eps=1e-8)
    order = rng.permutation(len(trees))

    def batch_at(step):
        return [trees[order[(step * args.batch + i) % len(trees)]] for i in range(args.batch)]

    def loss_of(batch):
        if args.peer == "recursive":
            return sum(F.cross_entropy(*model.recursive(t), reduction="sum") for t in batch) / args.batch
        return F.cross_entropy(*model.level(batch), reduction="sum") / args.batch

    train_nodes, train_seconds = 0, 0.0
    for step in range(-2, args.steps):  # two warm-up steps
        batch = batch_at(step + 2)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_of(batch).backward()
        opt.step()
        if step >= 0:
            train_seconds += time.perf_counter() - t0
            train_nodes += sum(len(t.words) for t in batch)
    eval_batches = [batch_at(args.steps + 2 + s) for s in range(args.steps)]
    t0 = time.perf_counter()
    with torch.no_grad():
        for batch in eval_batches:
            if args.peer == "recursive":
                for t in batch:
                    model.recursive(t)
            else:
                model.level(batch)
    eval_seconds = time.perf_counter() - t0
    eval_nodes = sum(len(t.words) for b in eval_batches for t in b)
    print(json.dumps({"side": "torch", "peer": args.peer, "dim": n, "threads": args.threads,
                      "train_nodes_per_s": round(train_nodes / train_seconds),
                      "eval_nodes_per_s": round(eval_nodes / eval_seconds), "steps": args.steps}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check")
    c.add_argument("dump")
    c.add_argument("--data", default="../shared/data/sst")
    t = sub.add_parser("time")
    t.add_argument("--peer", choices=["recursive", "level"], required=True)
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--batch", type=int, default=27)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--dim", type=int, default=70)
    t.add_argument("--data", default="../shared/data/sst")
    args = p.parse_args()
    check(args) if args.command == "check" else time_peer(args)


if __name__ == "__main__":
    main()
