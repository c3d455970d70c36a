"""pens: pseudo-ensembles (Bachman, Alsharif, Precup, NIPS 2014) from Python.

The C++ library does the work (pens._pens); this package adds a model builder and
Pythonic entry points. Every function raises pens.Error (a ValueError) with pens' own
one-line message on bad input.

    import numpy as np, pens
    model = pens.load("examples/mnist/pea-600.model.json")
    print(model.inspect())                      # the pseudo-ensemble's training graph
    net = pens.compile(model, batch=100)        # the parent network, float32
    out = net.forward(x=np.zeros((100, 784), np.float32))   # {"logits": array (100, 10)}
    summary = pens.train("examples/mnist/pea-600.json", epochs=1, callback=print)

docs/api.md lists the whole API with examples.
"""
import functools
import json
import numbers
import os
import re

import numpy as np

from ._pens import Error, Model, RunOptions, Vocabulary, set_threads
from . import _pens
from . import optim

__all__ = ["Error", "Model", "ModelBuilder", "Program", "TrainingPlan", "Vocabulary", "compile", "gradcheck", "load",
           "mnist", "optim", "read_config", "set_threads", "train", "tree_text", "vocabulary"]


def load(path):
    """Reads a model file (and its sidecar of values, when it has one)."""
    return Model.load(path)  # a str or a pathlib.Path, checked by the C++ half


class Program:
    """A model's graph compiled in one precision (pens.compile), run on batches of any
    number of rows: each row count compiles once, when first fed, and all of them read
    and update one copy of the parameters.

    forward() takes the inputs by name (numpy arrays; real inputs in any float dtype,
    index inputs in any integer dtype) and returns the outputs as new arrays. backward()
    returns this call's gradients, as new arrays; backward(accumulate=True) adds them to
    the earlier calls' since zero_grad(), for gradients summed over several passes.
    value(name) and grad(name) are read-only views of the last run's memory (no copy;
    valid until the next run); parameters() are writable views of the program's own
    parameter copy, and copy_to(model) gives a model those values. One program may be
    used from several threads: each call runs alone.
    """

    def __init__(self, core):
        self._core = core

    inputs = property(lambda self: list(self._core.inputs), doc="the graph's input nodes")
    outputs = property(lambda self: list(self._core.outputs), doc="the graph's output nodes")
    dtype = property(lambda self: self._core.dtype, doc="'float32' or 'float64'")
    batch = property(lambda self: self._core.batch, doc="the row count compiled first (others compile when fed)")
    objective = property(lambda self: self._core.objective, doc="the summed loss terms of the last forward")

    def forward(self, feed=None, **inputs):
        """Runs the graph on the inputs (a dict, keyword arguments, or both); returns
        {output name: array}, copies the caller may keep."""
        if feed is not None and not isinstance(feed, dict):
            raise Error(f"forward() takes the inputs as a dict or as keyword arguments, got {type(feed).__name__}")
        feed = dict(feed or {}, **inputs)
        missing = [name for name in self._core.inputs if name not in feed]
        unknown = [name for name in feed if name not in self._core.inputs]
        if unknown:
            raise Error(f"no input named {unknown[0]!r} (the graph's inputs: {', '.join(self._core.inputs)})")
        if missing:
            raise Error(f"input {missing[0]!r} not given (the graph's inputs: {', '.join(self._core.inputs)})")
        return self._core.forward({name: _array(array, name) for name, array in feed.items()})

    def backward(self, accumulate=False, return_grads=True):
        """The gradients of the last forward's objective: {parameter: array}. This call's
        alone, or with accumulate=True the sum since zero_grad() (or since the last call
        without it). return_grads=False returns None: a loop that hands the gradients to
        an optimizer (pens.optim) skips copying them."""
        return self._core.backward(bool(accumulate), bool(return_grads))

    def zero_grad(self):
        """Sets the parameters' gradients to 0, for backward(accumulate=True)."""
        self._core.zero_grad()

    def value(self, name):
        return self._core.value(name)

    def grad(self, name):
        return self._core.grad(name)

    def parameters(self):
        return self._core.parameters()

    def copy_to(self, model):
        """Gives `model` (the model compiled, or one with the same parameters) this
        program's parameter values, so that model.save() keeps what was trained here."""
        if not isinstance(model, Model):
            raise Error(f"copy_to() takes a pens.Model, got {type(model).__name__}")
        self._core.copy_to(model)

    def set_noise_key(self, seed, step=0):
        """Keys the noise of the next forward passes: the same key draws the same noise."""
        self._core.set_noise_key(_count(seed, "seed", 0), _count(step, "step", 0))

    def set_lambda_scale(self, scale):
        """Scales the λ of the penalties the λ stages schedule (pens train's lambda_scale;
        1 until set)."""
        self._core.set_lambda_scale(_number(scale, "scale"))


def _array(value, name):
    array = np.asarray(value)
    if array.dtype == object:
        raise Error(f"input {name!r}: not a numeric array")
    return array


def _path(value, what):
    """A path argument as a str: a str or an os.PathLike, else pens.Error."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise Error(f"{what} must be a path (a str or a pathlib.Path), got {type(value).__name__}")


def _count(value, what, least=1):
    """A whole-number argument (an int or a NumPy integer, not a bool), at least `least`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise Error(f"{what} must be a whole number, got {value!r}")
    if value < least:
        raise Error(f"{what} must be at least {least}, got {value}")
    return int(value)


def _number(value, what):
    """A real-number argument (int, float or a NumPy scalar, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Error(f"{what} must be a number, got {value!r}")
    return float(value)


def _dtype(value):
    """'float32' or 'float64' from a name, a NumPy dtype or a NumPy scalar type."""
    if isinstance(value, str):
        return value
    try:
        return np.dtype(value).name
    except TypeError:
        raise Error(f"dtype must be 'float32' or 'float64', got {value!r}") from None


def _model(value, what="model"):
    if not isinstance(value, Model):
        raise Error(f"{what} must be a pens.Model (pens.load(path), ModelBuilder.build()), got {type(value).__name__}")
    return value


def _optional_count(value, what, least):
    return None if value is None else _count(value, what, least)


def compile(model, batch=None, dtype="float32", graph="inference", samples=0, children=None, labeled=None,
            init_seed=1, tree=None, vocabulary=None, precision="float32"):
    """Compiles a model's graph in float32 or float64, first for `batch` rows (any other
    row count compiles when it is first fed).

    precision: "float32"; "float32-onednn", the same products on oneDNN's float kernel
    (other sums order, faster on AVX-512 CPUs); or "bfloat16" for a float32 program whose
    matrix products take bfloat16 operands and sum in float32 (oneDNN). The last two are
    refused, saying why, where pens was built without oneDNN or the CPU lacks the
    instructions; parameters and everything else stay float32.

    graph: "inference" (the parent network, noise off; with samples=K, K noisy children
    and their mean class probabilities as "mc/<output>/probabilities"), "training" (the
    pseudo-ensemble: children, penalties, the objective; children and labeled rows as for
    inspect), or
    "parent" (the graph as written, noise on). Parameters are the model's values, or drawn
    from their init attributes with init_seed when the model holds none.

    A tree model compiles for one tree instead of a batch: tree= (pens.tree_text takes
    the treebank's notation, an unlabeled bracketing or nested tuples) and the vocabulary
    that numbers its words (pens.vocabulary); graph "inference" (the unrolled parent,
    noise off) or "training"; float32. Its program takes no inputs and outputs the nodes'
    scores (row root_row is the root's).
    """
    if tree is not None:
        if vocabulary is not None and not isinstance(vocabulary, Vocabulary):
            raise Error(f"vocabulary must be a pens.Vocabulary (pens.vocabulary(dir)), got {type(vocabulary).__name__}")
        return Program(_pens.compile(_model(model), 1, _dtype(dtype), graph, 0, None, None,
                                     _count(init_seed, "init_seed", 0), tree_text(tree), vocabulary, precision))
    if batch is None and not model.is_tree_model:
        raise Error("batch must be given: the rows the program is compiled for first")
    return Program(_pens.compile(_model(model), _count(batch if batch is not None else 1, "batch"), _dtype(dtype),
                                 graph, _count(samples, "samples", 0), _optional_count(children, "children", 1),
                                 _optional_count(labeled, "labeled", 0), _count(init_seed, "init_seed", 0),
                                 None, None, precision))


def vocabulary(dir, min_count=1, lowercase=False):
    """The words of a treebank's training trees (dir/train.txt) as a tree config numbers
    them (data.min_count, data.lowercase): what a tree model's word table is indexed by."""
    return _pens.vocabulary(dir, _count(min_count, "min_count"), bool(lowercase))


def tree_text(tree):
    """A tree in the treebank's notation, "(3 (2 a) (4 b))", from that notation, from an
    unlabeled binarized sentence, "((a b) c)", or from nested tuples: (label, left, right)
    and (label, word), or without labels (left, right) and words. Nodes without a label
    get 2 (neutral), which the binary task does not score."""
    if isinstance(tree, str):
        text = tree.strip()
        if re.match(r"\(\s*\d", text):
            return text
        return _tree_from_tokens(re.findall(r"\(|\)|[^\s()]+", text), text)
    if isinstance(tree, (tuple, list)):
        return _tree_from_tuple(tree)
    raise Error(f"a tree is a string or nested tuples, got {type(tree).__name__}")


def _tree_from_tuple(node):
    if isinstance(node, str):
        return f"(2 {node})"
    if not isinstance(node, (tuple, list)) or not node:
        raise Error(f"a tree node is a word, (label, word), (label, left, right) or (left, right), got {node!r}")
    label, rest = (node[0], node[1:]) if isinstance(node[0], int) and not isinstance(node[0], bool) else (2, node)
    if len(rest) == 1 and isinstance(rest[0], str):
        return f"({label} {rest[0]})"
    if len(rest) != 2:
        raise Error(f"a tree node has a word or two children, got {node!r}")
    return f"({label} {_tree_from_tuple(rest[0])} {_tree_from_tuple(rest[1])})"


def _tree_from_tokens(tokens, text):
    """An unlabeled bracketing, "((a b) c)", with label 2 on every node."""
    position = 0

    def node():
        nonlocal position
        if position >= len(tokens):
            raise Error(f"tree {text!r}: it ends inside a bracket")
        token = tokens[position]
        position += 1
        if token == ")":
            raise Error(f"tree {text!r}: ')' where a word or '(' belongs")
        if token != "(":
            return (token,)
        children = []
        while position < len(tokens) and tokens[position] != ")":
            children.append(node())
        if position >= len(tokens):
            raise Error(f"tree {text!r}: it ends inside a bracket")
        position += 1
        if len(children) == 1:
            return children[0]
        if len(children) != 2:
            raise Error(f"tree {text!r}: a bracket holds {len(children)} parts; a binarized tree has two")
        return tuple(children)

    root = node()
    if position != len(tokens):
        raise Error(f"tree {text!r}: text after the tree")

    def labeled(n):
        return f"(2 {n[0]})" if len(n) == 1 else f"(2 {labeled(n[0])} {labeled(n[1])})"

    return labeled(root)


def gradcheck(model, batch=8, children=None, labeled=None, parent=False, sample=None, tolerance=1e-6, step=1e-5,
              init_seed=1, tree=None):
    """Finite-difference check in float64 of d objective / d parameters of the model's
    training graph, as `pens gradcheck MODEL` runs it. sample: elements checked per
    tensor (0: all; default all up to 10,000 parameter elements, 64 above). tree: a tree
    model's training graph is built for one tree, "(3 (2 a) (4 b))" or as tree_text takes
    it (pens gradcheck --tree)."""
    if tree is not None:
        tree = tree_text(tree)
    return _pens.gradcheck(_model(model), _count(batch, "batch"), _optional_count(children, "children", 1),
                           _optional_count(labeled, "labeled", 0), bool(parent), _optional_count(sample, "sample", 0),
                           _number(tolerance, "tolerance"), _number(step, "step"), _count(init_seed, "init_seed", 0),
                           tree)


def train(config, out=None, callback=None, *, data=None, test=None, init=None, data_dir=None, seed=None, epochs=None,
          budget_minutes=None, threads=None, labels=None, split_seed=None, shards=None, precision=None, resume=False,
          resume_from=None):
    """Runs `pens train CONFIG` with the same options; returns summary.json's contents
    (plus "out_dir" and "diverged"). callback(event, data) is called with ("step",
    {step, total_steps, epoch, objective, elapsed_seconds}) after every step, ("eval",
    metrics) after every evaluation (the line written to metrics.jsonl) and ("message",
    text); an exception it raises stops the run, whose last checkpoint stays.

    data=(X, y) or (X, y, X_unlabeled), test=(X_test, y_test): NumPy arrays in place of
    the files of the config's data.dir (a dense config, not a tree one): X [examples,
    values] taken as they are (pens' MNIST loader gives pixels / 255), y class indices
    0, 1, ..., X_unlabeled examples without labels. The config's split applies to `data`
    as to MNIST's training set (data.labeled, data.validation, data.split_seed; the
    examples of X_unlabeled are only ever unlabeled)."""
    if callback is not None and not callable(callback):
        raise Error(f"callback must be callable, got {type(callback).__name__}")
    options = _run_options(out=out, init=init, data_dir=data_dir, resume_from=resume_from, seed=seed, epochs=epochs,
                           threads=threads, labels=labels, split_seed=split_seed, shards=shards,
                           precision=precision, budget_minutes=budget_minutes)
    options.resume = bool(resume)
    return _pens.train(_path(config, "config"), options, callback, _arrays(data, test))


def _run_options(budget_minutes=None, **given):
    """RunOptions from keyword arguments, each checked: paths and whole numbers (from the
    least value pens train's table gives them)."""
    options = RunOptions()
    least = {name: low for name, low, high in _pens.run_options if high > 0 and name != "budget_minutes"}
    for key, value in given.items():
        if value is None:
            continue
        if key in least:
            value = _count(value, key, int(least[key]))
        elif key == "precision":
            if not isinstance(value, str):
                raise Error(f"precision must be 'float32', 'float32-onednn' or 'bfloat16', got {type(value).__name__}")
        else:
            value = _path(value, key)
        setattr(options, key, value)
    if budget_minutes is not None:
        options.budget_minutes = _number(budget_minutes, "budget_minutes")
    return options


def _arrays(data, test):
    """(X, y, X_unlabeled or None, X_test, y_test) for the C++ half, or None."""
    if (data is None) != (test is None):
        raise Error("data and test go together: data=(X, y), test=(X_test, y_test)")
    if data is None:
        return None
    given = _arrays_of(data, "data", (2, 3))
    return (*given, None)[:3] + _arrays_of(test, "test", (2,))


def _arrays_of(value, what, sizes):
    """A tuple of `sizes` arrays: (X, y) or (X, y, X_unlabeled)."""
    if not isinstance(value, (tuple, list)) or len(value) not in sizes:
        shape = "(X, y) or (X, y, X_unlabeled)" if 3 in sizes else "(X, y)"
        raise Error(f"{what} must be {shape} of arrays, got {type(value).__name__}"
                    + (f" of {len(value)}" if isinstance(value, (tuple, list)) else ""))
    return tuple(_array(part, f"{what}[{i}]") for i, part in enumerate(value))


class TrainingPlan:
    """What `pens train CONFIG` would do, step by step, for a loop written in Python: the
    model as the run starts it (values drawn with the config's init_seed, init_from
    applied), batch(step) (the inputs of step `step`: the labeled rows, then the
    unlabeled ones), at(step) (epoch, learning_rate, momentum, lambda_scale, restart,
    optimizer_step: the noise key's step), the optimizer and the data (data("test"),
    data("validation"), data("labeled")). A loop that compiles the model's training
    graph for batch_labeled + batch_unlabeled rows (labeled=batch_labeled), keys its noise
    (seed, optimizer_step), sets the λ scale and updates with the config's optimizer at
    those settings trains exactly as pens train (bench/python_loop.py). Options as for
    pens.train; dense configs without shards or trainable periods. Evaluation is the
    loop's own: pens train evaluates with batch statistics recalibrated over
    recalibrate_statistics training examples where that is not 0."""

    def __init__(self, config, *, data=None, test=None, init=None, data_dir=None, seed=None, epochs=None,
                 labels=None, split_seed=None):
        options = _run_options(init=init, data_dir=data_dir, seed=seed, epochs=epochs, labels=labels,
                               split_seed=split_seed)
        self._core = _pens.TrainingPlan(_path(config, "config"), options, _arrays(data, test))

    model = property(lambda self: self._core.model, doc="the model with the values the run starts from")
    total_steps = property(lambda self: self._core.total_steps)
    steps_per_epoch = property(lambda self: self._core.steps_per_epoch)
    seed = property(lambda self: self._core.seed, doc="the run's seed: the noise keys' first part")
    threads = property(lambda self: self._core.threads, doc="the config's run.threads (0: every CPU)")
    batch_labeled = property(lambda self: self._core.batch_labeled)
    batch_unlabeled = property(lambda self: self._core.batch_unlabeled)
    eval_batch = property(lambda self: self._core.eval_batch)
    recalibrate_statistics = property(lambda self: self._core.recalibrate_statistics,
                                      doc="the config's eval.recalibrate_statistics (0: none)")
    max_norm_rule = property(lambda self: self._core.max_norm_rule)
    optimizer_groups = property(lambda self: self._core.optimizer_groups,
                                doc="the config's optimizer.groups, as pens.optim.Optimizer takes them")
    base_learning_rate = property(lambda self: self._core.base_learning_rate,
                                  doc="the config's optimizer.learning_rate: the groups' rates are relative to it")

    def optimizer(self, program):
        """The config's optimizer (kind, settings, max-norm rule, groups) over a program,
        set to step 0's learning rate and momentum."""
        # Made at the schedule's base rate, which the groups' rates are relative to.
        opt = optim.Optimizer(program, self._core.optimizer, self.base_learning_rate, 0.0,
                              self.max_norm_rule, groups=self.optimizer_groups,
                              **self._core.optimizer_settings)
        first = self.at(0)
        opt.lr, opt.momentum = first["learning_rate"], first["momentum"]
        return opt

    def batch(self, step):
        return self._core.batch(_count(step, "step", 0))

    def at(self, step):
        return self._core.at(_count(step, "step", 0))

    def data(self, part):
        return self._core.data(part)


def read_config(path):
    """A training config as pens reads it, a dict: the configs it names as "base" laid
    under it (each member over the base's, objects merged, null removing one;
    docs/training.md). `pens config PATH` prints the same."""
    return _pens.read_config(path)


def mnist(dir="data/mnist", part="train"):
    """MNIST as pens reads it (the IDX files, checked): (X, y), X float32 [examples, 784]
    of pixels / 255, y int64 labels. part: "train" (60,000) or "test" (10,000)."""
    return _pens.load_mnist(dir, part)


def _predict(model, x, batch=1000, samples=0, output=None, vocabulary=None):
    """The model's scores for the rows of x, in batches: its output (the one it has, or
    `output` by name) as a NumPy array, from the inference graph (noise off; samples=K:
    the mean class probabilities of K noisy children). A tree model's x is a sentence's
    tree (as tree_text takes it), whose words `vocabulary` numbers: its root's class
    probabilities (predict_tree)."""
    if model.is_tree_model:
        return _predict_tree(model, x, vocabulary)
    x = _array(x, "x")
    if x.ndim != 2 or len(x) == 0:
        raise Error(f"x must be a 2-D array of examples, got shape {x.shape}")
    program = compile(model, batch=min(_count(batch, "batch"), len(x)), samples=samples)
    if output is None:
        if len(program.outputs) != 1:
            raise Error(f"the model has outputs {', '.join(program.outputs)}: name one with output=")
        output = program.outputs[0]
    elif samples and f"mc/{output}/probabilities" in program.outputs:
        output = f"mc/{output}/probabilities"
    if output not in program.outputs:
        raise Error(f"no output named {output!r} (the outputs: {', '.join(program.outputs)})")
    (name,) = [n for n in program.inputs]  # the inference graph reads one input
    parts = [program.forward({name: x[start:start + program.batch]})[output]
             for start in range(0, len(x), program.batch)]
    return np.concatenate(parts)


def _evaluate(model, x, y, batch=1000, samples=0, output=None):
    """The classification error of the model on (x, y), as a fraction (as metrics.jsonl
    has it), and the confusion matrix: counts[true class][predicted class]."""
    y = _array(y, "y")
    scores = _predict(model, x, batch, samples, output)
    if y.shape != (len(scores),) or y.dtype.kind not in "iu":
        raise Error(f"y must be {len(scores)} class indices (integers), got shape {y.shape} of {y.dtype}")
    classes = scores.shape[1]
    if y.min() < 0 or y.max() >= classes:
        raise Error(f"y holds a class outside 0..{classes - 1}, which the output scores")
    predicted = scores.argmax(axis=1)
    confusion = np.zeros((classes, classes), np.int64)
    np.add.at(confusion, (y, predicted), 1)
    return {"error": float((predicted != y).mean()), "confusion": confusion}


def _predict_tree(model, tree, vocabulary):
    """A tree model's class probabilities for a sentence's root (the unrolled parent,
    noise off): tree as pens.tree_text takes it, words numbered by `vocabulary`."""
    program = compile(model, tree=tree, vocabulary=vocabulary)
    scores = program.forward()[program.outputs[0]][program._core.root_row].astype(np.float64)
    exp = np.exp(scores - scores.max())
    return exp / exp.sum()


Model.predict = _predict
Model.evaluate = _evaluate
Model.predict_tree = _predict_tree


def _in_pens_words(function, name):
    """`function` (a C++ method) with pybind11's TypeError for arguments of the wrong type
    ("incompatible function arguments" and every overload) as one pens.Error line that
    names the call, what it takes and what it got."""

    @functools.wraps(function)
    def checked(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TypeError as e:
            text = str(e)
            if "incompatible function arguments" not in text and "incompatible constructor arguments" not in text:
                raise
            takes = re.search(r"1\. (\(.*?\))(?: -> |\n|$)", text)
            # (py::handle is how the C++ half takes a path.)
            takes = (takes.group(1).replace("pens._pens.", "").replace(": handle", ": str or pathlib.Path")
                     if takes else "other arguments")
            got = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
            raise Error(f"{name} takes {takes}, got ({got})") from None

    return checked


for _name in ("initialize", "inspect", "parameters", "save", "to_json"):
    setattr(Model, _name, _in_pens_words(getattr(Model, _name), f"Model.{_name}"))
for _name in ("load", "from_json"):
    setattr(Model, _name, staticmethod(_in_pens_words(getattr(Model, _name), f"Model.{_name}")))
for _name in ("id", "word"):
    setattr(Vocabulary, _name, _in_pens_words(getattr(Vocabulary, _name), f"Vocabulary.{_name}"))
set_threads = _in_pens_words(set_threads, "set_threads")


def noise(kind, **params):
    """A noise annotation: noise("mask", p=0.5), noise("gaussian", sigma=0.1), ...; with
    children=[2], only child 2 applies it (children numbered from 1; default every child)."""
    return dict(kind=kind, **params)


def penalty(node, kind, weight=1.0, rows="all", fixed_target=False, scheduled=True, target=None, pairing=None,
            children=None, **params):
    """A pseudo-ensemble penalty term: V of `kind` on `node`'s taps, weighted by `weight` (λ);
    `fixed_target`: the pair's first side gets no gradient; `scheduled=False`: the λ stages
    do not scale it; `target` (parent-child pairing): the parent's node compared with the
    children's `node`, as a ladder network's decoder estimate with the clean value,
    penalty("xhat", "l2", 1.0, target="x"); `pairing`: this term's pairs ("child-child"
    or "parent-child") where they differ from the pseudo-ensemble's; `children`: the
    children it taps, [1] or [2, 3], where not all (children of different kinds, each with
    its own noise); `params`: the kind's parameters, penalty("logits", "pseudo_label", 1.0,
    threshold=0.9)."""
    term = {"node": node, "kind": kind, "lambda": float(weight), "rows": rows}
    if target is not None:
        term["target"] = target
    if pairing is not None:
        term["pairing"] = pairing
    if children is not None:
        term["children"] = list(children)
    if fixed_target:
        term["fixed_target"] = True
    if not scheduled:
        term["scheduled"] = False
    if params:
        term["params"] = {name: float(value) for name, value in params.items()}
    return term


def _builder_message(message, doc):
    """A model-file error about the builder's JSON, in the builder's words: "<json>:
    /nodes/3/noise/0: ..." becomes "ModelBuilder: node 'h1' (noise 0): ...", or just
    "ModelBuilder: ..." when the message names the node itself."""
    found = re.match(r"<json>: /(inputs|parameters|nodes)/(\d+)(/\S*)?: (.*)", message, re.S)
    if not found:
        return message.replace("<json>", "ModelBuilder", 1)
    section, index, field, rest = found.groups()
    name = doc[section][int(index)]["name"]
    if f"'{name}'" in rest:
        return f"ModelBuilder: {rest}"
    where = f" ({field.strip('/').replace('/', ' ')})" if field else ""
    return f"ModelBuilder: node '{name}'{where}: {rest}"


class ModelBuilder:
    """Builds a model graph node by node, as the C++ Graph does, and turns it into a
    pens.Model through the model format (so every check of a model file applies):

        b = pens.ModelBuilder()
        x = b.input("x", [None, 784], layer="in", noise=[pens.noise("mask", p=0.2)])
        y = b.input("y", [None], dtype="index")
        w = b.param("W", [784, 10], init="normal", std=0.01)
        c = b.param("c", [10], init="constant", value=0.0)
        logits = b.add("affine", [x, w, c], name="logits", layer="out", output=True)
        b.add("mean", [b.add("softmax_xent", [logits, y])], name="loss", loss=True)
        b.pseudo_ensemble(children=2, penalties=[pens.penalty("logits", "kl", 1.0)])
        model = b.build()

    Shapes use None (or -1) for the batch dimension. Node names are made up ("affine_1")
    when not given. Each method returns the node's name.
    """

    def __init__(self, description=None):
        self._inputs, self._params, self._nodes, self._outputs = [], [], [], []
        self._names = set()
        self._ensemble = None
        self._averages = []
        self._metadata = {"description": description} if description else {}

    def _name(self, name, op):
        if name is None:
            n = 1
            while f"{op}_{n}" in self._names:
                n += 1
            name = f"{op}_{n}"
        if name in self._names:
            raise Error(f"a node named {name!r} exists already")
        self._names.add(name)
        return name

    @staticmethod
    def _shape(shape):
        """None or -1: the batch; every other dimension a whole number (7 / 2 is refused,
        not cut to 3)."""
        dims = []
        for d in shape:
            if d is None:
                dims.append(-1)
            elif isinstance(d, numbers.Integral) and not isinstance(d, bool):
                dims.append(int(d))
            elif isinstance(d, numbers.Real) and float(d).is_integer():
                dims.append(int(d))
            else:
                raise Error(f"shape {list(shape)}: {d!r} is not a whole number of units")
        return dims

    def _find(self, name):
        for entry in self._inputs + self._params + self._nodes:
            if entry["name"] == name:
                return entry
        raise Error(f"no node named {name!r}")

    @staticmethod
    def _with(entry, **optional):
        """The entry with those optional fields that are given (not None)."""
        entry.update({key: value for key, value in optional.items() if value is not None})
        return entry

    def input(self, name, shape, dtype="real", layer=None, noise=None):
        entry = self._with({"name": self._name(name, "input"), "shape": self._shape(shape), "dtype": dtype},
                           layer=layer, noise=list(noise) if noise else None)
        self._inputs.append(entry)
        return entry["name"]

    def param(self, name, shape, init="normal", max_norm=None, frozen=False, layer=None, noise=None, **init_params):
        """init: "zeros", "constant" (value=v), "normal" (std=s) or "uniform" (limit=l)."""
        entry = self._with({"name": self._name(name, "param"), "shape": self._shape(shape), "dtype": "float32",
                            "init": dict(kind=init, **init_params)},
                           max_norm=max_norm, flags=["frozen"] if frozen else None, layer=layer,
                           noise=list(noise) if noise else None)
        self._params.append(entry)
        return entry["name"]

    def add(self, op, inputs, name=None, layer=None, noise=None, output=False, loss=False, **attrs):
        """A node applying `op` (pens ops lists them) to `inputs` (node names); attrs are
        the op's attributes."""
        entry = self._with({"name": self._name(name, op), "op": op, "inputs": list(inputs)},
                           attrs=attrs or None, layer=layer, noise=list(noise) if noise else None,
                           flags=["loss"] if loss else None)
        self._nodes.append(entry)
        if output:
            self._outputs.append(entry["name"])
        return entry["name"]

    def add_noise(self, node, kind, **params):
        """Annotates a node (input, parameter or computation) with noise for the children."""
        self._find(node).setdefault("noise", []).append(noise(kind, **params))
        return node

    def output(self, node):
        self._find(node)
        self._outputs.append(node)
        return node

    def moving_average(self, param, source, decay, at_inference=True, child=0):
        """Keeps frozen parameter `param` as a moving average of node `source` after every
        update, read in its place at inference when at_inference (docs/model-format.md,
        moving_averages): running statistics, a mean teacher's weights. child k > 0
        follows child k's copy of `source` in training (a mean teacher's own statistics)."""
        self._find(param)
        self._find(source)
        average = {"param": param, "source": source, "decay": decay, "at_inference": at_inference}
        if child:
            average["child"] = child
        self._averages.append(average)

    def batch_norm(self, x, name, width, decay=0.99, eps=1e-5, child=0):
        """Batch normalisation of x [B, width] over its rows, as pens new mlp --batch-norm
        writes it: nodes "<name>/mean", "<name>/var", "<name>"; parameters "<name>/scale",
        "<name>/shift" and the running statistics, which follow child `child`'s batch
        statistics (0: the clean parent's). Returns the normalised node."""
        scale = self.param(f"{name}/scale", [width], init="constant", value=1.0)
        shift = self.param(f"{name}/shift", [width], init="constant", value=0.0)
        running_mean = self.param(f"{name}/running_mean", [width], init="constant", value=0.0, frozen=True)
        running_var = self.param(f"{name}/running_var", [width], init="constant", value=1.0, frozen=True)
        mean = self.add("mean", [x], name=f"{name}/mean", axes=[0], keepdims=0)
        var = self.add("batch_variance", [x, mean], name=f"{name}/var")
        out = self.add("normalize", [x, mean, var, scale, shift], name=name, eps=eps)
        self.moving_average(running_mean, mean, decay, child=child)
        self.moving_average(running_var, var, decay, child=child)
        return out

    def pseudo_ensemble(self, children=2, penalties=(), pairing="child-child", loss_on="parent", smoothing=1e-4,
                        lambda_schedule=(), teacher=0, batch_statistics="own", statistics_by_part=False):
        """How training builds the pseudo-ensemble (docs/model-format.md, pseudo_ensemble).
        `batch_statistics`: "own" or "parent" for every child, or a list of one per child."""
        self._ensemble = {"children": children, "pairing": pairing, "loss_on": loss_on, "smoothing": smoothing,
                          "penalties": list(penalties)}
        if lambda_schedule:
            self._ensemble["lambda_schedule"] = list(lambda_schedule)
        if teacher:
            self._ensemble["teacher"] = teacher
        if batch_statistics != "own":
            self._ensemble["batch_statistics"] = (batch_statistics if isinstance(batch_statistics, str)
                                                  else list(batch_statistics))
        if statistics_by_part:
            self._ensemble["statistics_by_part"] = True

    def to_dict(self):
        model = {"format_version": 1, "opset_version": 1, "inputs": self._inputs, "parameters": self._params,
                 "nodes": self._nodes, "outputs": self._outputs}
        if self._metadata:
            model["metadata"] = self._metadata
        if self._averages:
            model["moving_averages"] = self._averages
        if self._ensemble is not None:
            model["pseudo_ensemble"] = self._ensemble
        return model

    def build(self):
        """The pens.Model, checked as a model file is. Errors name nodes by name, not by
        their place in the JSON the builder writes."""
        doc = self.to_dict()
        try:
            return Model.from_json(json.dumps(doc))
        except Error as e:
            raise Error(_builder_message(str(e), doc)) from None
