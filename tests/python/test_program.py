"""A compiled program as a hand-written training loop uses it: gradients per call, any
batch size, optimizers, values back into the model, threads, and mistakes refused in
pens' words."""
import inspect
import json
import os
import re
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import pens
from conftest import ROOT, SANITIZED, metrics_without_timings, run_pens, small_model

sys.path.insert(0, str(ROOT / "bench"))
import python_loop  # noqa: E402  (the loop the benchmark times)


def feed(rng, rows, labeled=None):
    return {"x": rng.random((rows, 16)), "y": rng.integers(0, 10, labeled if labeled is not None else rows // 2)}


def test_backward_returns_this_calls_gradients_and_accumulates_only_when_asked():
    net = pens.compile(small_model(), batch=6, graph="training", dtype="float64")
    net.set_noise_key(4)
    inputs = feed(np.random.default_rng(2), 6)
    net.forward(inputs)
    first = net.backward()
    net.forward(inputs)
    second = net.backward()
    for name in first:
        np.testing.assert_array_equal(second[name], first[name])
    # The second call's gradient is the objective's derivative (finite differences,
    # float64), not the sum of two calls'.
    w = net.parameters()["W2"]
    for index in [(0, 0), (3, 7), (11, 9)]:
        saved = w[index]
        w[index] = saved + 1e-6
        net.forward(inputs)
        up = net.objective
        w[index] = saved - 1e-6
        net.forward(inputs)
        down = net.objective
        w[index] = saved
        assert second["W2"][index] == pytest.approx((up - down) / 2e-6, rel=1e-5, abs=1e-8)
    # accumulate=True adds to what the last call left; zero_grad() starts a sum afresh.
    net.forward(inputs)
    total = net.backward(accumulate=True)
    np.testing.assert_allclose(total["W1"], 2 * first["W1"], rtol=1e-12)
    net.zero_grad()
    net.forward(inputs)
    np.testing.assert_allclose(net.backward(accumulate=True)["W1"], first["W1"], rtol=1e-12)
    # return_grads=False leaves the gradients in the program (for an optimizer) alone.
    net.forward(inputs)
    assert net.backward(return_grads=False) is None
    np.testing.assert_array_equal(net.grad("W1"), first["W1"])
    # What backward() returned is the caller's: a later call does not change it.
    kept = first["W1"].copy()
    net.forward(feed(np.random.default_rng(3), 6))
    net.backward()
    np.testing.assert_array_equal(first["W1"], kept)


def test_a_program_runs_any_number_of_rows_with_one_set_of_parameters():
    model = small_model()
    model.initialize(seed=5)
    rng = np.random.default_rng(1)
    x = rng.random((10, 16))
    big = pens.compile(model, batch=10, dtype="float64")
    small = pens.compile(model, batch=3, dtype="float64")
    # (Equal up to the order of a product's sums, which the row count may change.)
    np.testing.assert_allclose(big.forward(x=x[:3])["logits"], small.forward(x=x[:3])["logits"], rtol=1e-12)
    np.testing.assert_allclose(big.forward(x=x)["logits"][:3], small.forward(x=x[:3])["logits"], rtol=1e-12)
    assert big.batch == 10  # the size compiled first
    # Training graphs too: the last, partial batch of a loop (labeled rows: half, as at
    # compile time), with the gradient of a program compiled for that size.
    train_big = pens.compile(model, batch=8, graph="training", dtype="float64")
    train_small = pens.compile(model, batch=5, graph="training", dtype="float64")
    inputs = feed(rng, 5)
    for net in (train_big, train_small):
        net.set_noise_key(9, 2)
        net.forward(inputs)
    np.testing.assert_allclose(train_big.backward()["W1"], train_small.backward()["W1"], rtol=1e-12)
    # An update through one size is seen by every size.
    train_big.parameters()["b2"][:] = 0.25
    train_big.forward(feed(rng, 8))
    assert np.all(train_big.value("b2") == 0.25)
    with pytest.raises(pens.Error, match="inputs 'x' and 'y'|input 'y' takes an array of shape"):
        train_big.forward(x=rng.random((6, 16)), y=np.zeros(5, int))


def test_an_sgd_step_from_python_is_the_update_rule():
    net = pens.compile(small_model(), batch=8, graph="training")
    opt = pens.optim.SGD(net, lr=0.1)
    net.set_noise_key(1)
    net.forward(feed(np.random.default_rng(4), 8))
    grads = net.backward()
    before = {name: value.copy() for name, value in net.parameters().items()}
    opt.step()
    for name, value in net.parameters().items():
        np.testing.assert_allclose(value, before[name] - 0.1 * grads[name], rtol=1e-6, atol=1e-7)
    assert opt.steps == 1 and opt.kind == "sgd"
    assert set(pens.optim.kinds()) >= {"sgd", "adagrad", "adam"}


def test_a_group_s_parameters_take_its_optimizer_and_rate_and_follow_the_optimizer_s_lr():
    net = pens.compile(small_model(), batch=8, graph="training")
    opt = pens.optim.SGD(net, lr=0.1, groups=[{"params": ["W1", "b1"], "kind": "sgd", "lr": 0.4}])
    assert opt.kind == "sgd+groups"
    rng = np.random.default_rng(5)
    for lr in (0.1, 0.05):  # halving the run's rate halves the group's
        opt.lr = lr
        net.set_noise_key(1, opt.steps)
        net.forward(feed(rng, 8))
        grads = net.backward()
        before = {name: value.copy() for name, value in net.parameters().items()}
        opt.step()
        for name, value in net.parameters().items():
            rate = 4 * lr if name in ("W1", "b1") else lr
            np.testing.assert_allclose(value, before[name] - rate * grads[name], rtol=1e-6, atol=1e-7, err_msg=name)
    cases = [
        ([{"params": ["W3"], "kind": "sgd", "lr": 0.1}], "groups[0].params: the model has no parameter 'W3'"),
        ([{"params": ["W1"], "kind": "sgd", "lr": 0.1}, {"params": ["W1"], "kind": "sgd", "lr": 0.2}],
         "'W1' is already in optimizer.groups[0]"),
        ([{"params": ["W1"], "kind": "adam", "lr": 0.1}], "has no update of a range of the store"),
        ([{"params": ["W1"], "kind": "sgd"}], "groups[0] has no 'lr'"),
        ([{"params": "W1", "kind": "sgd", "lr": 0.1}], "groups[0]['params'] must be a non-empty list"),
        ([{"params": ["W1"], "kind": "sgd", "lr": 0.1, "nesterov": True}], "groups[0] setting 'nesterov' takes a number"),
        ({"params": ["W1"]}, "groups must be a list of dicts"),
    ]
    for groups, message in cases:
        with pytest.raises(pens.Error, match=re.escape(message)):
            pens.optim.SGD(net, lr=0.1, groups=groups)
    with pytest.raises(pens.Error, match="optimizer adam updates the whole store at once"):
        pens.optim.Adam(net, lr=0.1, groups=[{"params": ["W1"], "kind": "sgd", "lr": 0.1}])


def test_a_python_training_loop_lowers_the_objective_and_its_model_saves(tmp_path):
    model = small_model()
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, 64)
    x = rng.random((64, 16))
    x[:, :8] += 1.5 * y[:, None]  # two classes the noisy network can tell apart
    net = pens.compile(model, batch=16, graph="training")
    opt = pens.optim.Adam(net, lr=0.02)
    objectives = []
    for epoch in range(60):
        for start in range(0, 64, 24):  # batches of 24, 24 and 16 rows
            rows = slice(start, min(start + 24, 64))
            batch_x = x[rows]
            net.set_noise_key(7, opt.steps)
            net.forward(x=batch_x, y=y[rows][: len(batch_x) // 2])
            net.backward()
            opt.step()
            objectives.append(net.objective)
    assert np.mean(objectives[-6:]) < 0.25 * np.mean(objectives[:6])
    # The values trained here into the model, saved, read back: the same predictions.
    net.copy_to(model)
    model.save(tmp_path / "trained.model.json")
    again = pens.load(tmp_path / "trained.model.json")
    predict = lambda m: pens.compile(m, batch=64).forward(x=x)["logits"]
    np.testing.assert_array_equal(predict(again), predict(model))
    assert (predict(again).argmax(axis=1) == y).mean() > 0.9


def test_max_norm_constraints_follow_each_step():
    b = pens.ModelBuilder()
    x = b.input("x", [None, 4], layer="in", noise=[pens.noise("mask", p=0.2)])
    y = b.input("y", [None], dtype="index")
    w = b.param("W", [4, 3], std=3.0, max_norm=1.0)
    logits = b.add("matmul", [x, w], name="logits", layer="out", output=True)
    b.add("mean", [b.add("softmax_xent", [logits, y])], name="loss", loss=True)
    b.pseudo_ensemble(children=2, penalties=[pens.penalty("logits", "kl", 1.0)])
    net = pens.compile(b.build(), batch=4, graph="training")
    assert np.linalg.norm(net.parameters()["W"], axis=0).max() > 1.0
    opt = pens.optim.SGD(net, lr=0.01)
    net.forward(x=np.ones((4, 4)), y=np.zeros(4, int))
    net.backward()
    opt.step()
    assert np.linalg.norm(net.parameters()["W"], axis=0).max() <= 1.0 + 1e-6  # unit-incoming: columns


def test_parameter_views_keep_their_values_alive():
    model = small_model()
    model.initialize(seed=1)
    view = model.parameters()["W1"]
    copy = view.copy()
    model.initialize(seed=2)  # new values for the model; the view holds the old ones
    del model
    np.testing.assert_array_equal(view, copy)


def test_a_program_shared_by_threads_gives_each_call_its_own_outputs():
    model = small_model()
    model.initialize(seed=3)
    net = pens.compile(model, batch=4)
    inputs = [np.full((4, 16), k, np.float32) for k in range(4)]
    expected = [pens.compile(model, batch=4).forward(x=x)["logits"] for x in inputs]
    wrong = []

    def worker(k):
        for _ in range(300):
            if not np.array_equal(net.forward(x=inputs[k])["logits"], expected[k]):
                wrong.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_mistakes_a_python_user_makes_are_refused_in_one_line():
    model = small_model()
    net = pens.compile(model, batch=4, graph="training")
    inference = pens.compile(model, batch=4)
    inference.forward(x=np.zeros((4, 16)))
    cases = [
        (net.backward, r"backward\(\) needs a forward\(\) first"),
        (inference.backward, "the graph has no loss to differentiate"),
        (lambda: pens.ModelBuilder().input("x", [None, 7 / 2]), "3.5 is not a whole number"),
        (lambda: pens.train({"model": "m.json"}), "config must be a path"),
        (lambda: pens.train(model), "config must be a path"),
        (lambda: pens.load(None), "the model file must be a path"),
        (lambda: model.save(3), "the model file must be a path"),
        (lambda: pens.compile(model, batch="4"), "batch must be a whole number"),
        (lambda: pens.compile(model, batch=True), "batch must be a whole number"),
        (lambda: pens.compile("model.json", batch=4), "model must be a pens.Model"),
        (lambda: pens.compile(model, batch=4, dtype=np.int32), "dtype must be 'float32' or 'float64'"),
        (lambda: pens.gradcheck(model, tolerance="small"), "tolerance must be a number"),
        (lambda: inference.forward([np.zeros((4, 16))]), "takes the inputs as a dict"),
        (lambda: inference.forward(x=np.zeros((0, 16))), "input 'x' has no rows"),
        (lambda: pens.optim.Adam(pens.compile(model, batch=4, dtype="float64"), lr=1e-3), "float32 programs"),
        (lambda: pens.optim.Optimizer(net, "adamw", lr=1e-3), r"did you mean 'adam'"),
        (lambda: pens.optim.Adam(net, lr=1e-3, beta3=0.9), "unknown attribute 'beta3'"),
        (lambda: pens.optim.Adam(inference._core, lr=1e-3), "takes a pens.Program"),
        (lambda: net.copy_to("model"), r"copy_to\(\) takes a pens.Model"),
        (lambda: pens.train(ROOT / "examples" / "mnist" / "pea-600.json", epochs=1.5), "epochs must be a whole"),
    ]
    for call, message in cases:
        with pytest.raises(pens.Error, match=message) as refused:
            call()
        assert "\n" not in str(refused.value)


def test_numpy_types_and_paths_go_where_python_types_do(tmp_path):
    model = small_model()
    model.initialize(seed=1)
    net = pens.compile(model, batch=np.int64(4), dtype=np.float64, init_seed=np.uint8(1))
    assert net.dtype == "float64" and net.batch == 4
    model.save(pathlib.Path(tmp_path) / "m.json")
    assert pens.load(pathlib.Path(tmp_path) / "m.json").trained


@pytest.mark.skipif(SANITIZED, reason="AddressSanitizer reserves terabytes of address space")
def test_a_batch_past_the_address_space_limit_is_refused_by_the_memory_limit():
    # Under ulimit -v (RLIMIT_AS) the limit is 90% of it: a clear refusal, not a
    # MemoryError from inside an allocation.
    script = (
        "import resource, numpy as np, pens\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "from conftest import small_model\n"
        "try:\n"
        "    pens.compile(small_model(), batch=200_000_000)\n"
        "except pens.Error as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=pathlib.Path(__file__).parent,
                         env=env, timeout=120)
    assert "memory limit of 3.6 GiB" in run.stdout, run.stdout + run.stderr


def test_a_noisy_tree_model_is_gradient_checked_for_the_tree_it_is_given(tmp_path, pens_binary):
    path = tmp_path / "ctn.json"
    run_pens(pens_binary, "new", "ctn", "--vocabulary", 20, "--dim", 4, "--classes", 5, "--fuzz", 0.02,
             "--subspace", 2, "--output", path)
    model = pens.load(path)
    result = pens.gradcheck(model, tree="(3 (2 a) (4 b))")
    assert result["passed"] and result["checked"] == result["variables"] > 0
    # Without a tree there is no training graph: both the tool and Python say what to give.
    with pytest.raises(pens.Error, match='tree="'):
        pens.gradcheck(model)
    refused = subprocess.run([pens_binary, "gradcheck", str(path)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "--tree" in refused.stderr


def test_training_on_numpy_arrays_is_training_on_the_files_they_came_from(tmp_path, small_config, small_mnist):
    files = pens.train(small_config, out=tmp_path / "files")
    train_set, test_set = pens.mnist(small_mnist, "train"), pens.mnist(small_mnist, "test")
    assert train_set[0].dtype == np.float32 and train_set[0].max() <= 1.0 and train_set[1].dtype == np.int64
    arrays = pens.train(small_config, out=tmp_path / "arrays", data=train_set, test=test_set)
    assert metrics_without_timings(tmp_path / "arrays") == metrics_without_timings(tmp_path / "files")
    assert arrays["final"] == files["final"]
    saved = json.loads((tmp_path / "arrays" / "config.json").read_text())
    assert saved["data"]["dir"] == "<arrays from Python>"
    # The trained model on the same arrays: predict() and evaluate() agree with the run.
    model = pens.load(tmp_path / "arrays" / "model.json")
    result = model.evaluate(*test_set, batch=64)
    assert result["error"] == pytest.approx(arrays["final"]["test_error"], abs=1e-9)
    assert result["confusion"].sum() == len(test_set[1]) and result["confusion"].shape == (10, 10)
    assert model.predict(test_set[0][:7]).shape == (7, 10)
    probabilities = model.predict(test_set[0][:7], samples=4)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-5)


def test_data_given_as_arrays_is_checked(tmp_path, small_config, small_mnist):
    x, y = pens.mnist(small_mnist, "train")
    test = pens.mnist(small_mnist, "test")
    cases = [
        (dict(data=(x, y)), "data and test go together"),
        (dict(data=(x, y[:-1]), test=test), f"{len(y)} examples but {len(y) - 1} labels"),
        (dict(data=(x, y.astype(np.float32)), test=test), "labels must be class indices"),
        (dict(data=(x[:, :15], y), test=test), "takes 16 values per example, but <arrays from Python> has 15"),
        (dict(data=(x, y), test=(test[0], -test[1] - 1)), "is not a class index"),
        (dict(data=x, test=test), "data must be (X, y) or (X, y, X_unlabeled) of arrays"),
        (dict(data=(x, y, x[:, :3]), test=test), "the unlabeled examples must be a 2-D array of 16 values"),
        (dict(data=(x, y), test=test, data_dir="data"), "data is given as arrays"),
    ]
    for kwargs, message in cases:
        with pytest.raises(pens.Error, match=re.escape(message)):
            pens.train(small_config, out=tmp_path / "refused", **kwargs)
    nan = x.copy()
    nan[5, 3] = np.nan
    with pytest.raises(pens.Error, match="example 5 holds a value that is not finite"):
        pens.train(small_config, out=tmp_path / "refused", data=(nan, y), test=test)


@pytest.fixture
def treebank(tmp_path, pens_binary):
    """Three sentences as a treebank folder, and a CTN over its words with weight fuzzing
    and subspace sampling."""
    trees = "(3 (2 a) (4 (3 good) (2 film)))\n(1 (2 a) (0 (1 bad) (2 film)))\n(4 (4 good) (3 good))\n"
    for part in ("train", "dev", "test"):
        (tmp_path / f"{part}.txt").write_text(trees)
    run_pens(pens_binary, "new", "ctn", "--sst", tmp_path, "--dim", 4, "--classes", 5, "--fuzz", 0.02,
             "--subspace", 2, "--output", tmp_path / "ctn.json")
    return tmp_path


def test_trees_are_written_as_the_treebank_does_from_text_or_tuples():
    assert pens.tree_text("(3 (2 a) (4 b))") == "(3 (2 a) (4 b))"
    assert pens.tree_text("((a good) film)") == "(2 (2 (2 a) (2 good)) (2 film))"
    assert pens.tree_text((3, (2, "a"), (4, "good"))) == "(3 (2 a) (4 good))"
    assert pens.tree_text(("a", ("good", "film"))) == "(2 (2 a) (2 (2 good) (2 film)))"
    for bad, message in [("((a b c) d)", "a bracket holds 3 parts"), ("((a b)", "ends inside a bracket"),
                         ("(a b))", "text after the tree"), ((1, 2, 3, 4), "a word or two children"), (7, "got int")]:
        with pytest.raises(pens.Error, match=re.escape(message)):
            pens.tree_text(bad)


def test_a_tree_model_runs_forward_backward_and_trains_on_one_tree_from_python(treebank):
    words = pens.vocabulary(treebank)
    assert len(words) == 5 and words.word(words.id("good")) == "good" and words.id("unseen") == 0
    model = pens.load(treebank / "ctn.json")
    sentence = "(3 (2 a) (4 (3 good) (2 film)))"
    clean = pens.compile(model, tree=sentence, vocabulary=words)
    assert clean.inputs == []
    scores = clean.forward()[clean.outputs[0]]
    assert scores.shape == (5, 5)  # a row per node, a column per class
    root = scores[clean._core.root_row].astype(np.float64)
    np.testing.assert_allclose(model.predict_tree(sentence, words), np.exp(root) / np.exp(root).sum(), rtol=1e-6)
    np.testing.assert_array_equal(model.predict(sentence, vocabulary=words), model.predict_tree(sentence, words))

    training = pens.compile(model, tree=sentence, vocabulary=words, graph="training")
    opt = pens.optim.AdaGrad(training, lr=0.1)
    objectives = []
    for step in range(40):
        training.set_noise_key(1, step)
        training.forward()
        objectives.append(training.objective)
        grads = training.backward()
        opt.step()
    assert set(grads) == {"C", "E", "Ml", "Mr", "T", "c", "m"}
    assert np.mean(objectives[-5:]) < 0.6 * np.mean(objectives[:5])
    training.copy_to(model)
    assert model.predict_tree(sentence, words).argmax() == 3  # the root's label
    assert pens.gradcheck(model, tree=(3, (2, "a"), (4, "good")))["passed"]
    cases = [
        (lambda: pens.compile(model, batch=4), "a tree model compiles for one tree"),
        (lambda: pens.compile(model, tree=sentence), "need the vocabulary"),
        (lambda: pens.compile(model, tree=sentence, vocabulary=words, dtype="float64"), "float32"),
        (lambda: pens.compile(model, tree="(3 (2 a) (4 b)) (1 c)", vocabulary=words), "a line holds exactly one tree"),
        (lambda: pens.compile(model, tree=sentence, vocabulary={"a": 1}), "vocabulary must be a pens.Vocabulary"),
    ]
    for call, message in cases:
        with pytest.raises(pens.Error, match=re.escape(message)):
            call()


def test_a_loop_written_in_python_trains_exactly_as_pens_train(tmp_path, small_config):
    # λ stages and a learning-rate restart, so that the plan's schedule is all used.
    config = json.loads(small_config.read_text())
    config["lambda_schedule"] = [{"epochs": 1, "scale": 0.5}, {"epochs": 1, "scale": 2},
                                 {"epochs": 1, "scale": 2, "restart": True, "learning_rate": 0.05}]
    config["optimizer"].update(kind="adam", learning_rate=0.02)
    small_config.write_text(json.dumps(config))
    summary = pens.train(small_config, out=tmp_path / "run")
    plan = pens.TrainingPlan(small_config)
    assert plan.total_steps == 30 and plan.at(25)["restart"] is False and plan.at(20)["restart"] is True
    assert [plan.at(step)["lambda_scale"] for step in (0, 10, 29)] == [0.5, 2, 2]
    model = python_loop.train_by_plan(plan)  # bench/python_loop.py's loop, docs/api.md's
    trained = pens.load(tmp_path / "run" / "model.json").parameters()
    for name, value in model.parameters().items():
        np.testing.assert_array_equal(value, trained[name], err_msg=name)
    assert model.evaluate(*plan.data("test"))["error"] == summary["final"]["test_error"]
    batch = plan.batch(0)
    assert batch["x"].shape == (32, 16) and batch["y"].shape == (16,)
    assert len(plan.data("labeled")[1]) == 100 and len(plan.data("validation")[1]) == 100


def test_a_loop_written_in_python_trains_a_config_s_optimizer_groups_exactly_as_pens_train(tmp_path, small_config):
    # The groups' rates are relative to the schedule's base rate, which warm-up and decay
    # move away from: the loop must scale them as pens train does.
    config = json.loads(small_config.read_text())
    config["optimizer"].update(kind="sgd", learning_rate=0.1, momentum_start=0.5, warmup_epochs=1, decay=0.9,
                               groups=[{"params": ["W2", "b2"], "kind": "adagrad", "learning_rate": 0.03}])
    small_config.write_text(json.dumps(config))
    pens.train(small_config, out=tmp_path / "run")
    plan = pens.TrainingPlan(small_config)
    assert plan.optimizer_groups == [{"params": ["W2", "b2"], "kind": "adagrad", "lr": 0.03, "momentum": 0.0,
                                      "epsilon": 1e-8, "initial_accumulator": 0.0}]
    assert plan.at(0)["learning_rate"] < plan.base_learning_rate == 0.1
    model = python_loop.train_by_plan(plan)
    trained = pens.load(tmp_path / "run" / "model.json").parameters()
    for name, value in model.parameters().items():
        np.testing.assert_array_equal(value, trained[name], err_msg=name)
    # Without the groups the same loop trains another model: the test can tell.
    config["optimizer"].pop("groups")
    (tmp_path / "plain.json").write_text(json.dumps(config))
    plain = python_loop.train_by_plan(pens.TrainingPlan(tmp_path / "plain.json")).parameters()
    assert not np.array_equal(plain["W2"], trained["W2"])


def test_a_plan_is_of_batches_alone_so_recalibrated_evaluation_is_allowed_and_shards_are_not(tmp_path, small_config):
    config = json.loads(small_config.read_text())
    plain = pens.TrainingPlan(small_config)
    assert plain.recalibrate_statistics == 0
    config["eval"]["recalibrate_statistics"] = 500
    (tmp_path / "recalibrated.json").write_text(json.dumps(config))
    recalibrated = pens.TrainingPlan(tmp_path / "recalibrated.json")
    assert recalibrated.recalibrate_statistics == 500
    for step in (0, 7):
        for name, value in plain.batch(step).items():
            np.testing.assert_array_equal(recalibrated.batch(step)[name], value, err_msg=name)
    config["batch"]["shards"] = 2
    (tmp_path / "sharded.json").write_text(json.dumps(config))
    with pytest.raises(pens.Error, match="batch.shards and trainable periods are pens train's alone"):
        pens.TrainingPlan(tmp_path / "sharded.json")


def test_arguments_of_the_wrong_type_to_the_cpp_half_are_refused_in_pens_words(tmp_path, small_config):
    model = small_model()
    cases = [
        (lambda: model.initialize(seed="x"), "Model.initialize takes (self: Model, seed: int = 1), got (Model, seed=str)"),
        (lambda: model.inspect(batch="8"), "Model.inspect takes (self: Model, format: str = 'text', batch: int = 8"),
        (lambda: model.save(tmp_path / "m.json", storage=3), "path: str or pathlib.Path, storage: str = 'auto'"),
        (lambda: pens.Model.from_json(3), "Model.from_json takes (text: str"),
        (lambda: pens.set_threads("2"), "set_threads takes (threads: int), got (str)"),
    ]
    for call, message in cases:
        with pytest.raises(pens.Error, match=re.escape(message)) as refused:
            call()
        assert "\n" not in str(refused.value)
    # A model whose loss node is not marked has nothing to train: refused, not trained.
    config = json.loads(small_config.read_text())
    doc = json.loads(model.to_json())
    for node in doc["nodes"] + doc["inputs"]:
        node.pop("flags", None)
        node.pop("noise", None)
    doc.pop("pseudo_ensemble")
    (tmp_path / "no-loss.json").write_text(json.dumps(doc))
    config.update(model=str(tmp_path / "no-loss.json"), batch={"labeled": 16, "unlabeled": 0})
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(pens.Error, match="no node is marked as a loss"):
        pens.train(tmp_path / "config.json", out=tmp_path / "run")


def test_examples_without_labels_join_the_unlabeled_pool_only(tmp_path, small_config, small_mnist):
    x, y = pens.mnist(small_mnist, "train")
    test = pens.mnist(small_mnist, "test")
    summary = pens.train(small_config, out=tmp_path / "run", data=(x[:300], y[:300], x[300:]), test=test)
    # 100 validation and 100 labeled examples from the 300 with labels; the other 100 and
    # the 300 without labels are unlabeled.
    assert (summary["labeled"], summary["validation"], summary["unlabeled"]) == (100, 100, 400)
    plan = pens.TrainingPlan(small_config, data=(x[:300], y[:300], x[300:]), test=test)
    labeled_x, labeled_y = plan.data("labeled")
    assert len(labeled_y) == 100 and np.bincount(labeled_y).tolist() == [10] * 10
    rows = {tuple(row) for row in x[300:]}
    assert not any(tuple(row) in rows for row in np.vstack([labeled_x, plan.data("validation")[0]]))
    with pytest.raises(pens.Error, match="do not fit a training set of 120 examples with labels"):
        pens.train(small_config, out=tmp_path / "refused", data=(x[:120], y[:120], x[120:]), test=test)


def test_a_config_naming_npy_files_trains_as_the_arrays_saved_in_them(tmp_path, small_config, small_mnist):
    (x, y), test = pens.mnist(small_mnist, "train"), pens.mnist(small_mnist, "test")
    arrays = pens.train(small_config, out=tmp_path / "arrays", data=(x, y), test=test)
    for name, array in {"x": x, "y": y, "test_x": test[0], "test_y": test[1]}.items():
        np.save(tmp_path / f"{name}.npy", array)
    config = json.loads(small_config.read_text())
    config["data"].update(source="npy", dir=".", test_x="test_x.npy", test_y="test_y.npy")
    (tmp_path / "npy.json").write_text(json.dumps(config))
    files = pens.train(tmp_path / "npy.json", out=tmp_path / "npy")
    assert metrics_without_timings(tmp_path / "npy") == metrics_without_timings(tmp_path / "arrays")
    assert files["final"] == arrays["final"]
    saved = json.loads((tmp_path / "npy" / "config.json").read_text())
    assert saved["data"]["source"] == "npy" and saved["data"]["dir"] == str(tmp_path)


def test_pens_train_in_python_takes_every_option_pens_train_does():
    # One table (train/loop/run_kind.h) gives the tool its options and these their names.
    options = {name for name, low, high in pens._pens.run_options}
    assert {"out", "seed", "epochs", "shards", "resume", "resume_from"} <= options
    keywords = set(inspect.signature(pens.train).parameters)
    assert keywords - options == {"config", "callback", "data", "test"}
    assert options <= keywords
    # A training plan follows one run from its start: no output folder, resume or shards;
    # the loop compiles its own programs (pens.compile's precision).
    plan = set(inspect.signature(pens.TrainingPlan).parameters) - {"config", "data", "test"}
    assert plan <= options
    assert options - plan == {"out", "budget_minutes", "threads", "shards", "precision", "resume", "resume_from"}
    with pytest.raises(pens.Error, match="shards must be at least 1"):
        pens.train("any.json", shards=0)
    with pytest.raises(pens.Error, match="precision must be 'float32', 'float32-onednn' or 'bfloat16'"):
        pens.train("any.json", precision=16)
