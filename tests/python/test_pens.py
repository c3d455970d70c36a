"""The Python package against the library and the pens tool."""
import json
import os
import re
import subprocess
import threading

import numpy as np
import pytest

import pens
from conftest import ROOT, metrics_without_timings, run_pens, small_model


def test_a_model_from_examples_loads_and_inspects():
    model = pens.load(ROOT / "examples" / "mnist" / "pea-xent.model.json")
    text = model.inspect()
    assert "pseudo-ensemble: 2 children" in text
    graph = model.inspect(format="json", batch=10)
    assert graph["batch"] == 10 and graph["children"] == 2
    assert {"x", "W1", "c1/logits", "c2/logits"} <= {node["name"] for node in graph["nodes"]}
    assert any(tap["penalty"] == "xent" for tap in graph["taps"])
    assert model.inspect(format="dot").startswith("digraph")
    assert "children" not in model.inspect(parent=True)


def test_forward_on_numpy_equals_pens_eval(tmp_path, mnist_shaped, pens_binary):
    # The paper's network from examples/, given values, evaluated by pens eval and by
    # pens.compile on the same images.
    model = pens.load(ROOT / "examples" / "mnist" / "pea-xent.model.json")
    model.initialize(seed=5)
    model.save(str(tmp_path / "m.json"))
    printed = run_pens(pens_binary, "eval", tmp_path / "m.json", "--data-dir", mnist_shaped)
    wrong = int(re.search(r"\((\d+) wrong\)", printed).group(1))

    images = np.fromfile(mnist_shaped / "t10k-images-idx3-ubyte", np.uint8, offset=16).reshape(300, 784)
    labels = np.fromfile(mnist_shaped / "t10k-labels-idx1-ubyte", np.uint8, offset=8)
    net = pens.compile(pens.load(tmp_path / "m.json"), batch=300)
    logits = net.forward(x=images / np.float32(255))["logits"]
    assert logits.shape == (300, 10) and logits.dtype == np.float32
    assert int((logits.argmax(axis=1) != labels).sum()) == wrong
    # float64 computes the same scores to float32 round-off.
    net64 = pens.compile(pens.load(tmp_path / "m.json"), batch=300, dtype="float64")
    np.testing.assert_allclose(net64.forward(x=images / 255.0)["logits"], logits, rtol=1e-4, atol=1e-5)


def test_a_centred_model_carries_the_mean_training_image(tmp_path, small_mnist, pens_binary):
    # pens new mlp --center: the model subtracts the mean of the folder's training images,
    # so its scores on x are the uncentred network's on x - mean, with the same weights.
    run_pens(pens_binary, "new", "mlp", "--layers", "16,8,10", "--center", small_mnist, "--values", "3",
             "--output", tmp_path / "centred.json")
    run_pens(pens_binary, "new", "mlp", "--layers", "16,8,10", "--values", "3", "--output", tmp_path / "plain.json")
    images = np.fromfile(small_mnist / "train-images-idx3-ubyte", np.uint8, offset=16).reshape(600, 16) / 255.0
    centred = pens.load(tmp_path / "centred.json")
    stored = next(n for n in json.loads((tmp_path / "centred.json").read_text())["nodes"] if n["name"] == "x_mean")
    np.testing.assert_allclose(stored["attrs"]["values"], images.mean(axis=0), atol=1e-12)
    x = images[:20]
    scores = pens.compile(centred, batch=20, dtype="float64").forward(x=x)["logits"]
    plain = pens.compile(pens.load(tmp_path / "plain.json"), batch=20, dtype="float64")
    np.testing.assert_allclose(scores, plain.forward(x=x - images.mean(axis=0))["logits"], rtol=1e-9, atol=1e-10)


def test_training_from_python_gives_the_metrics_of_pens_train(tmp_path, small_config, pens_binary):
    run_pens(pens_binary, "train", small_config, "--out", tmp_path / "cli")
    events = []
    summary = pens.train(small_config, out=tmp_path / "py", callback=lambda event, data: events.append((event, data)))
    assert summary["out_dir"] == str(tmp_path / "py") and not summary["diverged"]

    assert metrics_without_timings(tmp_path / "py") == metrics_without_timings(tmp_path / "cli")
    assert len(metrics_without_timings(tmp_path / "py")) == 3
    steps = [data for event, data in events if event == "step"]
    assert [s["step"] for s in steps] == list(range(1, 31))
    assert [data["epoch"] for event, data in events if event == "eval"] == [1, 2, 3]


def test_a_run_folder_evaluates_as_its_best_model_on_its_data(tmp_path, small_config, small_mnist, pens_binary):
    # The run folder's config names its files absolutely, so pens eval RUN_DIR finds the
    # run's data from any working directory.
    run_pens(pens_binary, "train", small_config, "--out", tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["model"] == str(tmp_path / "small.model.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_folder = subprocess.run([os.path.abspath(pens_binary), "eval", str(tmp_path / "run")], cwd=elsewhere, check=True,
                               capture_output=True, text=True).stdout
    by_file = run_pens(pens_binary, "eval", tmp_path / "run" / "best.model.json", "--data-dir", small_mnist)
    assert by_folder == by_file and "error" in by_file
    not_a_run = subprocess.run([str(pens_binary), "eval", str(elsewhere)], capture_output=True, text=True)
    assert not_a_run.returncode != 0 and "not a run folder: it has no config.json" in not_a_run.stderr


def test_training_releases_the_python_lock(tmp_path, small_config):
    # While a run computes in another thread, this thread runs Python: it sees the run's
    # first evaluation written and the run not yet finished. With the lock held for the
    # whole run it could look only once the run had returned.
    out = tmp_path / "run"
    runner = threading.Thread(target=pens.train, args=(small_config,), kwargs={"out": out, "epochs": 30})
    runner.start()
    seen_mid_run = False
    while runner.is_alive() and not seen_mid_run:
        seen_mid_run = (out / "metrics.jsonl").exists() and not (out / "summary.json").exists()
    runner.join()
    assert seen_mid_run and (out / "summary.json").exists()


def test_a_callback_that_raises_stops_the_run(tmp_path, small_config):
    def stop(event, data):
        if event == "step" and data["step"] == 12:
            raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        pens.train(small_config, out=tmp_path / "stopped", callback=stop)
    # The checkpoint of epoch 1 stays, and the run resumes from it.
    summary = pens.train(small_config, out=tmp_path / "stopped", resume=True)
    assert summary["epochs"] == 3


def test_resume_from_another_checkpoint_touches_the_folder_only_once_accepted(tmp_path, small_config):
    pens.train(small_config, out=tmp_path / "a", seed=1)
    pens.train(small_config, out=tmp_path / "b", seed=2)
    own = (tmp_path / "b" / "checkpoint.pens").read_bytes()
    # Another seed's checkpoint is refused, and b keeps its own.
    with pytest.raises(pens.Error, match="written by a different config: run.seed 1 in the checkpoint, 2 now"):
        pens.train(small_config, out=tmp_path / "b", seed=2, epochs=4, resume_from=tmp_path / "a" / "checkpoint.pens")
    assert (tmp_path / "b" / "checkpoint.pens").read_bytes() == own
    # Taken with a's seed, b goes on from a's checkpoint as an unbroken run of a's would.
    summary = pens.train(small_config, out=tmp_path / "b", seed=1, epochs=4,
                         resume_from=tmp_path / "a" / "checkpoint.pens")
    unbroken = pens.train(small_config, out=tmp_path / "c", seed=1, epochs=4)
    assert summary["steps"] == 40 and summary["final"] == unbroken["final"]
    assert (tmp_path / "b" / "model.json").read_text() == (tmp_path / "c" / "model.json").read_text()


def test_backward_and_gradcheck_in_float64():
    model = small_model()
    net = pens.compile(model, batch=8, graph="training", dtype="float64", labeled=4)
    net.set_noise_key(1, 0)
    rng = np.random.default_rng(1)
    feed = {"x": rng.random((8, 16)), "y": np.arange(4)}
    net.forward(feed)
    first = net.objective
    grads = net.backward()
    assert set(grads) == {"W1", "b1", "W2", "b2"} and grads["W1"].shape == (16, 12)
    assert np.isfinite(first) and np.abs(grads["W2"]).sum() > 0
    # One step down the gradient lowers the objective at the same noise.
    for name, value in net.parameters().items():
        value -= 1e-3 * grads[name]
    net.forward(feed)
    assert net.objective < first
    result = pens.gradcheck(model, batch=6)
    assert result["passed"] and result["checked"] == result["variables"] > 0


def test_parameters_are_views_of_the_model():
    model = small_model()
    assert not model.trained
    params = model.parameters()  # a model without values gets initialize(seed=1)'s
    assert model.trained
    seeded = small_model()
    seeded.initialize(seed=1)
    for name, value in seeded.parameters().items():
        np.testing.assert_array_equal(params[name], value)
    assert params["W1"].dtype == np.float32 and params["W1"].shape == (16, 12)
    params["b2"][:] = 0.5
    assert np.all(model.parameters()["b2"] == 0.5)
    assert '"values"' in model.to_json() and pens.Model.from_json(model.to_json()).trained


def logits_in(precision):
    """A small model's logits on one batch in float32 and with its products in `precision`;
    a skip, checked to say why, where pens cannot run that precision here (no oneDNN, or
    a CPU without bfloat16 instructions)."""
    model = small_model()
    x = np.sin(np.arange(64 * 16, dtype=np.float32)).reshape(64, 16)
    want = pens.compile(model, batch=64).forward(x=x)["logits"]
    try:
        net = pens.compile(model, batch=64, precision=precision)
    except pens.Error as e:
        assert f"precision \"{precision}\" cannot run here" in str(e)
        pytest.skip(str(e))
    return want, net.forward(x=x)["logits"]


def test_a_bfloat16_program_computes_the_float32_one_to_bfloat16_precision():
    want, got = logits_in("bfloat16")
    assert np.allclose(got, want, rtol=0.05, atol=0.05) and not np.array_equal(got, want)


def test_a_program_with_float32_products_on_onednn_computes_the_float32_one():
    want, got = logits_in("float32-onednn")
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6)


def test_bad_input_gets_one_clear_error():
    model = small_model()
    net = pens.compile(model, batch=4)
    cases = [
        (lambda: net.forward(x=np.zeros((3, 15), np.float32)), r"input 'x' takes an array of shape \(3, 16\), got \(3, 15\)"),
        (lambda: net.forward(x=np.zeros((4, 16), np.int32)), "takes floating-point values, got dtype int32"),
        (lambda: net.forward(x=np.zeros((4, 16)), z=1), "no input named 'z'"),
        (lambda: net.forward(), "input 'x' not given"),
        (lambda: pens.compile(model, batch=0), "batch must be at least 1"),
        (lambda: pens.compile(model, batch=4, dtype="float16"), "dtype must be 'float32' or 'float64'"),
        (lambda: pens.compile(model, batch=4, precision="bf16"), "precision is \"float32\", \"float32-onednn\" or \"bfloat16\""),
        (lambda: pens.compile(model, batch=4, dtype="float64", precision="bfloat16"), "for float32 programs"),
        (lambda: pens.compile(model, batch=4, dtype="float64", precision="float32-onednn"), "'float32-onednn' is for float32 programs"),
        (lambda: model.inspect(format="svg"), "format must be"),
        (lambda: pens.load(ROOT / "no-such-model.json"), "no-such-model.json"),
        (lambda: pens.Model.from_json('{"format_version": 1} trailing'), "text after the JSON document"),
        (lambda: pens.gradcheck(model, tolerance=float("nan")), "tolerance must be above 0"),
        (lambda: pens.train(ROOT / "examples" / "mnist" / "pea-600.json", epochs=0), "epochs must be at least 1"),
    ]
    for call, message in cases:
        with pytest.raises(pens.Error, match=message):
            call()
    training = pens.compile(model, batch=4, graph="training", labeled=2)
    with pytest.raises(pens.Error, match="holds class indices: give an integer array"):
        training.forward(x=np.zeros((4, 16)), y=np.zeros(2))


def test_the_builder_refuses_what_a_model_file_refuses():
    b = pens.ModelBuilder()
    x = b.input("x", [None, 3])
    b.add("relu", [x, "missing"], name="h", output=True)
    # Errors name the builder and the node, not a place in the JSON it writes.
    with pytest.raises(pens.Error) as refused:
        b.build()
    assert str(refused.value).startswith("ModelBuilder: node 'h' (inputs 1): no node named 'missing'")
    assert "/nodes/" not in str(refused.value)
    with pytest.raises(pens.Error, match="exists already"):
        b.input("x", [None, 3])
    shapes = pens.ModelBuilder()
    x = shapes.input("x", [None, 5])
    shapes.add("affine", [x, shapes.param("W", [4, 3], std=0.1), shapes.param("b", [3], init="zeros")], name="h",
               output=True)
    with pytest.raises(pens.Error) as refused:
        shapes.build()
    assert str(refused.value) == "ModelBuilder: node 'h' (affine): x is [B,5] but W is [4,3]"


def batch_norm_network(noise=(), **batch_norm):
    """A 3-4-2 builder network with batch normalisation of its hidden layer."""
    b = pens.ModelBuilder()
    x = b.input("x", [None, 3], noise=list(noise))
    y = b.input("y", [None], dtype="index")
    a = b.add("matmul", [x, b.param("W", [3, 4], std=0.5)], name="a")
    h = b.add("relu", [b.batch_norm(a, "bn", 4, **batch_norm)], name="h")
    logits = b.add("affine", [h, b.param("V", [4, 2], std=0.5), b.param("c", [2], init="zeros")], name="logits",
                   output=True)
    b.add("mean", [b.add("softmax_xent", [logits, y])], name="loss", loss=True)
    return b


def test_batch_norm_from_the_builder_keeps_running_statistics_and_infers_row_by_row():
    model = batch_norm_network(decay=0.5).build()
    model.initialize(seed=1)
    assert "moving average: %bn/running_mean <- 0.5 * %bn/running_mean + 0.5 * %bn/mean" in model.inspect()
    # Inference normalises with the running statistics: each row alone gives what it
    # gives in a batch.
    rng = np.random.default_rng(2)
    inference = pens.compile(model, batch=5)
    xs = rng.random((5, 3))
    whole = np.array(inference.forward(x=xs)["logits"])
    one = pens.compile(model, batch=1)
    for r in range(5):
        assert np.allclose(np.array(one.forward(x=xs[r:r + 1])["logits"])[0], whole[r], atol=1e-6)


def test_running_statistics_can_follow_a_childs_batch():
    b = batch_norm_network(noise=[pens.noise("gaussian", sigma=0.1)], child=2)
    b.pseudo_ensemble(children=2, penalties=[pens.penalty("logits", "softmax_l2", 1.0)])
    model = b.build()
    assert json.loads(model.to_json())["moving_averages"][0]["child"] == 2
    assert "0.01 * %c2/bn/mean after each update; read for %bn/mean at inference" in model.inspect()
    b.pseudo_ensemble(children=1, penalties=[pens.penalty("logits", "softmax_l2", 1.0)], pairing="parent-child")
    with pytest.raises(pens.Error, match=r"no such child \(children: 1\)"):
        b.build()


def test_statistics_by_part_from_the_builder():
    b = batch_norm_network(noise=[pens.noise("gaussian", sigma=0.1)])
    b.pseudo_ensemble(children=1, pairing="parent-child", loss_on="child", statistics_by_part=True,
                      penalties=[pens.penalty("logits", "softmax_l2", 1.0, rows="unlabeled")])
    assert json.loads(b.build().to_json())["pseudo_ensemble"]["statistics_by_part"] is True
    b.pseudo_ensemble(children=1, pairing="parent-child", batch_statistics="parent", statistics_by_part=True,
                      penalties=[pens.penalty("logits", "softmax_l2", 1.0)])
    with pytest.raises(pens.Error, match="statistics_by_part needs batch_statistics 'own'"):
        b.build()


def test_a_penalty_kind_takes_its_parameters_from_the_builder():
    b = pens.ModelBuilder()
    x = b.input("x", [None, 3], noise=[pens.noise("gaussian", sigma=0.1)])
    y = b.input("y", [None], dtype="index")
    logits = b.add("affine", [x, b.param("W", [3, 2], std=0.5), b.param("c", [2], init="zeros")], name="logits",
                   output=True)
    b.add("mean", [b.add("softmax_xent", [logits, y])], name="loss", loss=True)
    b.pseudo_ensemble(children=1, pairing="parent-child",
                      penalties=[pens.penalty("logits", "pseudo_label", 0.5, threshold=0.9)])
    model = b.build()
    term = json.loads(model.to_json())["pseudo_ensemble"]["penalties"][0]
    assert term["params"] == {"threshold": 0.9}
    assert "scheduled" not in term
    assert "pseudo_label" in model.inspect()
    b.pseudo_ensemble(children=1, pairing="parent-child",
                      penalties=[pens.penalty("logits", "activation_l2", 0.01, scheduled=False)])
    assert json.loads(b.build().to_json())["pseudo_ensemble"]["penalties"][0]["scheduled"] is False
    b.pseudo_ensemble(children=1, pairing="parent-child",
                      penalties=[pens.penalty("logits", "pseudo_label", 0.5, margin=0.9)])
    with pytest.raises(pens.Error, match="no parameter 'margin'"):
        b.build()


def test_a_penalty_with_a_target_makes_the_child_compute_a_decoder():
    b = pens.ModelBuilder()
    x = b.input("x", [None, 3], noise=[pens.noise("gaussian", sigma=0.3)])
    y = b.input("y", [None], dtype="index")
    h = b.add("relu", [b.add("affine", [x, b.param("W", [3, 4], std=0.5), b.param("b", [4], init="zeros")])], name="h")
    logits = b.add("affine", [h, b.param("V", [4, 2], std=0.5), b.param("c", [2], init="zeros")], name="logits",
                   output=True)
    b.add("mean", [b.add("softmax_xent", [logits, y])], name="loss", loss=True)
    b.add("matmul", [h, b.param("D", [4, 3], std=0.5)], name="xhat")  # read by no output
    b.pseudo_ensemble(children=1, pairing="parent-child", loss_on="child",
                      penalties=[pens.penalty("xhat", "l2", 2.0, target="x")])
    model = b.build()
    assert json.loads(model.to_json())["pseudo_ensemble"]["penalties"][0]["target"] == "x"
    assert "parent x, children c1/xhat; l2, lambda 2" in model.inspect()

    def refused(message, term):
        b.pseudo_ensemble(children=1, pairing="parent-child", loss_on="child", penalties=[term])
        with pytest.raises(pens.Error, match=message):
            b.build()

    refused("compares values of one shape", pens.penalty("xhat", "l2", 2.0, target="h"))
    # Two children: each decoder against the clean x, and the children's outputs against
    # each other by the term's own pairing.
    b.pseudo_ensemble(children=2, pairing="parent-child", loss_on="children",
                      penalties=[pens.penalty("xhat", "l2", 2.0, target="x"),
                                 pens.penalty("logits", "xent", 1.0, pairing="child-child")])
    model = b.build()
    assert json.loads(model.to_json())["pseudo_ensemble"]["penalties"][1]["pairing"] == "child-child"
    assert "parent -, children c1/logits c2/logits; xent, lambda 1, rows all, child-child" in model.inspect()
    refused("'child-child' needs at least 2 children", pens.penalty("logits", "xent", 1.0, pairing="child-child"))


def test_children_of_two_kinds_each_with_its_noise_terms_and_batch_statistics():
    b = pens.ModelBuilder()
    x = b.input("x", [None, 3], noise=[pens.noise("gaussian", sigma=0.3, children=[1]),
                                       pens.noise("mask", p=0.2, children=[2])])
    y = b.input("y", [None], dtype="index")
    h = b.add("relu", [b.add("affine", [x, b.param("W", [3, 4], std=0.5), b.param("b", [4], init="zeros")])], name="h")
    logits = b.add("affine", [h, b.param("V", [4, 2], std=0.5), b.param("c", [2], init="zeros")], name="logits",
                   output=True)
    b.add("mean", [b.add("softmax_xent", [logits, y])], name="loss", loss=True)
    b.add("matmul", [h, b.param("D", [4, 3], std=0.5)], name="xhat")
    # Child 1 reconstructs the clean x (a ladder's child), child 2 is held to the parent's
    # output (a consistency child) and normalises with the parent's statistics.
    b.pseudo_ensemble(children=2, pairing="parent-child", loss_on="child", batch_statistics=("own", "parent"),
                      penalties=[pens.penalty("xhat", "l2", 2.0, target="x", children=[1]),
                                 pens.penalty("logits", "kl", 1.0, fixed_target=True, children=[2])])
    model = b.build()
    saved = json.loads(model.to_json())
    assert [n["children"] for n in saved["inputs"][0]["noise"]] == [[1], [2]]
    assert [t["children"] for t in saved["pseudo_ensemble"]["penalties"]] == [[1], [2]]
    assert saved["pseudo_ensemble"]["batch_statistics"] == ["own", "parent"]
    text = model.inspect()
    assert "noise=gaussian(sigma=0.3)@1 mask(p=0.2, rescale=1)@2" in text
    assert "parent x, children c1/xhat; l2" in text
    assert "parent logits, children c2/logits; kl" in text
    b.pseudo_ensemble(children=1, pairing="parent-child", penalties=[pens.penalty("logits", "kl", 1.0, children=[2])])
    with pytest.raises(pens.Error, match=r"children must list distinct children in \[1, 1\], got 2"):
        b.build()
