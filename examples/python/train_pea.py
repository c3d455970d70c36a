"""Semi-supervised PEA on MNIST from Python, notebook style: each "# %%" cell runs as a
notebook cell (VS Code, Jupyter's jupytext) or the whole file as a script:

    scripts/fetch-mnist.sh                       # MNIST into data/mnist (MD5-checked)
    python3 examples/python/train_pea.py [EPOCHS]

It trains examples/mnist/pea-600.json (600 labels; PEA with V^x penalties) for EPOCHS
epochs (default 10, about 25 s on 2 cores), prints each evaluation as it comes, and
draws the learning curve into runs/python-pea/curve.png with matplotlib.
"""
# %% The model: the pseudo-ensemble pens builds from the model file.
import pathlib
import sys

import pens

root = pathlib.Path(__file__).resolve().parents[2]
config = root / "examples" / "mnist" / "pea-600.json"
model = pens.load(root / "examples" / "mnist" / "pea-xent.model.json")
print(model.inspect().splitlines()[0])
print(model.inspect().split("pseudo-ensemble: ")[1].splitlines()[0])

# %% Train, with a callback that sees every evaluation.
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
curve = []


def report(event, data):
    if event == "eval":
        curve.append(data)
        print(f"epoch {data['epoch']:5.1f}  objective {data['objective']:.4f}  "
              f"validation error {100 * data['validation_error']:.2f}%  test error {100 * data['test_error']:.2f}%",
              flush=True)


summary = pens.train(config, out=root / "runs" / "python-pea", epochs=epochs, data_dir=root / "data" / "mnist",
                     callback=report)
best = summary["best_validation"]
print(f"test error {100 * best['test_error']:.2f}% at the best validation error "
      f"({100 * best['validation_error']:.2f}%, epoch {best['epoch']})")

# %% The learning curve.
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

figure, axes = plt.subplots(figsize=(6, 4))
epochs_seen = [m["epoch"] for m in curve]
axes.plot(epochs_seen, [100 * m["validation_error"] for m in curve], label="validation")
axes.plot(epochs_seen, [100 * m["test_error"] for m in curve], label="test")
axes.set_xlabel("epoch")
axes.set_ylabel("error (%)")
axes.set_title("PEA, 600 MNIST labels")
axes.legend()
figure.tight_layout()
figure.savefig(root / "runs" / "python-pea" / "curve.png", dpi=100)
print("curve: runs/python-pea/curve.png")
