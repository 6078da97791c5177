"""Robustness: hostile input, numerical stress, persistence, failure mid-fit.

What is tried and what each case gets is summarised in ``docs/robustness.md``.

Compile budget
--------------
JAX compiles one program per array shape, and a compile costs seconds on a
loaded 2-core machine while a fit on tiny data costs milliseconds.  So every
estimator trained by the optax loop gets ONE fixed *layout* -- a number of
features ``d`` and one row-count range per sample, each range inside one
padded bucket of :mod:`skdiagatt._shared.ragged` -- and every test of that estimator
(property tests, stress, persistence, failure mid-fit) draws its samples in
that layout: the values, dtypes, magnitudes, row counts inside the bucket,
duplicated and constant rows vary freely, the compiled shapes do not.  The
layouts together cover ``p_i = 1`` and ``p_i`` up to 300, ``d = 1`` and
``d = 64``.  Estimators that compile nothing (group lasso, two-step, oracle)
draw ``p_i`` in 1..300 and ``d`` in 1..64 freely.

Set ``SKDIAGATT_HYPOTHESIS_EXAMPLES=N`` for N examples per property test and
free shapes for every estimator (each new shape compiles: expect minutes)::

    SKDIAGATT_HYPOTHESIS_EXAMPLES=200 python -m pytest tests/test_robustness.py

Examples are derandomized (the same ones on every run) and no example
database is written.
"""

import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import joblib
import numpy as np
import pytest
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from skdiagatt import (  # noqa: E402
    DiagAttClassifier,
    DiagAttRegressor,
    NTKPrefixRegressor,
)
from skdiagatt._shared import base as _base  # noqa: E402
from skdiagatt._shared import ragged  # noqa: E402
from skdiagatt._testing import Layout, use_layout  # noqa: E402
from skdiagatt._training import step as training_step  # noqa: E402

try:  # competitors are optional here: another part of the project
    from skdiagatt import baselines as _baselines
except ImportError:  # pragma: no cover
    _baselines = None


def _baseline(name):
    if _baselines is None:
        return None
    cls = getattr(_baselines, name, None)
    if cls is None and name == "PrefixTuningRegressor":
        try:
            from skdiagatt.baselines.prefix_tuning import PrefixTuningRegressor as cls
        except ImportError:  # pragma: no cover
            cls = None
    return cls


# ------------------------------------------------------------------ settings
_ENV = "SKDIAGATT_HYPOTHESIS_EXAMPLES"
_N = int(os.environ.get(_ENV, "0") or 0)
EXTENDED = _N > 0


def _settings(default):
    return settings(
        max_examples=_N if EXTENDED else default,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=True,
        suppress_health_check=[
            getattr(HealthCheck, name)
            for name in ("too_slow", "data_too_large", "filter_too_much", "differing_executors")
            if hasattr(HealthCheck, name)
        ],
    )


FIT_SETTINGS = _settings(5)  # fits of the JAX estimators: compiled once per layout
CHEAP_SETTINGS = _settings(25)  # validation only, or estimators that compile nothing

# Buckets of the fixed grid (see skdiagatt._shared.ragged.bucket_length): 1 | 5..8 | 257..312.
P1, MID, LONG = (1, 1), (5, 8), (257, 300)


@pytest.fixture(autouse=True, scope="module")
def _every_length_in_its_bucket():
    """Small data sets here keep a bucket per length, as large ones do, instead of one padded bucket."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ragged, "ONE_BUCKET_ROWS", 0)
        yield


# -------------------------------------------------------------- estimators
class Spec:
    """How to build, feed and check one estimator."""

    def __init__(self, name, cls, kind, kwargs, layout, attention, rows=False, heads=1):
        self.name, self.cls, self.kind, self.kwargs = name, cls, kind, kwargs
        self.layout = layout  # (d, ranges) or None for free shapes
        self.attention = attention  # "softmax", "partial" (prefix takes mass) or None
        self.rows = rows  # fit/predict/localize take the true rows (oracle)
        self.heads = heads

    def make(self, **extra):
        return self.cls(**{**self.kwargs, **extra})

    def __repr__(self):
        return self.name


_TRAIN = dict(max_iter=2, random_state=0)
_SPECS = [
    # batch_size=2: the ragged samples train packed, two minibatches per epoch.
    Spec("DiagAttRegressor", DiagAttRegressor, "reg", dict(calibration_iter=1, batch_size=2, **_TRAIN),
         (64, [P1, P1, LONG, LONG]), "softmax"),
    Spec("DiagAttClassifier", DiagAttClassifier, "clf", dict(n_heads=2, calibration_iter=1, batch_size=2,
                                                            **_TRAIN),
         (1, [P1, P1, MID, MID]), "softmax", heads=2),
    # The paper's Taylor state trained by Adam: these tests exercise the minibatch training loop
    # (its steps, step size, failures); the default solver raises FloatingPointError instead.
    Spec("NTKPrefixRegressor", NTKPrefixRegressor, "reg", dict(prefix_length=8, feature_map="taylor",
                                                                solver="adam", **_TRAIN),
         (3, [P1, P1, LONG, LONG]), "partial"),
    # The competitors get one bucket each (fewer programs to compile); batch_size=2
    # keeps two optimizer steps per epoch for the failure-mid-fit tests.
    Spec("StdAttRegressor", _baseline("StdAttRegressor"), "reg",
         dict(calibration_iter=1, batch_size=2, **_TRAIN), (2, [LONG] * 4), "softmax"),
    Spec("StdAttClassifier", _baseline("StdAttClassifier"), "clf",
         dict(calibration_iter=1, batch_size=2, **_TRAIN), (5, [MID] * 4), "softmax"),
    Spec("PrefixTuningRegressor", _baseline("PrefixTuningRegressor"), "reg",
         dict(prefix_length=3, batch_size=2, **_TRAIN), (4, [P1] * 4), "partial"),
    Spec("LoRARegressor", _baseline("LoRARegressor"), "reg",
         dict(rank=2, batch_size=2, **_TRAIN), (4, [P1] * 4), "partial"),
    Spec("GroupLassoRegressor", _baseline("GroupLassoRegressor"), "reg", dict(max_iter=300), None, None),
    Spec("GroupLassoClassifier", _baseline("GroupLassoClassifier"), "clf", dict(max_iter=300), None, None),
    Spec("TwoStepRegressor", _baseline("TwoStepRegressor"), "reg",
         dict(gmm_max_iter=20, random_state=0), None, None),
    Spec("TwoStepClassifier", _baseline("TwoStepClassifier"), "clf",
         dict(gmm_max_iter=20, random_state=0), None, None),
    Spec("OracleRegressor", _baseline("OracleRegressor"), "reg", {}, None, None, rows=True),
]
SPECS = [s for s in _SPECS if s.cls is not None]
JAX_SPECS = [s for s in SPECS if s.layout is not None]
BY_NAME = {s.name: s for s in SPECS}


def _ids(specs):
    return [s.name for s in specs]


# ------------------------------------------------------------------- data
def _labels(n, pattern, rng):
    """Class labels for n samples; pattern 'lone': one class has a single sample."""
    names = np.array(["no", "yes"]) if rng.rand() < 0.5 else np.array([3, 7])
    codes = np.ones(n, dtype=int)
    codes[rng.randint(n)] = 0
    if pattern == "alternate":
        codes = np.arange(n) % 2
    return names[codes]


def _values(rng, ps, d, dtype, exponent, mixed, pattern):
    """Samples of the given row counts with hostile but valid values."""
    out = []
    for p in ps:
        e = rng.randint(-20, 21) if mixed else exponent
        if np.issubdtype(np.dtype(dtype), np.integer):
            hi = 10 ** min(max(e, 0), 18 if dtype == "int64" else 9)
            x = rng.randint(-hi, hi + 1, size=(p, d)).astype(dtype)
        else:
            x = (rng.standard_normal((p, d)) * 10.0**e).astype(dtype)
        if pattern == "duplicated":  # every row a copy of the first
            x[:] = x[0]
        elif pattern == "constant_rows":  # each row constant across features
            x[:] = x[:, :1]
        elif pattern == "zeros_and_copies":  # zero rows, a repeated row
            x[::2] = 0
            x[1::3] = x[-1]
        elif pattern == "one_hot_large":
            x[:] = 0
            x[rng.randint(p), rng.randint(d)] = 10.0**e if not np.issubdtype(x.dtype, np.integer) else 1
        out.append(x)
    return out


@st.composite
def hostile(draw, spec):
    """A valid but hostile data set for ``spec``: dict with X, y, rows."""
    if spec.layout is not None and not EXTENDED:
        d, ranges = spec.layout
        ps = [draw(st.integers(lo, hi)) for lo, hi in ranges]
    else:
        n = draw(st.integers(2, 6))
        d = draw(st.integers(1, 64))
        ps = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    seed = draw(st.integers(0, 2**31 - 1))
    dtype = draw(st.sampled_from(["float64", "float32", "int64", "int32"]))
    exponent = draw(st.integers(-20, 20))
    mixed = draw(st.booleans())
    pattern = draw(st.sampled_from(
        ["normal", "duplicated", "constant_rows", "zeros_and_copies", "one_hot_large"]))
    y_exponent = draw(st.integers(-10, 10))
    y_pattern = draw(st.sampled_from(["normal", "constant", "outlier", "lone", "alternate"]))
    rng = np.random.RandomState(seed)
    X = _values(rng, ps, d, dtype, exponent, mixed, pattern)
    n = len(ps)
    if spec.kind == "clf":
        y = _labels(n, "alternate" if y_pattern == "alternate" else "lone", rng)
    else:
        y = rng.standard_normal(n) * 10.0**y_exponent
        if y_pattern == "constant":
            y[:] = 10.0**y_exponent
        elif y_pattern == "outlier":
            y[:] = 0.0
            y[rng.randint(n)] = 10.0**y_exponent
    rows = np.array([[rng.randint(p)] for p in ps])
    return dict(X=X, y=y, rows=rows)


def _layout_data(spec, seed=0, scale=1.0):
    """Plain N(0, 1) data in the estimator's layout (compiles nothing new)."""
    rng = np.random.RandomState(seed)
    if spec.layout is None:
        d, ranges = 3, [P1, MID, MID, (20, 40)]
    else:
        d, ranges = spec.layout
    ps = [hi for _, hi in ranges]
    X = [rng.standard_normal((p, d)) * scale for p in ps]
    n = len(X)
    if spec.kind == "clf":
        y = _labels(n, "lone", rng)
    else:
        y = rng.standard_normal(n) + np.array([x[:, 0].max() for x in X])
    rows = np.array([[rng.randint(p)] for p in ps])
    return dict(X=X, y=y, rows=rows)


# --------------------------------------------------------------- checking
def _fit(spec, data, **extra):
    est = spec.make(**extra)
    if spec.rows:
        return est.fit(data["X"], data["y"], data["rows"])
    return est.fit(data["X"], data["y"])


def _call(spec, est, method, data, X=None, **kw):
    X = data["X"] if X is None else X
    if spec.rows:
        kw["rows"] = data["rows"]
        if method == "predict":
            return est.predict(X, kw["rows"])
    return getattr(est, method)(X, **kw)


def _fitted_state(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("__")}


def _all_finite(obj):
    """True when every array / float inside ``obj`` (dicts, lists) is finite."""
    if isinstance(obj, dict):
        return all(_all_finite(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_all_finite(v) for v in obj)
    arr = np.asarray(obj)
    if arr.dtype.kind in "fc":
        return bool(np.all(np.isfinite(arr)))
    return True


def _clear_error(exc):
    """A ValueError / TypeError with a message that says something."""
    return isinstance(exc, (ValueError, TypeError)) and len(str(exc)) >= 15


def _outputs(spec, est, data):
    """Everything an estimator returns for ``data``, as numpy values."""
    out = {}
    if spec.kind == "clf":
        if hasattr(est, "decision_function"):
            out["decision_function"] = _call(spec, est, "decision_function", data)
        out["predict_proba"] = _call(spec, est, "predict_proba", data)
    out["predict"] = _call(spec, est, "predict", data)
    if spec.attention is not None:
        out["attention"] = est.attention(data["X"])
    out["localize"] = _call(spec, est, "localize", data)
    out["localize_top3"] = _call(spec, est, "localize", data, top_k=3)
    return out


def check_fitted(spec, est, data):
    """The output contract: finite values of the right shapes, valid weights and rows."""
    X = data["X"]
    n, ps = len(X), [len(x) for x in X]
    for key in ("params_", "loss_curve_", "validation_scores_", "coef_", "intercept_"):
        if getattr(est, key, None) is not None:
            assert _all_finite(getattr(est, key)), f"{key} is not finite"
    out = _outputs(spec, est, data)
    pred = out["predict"]
    assert np.shape(pred) == (n,)
    if spec.kind == "clf":
        assert set(np.asarray(pred).tolist()) <= set(est.classes_.tolist())
        proba = out["predict_proba"]
        assert proba.shape == (n, len(est.classes_))
        assert np.all(np.isfinite(proba)) and np.all(proba >= 0)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
        assert np.all(np.isfinite(out.get("decision_function", 0.0)))
    else:
        assert np.all(np.isfinite(pred)), "non-finite prediction"
    if spec.attention is not None:
        for w, p in zip(out["attention"], ps):
            assert w.shape == (spec.heads, p)
            assert np.all(np.isfinite(w)) and np.all(w >= 0)
            if spec.attention == "softmax":
                np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-5)
            else:  # the prefix takes the rest of the mass
                assert np.all(w.sum(axis=1) <= 1.0 + 1e-5)
    for r, p in zip(out["localize"], ps):
        r = np.asarray(r)
        assert r.dtype.kind in "iu" and r.ndim == 1
        assert np.all((r >= 0) & (r < p)) and len(np.unique(r)) == len(r)
        if spec.attention is not None:
            assert 1 <= len(r) <= spec.heads
    for r, p in zip(out["localize_top3"], ps):
        r = np.asarray(r)
        assert r.dtype.kind in "iu" and np.all((r >= 0) & (r < p)) and len(np.unique(r)) == len(r)
        if spec.attention is not None:
            assert len(r) == min(3, p)
    return out


def fit_or_fail_cleanly(spec, data, **extra):
    """Fit; a clear ValueError / TypeError is accepted, anything else fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning, numpy overflow notes
        try:
            est = _fit(spec, data, **extra)
        except (ValueError, TypeError) as exc:
            assert _clear_error(exc), f"unclear error: {exc!r}"
            return None
        try:
            check_fitted(spec, est, data)
        except ValueError as exc:
            # The documented way out: an output that overflows float32 is
            # refused with an error naming the sample.
            assert "X[" in str(exc) and "non-finite" in str(exc), repr(exc)
    return est


# --------------------------------------------------------------- fixtures
class _Fitted(dict):
    """name -> (estimator fitted on plain data in its layout, data); fitted on first use.

    A dict subclass with a short repr, so hypothesis does not print every array
    of every model when it reports a failing example.
    """

    def __missing__(self, name):
        spec = BY_NAME[name]
        data = _layout_data(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self[name] = (_fit(spec, data), data)
        return self[name]

    def __repr__(self):
        return "<fitted models>"


_FITTED = _Fitted()


@pytest.fixture(scope="module")
def fitted():
    return _FITTED


# ===================================================== 1. property tests
@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
@given(data=st.data())
@FIT_SETTINGS
def test_hostile_valid_input_fits_or_fails_cleanly(spec, data):
    """Random ragged data: huge/tiny magnitudes, int/float dtypes, repeated rows, lone classes."""
    fit_or_fail_cleanly(spec, data.draw(hostile(spec)))


_CORNERS = {
    "float64_1e20": dict(dtype="float64", exponent=20, pattern="normal"),
    "float64_1e-20": dict(dtype="float64", exponent=-20, pattern="normal"),
    "float32_mixed_1e-20_1e20": dict(dtype="float32", exponent=0, pattern="normal", mixed=True),
    "int64_huge": dict(dtype="int64", exponent=18, pattern="normal"),
    "int32_small": dict(dtype="int32", exponent=0, pattern="normal"),
    "all_rows_duplicated": dict(dtype="float64", exponent=0, pattern="duplicated"),
    "constant_rows": dict(dtype="float64", exponent=3, pattern="constant_rows"),
}


@pytest.mark.parametrize("corner", list(_CORNERS))
@pytest.mark.parametrize("spec", JAX_SPECS, ids=_ids(JAX_SPECS))
def test_corner_inputs_give_finite_outputs(spec, corner):
    """The corners the property test may not hit: these must fit, not just fail cleanly."""
    kw = {"mixed": False, **_CORNERS[corner]}
    rng = np.random.RandomState(1)
    d, ranges = spec.layout
    ps = [hi for _, hi in ranges]
    data = _layout_data(spec)
    data["X"] = _values(rng, ps, d, **kw)
    if spec.attention == "partial":
        # NTK-Attention does not rescale its input (the projections are given):
        # scores of rows of size 1e20 overflow float32, which predict refuses.
        fit_or_fail_cleanly(spec, data)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = _fit(spec, data)
        check_fitted(spec, est, data)


def _corrupt(rng, X, how):
    """Break one sample of X; returns the new X and the index of the broken sample."""
    X = [np.array(x, dtype=np.float64) for x in X]
    i = rng.randint(len(X))
    x = X[i]
    r, c = rng.randint(x.shape[0]), rng.randint(x.shape[1])
    if how in ("nan", "inf", "-inf", "overflow32"):
        x[r, c] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "overflow32": 1e39}[how]
    elif how == "wrong_d":
        X[i] = np.zeros((x.shape[0], x.shape[1] + 1))
    elif how == "no_rows":
        X[i] = np.zeros((0, x.shape[1]))
    elif how == "one_d":
        X[i] = x[0]
    elif how == "three_d":
        X[i] = x[None]
    elif how == "strings":
        X[i] = x.astype(str)
    elif how == "complex":
        X[i] = x + 1j
    elif how == "sparse":
        X[i] = scipy.sparse.csr_matrix(x)
    elif how == "none":
        X[i] = None
    return X, i


_CORRUPTIONS = ["nan", "inf", "-inf", "overflow32", "wrong_d", "no_rows", "one_d", "three_d",
                "strings", "complex", "sparse", "none"]
_PATTERNS = {
    "nan": r"NaN", "inf": r"infinity", "-inf": r"infinity", "overflow32": r"infinity|too large",
    "wrong_d": r"features", "no_rows": r"empty|no rows", "one_d": r"2-D", "three_d": r"2-D",
    "strings": r"non-numeric", "complex": r"complex", "sparse": r"sparse", "none": r"non-numeric",
}


def _expect_clear_error(call, i, how, float64_ok):
    """``call()`` must raise a ValueError/TypeError naming sample i (float64 estimators may
    accept values that only overflow float32)."""
    import re

    try:
        result = call()
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        assert f"X[{i}]" in msg, f"the error does not name X[{i}]: {msg!r}"
        assert re.search(_PATTERNS[how], msg), f"the error does not say what is wrong: {msg!r}"
        return None
    assert how == "overflow32" and float64_ok, f"{how} in X[{i}] was accepted"
    return result


@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
@given(seed=st.integers(0, 2**31 - 1), how=st.sampled_from(_CORRUPTIONS))
@CHEAP_SETTINGS
def test_invalid_samples_are_named_in_the_error(spec, fitted, seed, how):
    """NaN, inf, float32 overflow, wrong d, empty, wrong ndim, strings, complex, sparse, None:
    fit and predict raise an error naming the sample; the fitted model is not touched."""
    est, data = fitted[spec.name]
    rng = np.random.RandomState(seed)
    X, i = _corrupt(rng, data["X"], how)
    bad = dict(data, X=X)
    float64_ok = spec.layout is None  # validates in float64
    before = pickle.dumps(est)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _expect_clear_error(lambda: _fit(spec, bad), i, how, float64_ok)
        got = _expect_clear_error(lambda: _call(spec, est, "predict", bad), i, how, float64_ok)
    if got is not None and spec.kind == "reg":
        assert np.all(np.isfinite(got))
    assert pickle.dumps(est) == before


@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
@pytest.mark.parametrize(
    "X, err",
    [("abc", TypeError), ({"a": 1}, TypeError), (None, TypeError), (3.0, TypeError),
     ([], ValueError), (np.zeros((4, 3)), ValueError), (np.zeros((2, 3, 4, 5)), ValueError)],
    ids=["str", "dict", "None", "scalar", "empty", "2-D", "4-D"],
)
def test_malformed_X_is_rejected(spec, X, err):
    with pytest.raises(err, match=r"X "):
        _fit(spec, dict(X=X, y=np.zeros(4), rows=np.zeros((4, 1), int)))


@pytest.mark.parametrize("spec", [s for s in SPECS if s.kind == "reg"],
                         ids=_ids([s for s in SPECS if s.kind == "reg"]))
@pytest.mark.parametrize("y_bad, match", [(np.nan, r"y\[1\]"), (np.inf, r"y\[1\]"),
                                          ("short", r"entries|samples"), ("text", r"numeric")])
def test_bad_targets_are_named(spec, y_bad, match):
    data = _layout_data(spec)
    y = data["y"].astype(object if y_bad == "text" else float)
    if y_bad == "short":
        y = y[:-1].astype(float)
    elif y_bad == "text":
        y[1] = "a"
    else:
        y[1] = y_bad
    with pytest.raises((ValueError, TypeError), match=match):
        _fit(spec, dict(data, y=y))


# ================================================= 2. numerical stress
def _fit_stress(spec, data, **extra):
    """Fit recording warnings; returns the estimator and whether it warned ConvergenceWarning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = _fit(spec, data, **extra)
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return est, warned


def _assert_sane_model(spec, est, data):
    assert _all_finite(est.params_), "non-finite parameters"
    assert _all_finite(est.loss_curve_), "non-finite loss_curve_"
    check_fitted(spec, est, data)


_DIAG = [BY_NAME["DiagAttRegressor"], BY_NAME["DiagAttClassifier"]]


@pytest.mark.parametrize("scale", [1.0, 1e6])
@pytest.mark.parametrize("temperature", [1e-4, 1e-2, 1.0, 1e2, 1e4])
@pytest.mark.parametrize("spec", _DIAG, ids=_ids(_DIAG))
def test_temperature_and_feature_scale_extremes(spec, temperature, scale):
    data = _layout_data(spec, scale=scale)
    est, _ = _fit_stress(spec, data, temperature=temperature, max_iter=4, calibration_iter=2)
    _assert_sane_model(spec, est, data)


@pytest.mark.parametrize("spec", JAX_SPECS, ids=_ids(JAX_SPECS))
def test_diverging_objective_warns_and_keeps_finite_parameters(spec):
    """A learning rate of 1e30 blows the objective up: ConvergenceWarning, finite model."""
    data = _layout_data(spec)
    est, warned = _fit_stress(spec, data, learning_rate=1e30, max_iter=3)
    assert warned
    _assert_sane_model(spec, est, data)


@pytest.mark.parametrize("spec", JAX_SPECS, ids=_ids(JAX_SPECS))
def test_features_scaled_by_1e6(spec):
    data = _layout_data(spec, scale=1e6)
    est, warned = _fit_stress(spec, data)
    _assert_sane_model(spec, est, data)


@pytest.mark.parametrize("spec", [s for s in JAX_SPECS if s.attention],
                         ids=_ids([s for s in JAX_SPECS if s.attention]))
def test_one_row_and_all_equal_scores(spec, fitted):
    """p = 1: the softmax over one row is exactly 1; identical rows: uniform weights."""
    est, data = fitted[spec.name]
    X = [np.repeat(x[:1], len(x), axis=0) for x in data["X"]]  # every row equal
    for w, x in zip(est.attention(X), X):
        if spec.attention == "softmax":
            np.testing.assert_allclose(w, 1.0 / len(x), rtol=1e-5)
            if len(x) == 1:
                assert np.all(w == 1.0)
        else:  # equal mass on every row, the rest on the prefix
            np.testing.assert_allclose(w, w[:, :1] * np.ones_like(w), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("y_scale", [1e-12, 1e15, 1e30])
@pytest.mark.parametrize("spec", [s for s in JAX_SPECS if s.kind == "reg"],
                         ids=_ids([s for s in JAX_SPECS if s.kind == "reg"]))
def test_targets_with_huge_variance(spec, y_scale):
    data = _layout_data(spec)
    data["y"] = data["y"] * y_scale
    est, _ = _fit_stress(spec, data)
    _assert_sane_model(spec, est, data)
    assert np.all(np.abs(est.predict(data["X"])) < 1e3 * y_scale)


_JAX_REG = [s for s in JAX_SPECS if s.kind == "reg"]


@pytest.mark.parametrize("spec", _JAX_REG, ids=_ids(_JAX_REG))
def test_targets_whose_variance_overflows(spec):
    data = _layout_data(spec)
    data["y"] = data["y"] * 1e155
    try:
        est, _ = _fit_stress(spec, data)
    except ValueError as exc:  # a clear refusal would be fine
        assert "y" in str(exc)
        return
    assert np.all(np.isfinite(est.predict(data["X"])))


_JAX_CLF = [s for s in JAX_SPECS if s.kind == "clf" and hasattr(s.cls, "predict_log_proba")]


@pytest.mark.parametrize("spec", _JAX_CLF, ids=_ids(_JAX_CLF))
def test_predict_log_proba_of_a_confident_model_is_finite(spec, fitted):
    est0, data = fitted[spec.name]
    est = pickle.loads(pickle.dumps(est0))
    # A confident model (white-box: the intercept set to a logit of 40).
    est.params_ = {**est.params_, "b": np.full_like(est.params_["b"], 40.0)}
    assert np.all(np.isfinite(est.decision_function(data["X"])))
    assert np.all(np.isfinite(est.predict_log_proba(data["X"])))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_class_has_a_single_sample(n_classes):
    """n = n_classes, one sample each, one row each (binary: the layout's p = 1 bucket,
    compiled already; three classes compile one small program)."""
    spec = BY_NAME["DiagAttClassifier"]
    rng = np.random.RandomState(0)
    X = [rng.standard_normal((1, spec.layout[0])) for _ in range(n_classes)]
    data = dict(X=X, y=np.array(["a", "b", "c"][:n_classes]), rows=np.zeros((n_classes, 1), int))
    est, _ = _fit_stress(spec, data, max_iter=3)
    _assert_sane_model(spec, est, data)
    assert est.predict_proba(X).shape == (n_classes, n_classes)


@pytest.mark.parametrize("feature_map, degree, causal",
                         [("taylor", 2, False), ("taylor", 2, True), ("elu", 1, False)])
@pytest.mark.parametrize("score_max", [1.0, 1e2, 1e4])
def test_ntk_attention_kernel_float32_scores_up_to_1e4(feature_map, degree, causal, score_max):
    """NTK-Attention stays finite in float32 with |q . k| / sqrt(d_h) up to 1e4, with a
    prefix state and without one (then it is plain attention, which it must match)."""
    import jax.numpy as jnp

    from skdiagatt.kernels.attention import plain_attention
    from skdiagatt.kernels.ntk_attention import ntk_attention, prefix_to_state

    rng = np.random.RandomState(0)
    B, L, d, H = 3, 16, 4, 2
    X = rng.standard_normal((B, L, d)).astype(np.float32)
    where = np.ones((B, L), bool)
    where[1, 9:] = False
    where[2, 1:] = False
    X[~where] = 1e3  # garbage in padded rows
    W = [rng.standard_normal((H, d, d)).astype(np.float32) for _ in range(3)]
    # Rescale W_Q so that the largest |score| over valid rows is score_max.
    Xz = np.where(where[..., None], X, 0).astype(np.float64)
    Q = np.einsum("bld,hde->bhle", Xz, W[0])
    K = np.einsum("bld,hde->bhle", Xz, W[1])
    S = np.einsum("bhle,bhme->bhlm", Q, K) / np.sqrt(d)
    W[0] = (W[0] * (score_max / np.abs(S).max())).astype(np.float32)
    P = rng.standard_normal((32, d)).astype(np.float32)
    Z, k = prefix_to_state(jnp.asarray(P), W[1], W[2], feature_map=feature_map, degree=degree)
    args = dict(feature_map=feature_map, degree=degree, causal=causal)
    T = np.asarray(ntk_attention(X, where, Z, k, *W, **args))
    assert np.all(np.isfinite(T))
    assert np.all(T[~where] == 0)
    T0 = np.asarray(ntk_attention(X, where, jnp.zeros_like(Z), jnp.zeros_like(k), *W, **args))
    ref = np.asarray(plain_attention(X, where, *W, causal=causal))
    assert np.all(np.isfinite(T0))
    np.testing.assert_allclose(T0, ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())


def test_ntk_regressor_with_scores_up_to_1e4():
    spec = BY_NAME["NTKPrefixRegressor"]
    data = _layout_data(spec)
    d = spec.layout[0]
    rng = np.random.RandomState(0)
    W = {k: rng.standard_normal((1, d, d)).astype(np.float32) for k in ("W_Q", "W_K", "W_V")}
    rows = np.concatenate(data["X"])
    s = np.abs((rows @ W["W_Q"][0]) @ (rows @ W["W_K"][0]).T).max() / np.sqrt(d)
    W["W_Q"] = (W["W_Q"] * (1e4 / s)).astype(np.float32)
    est, _ = _fit_stress(spec, data, attention_weights=W)
    _assert_sane_model(spec, est, data)


# ===================================================== 3. persistence
def _same_outputs(a, b):
    assert a.keys() == b.keys()
    for key in a:
        va, vb = a[key], b[key]
        if isinstance(va, list):
            assert len(va) == len(vb)
            for x, z in zip(va, vb):
                np.testing.assert_array_equal(x, z)
        else:
            np.testing.assert_array_equal(va, vb)


@pytest.mark.parametrize("via", ["pickle", "joblib"])
@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
def test_round_trip_is_bit_identical(spec, fitted, via, tmp_path):
    est, data = fitted[spec.name]
    if via == "pickle":
        again = pickle.loads(pickle.dumps(est))
    else:
        joblib.dump(est, tmp_path / "m.joblib")
        again = joblib.load(tmp_path / "m.joblib")
    _same_outputs(_outputs(spec, est, data), _outputs(spec, again, data))
    assert again.get_params().keys() == est.get_params().keys()


@pytest.mark.parametrize("via", ["pickle", "joblib"])
@pytest.mark.parametrize("spec", SPECS)
def test_other_format_version_is_refused(spec, fitted, via, tmp_path, monkeypatch):
    """A model written under another FORMAT_VERSION fails to load with a clear error."""
    est, _ = fitted[spec.name]
    monkeypatch.setattr(_base, "FORMAT_VERSION", _base.FORMAT_VERSION + 1)
    if via == "pickle":
        blob = pickle.dumps(est)
    else:
        joblib.dump(est, tmp_path / "m.joblib")
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"format .* refit"):
        pickle.loads(blob) if via == "pickle" else joblib.load(tmp_path / "m.joblib")


def test_unfitted_estimators_round_trip():
    for spec in SPECS:
        est = spec.make()
        again = pickle.loads(pickle.dumps(est))
        assert again.get_params() == est.get_params()


_CHILD = textwrap.dedent(
    """
    import json, pickle, sys
    import joblib, numpy as np
    import skdiagatt._shared.base as base

    folder = sys.argv[1]
    with open(folder + "/manifest.json") as f:
        manifest = json.load(f)
    report = {}
    for name, info in manifest.items():
        with open(folder + "/" + name + ".data.pkl", "rb") as f:
            data, expected = pickle.load(f)
        X, rows = data["X"], data["rows"]
        res = {}
        for via in ("pickle", "joblib"):
            path = folder + "/" + name + "." + via
            est = joblib.load(path) if via == "joblib" else pickle.load(open(path, "rb"))
            if info["rows"]:
                got = {"predict": est.predict(X, rows)}
            else:
                got = {"predict": est.predict(X)}
                if info["clf"]:
                    got["predict_proba"] = est.predict_proba(X)
            same = all(
                all(np.array_equal(a, b) for a, b in zip(got[k], expected[k]))
                if isinstance(got[k], list) else np.array_equal(got[k], expected[k])
                for k in got
            )
            res[via] = bool(same)
        # The same files read by a skdiagatt that expects another format.
        base.FORMAT_VERSION += 1
        for via in ("pickle", "joblib"):
            path = folder + "/" + name + "." + via
            try:
                joblib.load(path) if via == "joblib" else pickle.load(open(path, "rb"))
                res["refused_" + via] = "loaded"
            except ValueError as exc:
                res["refused_" + via] = str(exc)
        base.FORMAT_VERSION -= 1
        report[name] = res
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def fresh_process_report(fitted, tmp_path_factory):
    """Save every fitted model with pickle and joblib; reload all in one fresh interpreter."""
    folder = tmp_path_factory.mktemp("models")
    manifest = {}
    for spec in SPECS:
        est, data = fitted[spec.name]
        expected = {"predict": _call(spec, est, "predict", data)}
        if spec.kind == "clf":
            expected["predict_proba"] = est.predict_proba(data["X"])
        with open(folder / f"{spec.name}.data.pkl", "wb") as f:
            pickle.dump((data, expected), f)
        with open(folder / f"{spec.name}.pickle", "wb") as f:
            pickle.dump(est, f)
        joblib.dump(est, folder / f"{spec.name}.joblib")
        manifest[spec.name] = dict(rows=spec.rows, clf=spec.kind == "clf")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(folder)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("spec", SPECS, ids=_ids(SPECS))
def test_fresh_process_reproduces_predictions_bit_for_bit(spec, fresh_process_report):
    res = fresh_process_report[spec.name]
    assert res["pickle"] and res["joblib"]


@pytest.mark.parametrize("spec", SPECS)
def test_fresh_process_with_other_format_refuses_the_model(spec, fresh_process_report):
    res = fresh_process_report[spec.name]
    for via in ("pickle", "joblib"):
        assert "format" in res[f"refused_{via}"], res[f"refused_{via}"]


# ================================================= 4. failure mid-fit
class _Injected(RuntimeError):
    pass


_ORIGINAL_STEP = training_step.train_steps


def _flaky_step(fail_at, exc, counter):
    original = _ORIGINAL_STEP

    def step(*args, **kwargs):
        counter[0] += 1
        if fail_at is not None and counter[0] == fail_at:
            raise exc("injected failure")
        return original(*args, **kwargs)

    return step


def _snapshot(spec, est, data):
    return pickle.dumps(_fitted_state(est)), _outputs(spec, est, data)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, _Injected], ids=["KeyboardInterrupt", "error"])
@pytest.mark.parametrize("spec", JAX_SPECS, ids=_ids(JAX_SPECS))
def test_failure_mid_fit_keeps_the_previous_model(spec, fitted, exc, monkeypatch):
    """An exception in the middle of fit (first epoch, or the very last step) leaves a fitted
    estimator unchanged and usable; a warm-start refit then continues from that state
    exactly as if the failed fit had never happened."""
    est0, data = fitted[spec.name]
    est = pickle.loads(pickle.dumps(est0))
    state, outputs = _snapshot(spec, est, data)
    counter = [0]
    with use_layout(Layout(run_steps=1)):  # a call per step: fail inside an epoch
        monkeypatch.setattr(training_step, "train_steps", _flaky_step(None, exc, counter))
        _fit(spec, data)  # count the steps of one fit
        total = counter[0]
        assert total >= 4
        for fail_at in (2, total):  # mid-epoch in the first epoch; last step of the last phase
            for warm in (False, True):
                counter[0] = 0
                monkeypatch.setattr(training_step, "train_steps", _flaky_step(fail_at, exc, counter))
                est.set_params(warm_start=warm)
                with pytest.raises(exc, match="injected"):
                    est.fit(data["X"], data["y"])
                after_state, after_outputs = _snapshot(spec, est, data)
                assert after_state == state
                _same_outputs(outputs, after_outputs)
    monkeypatch.undo()
    resumed = est.set_params(warm_start=True).fit(data["X"], data["y"])
    reference = pickle.loads(pickle.dumps(est0)).set_params(warm_start=True).fit(data["X"], data["y"])
    cold = spec.make().fit(data["X"], data["y"])
    for key in reference.params_:
        np.testing.assert_array_equal(resumed.params_[key], reference.params_[key])
    assert resumed.loss_curve_ == reference.loss_curve_
    assert any(not np.array_equal(cold.params_[k], reference.params_[k]) for k in cold.params_)


@pytest.mark.parametrize("spec", JAX_SPECS, ids=_ids(JAX_SPECS))
def test_invalid_refit_keeps_the_previous_model(spec, fitted):
    """A refit that fails validation (bad parameter, wrong feature count under warm start)
    leaves the fitted estimator as it was."""
    est0, data = fitted[spec.name]
    est = pickle.loads(pickle.dumps(est0))
    state, outputs = _snapshot(spec, est, data)
    with pytest.raises(ValueError):
        est.set_params(max_iter=0).fit(data["X"], data["y"])
    est.set_params(max_iter=spec.kwargs["max_iter"], warm_start=True)
    X_wide = [np.hstack([x, x[:, :1]]) for x in data["X"]]
    with pytest.raises(ValueError, match="features"):
        est.fit(X_wide, data["y"])
    after_state, after_outputs = _snapshot(spec, est, data)
    assert after_state == state
    _same_outputs(outputs, after_outputs)


def test_env_var_documented():
    """The variable for more examples is the one docs/robustness.md names."""
    doc = os.path.join(os.path.dirname(__file__), "..", "docs", "robustness.md")
    if not os.path.exists(doc):
        pytest.skip("docs/robustness.md is not in this checkout")
    with open(doc) as f:
        assert _ENV in f.read()
