"""Declared constructor parameters: each estimator lists a rule per parameter, checked in one place.

An estimator sets ``_parameter_rules = {"name": rule, ...}`` with one entry
per ``__init__`` parameter; :func:`validate_parameters` checks them all at the
start of ``fit`` and raises ``"{name} must be {rule}, got {value!r}"``.
Checks that involve several parameters at once stay with the estimator
(``_check_combination``).

A value can be valid and still change nothing: ``validation_fraction``
without early stopping, say.  An estimator declares such cases in
``_inert_when = {"name": condition, ...}``, ``condition(est)`` returning the
setting that makes the parameter inert (or None); :func:`inert_parameters`
lists the parameters set away from their default that it makes inert, so
that ``fit`` can say so (:class:`InertParameterWarning`) and a grid search
over one is not silently a search over nothing.
"""

import inspect
import math
import numbers

import numpy as np

__all__ = [
    "Anything", "Boolean", "Either", "Integer", "Options", "Real",
    "TRAINING_INERT", "derived_init", "inert_parameters", "validate_parameters",
]


class Integer:
    """An integer (not a bool) of at least ``minimum`` (None: of any sign)."""

    def __init__(self, minimum=1):
        self.minimum = minimum

    def accepts(self, value):
        if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)):
            return False
        return self.minimum is None or value >= self.minimum

    def __str__(self):
        return "an integer" if self.minimum is None else f"an integer >= {self.minimum}"


class Real:
    """A finite real number above ``low`` (or at it when ``closed``), below ``high`` if given."""

    def __init__(self, low=0.0, *, closed=False, high=None):
        self.low, self.closed, self.high = low, closed, high

    def accepts(self, value):
        if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)) or not math.isfinite(value):
            return False
        above = value >= self.low if self.closed else value > self.low
        return above and (self.high is None or value < self.high)

    def __str__(self):
        if self.high is not None:
            return f"in {'[' if self.closed else '('}{self.low:g}, {self.high:g})"
        return f"a finite number {'>=' if self.closed else '>'} {self.low:g}"


class Options:
    """One of the listed values (compared with ``==``; None and strings alike)."""

    def __init__(self, *values):
        self.values = values

    def accepts(self, value):
        if isinstance(value, np.ndarray):
            return False
        return any(value is v or (isinstance(value, type(v)) and value == v) for v in self.values)

    def __str__(self):
        names = ", ".join(repr(v) for v in self.values)
        return names if len(self.values) == 1 else f"one of {names}"


class Boolean:
    """True or False (numpy bools included)."""

    def accepts(self, value):
        return isinstance(value, (bool, np.bool_))

    def __str__(self):
        return "True or False"


class Anything:
    """Any value: checked where it is used (``random_state``, arrays of weights)."""

    def accepts(self, value):
        return True

    def __str__(self):
        return "any value"


class Callable:
    """A callable (a function, a bound method, an object with ``__call__``)."""

    def accepts(self, value):
        return callable(value)

    def __str__(self):
        return "a callable taking one EpochInfo"


class Either:
    """Accepted by any of ``rules``."""

    def __init__(self, *rules):
        self.rules = rules

    def accepts(self, value):
        return any(rule.accepts(value) for rule in self.rules)

    def __str__(self):
        return " or ".join(str(rule) for rule in self.rules)


def derived_init(init, *, drop=(), add=(), after=None):
    """An ``__init__`` with the keyword parameters of ``init`` but ``drop``, and ``add``'s ``(name, default)`` pairs.

    scikit-learn reads an estimator's parameters from the signature of its
    ``__init__``; deriving a variant's from the estimator it varies keeps
    their lists of parameters (same names, defaults and order) from
    drifting apart.  ``add`` goes after the parameter ``after`` (None: at
    the end).  The ``__init__`` stores every argument unchanged under its
    own name, as scikit-learn requires.
    """
    kept = [p for p in inspect.signature(init).parameters.values() if p.name not in drop]
    at = len(kept) if after is None else [p.name for p in kept].index(after) + 1
    new = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default) for name, default in add]
    signature = inspect.Signature(kept[:at] + new + kept[at:])

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for key, value in list(bound.arguments.items())[1:]:  # after self
            setattr(self, key, value)

    __init__.__signature__ = signature
    return __init__


def validate_parameters(est):
    """Check every declared parameter of ``est``; raise ValueError naming the first bad one."""
    for name, rule in type(est)._parameter_rules.items():
        value = getattr(est, name)
        if not rule.accepts(value):
            raise ValueError(f"{name} must be {rule}, got {value!r}")


def _is_default(value, default):
    try:
        return bool(value is default or value == default)
    except (TypeError, ValueError):  # an array compared element-wise
        return False


def inert_parameters(est):
    """``{name: setting}``: the parameters of ``est`` set away from their default that have no effect.

    ``setting`` names what makes the parameter inert (``"early_stopping=False"``).
    """
    defaults = {k: p.default for k, p in inspect.signature(type(est).__init__).parameters.items()}
    inert = {}
    for name, condition in getattr(type(est), "_inert_when", {}).items():
        if _is_default(getattr(est, name), defaults[name]):
            continue
        setting = condition(est)
        if setting:
            inert[name] = setting
    return inert


#: The rules of the parameters every estimator trained by the optax loop shares.
TRAINING_RULES = {
    "max_iter": Integer(1),
    "learning_rate": Real(0.0),
    "batch_size": Either(Options("auto"), Integer(1)),
    "tol": Real(0.0, closed=True),
    "n_iter_no_change": Integer(1),
    "early_stopping": Boolean(),
    "validation_fraction": Real(0.0, high=1.0),
    "random_state": Anything(),
    "verbose": Either(Boolean(), Integer(0)),
    "callback": Either(Options(None), Callable()),
    "warm_start": Boolean(),
}


#: The training parameters that other settings make inert (see :func:`inert_parameters`).
TRAINING_INERT = {
    "validation_fraction": lambda est: None if est.early_stopping else "early_stopping=False",
}
