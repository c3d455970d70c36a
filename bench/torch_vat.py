#!/usr/bin/env python3
"""The PyTorch peer of pens' VAT configs: virtual adversarial training (Miyato et al.,
TPAMI 2018) of the 784-1200-600-300-150-10 ReLU network with batch normalisation,
written as a careful PyTorch user writes it, trained on the very batches `pens train
CONFIG` draws (pens.TrainingPlan: the same split, the same labeled and unlabeled rows
at every step, the same learning-rate schedule), so that a difference in test error
between the two is the implementations', not the data's.

  torch_vat.py CONFIG [--passes separate|joint] [--probe-precision float32|float64]
                      [--init torch|pens] [--threads T] [--epochs E] [--out FILE]

The adversarial noise's eps, xi and iterations are read from the config's model file
(the input's adversarial annotation). --passes separate (the VAT paper's code): the
labeled rows and the unlabeled rows go through the network in separate passes, each
normalised over its own rows, and the KL term covers the unlabeled rows (pens' graph
with statistics_by_part and the term on the unlabeled rows); joint (pens' graph
without them): one pass over the labeled and unlabeled rows together, the KL term over
all of them. Either way the perturbed passes normalise with their own batch's statistics
and leave the running statistics alone, as the paper's code does. --probe-precision
float64 runs the power iteration on a float64 copy of the network (xi = 1e-6 is below
float32's resolution on bright pixels). --init pens draws the weights as pens' model
files do (He normal, biases 0) in place of nn.Linear's default. Prints a line per
epoch (train: the error on the labeled examples, evaluated as validation and test are)
and, at the end, one JSON line: test error at the best validation epoch, minutes, the
settings.
"""
import argparse
import contextlib
import copy
import json
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import pens

HIDDEN = [1200, 600, 300, 150]


def network(init):
    layers, width = [], 784
    for h in HIDDEN:
        # Batch normalisation's running statistics at decay 0.99, as pens' vat-bn model's.
        layers += [nn.Linear(width, h, bias=False), nn.BatchNorm1d(h, momentum=0.01), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    net = nn.Sequential(*layers)
    if init == "pens":  # He normal, as pens' vat-bn model file draws its weights; biases 0
        for m in net.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=(2.0 / m.in_features) ** 0.5)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
    return net


@contextlib.contextmanager
def statistics_frozen(net):
    """Batch statistics in use, running statistics not updated (momentum 0 keeps them)."""
    norms = [m for m in net.modules() if isinstance(m, nn.BatchNorm1d)]
    saved = [m.momentum for m in norms]
    for m in norms:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, s in zip(norms, saved):
            m.momentum = s


def unit_rows(d):
    return d / (d.flatten(1).norm(dim=1, keepdim=True) + 1e-12)


def kl(p_logits, q_logits):
    """Mean over rows of KL(p || q), p a fixed target."""
    p = F.softmax(p_logits, dim=1)
    return (p * (F.log_softmax(p_logits, dim=1) - F.log_softmax(q_logits, dim=1))).sum(1).mean()


def adversarial(net, x, p_logits, eps, xi, iterations, probe_net):
    """r_adv: eps times the unit direction of the power iteration from a random start."""
    probe, xp, pp = net, x, p_logits
    if probe_net is not None:  # float64: a copy of the network at this step's weights
        probe_net.load_state_dict(net.state_dict())
        probe, xp, pp = probe_net, x.double(), p_logits.double()
    d = torch.randn_like(xp)
    with statistics_frozen(probe):
        for _ in range(iterations):
            d = (xi * unit_rows(d)).requires_grad_(True)
            (g,) = torch.autograd.grad(kl(pp, probe(xp + d)), d)
            d = g.detach()
    return (eps * unit_rows(d)).to(x.dtype)


def error_rate(net, x, y):
    net.eval()
    with torch.no_grad():
        wrong = sum((net(x[i:i + 1000]).argmax(1) != y[i:i + 1000]).sum().item() for i in range(0, len(x), 1000))
    net.train()
    return 100.0 * wrong / len(x)


def adversarial_settings(model):
    """eps, xi and iterations of the model's adversarial annotation, read from pens'
    canonical form of the model (which writes every attribute, defaults included). Its
    precision is not read: the peer's own --probe-precision says how its power
    iteration runs."""
    model = json.loads(model.to_json())
    for inp in model["inputs"]:
        for noise in inp.get("noise", []):
            if noise["kind"] == "adversarial":
                return {key: noise[key] for key in ("eps", "xi", "iterations")}
    sys.exit("torch_vat: the config's model has no adversarial noise on an input")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--passes", choices=["separate", "joint"], default="separate")
    ap.add_argument("--probe-precision", choices=["float32", "float64"], default="float32")
    ap.add_argument("--init", choices=["torch", "pens"], default="torch",
                    help="nn.Linear's default initialisation, or pens' He normal")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epochs", type=int, help="fewer epochs than the config's (its schedule unchanged)")
    ap.add_argument("--out", help="also append the final JSON line to this file")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    plan = pens.TrainingPlan(args.config)
    settings = adversarial_settings(plan.model)
    torch.manual_seed(plan.seed)
    net = network(args.init)
    probe_net = copy.deepcopy(net).double() if args.probe_precision == "float64" else None
    optimizer = torch.optim.Adam(net.parameters(), lr=0.0)
    parts = {}
    for part in ("labeled", "validation", "test"):
        x, y = plan.data(part)
        parts[part] = (torch.from_numpy(np.asarray(x)), torch.from_numpy(np.asarray(y)).long())
    labeled = plan.batch_labeled
    steps_per_epoch = plan.steps_per_epoch
    epochs = args.epochs or plan.total_steps // steps_per_epoch
    print(f"torch_vat: {args.config}: {args.passes} passes, probe in {args.probe_precision}, {args.init} init, "
          f"eps {settings['eps']}, xi {settings['xi']}, {settings['iterations']} iteration(s); {labeled} labeled + "
          f"{plan.batch_unlabeled} unlabeled rows a step; {epochs} epochs of {steps_per_epoch} steps; "
          f"{args.threads} thread(s)", flush=True)

    best = (float("inf"), None, None)
    start = time.time()
    for epoch in range(1, epochs + 1):
        for step in range((epoch - 1) * steps_per_epoch, epoch * steps_per_epoch):
            feed = plan.batch(step)
            x = torch.from_numpy(np.asarray(feed["x"]))
            y = torch.from_numpy(np.asarray(feed["y"])).long()
            for group in optimizer.param_groups:
                group["lr"] = plan.at(step)["learning_rate"]
            if args.passes == "separate":
                xent = F.cross_entropy(net(x[:labeled]), y)
                x_vat = x[labeled:]
                with torch.no_grad():
                    p_logits = net(x_vat)
            else:
                logits = net(x)
                xent = F.cross_entropy(logits[:labeled], y)
                x_vat, p_logits = x, logits.detach()
            r = adversarial(net, x_vat, p_logits, settings["eps"], settings["xi"], settings["iterations"], probe_net)
            with statistics_frozen(net):
                vat = kl(p_logits, net(x_vat + r))
            optimizer.zero_grad(set_to_none=True)
            (xent + vat).backward()
            optimizer.step()
        train = error_rate(net, *parts["labeled"])
        val = error_rate(net, *parts["validation"])
        test = error_rate(net, *parts["test"])
        if val < best[0]:
            best = (val, test, epoch)
        print(f"epoch {epoch:3d}  xent {xent.item():.4f}  vat {vat.item():.4f}  train {train:.2f}%  val {val:.2f}%  "
              f"test {test:.2f}%  "
              f"{(time.time() - start) / 60:.1f} min", flush=True)
    result = {"side": "torch", "config": args.config, "passes": args.passes, "probe_precision": args.probe_precision,
              "init": args.init,
              **settings, "epochs": epochs, "threads": args.threads, "best_val": best[0], "test_at_best_val": best[1],
              "best_epoch": best[2], "minutes": round((time.time() - start) / 60, 1)}
    line = json.dumps(result)
    print(line)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
