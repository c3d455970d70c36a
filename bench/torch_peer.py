#!/usr/bin/env python3
"""The PyTorch peer of bench/modes.cpp: the same three pseudo-ensemble training steps
of the 784-800-800-10 ReLU network, written as a careful PyTorch user writes them.

  torch_peer.py time --mode M --batch B --threads T [--variant V] [--foreach 0|1] [--reps N]
                     [--precision float32|bfloat16]
      one JSON line: {"side": "torch", "mode", "variant", "foreach", "precision", "batch",
      "threads", "ms", "peak_rss_mb"}; bfloat16 runs the step's forward under
      torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's own mixed precision
  torch_peer.py gemm [--batch B] [--threads T]
      torch.mm's rate at the shapes of bench/gemm.cpp, one JSON line per shape
  torch_peer.py check DIR
      recomputes, in each variant, the objective of the step bench/modes.cpp dumped into
      DIR, with its parameters, inputs and noise, and prints both objectives and their
      difference

Modes (see bench/modes.cpp): sde, pea, pea-ss. What a careful user does: weights in
nn.Linear's layout ([out, in], F.linear), F.dropout for masks, the networks of a step
stacked into one pass per layer where they share weights ("stacked"; "unstacked" runs
them one by one, and bench/compare-torch.sh times both and keeps the faster), no rows
that no term reads (child 2 of pea-ss runs on the unlabeled rows only), gradients
set to None instead of zeroed, SGD's per-parameter loop (its foreach form, --foreach 1,
measured slower here), max-norm as one renorm_ per weight. SGD keeps m <- mu m + (1 - mu) g (dampening = mu); the max-norm
constraint bounds each unit's incoming weights at 3.5.
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
# The forms of each mode's step (see objective()); sde has one network, so one form.
VARIANTS = {"sde": ["stacked"], "pea": ["stacked", "unstacked"], "pea-ss": ["stacked", "unstacked"]}


class Noise:
    """Draws noise as a training step does, the way a PyTorch user draws it: F.dropout
    (inverted: kept values scaled by 1/(1-p)) and additive Gaussian noise."""

    def mask(self, child, site, v, p):
        return F.dropout(v, p, training=True)

    def gaussian(self, child, site, v, sigma):
        return v + sigma * torch.randn_like(v)


class ReplayedNoise:
    """The noise pens drew, recovered from each noise node's input and output: a mask
    factor out / in (any value where the input is 0 gives the same product), and the
    Gaussian term out - in. pens computes each child on the rows the peer does (child 2
    of pea-ss on the unlabeled rows), so each dumped draw covers the rows of its pass."""

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


class Stacked:
    """Noise for a stacked pass: the parts of the rows, each with its own source (a child,
    or None for clean rows), drawn part by part and joined."""

    def __init__(self, noise, parts):
        self.noise, self.parts = noise, parts  # parts: [(child or None, count)]

    def _apply(self, draw, v):
        if len(self.parts) == 1:  # one network: no copies
            child = self.parts[0][0]
            return v if child is None else draw(child, v)
        pieces, at = [], 0
        for child, count in self.parts:
            piece = v[at:at + count]
            pieces.append(piece if child is None else draw(child, piece))
            at += count
        return torch.cat(pieces)

    def mask(self, site, v, p):
        return self._apply(lambda child, piece: self.noise.mask(child, site, piece, p), v)

    def gaussian(self, site, v, sigma):
        return self._apply(lambda child, piece: self.noise.gaussian(child, site, piece, sigma), v)


def network(params, x, noise, gaussian):
    """The 784-800-800-10 network over the rows of x with the noise of `noise` (a
    Stacked): Gaussian input noise (pea-ss), input mask 0.2, then per layer the affine map
    (nn.Linear's layout), Gaussian bias noise (pea-ss), ReLU, mask 0.5. Returns the logits
    and the partial-noise taps of h1 and h2 (before their own masks)."""
    W1, b1, W2, b2, W3, b3 = params
    v = noise.gaussian("x", x, 0.1) if gaussian else x
    v = noise.mask("x", v, 0.2)
    taps = []
    for i, (W, b) in enumerate(((W1, b1), (W2, b2)), start=1):
        a = F.linear(v, W, b)
        if gaussian:
            a = noise.gaussian(f"a{i}", a, 0.1)
        h = F.relu(a)
        taps.append(h)
        v = noise.mask(f"h{i}", h, 0.5)
    return F.linear(v, W3, b3), taps


def smoothed(logits):
    return (F.softmax(logits, dim=1) + SMOOTHING) / (1.0 + SMOOTHING * logits.shape[1])


def direction(a, b):
    na = a / torch.sqrt((a * a).sum(dim=1, keepdim=True) + 1e-6)
    nb = b / torch.sqrt((b * b).sum(dim=1, keepdim=True) + 1e-6)
    return ((na - nb) ** 2).sum(dim=1).mean()


def objective(mode, variant, params, x, y, batch, noise):
    """The step's objective. variant "stacked": the networks of one step share their
    weights, so their rows go through each layer as one product (pea: clean and child
    rows, 2B; pea-ss: child 1 on its 2B rows and child 2 on the B unlabeled rows, 3B);
    "unstacked": a pass per network. Either way only the rows some term reads are
    computed: child 2 of pea-ss runs on the unlabeled rows alone."""
    B = batch
    if mode == "sde":
        logits, _ = network(params, x, Stacked(noise, [(1, B)]), gaussian=False)
        return F.cross_entropy(logits, y)
    if mode == "pea":
        if variant == "stacked":
            logits, _ = network(params, torch.cat([x, x]), Stacked(noise, [(None, B), (1, B)]), False)
            clean, child = logits[:B], logits[B:]
        else:
            clean, _ = network(params, x, Stacked(noise, [(None, B)]), gaussian=False)
            child, _ = network(params, x, Stacked(noise, [(1, B)]), gaussian=False)
        p, q = smoothed(clean), smoothed(child)
        kl = (p * (p.log() - q.log())).sum(dim=1).mean()
        return F.cross_entropy(clean, y) + kl
    if mode == "pea-ss":
        unlabeled = slice(B, 2 * B)
        if variant == "stacked":
            both = Stacked(noise, [(1, 2 * B), (2, B)])
            logits, (h1, h2) = network(params, torch.cat([x, x[unlabeled]]), both, gaussian=True)
            l1, l2 = logits[:2 * B], logits[2 * B:]
            h11, h12, h21, h22 = h1[B:2 * B], h2[B:2 * B], h1[2 * B:], h2[2 * B:]
        else:
            l1, (h11, h12) = network(params, x, Stacked(noise, [(1, 2 * B)]), gaussian=True)
            l2, (h21, h22) = network(params, x[unlabeled], Stacked(noise, [(2, B)]), gaussian=True)
            h11, h12 = h11[unlabeled], h12[unlabeled]
        loss = F.cross_entropy(l1[:B], y)
        vc = direction(h11, h21) + direction(h12, h22)
        vt = ((torch.tanh(l1[unlabeled]) - torch.tanh(l2)) ** 2).sum(dim=1).mean()
        return loss + vc + vt
    raise SystemExit(f"torch_peer: unknown mode {mode}")


def initial_params():
    """Weights in nn.Linear's layout, [out, in] (F.linear computes x Wᵀ + b)."""
    g = torch.Generator().manual_seed(1)
    params = []
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        W = torch.randn(n_out, n_in, generator=g) * 0.01
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
    """Each unit's incoming weights (a row of W) within an L2 norm of 3.5: one renorm_."""
    with torch.no_grad():
        for W in params[0::2]:
            W.renorm_(2, 0, MAX_NORM)


def time_steps(args):
    torch.set_num_threads(args.threads)
    params = initial_params()
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.5, dampening=0.5, foreach=bool(args.foreach))
    x, y = inputs(args.mode, args.batch)
    noise = Noise()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bfloat16"):
            loss = objective(args.mode, args.variant, params, x, y, args.batch, noise)
        loss.backward()
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
    print(json.dumps({"side": "torch", "mode": args.mode, "variant": args.variant, "foreach": args.foreach,
                      "precision": args.precision, "batch": args.batch, "threads": args.threads, "ms": round(statistics.median(ms), 3),
                      "peak_rss_mb": round(rss_mb, 1)}))


def check(args):
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    tensors = {}
    for name, t in manifest["tensors"].items():
        a = np.fromfile(os.path.join(args.dir, t["file"]), dtype=np.float32).reshape(t["shape"])
        tensors[name] = torch.from_numpy(a)
    # pens' weights are [in, out]; the peer's [out, in], as nn.Linear keeps them.
    params = [tensors[n].t().contiguous() if n.startswith("W") else tensors[n]
              for n in ("W1", "b1", "W2", "b2", "W3", "b3")]
    x, y = tensors["x"], tensors["y"].long()
    noise = ReplayedNoise(tensors, manifest["noise"])
    theirs = manifest["objective"]
    ok = True
    for variant in VARIANTS[manifest["mode"]]:
        with torch.no_grad():
            ours = float(objective(manifest["mode"], variant, params, x, y, manifest["batch"], noise))
        print(json.dumps({"check": manifest["mode"], "variant": variant, "batch": manifest["batch"],
                          "pens_objective": theirs, "torch_objective": ours, "abs_difference": abs(ours - theirs)}))
        ok = ok and abs(ours - theirs) <= 1e-4
    return ok


def gemm(args):
    """torch.mm at the shapes of bench/gemm.cpp (the same cases, in the same order)."""
    torch.set_num_threads(args.threads)
    b = args.batch
    cases = [("forward x·W1", b, 784, 800, False, False), ("forward h1·W2", b, 800, 800, False, False),
             ("forward h2·W3", b, 800, 10, False, False), ("backward dW1 = xᵀ·g", 784, b, 800, True, False),
             ("backward dW2 = h1ᵀ·g", 800, b, 800, True, False), ("backward dW3 = h2ᵀ·g", 800, b, 10, True, False),
             ("backward dh1 = g·W2ᵀ", b, 800, 800, False, True), ("backward dh2 = g·W3ᵀ", b, 10, 800, False, True),
             ("square 1024", 1024, 1024, 1024, False, False)]
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
    t.add_argument("--variant", choices=["stacked", "unstacked"], default="stacked")
    t.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
    # The loop measured faster here (pea, batch 100, 2 threads: 12.3-12.4 ms against
    # 13.0-13.3 ms with foreach), so it is the default.
    t.add_argument("--foreach", type=int, choices=[0, 1], default=0,
                   help="SGD over all parameters in one foreach kernel (1) or a loop (0)")
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
