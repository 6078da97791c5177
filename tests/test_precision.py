"""Every matrix product the estimators compile asks for float32 precision.

On NVIDIA GPUs XLA computes a float32 product at its default precision in
TensorFloat-32 (see ``skdiagatt/kernels/_matmul.py``); a CPU computes float32
whatever the product asks for, so CI cannot see the difference in numbers.
These tests read the precision off the programs instead: each estimator is
fitted and used as a user would, the arguments of its compiled training steps
and predictions are recorded, and every ``dot_general`` in the traced programs
(gradients and custom backward passes included) must carry
``Precision.HIGHEST``.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor
from skdiagatt._training import step as training_step
from skdiagatt.baselines import LoRARegressor, PrefixTuningRegressor, StdAttClassifier, StdAttRegressor
from skdiagatt.baselines import stdatt as stdatt_module
from skdiagatt.datasets import make_individualized_regression
from skdiagatt.diagatt import _estimators as diagatt_module
from skdiagatt.kernels.transformer import encoder_forward, init_encoder_params
from skdiagatt.ntk import _estimator as ntk_module

HIGHEST = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)

# The compiled programs the estimators call, by module and attribute name;
# their arguments are recorded during a fit and a prediction.
PROGRAMS = [
    (training_step, "train_steps", 8),  # arrays first, then loss_fn, config, n_slices
    (training_step, "eval_step", 5),
    (diagatt_module, "_linear_predictor", None),
    (diagatt_module, "_weights", None),
    (diagatt_module, "_pooled", None),
    (diagatt_module, "_contributions", None),
    (ntk_module, "_forward", None),
    (ntk_module, "_row_mass", None),
    (stdatt_module, "_linear_predictor", None),
    (stdatt_module, "_received", None),
]

ESTIMATORS = [
    DiagAttRegressor(max_iter=1, calibration_iter=1, early_stopping=True),
    DiagAttRegressor(n_heads=2, rank=2, exclusive_heads=True, objective="attention", max_iter=1,
                     calibration_iter=1, value_refit=True),
    DiagAttClassifier(n_heads=2, score_form="quadratic", max_iter=1, calibration_iter=1),
    NTKPrefixRegressor(prefix_length=8, max_iter=1, solver="adam"),
    NTKPrefixRegressor(feature_map="elu", prefix_length=8, causal=True, max_iter=1, solver="adam"),
    StdAttRegressor(max_iter=1, calibration_iter=1),
    StdAttClassifier(max_iter=1, calibration_iter=1),
    PrefixTuningRegressor(prefix_length=3, max_iter=1),
    LoRARegressor(rank=2, max_iter=1),
]


def dot_precisions(jaxpr):
    """The ``precision`` of every ``dot_general`` in ``jaxpr`` and the programs nested in it."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            yield eqn.params["precision"]
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                sub = getattr(sub, "jaxpr", sub)  # a closed program: its open one
                if hasattr(sub, "eqns"):
                    yield from dot_precisions(sub)


def traced_precisions(fn, args, kwargs, n_arrays):
    """Precisions in the program of ``fn(*args, **kwargs)``; arguments past ``n_arrays`` are static."""
    n_arrays = len(args) if n_arrays is None else n_arrays
    arrays, static = args[:n_arrays], args[n_arrays:]
    jaxpr = jax.make_jaxpr(lambda *a: fn(*a, *static, **kwargs))(*arrays)
    return list(dot_precisions(jaxpr.jaxpr))


def test_the_walker_sees_a_default_precision_product():
    """The check can fail: a plain ``@`` (default precision) is found, in a nested program too."""
    f = jax.jit(lambda a, b: jnp.sum(a @ b))
    found = list(dot_precisions(jax.make_jaxpr(jax.grad(f))(jnp.ones((3, 3)), jnp.ones((3, 3))).jaxpr))
    assert found and all(p != HIGHEST for p in found)


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: repr(e).replace("\n", "").replace(" ", ""))
def test_every_compiled_product_asks_for_float32(est, monkeypatch):
    X, y, _, _ = make_individualized_regression(40, n_rows=(3, 9), n_features=4, random_state=0)
    if "Classifier" in type(est).__name__:
        y = (y > np.median(y)).astype(int)
    calls = {}
    for module, name, n_arrays in PROGRAMS:
        original = getattr(module, name)

        def record(*args, _key=(module.__name__, name), _fn=original, _n=n_arrays, **kwargs):
            calls.setdefault(_key, (_fn, args, kwargs, _n))
            return _fn(*args, **kwargs)

        monkeypatch.setattr(module, name, record)
    est.fit(X, y)
    est.predict(X[:5])
    for method in ("localize", "row_contributions"):
        if hasattr(est, method):
            getattr(est, method)(X[:5])
    assert ("skdiagatt._training.step", "train_steps") in calls
    for key, (fn, args, kwargs, n_arrays) in calls.items():
        precisions = traced_precisions(fn, args, kwargs, n_arrays)
        assert precisions, f"{key}: no matrix product traced"
        bad = [p for p in precisions if p != HIGHEST]
        assert not bad, f"{key}: {len(bad)} of {len(precisions)} products at precision {bad[0]}"


def test_the_text_encoder_asks_for_float32():
    params = init_encoder_params(30, 8, 2, 16, max_positions=8)
    ids = jnp.zeros((2, 5), jnp.int32)
    mask = jnp.ones((2, 5), bool)
    fn = functools.partial(encoder_forward, n_heads=2)
    precisions = list(dot_precisions(jax.make_jaxpr(fn)(params, ids, mask).jaxpr))
    assert precisions and all(p == HIGHEST for p in precisions)
