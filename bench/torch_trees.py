#!/usr/bin/env python3
"""The PyTorch peers of bench/trees.cpp: the compact tensor network on SST training trees,
written as a careful PyTorch user would, two ways:

  level      the step's trees together: every node in one buffer sorted by height, and per
             height one index_select of both children and ONE product for the tensor and
             the affine terms, [vec(v1 v2^T); v1; v2; 1] (n^2 + 2n + 1 wide) times one
             weight W = [T as n x n^2 | Ml | Mr | m]^T, then tanh into that height's slice;
             one classification product over all nodes. Noise is drawn once per step
             (per minibatch): the same fuzzed or sliced weights for every tree.
  recursive  one node at a time, in post-order, with the same one-product cell: the only
             form in which each tree can have its own noise (per tree, as the paper and
             pens draw it).

(F.bilinear, which the earlier level peer used, is slower than the one product, tensor
and affine terms together: forward, one thread, n = 70, 16x at 1 row, 5.6x at 8, 2.7x at
32, 1.4x at 128 and 1.2x at 300 rows, measured 2026-11-29.) Models: ctn, ctn+f (weight fuzzing,
sigma 0.02, on W, C, c and the step's word vectors), ctn+s (n/2 latent dimensions kept,
the weights really sliced to them, activation noise sigma 0.05 on leaf and node vectors),
ctn+f+s (slice, then fuzz what is kept), as bench/trees.cpp builds them. All train with
torch.optim.Adagrad (eps 1e-8, the paper's l2 as weight decay per parameter) and
evaluate the clean network under torch.no_grad().

  torch_trees.py check DIR          pens' objective on its dump (1e-4, float32), and in
                                    float64 the level and recursive forms agreeing on
                                    objective and gradients under the same noise draws
  torch_trees.py time --peer level|recursive [--model ctn] [--noise step|tree]
                 [--steps 20] [--batch 27] [--threads 1] [--dim 70] [--data DIR]
                                    one JSON line: train/eval nodes per second
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

# The paper's l2 per parameter: W holds T, Ml, Mr and m (4e-3 each); C, c and E 2e-4.
WEIGHT_DECAY = {"W": 4e-3, "C": 2e-4, "c": 2e-4, "E": 2e-4}
FUZZ, ACTIVATION_NOISE = 0.02, 0.05


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
    """One tree as arrays, in post-order (children before parents, the root last)."""

    def __init__(self, nodes, vocab):
        self.labels = np.array([n[0] for n in nodes], dtype=np.int64)
        self.left = np.array([n[1] for n in nodes], dtype=np.int64)
        self.right = np.array([n[2] for n in nodes], dtype=np.int64)
        self.words = np.array([vocab.get(n[3], 0) if n[3] is not None else -1 for n in nodes], dtype=np.int64)
        height = np.zeros(len(nodes), dtype=np.int64)
        for i, (l, r) in enumerate(zip(self.left, self.right)):
            if l >= 0:
                height[i] = 1 + max(height[l], height[r])
        self.height = height

    def __len__(self):
        return len(self.labels)


class Batch:
    """A step's trees as one buffer of rows sorted by height: rows [0, leaves) are the
    leaves, then each height's nodes; `levels` holds each height's rows and its children's
    rows. Built with numpy, once per step (timed with the step)."""

    def __init__(self, trees):
        sizes = np.array([len(t) for t in trees])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        height = np.concatenate([t.height for t in trees])
        left = np.concatenate([np.where(t.left >= 0, t.left + o, -1) for t, o in zip(trees, offsets)])
        right = np.concatenate([np.where(t.right >= 0, t.right + o, -1) for t, o in zip(trees, offsets)])
        order = np.argsort(height, kind="stable")  # node of each row
        row_of = np.empty_like(order)
        row_of[order] = np.arange(len(order))
        bounds = np.searchsorted(height[order], np.arange(height.max() + 2))
        self.leaves = int(bounds[1])
        self.words = torch.from_numpy(np.concatenate([t.words for t in trees])[order[:self.leaves]])
        self.levels = []
        for h in range(1, height.max() + 1):
            nodes = order[bounds[h]:bounds[h + 1]]
            self.levels.append((int(bounds[h]), int(bounds[h + 1]),
                                torch.from_numpy(row_of[left[nodes]]), torch.from_numpy(row_of[right[nodes]])))
        self.labels = torch.from_numpy(np.concatenate([t.labels for t in trees])[order])
        self.rows = len(order)


class Ctn(torch.nn.Module):
    """The compact tensor network with the cell's weights as one matrix W, rows in the
    order of [vec(v1 v2^T); v1; v2; 1] (v1's index major in the outer product, as pens'
    T[out, in1, in2]), columns the n outputs."""

    def __init__(self, p, dtype=torch.float32):
        super().__init__()
        n = p["T"].shape[0]
        self.n = n
        w = np.concatenate([p["T"].reshape(n, n * n).T, p["Ml"], p["Mr"], p["m"].reshape(1, n)])
        as_param = lambda a: torch.nn.Parameter(torch.as_tensor(np.ascontiguousarray(a), dtype=dtype))
        self.W, self.E, self.C, self.c = as_param(w), as_param(p["E"]), as_param(p["C"]), as_param(p["c"])


class Draw:
    """The noise of one child (a step's, or a tree's): the kept dimensions and the
    effective weights. Only the vocabulary rows of `words` are looked up (and fuzzed)."""

    def __init__(self, model, kind, words, generator, dtype):
        n, fuzz, subspace = model.n, "+f" in kind, "+s" in kind
        self.activation = ACTIVATION_NOISE if subspace else 0.0
        self.generator = generator
        self.used = torch.unique(words)  # sorted
        W, E, C, c = model.W, model.E.index_select(0, self.used), model.C, model.c
        if subspace:
            keep = torch.randperm(n, generator=generator)[: n // 2]
            rows = torch.cat([(keep[:, None] * n + keep[None, :]).reshape(-1), n * n + keep, n * n + n + keep,
                              torch.tensor([n * n + 2 * n])])
            W = W.index_select(0, rows).index_select(1, keep)
            E, C = E.index_select(1, keep), C.index_select(0, keep)
        if fuzz:
            W, E, C, c = (x + FUZZ * torch.randn(x.shape, generator=generator, dtype=dtype) for x in (W, E, C, c))
        self.W, self.E, self.C, self.c = W, E, C, c
        self.width = W.shape[1]

    def leaves(self, words):
        """The (noisy) vectors of these words."""
        return self.noisy(self.E.index_select(0, torch.searchsorted(self.used, words)))

    def noisy(self, v):
        if self.activation == 0:
            return v
        return v + self.activation * torch.randn(v.shape, generator=self.generator, dtype=v.dtype)

    def compose(self, a, b):
        """tanh of the one product for rows a, b: [vec(a_i b_i^T); a_i; b_i; 1] W, noisy."""
        outer = (a.unsqueeze(2) * b.unsqueeze(1)).reshape(a.shape[0], -1)
        ones = torch.ones(a.shape[0], 1, dtype=a.dtype)
        return self.noisy(torch.tanh(torch.cat([outer, a, b, ones], 1) @ self.W))


def level_scores(model, kind, batch, generator, dtype, draw=None):
    """Scores of every row of a Batch, the step's noise drawn once (unless `draw`)."""
    draw = draw or Draw(model, kind, batch.words, generator, dtype)
    vectors = torch.empty(batch.rows, draw.width, dtype=dtype)
    vectors[: batch.leaves] = draw.leaves(batch.words)
    for first, end, left, right in batch.levels:
        vectors[first:end] = draw.compose(vectors.index_select(0, left), vectors.index_select(0, right))
    return torch.addmm(draw.c, vectors, draw.C), batch.labels


def recursive_scores(model, kind, tree, generator, dtype, draw=None):
    """Scores of one tree's nodes, one node at a time: the tree's own noise (unless
    `draw`)."""
    words = torch.from_numpy(tree.words)
    draw = draw or Draw(model, kind, words[words >= 0], generator, dtype)
    vectors = []
    for node in range(len(tree)):
        l, r = int(tree.left[node]), int(tree.right[node])
        if l < 0:
            vectors.append(draw.leaves(words[node: node + 1]))
        else:
            vectors.append(draw.compose(vectors[l], vectors[r]))
    return torch.addmm(draw.c, torch.cat(vectors), draw.C), torch.from_numpy(tree.labels)


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
    trees = [Tree(parse_tree(lines[i - 1]), vocab) for i in manifest["trees"]]
    for t, ids in zip(trees, manifest["leaf_ids"]):
        assert list(t.words[t.words >= 0]) == ids, "leaf ids differ"
    size = manifest["batch"]
    # pens' objective on its own parameters (clean network, float32).
    model = Ctn(params)
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        level = F.cross_entropy(*level_scores(model, "ctn", Batch(trees), g, torch.float32), reduction="sum") / size
        rec = sum(F.cross_entropy(*recursive_scores(model, "ctn", t, g, torch.float32), reduction="sum")
                  for t in trees) / size
    for name, value in [("recursive", rec.item()), ("level", level.item())]:
        rel = abs(value - manifest["objective"]) / abs(manifest["objective"])
        print(f"torch_trees: {name} objective {value:.6f}, pens {manifest['objective']:.6f}, relative difference {rel:.2e}",
              file=sys.stderr)
        if rel > 1e-4:
            sys.exit(f"torch_trees: the {name} peer computes a different objective")
    # The two forms under the same draws, in float64: objective and every gradient. The
    # recursive form takes the step's one draw for every tree; activation noise is left
    # out (the two forms draw it in different orders).
    for kind in ("ctn", "ctn+f", "ctn+s", "ctn+f+s"):
        results = []
        for form in ("level", "recursive"):
            model = Ctn(params, torch.float64)
            batch = Batch(trees)
            draw = Draw(model, kind, batch.words, torch.Generator().manual_seed(7), torch.float64)
            draw.activation = 0.0
            if form == "level":
                loss = F.cross_entropy(*level_scores(model, kind, batch, None, torch.float64, draw), reduction="sum")
            else:
                loss = sum(F.cross_entropy(*recursive_scores(model, kind, t, None, torch.float64, draw), reduction="sum")
                           for t in trees)
            loss.backward()
            results.append((loss.item(), {k: p.grad.clone() for k, p in model.named_parameters()}))
        (a, ga), (b, gb) = results
        worst = max(((ga[k] - gb[k]).abs().max() / gb[k].abs().max().clamp(min=1e-300)).item() for k in ga)
        print(f"torch_trees: {kind}: objective level {a:.12f}, recursive {b:.12f}; gradients differ by at most "
              f"{worst:.1e} of their largest entry", file=sys.stderr)
        if abs(a - b) > 1e-10 * abs(b) or worst > 1e-10:
            sys.exit(f"torch_trees: the level and recursive forms differ on {kind}")


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
    groups = [{"params": [getattr(model, k)], "weight_decay": v} for k, v in WEIGHT_DECAY.items()]
    opt = torch.optim.Adagrad(groups, lr=0.01, eps=1e-8)
    order = rng.permutation(len(trees))
    generator = torch.Generator().manual_seed(1)

    def batch_at(step):
        return [trees[order[(step * args.batch + i) % len(trees)]] for i in range(args.batch)]

    def loss_of(members):
        if args.peer == "level":
            scores, labels = level_scores(model, args.model, Batch(members), generator, torch.float32)
            return F.cross_entropy(scores, labels, reduction="sum") / args.batch
        return sum(F.cross_entropy(*recursive_scores(model, args.model, t, generator, torch.float32), reduction="sum")
                   for t in members) / args.batch

    train_nodes, train_seconds = 0, 0.0
    for step in range(-2, args.steps):  # two warm-up steps
        members = batch_at(step + 2)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_of(members).backward()
        opt.step()
        if step >= 0:
            train_seconds += time.perf_counter() - t0
            train_nodes += sum(len(t) for t in members)
    # Evaluation batches 64 trees at a time, as pens' evaluation does its forests.
    eval_trees = [t for s in range(args.steps) for t in batch_at(args.steps + 2 + s)]
    eval_batches = [eval_trees[i:i + 64] for i in range(0, len(eval_trees), 64)]
    t0 = time.perf_counter()
    with torch.no_grad():
        for members in eval_batches:
            if args.peer == "level":
                level_scores(model, "ctn", Batch(members), generator, torch.float32)
            else:
                for t in members:
                    recursive_scores(model, "ctn", t, generator, torch.float32)
    eval_seconds = time.perf_counter() - t0
    eval_nodes = sum(len(t) for b in eval_batches for t in b)
    print(json.dumps({"side": "torch", "peer": args.peer, "model": args.model,
                      "noise": "step" if args.peer == "level" else "tree", "dim": n, "threads": args.threads,
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
    t.add_argument("--model", choices=["ctn", "ctn+f", "ctn+s", "ctn+f+s"], default="ctn")
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--batch", type=int, default=27)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--dim", type=int, default=70)
    t.add_argument("--data", default="../shared/data/sst")
    args = p.parse_args()
    check(args) if args.command == "check" else time_peer(args)


if __name__ == "__main__":
    main()
