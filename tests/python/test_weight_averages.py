"""scripts/add-weight-averages.py: a moving average of each trained parameter, read at
inference, in a model file pens accepts; a second pass, or a decay outside (0, 1), is
refused."""
import json
import subprocess
import sys

from conftest import ROOT, run_pens

SCRIPT = ROOT / "scripts" / "add-weight-averages.py"
MODEL = ROOT / "examples" / "sst" / "tree-lstm-glove.model.json"


def trained_parameters(model):
    return [p for p in model["parameters"] if "frozen" not in p.get("flags", [])]


def add(source, output, *options):
    return subprocess.run([sys.executable, str(SCRIPT), str(source), str(output), *options], capture_output=True,
                          text=True)


def test_each_trained_parameter_gets_an_average_read_at_inference(tmp_path, pens_binary):
    out = tmp_path / "averaged.model.json"
    done = add(MODEL, out, "--decay", "0.999")
    assert done.returncode == 0, done.stderr
    before = json.loads(MODEL.read_text())
    after = json.loads(out.read_text())
    trained = trained_parameters(before)
    assert trained
    params = {p["name"]: p for p in after["parameters"]}
    averages = {a["source"]: a for a in after["moving_averages"]}
    assert sorted(averages) == sorted(p["name"] for p in trained)
    for p in trained:
        a = averages[p["name"]]
        assert a == {"at_inference": True, "decay": 0.999, "param": "average/" + p["name"], "source": p["name"]}
        assert params[a["param"]]["shape"] == p["shape"]
        assert params[a["param"]]["flags"] == ["frozen"]
    assert after["nodes"] == before["nodes"]
    assert "moving average (decay 0.999)" in after["metadata"]["description"]
    run_pens(pens_binary, "fmt", out)  # a model file pens reads


def test_a_second_pass_and_a_decay_out_of_range_are_refused(tmp_path):
    out = tmp_path / "averaged.model.json"
    assert add(MODEL, out, "--decay", "0.99").returncode == 0
    again = add(out, tmp_path / "twice.model.json", "--decay", "0.99")
    assert again.returncode != 0 and "already has a parameter 'average/" in again.stderr
    assert not (tmp_path / "twice.model.json").exists()
    wrong = add(MODEL, tmp_path / "wrong.model.json", "--decay", "1")
    assert wrong.returncode != 0 and "--decay must lie strictly between 0 and 1" in wrong.stderr


def test_params_averages_only_the_parameters_it_names(tmp_path):
    trained = [p["name"] for p in trained_parameters(json.loads(MODEL.read_text()))]
    chosen = trained[0]
    out = tmp_path / "one.model.json"
    done = add(MODEL, out, "--decay", "0.999", "--params", chosen)
    assert done.returncode == 0, done.stderr
    after = json.loads(out.read_text())
    assert [a["source"] for a in after["moving_averages"] if a["param"].startswith("average/")] == [chosen]
    # The pattern matches whole names: one that is only part of a name names nothing, and that is refused.
    partial = next(n[:-1] for n in trained if len(n) > 1 and n[:-1] not in trained)
    none = add(MODEL, tmp_path / "none.model.json", "--decay", "0.999", "--params", partial)
    assert none.returncode != 0 and f"no trained parameter matching '{partial}'" in none.stderr
