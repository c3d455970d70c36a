"""Optimizers over a compiled program's parameters, as `pens train` runs them: each kind
registered in C++ (SGD with momentum, AdaGrad, Adam, and any a program registers), the
model's max-norm constraints after every update, then its moving averages (running
statistics, a mean teacher).

    program = pens.compile(model, batch=100, graph="training")
    opt = pens.optim.Adam(program, lr=1e-3)
    for x, y in batches:
        program.forward(x=x, y=y)
        program.backward()
        opt.step()
"""
from . import _pens
from ._pens import Error

__all__ = ["Optimizer", "SGD", "AdaGrad", "Adam", "kinds"]


def kinds():
    """The registered optimizer kinds, by the names configs use."""
    return list(_pens.optimizer_kinds())


class Optimizer:
    """An optimizer of a registered `kind` over a float32 program's parameters. lr and
    momentum may be changed between steps (a schedule is a loop that sets them); settings
    are the kind's own (`pens optimizers` lists them), checked as a config's are.

    groups put named parameters on optimizers of their own, as a config's
    optimizer.groups does: a list of dicts {"params": [names], "kind": K, "lr": rate,
    "momentum": m (default 0, constant), ...K's settings}. A group's lr is its rate while
    the optimizer's lr is the one given here; setting opt.lr later scales every group's
    rate alike, as a config's schedule does. Kinds that update the whole store at once
    (Adam) take no groups, beside them or in them.

        opt = pens.optim.AdaGrad(program, lr=0.05, groups=[{"params": ["E"], "kind": "sgd", "lr": 0.1}])
    """

    def __init__(self, program, kind, lr, momentum=0.0, max_norm_rule="unit-incoming", *, groups=(), **settings):
        from . import Program, _number

        if not isinstance(program, Program):
            raise Error(f"an optimizer takes a pens.Program (pens.compile), got {type(program).__name__}")
        if not isinstance(kind, str):
            raise Error(f"kind must be an optimizer's name ({', '.join(kinds())}), got {kind!r}")
        if not isinstance(groups, (list, tuple)):
            raise Error(f"groups must be a list of dicts {{'params': [...], 'kind': ..., 'lr': ...}}, "
                        f"got {type(groups).__name__}")
        self._core = _pens.Optimizer(program._core, kind, _number(lr, "lr"), _number(momentum, "momentum"),
                                     max_norm_rule, settings, list(groups))

    kind = property(lambda self: self._core.kind, doc="the registered kind")
    steps = property(lambda self: self._core.steps, doc="updates made so far")

    lr = property(lambda self: self._core.learning_rate, lambda self, value: self._set("learning_rate", value, "lr"),
                  doc="the learning rate of the next step")
    momentum = property(lambda self: self._core.momentum, lambda self, value: self._set("momentum", value, "momentum"),
                        doc="the momentum of the next step (for kinds that have one)")

    def _set(self, field, value, name):
        from . import _number

        setattr(self._core, field, _number(value, name))

    def step(self):
        """One update from the gradients the program holds (its last backward())."""
        self._core.step()

    def restart(self):
        """Forgets every update so far (the optimizer's state and step count)."""
        self._core.restart()


def SGD(program, lr, momentum=0.0, *, groups=(), **settings):
    return Optimizer(program, "sgd", lr, momentum, groups=groups, **settings)


def AdaGrad(program, lr, *, groups=(), **settings):
    return Optimizer(program, "adagrad", lr, groups=groups, **settings)


def Adam(program, lr, **settings):
    return Optimizer(program, "adam", lr, **settings)
