#!/usr/bin/env python3
"""The PyTorch peer of bench/modes.cpp: the same three pseudo-ensemble training steps
of the 784-800-800-10 ReLU network, written as a PyTorch user would write them.

  torch_peer.py time --mode M --batch B --threads T [--reps N]
      one JSON line: {"side": "torch", "mode", "batch", "threads", "ms", "peak_rss_mb"}
  torch_peer.py gemm [--batch B] [--threads T]
      torch.mm's rate at the shapes of bench/gemm.cpp, one JSON line per shape
  torch_peer.py check DIR
      recomputes the objective of the step bench/modes.cpp dumped into DIR, with its
      parameters, inputs and noise, and prints both objectives and their difference

Modes (see bench/modes.cpp): sde, pea, pea-ss. Weights are [in, out] (x @ W + b) as in
pens; SGD keeps m <- mu m + (1 - mu) g (dampening = mu) and the max-norm constraint
bounds each unit's incoming weights (a column of W) at 3.5.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

SIZES = [784, 800, 800, 10]
MAX_NORM = 3.5
SMOOTHING = 1e-4


class Noise:
    """Draws noise as a training step does: Bernoulli keep-masks scaled by 1/(1-p), and
    additive Gaussian noise."""

    def mask(self, child, site, v, p):
        keep = torch.empty_like(v).bernoulli_(1.0 - p)
        return v * keep * (1.0 / (1.0 - p))

    def gaussian(self, child, site, v, sigma):
        return v + sigma * torch.randn_like(v)


class ReplayedNoise:
    """The noise pens drew, recovered from each noise node's input and output: a mask
    factor out / in (any value where the input is 0 gives the same product), and the
    Gaussian term out - in."""

    def __init__(self, tensors, noise_nodes):
        self.t = tensors
        self.ops = {n["node"]: n["op"] for n in noise_nodes}

    def _pair(self, child, site, kind):
        name = f"c{child}/{site}~{kind}"
        if name not in self.ops:
            raise KeyError(f"the dump has no noise node {name}")
        return self.t[name + "/in"], self.t[name + "/out"]

    def mask(self, child, site, v, p):
        x, y = self._pair(child, site, "mask")
        factor = torch.where(x != 0, y / torch.where(x != 0, x, torch.ones_like(x)), torch.zeros_like(x))
        return v * factor

    def gaussian(self, child, site, v, sigma):
        x, y = self._pair(child, site, "gaussian")
        return v + (y - x)


def child_forward(params, x, child, noise, gaussian):
    """One child: Gaussian input noise (pea-ss), input mask 0.2, then per layer the affine
    map, Gaussian bias noise (pea-ss), ReLU, mask 0.5. Returns the logits and the
    partial-noise taps of h1 and h2 (before their own masks)."""
    W1, b1, W2, b2, W3, b3 = params
    v = x
    if gaussian:
        v = noise.gaussian(child, "x", v, 0.1)
    v = noise.mask(child, "x", v, 0.2)
    taps = []
    for i, (W, b) in enumerate(((W1, b1), (W2, b2)), start=1):
        a = torch.addmm(b, v, W)
        if gaussian:
            a = noise.gaussian(child, f"a{i}", a, 0.1)
        h = F.relu(a)
        taps.append(h)
        v = noise.mask(child, f"h{i}", h, 0.5)
    return torch.addmm(b3, v, W3), taps


def clean_forward(params, x):
    W1, b1, W2, b2, W3, b3 = params
    h = F.relu(torch.addmm(b1, x, W1))
    h = F.relu(torch.addmm(b2, h, W2))
    return torch.addmm(b3, h, W3)


def smoothed(logits):
    return (F.softmax(logits, dim=1) + SMOOTHING) / (1.0 + SMOOTHING * logits.shape[1])


def objective(mode, params, x, y, batch, noise):
    if mode == "sde":
        logits, _ = child_forward(params, x, 1, noise, gaussian=False)
        return F.cross_entropy(logits, y)
    if mode == "pea":
        clean = clean_forward(params, x)
        child, _ = child_forward(params, x, 1, noise, gaussian=False)
        p, q = smoothed(clean), smoothed(child)
        kl = (p * (p.log() - q.log())).sum(dim=1).mean()
        return F.cross_entropy(clean, y) + kl
    if mode == "pea-ss":
        # Child 1 over labeled and unlabeled rows; child 2 over the same rows, since its
        # noise is drawn for the whole batch (rows [batch, 2 batch) are unlabeled).
        l1, (h11, h12) = child_forward(params, x, 1, noise, gaussian=True)
        l2, (h21, h22) = child_forward(params, x, 2, noise, gaussian=True)
        u = slice(batch, 2 * batch)
        loss = F.cross_entropy(l1[:batch], y)

        def direction(a, b):
            na = a / torch.sqrt((a * a).sum(dim=1, keepdim=True) + 1e-6)
            nb = b / torch.sqrt((b * b).sum(dim=1, keepdim=True) + 1e-6)
            return ((na - nb) ** 2).sum(dim=1).mean()

        vc = direction(h11[u], h21[u]) + direction(h12[u], h22[u])
        vt = ((torch.tanh(l1[u]) - torch.tanh(l2[u])) ** 2).sum(dim=1).mean()
        return loss + vc + vt
    raise SystemExit(f"torch_peer: unknown mode {mode}")


def initial_params():
    g = torch.Generator().manual_seed(1)
    params = []
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        W = torch.randn(n_in, n_out, generator=g) * 0.01
        b = torch.full((n_out,), 0.1 if i < 2 else 0.0)
        params += [W.requires_grad_(), b.requires_grad_()]
    return params


def inputs(mode, batch):
    rows = 2 * batch if mode == "pea-ss" else batch
    i = np.arange(rows * 784, dtype=np.int64)
    v = (i * 7919) % 401
    x = np.where(v < 200, 0.0, (v - 200) / 200.0).astype(np.float32).reshape(rows, 784)
    y = np.arange(batch) % 10
    return torch.from_numpy(x), torch.from_numpy(y)


def max_norm_(params):
    with torch.no_grad():
        for W in params[0::2]:
            norms = W.norm(dim=0)
            W.mul_(torch.clamp(MAX_NORM / norms, max=1.0))


def time_steps(args):
    torch.set_num_threads(args.threads)
    params = initial_params()
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.5, dampening=0.5)
    x, y = inputs(args.mode, args.batch)
    noise = Noise()

    def step():
        opt.zero_grad(set_to_none=False)
        objective(args.mode, params, x, y, args.batch, noise).backward()
        opt.step()
        max_norm_(params)

    for _ in range(5):
        step()
    ms = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        step()
        ms.append(1000.0 * (time.perf_counter() - t0))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"side": "torch", "mode": args.mode, "batch": args.batch, "threads": args.threads,
                      "ms": round(statistics.median(ms), 3), "peak_rss_mb": round(rss_mb, 1)}))


def check(args):
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    tensors = {}
    for name, t in manifest["tensors"].items():
        a = np.fromfile(os.path.join(args.dir, t["file"]), dtype=np.float32).reshape(t["shape"])
        tensors[name] = torch.from_numpy(a)
    params = [tensors[n] for n in ("W1", "b1", "W2", "b2", "W3", "b3")]
    x, y = tensors["x"], tensors["y"].long()
    noise = ReplayedNoise(tensors, manifest["noise"])
    with torch.no_grad():
        ours = float(objective(manifest["mode"], params, x, y, manifest["batch"], noise))
    theirs = manifest["objective"]
    print(json.dumps({"check": manifest["mode"], "batch": manifest["batch"], "pens_objective": theirs,
                      "torch_objective": ours, "abs_difference": abs(ours - theirs)}))
    return abs(ours - theirs) <= 1e-4


def gemm(args):
    """torch.mm at the shapes of bench/gemm.cpp (the same cases, in the same order)."""
    torch.set_num_threads(args.threads)
    b = args.batch
    cases = [("forward x·W1", b, 784, 800, False, False), ("forward h1·W2", b, 800, 800, False, False),
             ("forward h2·W3", b, 800, 10, False, False), ("backward dW2 = h1ᵀ·g", 800, b, 800, True, False),
             ("backward dh1 = g·W2ᵀ", b, 800, 800, False, True), ("square 1024", 1024, 1024, 1024, False, False)]
    for name, m, k, n, ta, tb in cases:
        a = torch.rand(k, m).t() if ta else torch.rand(m, k)
        w = torch.rand(n, k).t() if tb else torch.rand(k, n)
        reps = max(3, args.reps // 5) if m * k * n > 100_000_000 else args.reps
        for _ in range(3):
            torch.mm(a, w)
        seconds = []
        for _ in range(reps):
            t0 = time.perf_counter()
            torch.mm(a, w)
            seconds.append(time.perf_counter() - t0)
        print(json.dumps({"side": "torch", "case": name, "m": m, "k": k, "n": n, "threads": args.threads,
                          "gflops": round(2.0 * m * k * n / statistics.median(seconds) / 1e9, 1)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("time")
    t.add_argument("--mode", required=True, choices=["sde", "pea", "pea-ss"])
    t.add_argument("--batch", type=int, default=100)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--reps", type=int, default=30)
    c = sub.add_parser("check")
    c.add_argument("dir")
    g = sub.add_parser("gemm")
    g.add_argument("--batch", type=int, default=100)
    g.add_argument("--threads", type=int, default=1)
    g.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    if args.command == "time":
        time_steps(args)
    elif args.command == "gemm":
        gemm(args)
    elif not check(args):
        sys.exit("torch_peer: the objectives differ by more than 1e-4")


if __name__ == "__main__":
    main()
