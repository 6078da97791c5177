"""sample_weight: weight 2 counts a sample twice, weight 0 leaves it out, bad weights name the sample.

The duplicated-sample checks use a full-batch, deterministic setting: one
minibatch per epoch (``batch_size`` above the sample count), ``init="zeros"``
and a fixed penalty, so that a weight of 2 and a second copy of the sample
give the same objective, gradient and statistics up to the order of float
summation.  The baselines' solvers stop at a tolerance: their checks allow
for it.  ``fit_chunks`` reads weights given with ``X`` or carried by
``(X, y, w)`` chunks; one chunk is the in-memory fit, bit for bit.
"""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor
from skdiagatt._testing import plan_minibatches, training_data
from skdiagatt.baselines import StdAttRegressor
from skdiagatt.datasets import make_individualized_classification, make_individualized_regression
from skdiagatt.preprocessing import RowStandardScaler

FULL = dict(max_iter=3, batch_size=64, random_state=0)
CASES = [
    (DiagAttRegressor, dict(FULL, init="zeros", alpha=1e-3, objective="latent", calibration_iter=2)),
    (DiagAttRegressor, dict(FULL, init="zeros", alpha=1e-3, value_refit=True)),
    (StdAttRegressor, FULL),
    (NTKPrefixRegressor, dict(FULL, prefix_length=8)),
]


@pytest.fixture(scope="module")
def data():
    X, y, _, _ = make_individualized_regression(24, n_rows=4, n_features=3, random_state=0)
    return [np.asarray(x, np.float32) for x in X], np.asarray(y)


def _doubled(X, y, twice):
    """The data with the samples ``twice`` given a second time, and the weights saying the same."""
    w = np.ones(len(X))
    w[twice] = 2.0
    return X + [X[i] for i in twice], np.concatenate([y, y[twice]]), w


def _close(a, b, X):
    """Same objective at every epoch, same predictions, up to float summation order.

    Parameters are not compared one by one: Adam divides each gradient by its
    own size, so a parameter whose gradient is zero in exact arithmetic (the
    intercept of standardized targets, when the read-out starts at 0) moves
    by the sign of rounding noise, a step of ``learning_rate`` at most.
    """
    np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, rtol=1e-3)
    if hasattr(b, "predict_proba"):
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=2e-3)
    else:
        np.testing.assert_allclose(a.predict(X), b.predict(X), atol=2e-3 * float(b.y_scale_[0]))


@pytest.mark.parametrize("cls, kw", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_weight_two_is_the_sample_given_twice(data, cls, kw):
    X, y = data
    Xd, yd, w = _doubled(X, y, [1, 5, 7])
    weighted, doubled = cls(**kw).fit(X, y, sample_weight=w), cls(**kw).fit(Xd, yd)
    _close(weighted, doubled, X)
    # The weights matter: the plain fit predicts ten times further off than the doubled data's.
    gap = lambda e: np.max(np.abs(e.predict(X) - weighted.predict(X)))  # noqa: E731
    assert gap(cls(**kw).fit(X, y)) > 10 * gap(doubled)


def test_weighted_objective_and_gradient_at_fixed_parameters(data):
    """The training objective of a minibatch with weight 2 is that of the sample given twice."""
    import jax

    from skdiagatt._testing import diagatt_loss_inputs, gather
    from skdiagatt.kernels.diagatt import diagatt_loss

    X, y = data
    Xd, yd, w = _doubled(X, y, [1, 5, 7])
    est = DiagAttRegressor(**dict(FULL, max_iter=1, calibration_iter=0)).fit(X, y)
    params, frozen = diagatt_loss_inputs(est)
    frozen = {**frozen, "alpha": np.float32(0.0), "prior": {}}

    def objective(samples, targets, weights):
        Y = ((targets - est.y_mean_) / est.y_scale_)[:, None].astype(np.float32)
        (b,) = plan_minibatches(training_data(samples, Y, weights=weights), 64, None)
        batch = {**gather(b.arrays, b.idx), "w": b.w}
        return jax.jit(jax.value_and_grad(diagatt_loss), static_argnums=3)(params, frozen, batch, ("latent", "gaussian"))

    (v1, g1), (v2, g2) = objective(X, y, w), objective(Xd, yd, None)
    np.testing.assert_allclose(v1, v2, rtol=1e-6)
    for k in g1:
        np.testing.assert_allclose(g1[k], g2[k], rtol=1e-4, atol=1e-7, err_msg=k)


def test_partial_fit_weight_two_is_the_sample_given_twice(data):
    X, y = data
    Xd, yd, w = _doubled(X, y, [0, 3])
    kw = dict(FULL, init="zeros", alpha=1e-3)
    a, b = DiagAttRegressor(**kw), DiagAttRegressor(**kw)
    for _ in range(2):
        a.partial_fit(X, y, sample_weight=w)
        b.partial_fit(Xd, yd)
    _close(a, b, X)


def test_classifier_weights(data):
    X, y, _, _ = make_individualized_classification(24, n_rows=4, n_features=3, random_state=1)
    X = [np.asarray(x, np.float32) for x in X]
    Xd, yd, w = _doubled(X, np.asarray(y), [2, 4])
    kw = dict(FULL, init="zeros", alpha=1e-3)
    _close(DiagAttClassifier(**kw).fit(X, y, sample_weight=w), DiagAttClassifier(**kw).fit(Xd, yd), X)


def test_weight_zero_leaves_the_sample_out(data):
    X, y = data
    w = np.ones(len(X))
    w[[2, 9]] = 0.0
    keep = np.flatnonzero(w)
    kw = dict(FULL, init="zeros", alpha=1e-3)
    _close(DiagAttRegressor(**kw).fit(X, y, sample_weight=w),
           DiagAttRegressor(**kw).fit([X[i] for i in keep], y[keep]), X)


@pytest.mark.parametrize("pack", [False, True])
def test_minibatches_carry_the_weights(pack):
    rng = np.random.RandomState(0)
    samples = [rng.randn(p, 2).astype(np.float32) for p in [3, 3, 40, 40, 3, 200]]
    weights = np.array([0.5, 1.0, 2.0, 3.0, 0.25, 4.0], np.float32)
    data = training_data(samples, np.zeros((6, 1), np.float32), pack=pack, weights=weights)
    for b in plan_minibatches(data, 4, rng):
        idx = b.idx["idx"] if isinstance(b.idx, dict) else b.idx
        real = b.w > 0
        bucket = getattr(data, "first", None) is None
        got = b.w[real]
        if bucket:  # bucket indices are positions inside the bucket: compare the multiset
            assert set(np.round(got, 4)) <= set(np.round(weights, 4))
        else:
            np.testing.assert_array_equal(got, weights[idx[real]])
    total = sum(float(b.w.sum()) for b in plan_minibatches(data, 4, rng))
    assert total == pytest.approx(float(weights.sum()))


@pytest.mark.parametrize("w, err, match", [
    ([1.0, -1.0], ValueError, r"sample_weight\[1\] is negative"),
    ([1.0, np.nan], ValueError, r"sample_weight\[1\] is not finite"),
    ([1.0], ValueError, r"sample_weight has shape \(1,\), expected \(2,\)"),
    ([0.0, 0.0], ValueError, "0 for every sample"),
    (["a", "b"], TypeError, "real numbers"),
])
def test_bad_weights_are_named(w, err, match):
    X = [np.ones((3, 2)), np.zeros((2, 2))]
    with pytest.raises(err, match=match):
        DiagAttRegressor(max_iter=1).fit(X, [1.0, 2.0], sample_weight=w)


def test_weights_through_pipeline_grid_search_and_cross_validation(data):
    X, y = data
    w = np.linspace(0.5, 2.0, len(X))
    kw = dict(max_iter=2, random_state=0)
    pipe = make_pipeline(RowStandardScaler(), DiagAttRegressor(**kw))
    direct = DiagAttRegressor(**kw).fit(RowStandardScaler().fit_transform(X), y, sample_weight=w)
    pipe.fit(X, y, diagattregressor__sample_weight=w)
    np.testing.assert_array_equal(pipe[-1].params_["b"], direct.params_["b"])
    search = GridSearchCV(DiagAttRegressor(**kw), {"n_heads": [1]}, cv=2).fit(X, y, sample_weight=w)
    assert search.best_estimator_.n_iter_ > 0
    scores = cross_val_score(DiagAttRegressor(**kw), X, y, cv=2, params={"sample_weight": w})
    assert np.all(np.isfinite(scores))


def test_oracle_weights():
    from skdiagatt.baselines import OracleRegressor

    X, y, rows, _ = make_individualized_regression(30, n_rows=4, n_features=2, random_state=0)
    Xd, yd, w = _doubled(list(X), np.asarray(y), [0, 3])
    rows_d = np.concatenate([rows, rows[[0, 3]]])
    a = OracleRegressor().fit(X, y, rows, sample_weight=w)
    np.testing.assert_allclose(a.model_.coef_, OracleRegressor().fit(Xd, yd, rows_d).model_.coef_, rtol=1e-8)
    with pytest.raises(ValueError, match=r"sample_weight\[2\] is negative"):
        OracleRegressor().fit(X, y, rows, sample_weight=np.r_[1.0, 1.0, -1.0, np.ones(27)])


# ------------------------------------------------------------------ baselines
def _baseline_data(n=30, seed=0):
    """Ragged samples (3 to 5 rows, d = 2) with one row shifted far from the rest, and its response."""
    rng = np.random.RandomState(seed)
    X, rows = [], []
    for _ in range(n):
        x = rng.randn(rng.randint(3, 6), 2)
        r = rng.randint(x.shape[0])
        x[r] += 6.0
        X.append(x)
        rows.append(r)
    y = np.array([x[r] @ [1.0, -2.0] for x, r in zip(X, rows)]) + 0.1 * rng.randn(n)
    return X, y


def _classes(y, k):
    """``k`` classes from the quantiles of the response."""
    return np.searchsorted(np.quantile(y, np.linspace(0, 1, k + 1)[1:-1]), y)


GL = dict(alpha=0.05, tol=1e-10)
BASELINES = [
    ("GroupLassoRegressor", GL, None),
    ("GroupLassoClassifier", GL, 2),
    ("GroupLassoClassifier", GL, 3),
    ("TwoStepRegressor", dict(random_state=0), None),
    ("TwoStepClassifier", dict(random_state=0), 2),
]
BASELINE_IDS = ["group-lasso", "group-lasso-binary", "group-lasso-3-classes", "two-step", "two-step-binary"]


def _baseline(name, kw, k, X, y):
    from skdiagatt import baselines

    return getattr(baselines, name)(**kw), (y if k is None else _classes(y, k))


def _same_baseline(a, b, X, tol):
    out = "predict_proba" if hasattr(a, "predict_proba") else "predict"
    np.testing.assert_allclose(getattr(a, out)(X), getattr(b, out)(X), rtol=tol, atol=tol)
    if hasattr(a, "coef_"):
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=tol, atol=tol)
        np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=tol, atol=tol)
    else:  # two-step: the same rows selected, the same second step
        assert [r.tolist() for r in a.localize(X)] == [r.tolist() for r in b.localize(X)]
        np.testing.assert_allclose(a.model_.coef_, b.model_.coef_, rtol=tol, atol=tol)


@pytest.mark.parametrize("name, kw, k", BASELINES, ids=BASELINE_IDS)
def test_baseline_weight_two_is_the_sample_given_twice(name, kw, k):
    X, y = _baseline_data()
    est, t = _baseline(name, kw, k, X, y)
    Xd, td, w = _doubled(X, t, [1, 5, 7, 8])
    w[3] = 3.0
    Xd, td = Xd + [X[3]] * 2, np.concatenate([td, t[[3, 3]]])
    weighted = clone(est).fit(X, t, sample_weight=w)
    # The solvers stop at their tolerance on objectives equal up to float rounding.
    _same_baseline(weighted, clone(est).fit(Xd, td), X, 1e-4 if k else 1e-6)
    out = "predict_proba" if k else "predict"
    assert np.max(np.abs(getattr(clone(est).fit(X, t), out)(X) - getattr(weighted, out)(X))) > 1e-3


@pytest.mark.parametrize("name, kw, k", BASELINES, ids=BASELINE_IDS)
def test_baseline_weight_zero_leaves_the_sample_out(name, kw, k):
    X, y = _baseline_data()
    X[4] = np.vstack([X[4], X[4]])  # the longest sample: left out, it no longer sets n_rows_
    est, t = _baseline(name, kw, k, X, y)
    w = np.ones(len(X))
    w[[4, 11]] = 0.0
    keep = np.flatnonzero(w)
    weighted = clone(est).fit(X, t, sample_weight=w)
    _same_baseline(weighted, clone(est).fit([X[i] for i in keep], t[keep]), X, 1e-9)
    if hasattr(weighted, "n_rows_"):
        assert weighted.n_rows_ == 5


def test_group_lasso_weighted_solution_satisfies_the_weighted_kkt():
    from skdiagatt.baselines import _group_lasso_solver as gl

    rng = np.random.RandomState(0)
    X, w = rng.randn(40, 6), rng.uniform(0.0, 3.0, 40)
    Y = (X[:, :2] @ [1.0, -1.0] + 0.1 * rng.randn(40))[:, None]
    Xc, _ = gl.center(X, sample_weight=w)
    alpha = 0.2 * gl.alpha_max(Xc, Y, 2, "gaussian", w)
    B, c, _ = gl.group_lasso(Xc, Y, 2, alpha, tol=1e-10, sample_weight=w)
    assert gl.kkt_violation(Xc, Y, B, c, alpha, 2, sample_weight=w) < 1e-8
    assert gl.kkt_violation(Xc, Y, B, c, alpha, 2) > 1e-3  # the unweighted conditions do not hold


@pytest.mark.parametrize("name", ["GroupLassoRegressor", "GroupLassoClassifier", "TwoStepRegressor",
                                  "TwoStepClassifier"])
@pytest.mark.parametrize("w, err, match", [
    ([1.0, -1.0, 1.0, 1.0], ValueError, r"sample_weight\[1\] is negative"),
    ([1.0, 1.0, np.nan, 1.0], ValueError, r"sample_weight\[2\] is not finite"),
    ([1.0, 1.0], ValueError, r"sample_weight has shape \(2,\), expected \(4,\)"),
    ([0.0, 0.0, 0.0, 0.0], ValueError, "0 for every sample"),
])
def test_baseline_bad_weights_are_named(name, w, err, match):
    from skdiagatt import baselines

    X = [np.ones((3, 2)), np.zeros((2, 2)), -np.ones((3, 2)), np.eye(2)]
    with pytest.raises(err, match=match):
        getattr(baselines, name)().fit(X, [0, 1, 0, 1], sample_weight=w)


# ------------------------------------------------------------------ fit_chunks
def _chunked(X, y, w, cuts):
    """``(X_k, y_k, w_k)`` triples cut at ``cuts``."""
    edges = [0, *cuts, len(X)]
    return [(X[a:b], y[a:b], w[a:b]) for a, b in zip(edges[:-1], edges[1:])]


def _same(a, b):
    for k in a.params_:
        np.testing.assert_array_equal(a.params_[k], b.params_[k], err_msg=k)
    assert a.loss_curve_ == b.loss_curve_


def test_fit_chunks_weights_count_as_in_fit(data):
    """One chunk is the in-memory fit; weights read in chunks are the weights given with X.

    DiagAtt only: StdAtt and NTK-Attention read chunks through the same
    source and hooks.  The chunks have one size, so that one program serves.
    """
    X, y = data
    kw = dict(FULL, calibration_iter=0)
    w = np.linspace(0.5, 2.0, len(X))
    _same(DiagAttRegressor(**kw).fit(X, y, sample_weight=w), DiagAttRegressor(**kw).fit_chunks(X, y, sample_weight=w))
    w[6:12], w[18:] = 0.0, 1.0
    chunks = _chunked(X, y, w, [6, 12, 18])
    chunks[3] = chunks[3][:2]  # chunks without weights weigh their samples 1
    by_size = DiagAttRegressor(**kw).fit_chunks(X, y, sample_weight=w, chunk_size=6)
    _same(by_size, DiagAttRegressor(**kw).fit_chunks(chunks))
    _same(by_size, DiagAttRegressor(**kw).fit_chunks(chunks[:1] + chunks[2:]))  # weight 0 leaves the chunk out


def test_fit_chunks_weight_two_is_the_sample_given_twice(data):
    """Within each chunk (one minibatch each), weight 2 and a second copy give the same steps and statistics.

    Two samples of weight 0 in each chunk are left out of it: the weighted
    chunks keep 6 samples, the size the test above compiled for.
    """
    X, y = data
    kw = dict(FULL, init="mixture", alpha=1e-3, calibration_iter=0)
    weighted, doubled = [], []
    for Xk, yk, _ in _chunked(X, y, np.ones(len(X)), [8, 16]):
        w = np.ones(8)
        w[1], w[[3, 6]] = 2.0, 0.0
        keep = [0, 1, 2, 4, 5, 7, 1]
        weighted.append((Xk, yk, w))
        doubled.append(([Xk[i] for i in keep], yk[keep]))
    a, b = DiagAttRegressor(**kw).fit_chunks(weighted), DiagAttRegressor(**kw).fit_chunks(doubled)
    np.testing.assert_allclose(a.preconditioner_, b.preconditioner_, rtol=1e-10)
    np.testing.assert_allclose(a.y_scale_, b.y_scale_, rtol=1e-10)
    _close(a, b, X)


@pytest.mark.parametrize("call, err, match", [
    (lambda e, X, y: e.fit_chunks([(X[:4], y[:4]), (X[4:8], y[4:8], [1.0, -1.0, 1.0, 1.0])]),
     ValueError, r"chunk 1: sample_weight\[1\] is negative"),
    (lambda e, X, y: e.fit_chunks([(X[:4], y[:4], [1.0, 1.0, 1.0])]),
     ValueError, r"chunk 0: sample_weight has shape \(3,\), expected \(4,\)"),
    (lambda e, X, y: e.fit_chunks([(X[:4], y[:4], np.zeros(4)), (X[4:8], y[4:8], np.zeros(4))]),
     ValueError, "0 for every sample"),
    (lambda e, X, y: e.fit_chunks(X, y, sample_weight=np.r_[1.0, np.nan, np.ones(len(X) - 2)], chunk_size=4),
     ValueError, r"sample_weight\[1\] is not finite"),
    (lambda e, X, y: e.fit_chunks(X, y, sample_weight=np.ones(3)),
     ValueError, r"sample_weight has shape \(3,\), expected \(24,\)"),
    (lambda e, X, y: e.fit_chunks([(X, y)], sample_weight=np.ones(len(X))),
     ValueError, r"sample_weight is used only with fit_chunks\(X, y"),
    (lambda e, X, y: e.fit_chunks([(X, y, np.ones(len(X)), None)]),
     TypeError, r"pair or an \(X, y, w\) triple"),
])
def test_fit_chunks_bad_weights_are_named(data, call, err, match):
    X, y = data
    with pytest.raises(err, match=match):
        call(DiagAttRegressor(max_iter=1), X, y)
