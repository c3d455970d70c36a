"""The tutorial notebook (examples/python/train_pea.ipynb): written from its script, and
run as Jupyter runs it, in a kernel, on a small config."""
import os
import subprocess
import sys

import nbclient
import nbformat

from conftest import PRELOAD, ROOT

SCRIPT = ROOT / "examples" / "python" / "train_pea.py"


def test_the_notebook_is_written_from_its_script():
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "notebook.py"), "--check", str(SCRIPT)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_the_notebook_trains_and_draws_its_learning_curve_in_a_kernel(tmp_path, small_config, small_mnist,
                                                                        monkeypatch):
    for name, value in dict(PEA_CONFIG=small_config, PEA_DATA=small_mnist, PEA_EPOCHS=2, PEA_OUT=tmp_path / "run").items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger, on frozen modules
    if PRELOAD:
        monkeypatch.setenv("LD_PRELOAD", PRELOAD)  # the kernel imports the sanitized module
    notebook = nbformat.read(SCRIPT.with_suffix(".ipynb"), as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(SCRIPT.parent)}}).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    printed = "".join(out.get("text", "") for cell in code for out in cell.outputs if out.output_type == "stream")
    assert "children sharing" in printed  # the first cell: the pseudo-ensemble
    assert sum(line.startswith("epoch ") for line in printed.splitlines()) == 2
    assert "at the best validation error" in printed
    assert (tmp_path / "run" / "curve.png").stat().st_size > 0
    # The curve is drawn below its cell, as a notebook shows a figure.
    assert any("image/png" in out.get("data", {}) for out in code[-1].outputs)
