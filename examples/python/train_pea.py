"""Semi-supervised PEA on MNIST from Python: the tutorial as a script, and, cell by cell
("# %%"), as the notebook train_pea.ipynb (scripts/notebook.py writes it from this file).

    scripts/fetch-mnist.sh                       # MNIST into data/mnist (MD5-checked)
    python3 examples/python/train_pea.py         # or open train_pea.ipynb in Jupyter

It trains examples/mnist/pea-600.json (600 labels; PEA with V^x penalties) for 10 epochs
(about 25 s on 2 cores), prints each evaluation as it comes, and draws the learning curve
with matplotlib into runs/python-pea/curve.png (and below the cell, in a notebook).
PEA_EPOCHS, PEA_CONFIG, PEA_DATA and PEA_OUT change the epochs, the config, the data
folder and the output folder (the tests run it on a small config so).
"""
# %% The model: the pseudo-ensemble pens builds from the model file.
import json
import os
import pathlib

import pens

# The repository: above this file, or above the notebook's folder.
here = pathlib.Path(globals().get("__file__", pathlib.Path.cwd() / "train_pea.py")).resolve().parent
root = next(p for p in [here, *here.parents] if (p / "examples" / "mnist").is_dir())
config = pathlib.Path(os.environ.get("PEA_CONFIG", root / "examples" / "mnist" / "pea-600.json"))
model = pens.load(config.parent / json.loads(config.read_text())["model"])
print(model.inspect().splitlines()[0])
print(model.inspect().split("pseudo-ensemble: ")[1].splitlines()[0])

# %% Train, with a callback that sees every evaluation.
epochs = int(os.environ.get("PEA_EPOCHS", 10))
out = pathlib.Path(os.environ.get("PEA_OUT", root / "runs" / "python-pea"))
curve = []


def report(event, data):
    if event == "eval":
        curve.append(data)
        print(f"epoch {data['epoch']:5.1f}  objective {data['objective']:.4f}  "
              f"validation error {100 * data['validation_error']:.2f}%  test error {100 * data['test_error']:.2f}%",
              flush=True)


summary = pens.train(config, out=out, epochs=epochs, data_dir=os.environ.get("PEA_DATA", root / "data" / "mnist"),
                     callback=report)
best = summary["best_validation"]
print(f"test error {100 * best['test_error']:.2f}% at the best validation error "
      f"({100 * best['validation_error']:.2f}%, epoch {best['epoch']})")

# %% The learning curve, from the evaluations the callback saw (metrics.jsonl holds them too).
import sys

import matplotlib

if "ipykernel" not in sys.modules:
    matplotlib.use("Agg")  # a script draws into the file alone
import matplotlib.pyplot as plt

figure, axes = plt.subplots(figsize=(6, 4))
epochs_seen = [m["epoch"] for m in curve]
axes.plot(epochs_seen, [100 * m["validation_error"] for m in curve], label="validation")
axes.plot(epochs_seen, [100 * m["test_error"] for m in curve], label="test")
axes.set_xlabel("epoch")
axes.set_ylabel("error (%)")
axes.set_title(f"PEA: {config.name}")
axes.legend()
figure.tight_layout()
figure.savefig(out / "curve.png", dpi=100)
print(f"curve: {out / 'curve.png'}")
plt.show()
