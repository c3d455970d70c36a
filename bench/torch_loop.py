#!/usr/bin/env python3
"""The PyTorch peer of a whole `pens train` run: the training loop of
examples/mnist/pea-600.json (semi-supervised PEA with V^x, 784-800-800-10 ReLU, two
children, 64 labeled + 64 unlabeled rows a step, SGD with momentum and max-norm) with
its evaluations, written as a careful PyTorch user would write it:

  - nn.Linear layouts ([out, in] weights), F.linear;
  - both children in one stacked pass: the batch of 128 rows is repeated, each copy
    drawing its own noise, so every layer is one product over 256 rows;
  - the loss on child 1's labeled rows only, V^x (symmetrised cross-entropy between the
    children's smoothed softmaxes, lambda 2) on all rows;
  - evaluation of the clean network under torch.no_grad() in batches of 1000 on the
    validation set (10,000), the test set (10,000) and the 600 labeled examples, every
    `--eval-every` epochs and at the end, as pens does; the final parameters saved.

  torch_loop.py --data-dir data/mnist --epochs 4 --threads 2
      one JSON line: {"side": "torch", "epochs", "steps", "threads", "loop_seconds",
      "examples_per_second", "test_error"}; examples are the 128 rows of each step, the
      time runs from the first step to the end of the last evaluation (data loading and
      the interpreter's start are not in it).
"""
import argparse
import json
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

SIZES = [784, 800, 800, 10]
MAX_NORM = 3.5
SMOOTHING = 1e-4
LAMBDA = 2.0


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, name):
    images = read_idx(os.path.join(data_dir, f"{name}-images-idx3-ubyte")).reshape(-1, 784)
    labels = read_idx(os.path.join(data_dir, f"{name}-labels-idx1-ubyte"))
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def split(x, y, labeled, validation, seed):
    """`labeled` examples (a tenth per class), `validation` held out, the rest unlabeled."""
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))
    val, rest = order[:validation], order[validation:]
    per_class = labeled // 10
    lab = torch.cat([rest[y[rest] == c][:per_class] for c in range(10)])
    mask = torch.ones(x.shape[0], dtype=torch.bool)
    mask[lab] = False
    mask[val] = False
    unl = mask.nonzero().squeeze(1)
    return (x[lab], y[lab]), x[unl], (x[val], y[val])


class Network(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(i, o) for i, o in zip(SIZES[:-1], SIZES[1:]))
        with torch.no_grad():
            for i, layer in enumerate(self.layers):
                layer.weight.normal_(0.0, 0.01)
                layer.bias.fill_(0.1 if i < 2 else 0.0)

    def clean(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)

    def children(self, x):
        """Both children at once on x repeated twice: Gaussian (0.1) and mask (0.2) noise
        on the input, Gaussian bias noise (0.1) and mask (0.5) on each hidden layer."""
        v = x.repeat(2, 1)
        v = v + 0.1 * torch.randn_like(v)
        v = v * torch.bernoulli(torch.full_like(v, 0.8)) * (1.0 / 0.8)
        for layer in self.layers[:-1]:
            a = layer(v)
            a = a + 0.1 * torch.randn_like(a)
            h = F.relu(a)
            v = h * torch.bernoulli(torch.full_like(h, 0.5)) * 2.0
        return self.layers[-1](v).chunk(2)


def smoothed_log(logits):
    p = (F.softmax(logits, dim=1) + SMOOTHING) / (1.0 + SMOOTHING * logits.shape[1])
    return p, p.log()


def error(net, x, y, batch=1000):
    wrong = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            wrong += int((net.clean(x[i:i + batch]).argmax(dim=1) != y[i:i + batch]).sum())
    return wrong / x.shape[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="data/mnist")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps-per-epoch", type=int, default=250)
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_x, train_y = load(args.data_dir, "train")
    test_x, test_y = load(args.data_dir, "t10k")
    (lab_x, lab_y), unl_x, (val_x, val_y) = split(train_x, train_y, 600, 10000, args.seed)
    net = Network()
    opt = torch.optim.SGD(net.parameters(), lr=0.3, momentum=0.5, dampening=0.5)
    weights = [layer.weight for layer in net.layers]
    gen = torch.Generator().manual_seed(args.seed + 1)

    start = time.perf_counter()
    test_err = None
    for epoch in range(args.epochs):
        # The config's schedules: learning rate 0.3 after one warm-up epoch, decayed by
        # 0.95 an epoch; momentum from 0.5 to 0.95 over 20 epochs.
        lr = 0.3 * min(1.0, (epoch + 1) / 1.0) * 0.95 ** epoch
        mu = 0.5 + (0.95 - 0.5) * min(1.0, epoch / 20.0)
        for group in opt.param_groups:
            group["lr"], group["momentum"], group["dampening"] = lr, mu, mu
        for _ in range(args.steps_per_epoch):
            li = torch.randint(0, lab_x.shape[0], (64,), generator=gen)
            ui = torch.randint(0, unl_x.shape[0], (64,), generator=gen)
            x = torch.cat([lab_x[li], unl_x[ui]])
            l1, l2 = net.children(x)
            p1, log1 = smoothed_log(l1)
            p2, log2 = smoothed_log(l2)
            vx = -0.5 * ((p1 * log2).sum(dim=1) + (p2 * log1).sum(dim=1)).mean()
            loss = F.cross_entropy(l1[:64], lab_y[li]) + LAMBDA * vx
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
            with torch.no_grad():
                for w in weights:  # each unit's incoming weights are a row of w
                    w.mul_(torch.clamp(MAX_NORM / w.norm(dim=1, keepdim=True), max=1.0))
        if (epoch + 1) % args.eval_every == 0 or epoch + 1 == args.epochs:
            error(net, val_x, val_y)
            error(net, lab_x, lab_y)
            test_err = error(net, test_x, test_y)
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(net.state_dict(), os.path.join(tmp, "model.pt"))
    seconds = time.perf_counter() - start
    steps = args.epochs * args.steps_per_epoch
    print(json.dumps({"side": "torch", "epochs": args.epochs, "steps": steps, "threads": args.threads,
                      "loop_seconds": round(seconds, 2), "examples_per_second": round(steps * 128 / seconds),
                      "test_error": test_err}))


if __name__ == "__main__":
    main()
