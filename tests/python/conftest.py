"""Shared pieces of the Python tests: the pens binary, the repository, a small data set
in MNIST's IDX form (4 x 4 images, 10 classes) and a model that fits it."""
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest

import pens

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Under the sanitized build (scripts/test.sh --sanitize) this Python started with the
# sanitizer runtime preloaded for the extension module; the pens tool it starts has the
# runtime linked in, and must not load a second one.
SANITIZED = os.environ.get("PENS_SANITIZED") == "1"
PRELOAD = os.environ.pop("LD_PRELOAD", None)  # what another Python importing pens needs


@pytest.fixture(scope="session")
def pens_binary():
    path = pathlib.Path(os.environ.get("PENS", ROOT / "build" / "pens"))
    if not path.exists():
        pytest.fail(f"{path}: no pens binary (build first, or set PENS)")
    return str(path)


def run_pens(binary, *args):
    done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def write_idx(path, array):
    """An IDX file of unsigned bytes (MNIST's type 0x08)."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture(scope="session")
def small_mnist(tmp_path_factory):
    """600 training and 200 test images of 4 x 4 pixels whose class is the brightest of
    the first 10 pixels, with noise: a task a small network learns in a few steps."""
    folder = tmp_path_factory.mktemp("mnist")
    rng = np.random.default_rng(7)
    for part, count in (("train", 600), ("t10k", 200)):
        labels = rng.integers(0, 10, count)
        images = rng.integers(0, 120, (count, 4, 4))
        images.reshape(count, 16)[np.arange(count), labels] = 255
        write_idx(folder / f"{part}-images-idx3-ubyte", images)
        write_idx(folder / f"{part}-labels-idx1-ubyte", labels)
    return folder


@pytest.fixture(scope="session")
def mnist_shaped(tmp_path_factory):
    """A test set in MNIST's own shape: 300 random 28 x 28 images and labels."""
    folder = tmp_path_factory.mktemp("mnist-shaped")
    rng = np.random.default_rng(11)
    write_idx(folder / "t10k-images-idx3-ubyte", rng.integers(0, 256, (300, 28, 28)))
    write_idx(folder / "t10k-labels-idx1-ubyte", rng.integers(0, 10, 300))
    return folder


def small_model():
    """A 16-12-10 PEA model built in Python: mask noise on the input and the hidden
    layer, V^k (kl) on the output for unlabeled rows."""
    b = pens.ModelBuilder("a 16-12-10 pseudo-ensemble for the Python tests")
    x = b.input("x", [None, 16], layer="in", noise=[pens.noise("mask", p=0.2)])
    y = b.input("y", [None], dtype="index")
    w1 = b.param("W1", [16, 12], init="normal", std=0.3)
    b1 = b.param("b1", [12], init="constant", value=0.1)
    w2 = b.param("W2", [12, 10], init="normal", std=0.3)
    b2 = b.param("b2", [10], init="zeros")
    a1 = b.add("affine", [x, w1, b1], name="a1", layer="h1")
    h1 = b.add("relu", [a1], name="h1", layer="h1", noise=[pens.noise("mask", p=0.5)])
    logits = b.add("affine", [h1, w2, b2], name="logits", layer="out", output=True)
    b.add("mean", [b.add("softmax_xent", [logits, y], name="losses")], name="loss", loss=True)
    b.pseudo_ensemble(children=2, loss_on="child", penalties=[pens.penalty("logits", "kl", 1.0, rows="unlabeled")])
    return b.build()


@pytest.fixture
def small_config(tmp_path, small_mnist):
    """A training config for small_model() on small_mnist: 3 epochs of 10 steps."""
    small_model().save(str(tmp_path / "small.model.json"))
    config = {
        "model": "small.model.json",
        "data": {"dir": str(small_mnist), "labeled": 100, "validation": 100, "split_seed": 1},
        "batch": {"labeled": 16, "unlabeled": 16},
        "optimizer": {"learning_rate": 0.1},
        "run": {"epochs": 3, "steps_per_epoch": 10, "seed": 3, "threads": 1},
        "eval": {"every_epochs": 1},
        "checkpoint": {"every_epochs": 1},
    }
    path = tmp_path / "small.json"
    path.write_text(json.dumps(config))
    return path


def metrics_without_timings(folder):
    """A run folder's metrics.jsonl without its clock: what two runs of the same bits share."""
    lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    timing = ("elapsed_seconds", "examples_per_second", "wall_seconds")
    return [{k: v for k, v in m.items() if k not in timing} for m in lines]
