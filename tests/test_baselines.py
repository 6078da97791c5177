"""Competitors: API, invariances and a small correctness check each."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Lasso
from sklearn.model_selection import GridSearchCV
from sklearn.utils import estimator_checks

from skdiagatt._shared.ragged import COARSE, FINE
from skdiagatt.baselines import (
    GroupLassoClassifier,
    GroupLassoRegressor,
    OracleRegressor,
    StdAttClassifier,
    StdAttRegressor,
    TwoStepClassifier,
    TwoStepRegressor,
)
from skdiagatt.baselines import _group_lasso_solver as gl
from skdiagatt.datasets import make_individualized_classification, make_individualized_regression
from skdiagatt.metrics import crlr, rmse
from tests.conftest import DATA_FREE_CHECKS, grid_sensitive_samples

ALL = [
    GroupLassoRegressor,
    GroupLassoClassifier,
    TwoStepRegressor,
    TwoStepClassifier,
    StdAttRegressor,
    StdAttClassifier,
    OracleRegressor,
]
FAST_ATT = dict(max_iter=3, batch_size=32, random_state=0)


@pytest.fixture(scope="module")
def reg_data():
    """Ragged (5 to 8 rows, one padded bucket: little to compile), d = 3."""
    return make_individualized_regression(80, n_rows=(5, 8), n_features=3, random_state=0)


@pytest.fixture(scope="module")
def cls_data():
    return make_individualized_classification(80, n_rows=(5, 8), n_features=3, random_state=1)


@pytest.fixture(scope="module")
def fitted_std(reg_data):
    X, y, _, _ = reg_data
    return StdAttRegressor(n_heads=2, **FAST_ATT).fit(X, y)


# ---------------------------------------------------------------- API checks
@pytest.mark.parametrize("Est", ALL)
@pytest.mark.parametrize("check", DATA_FREE_CHECKS)
def test_sklearn_data_free_checks(Est, check):
    getattr(estimator_checks, check)(Est.__name__, Est())


@pytest.mark.parametrize("Est", ALL)
def test_matrix_input_tags_and_unfitted(Est, reg_data):
    tags = Est().__sklearn_tags__()
    assert tags.input_tags.two_d_array is False and tags.input_tags.three_d_array is True
    with pytest.raises(NotFittedError):
        if Est is OracleRegressor:
            Est().predict(reg_data[0], reg_data[2])
        else:
            Est().predict(reg_data[0])


@pytest.mark.parametrize(
    "est",
    [
        GroupLassoRegressor(alpha=0.3),
        TwoStepRegressor(random_state=0),
        StdAttRegressor(**FAST_ATT),
    ],
    ids=["group_lasso", "two_step", "stdatt"],
)
def test_regressor_api_on_ragged_data(est, reg_data):
    X, y, rows, _ = reg_data
    est = clone(est).fit(X, y)
    pred = est.predict(X)
    assert pred.shape == (len(X),) and np.all(np.isfinite(pred))
    loc = est.localize(X)
    assert len(loc) == len(X)
    assert all(r.dtype == np.int64 and np.all((r >= 0) & (r < x.shape[0])) for r, x in zip(loc, X))
    top = est.localize(X, top_k=2)
    assert all(len(r) <= 2 for r in top)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), pred)
    with pytest.raises(ValueError, match=r"X\[1\] has 5 features, expected 3"):
        est.predict([X[0], np.ones((6, 5))])
    with pytest.raises(ValueError, match="top_k"):
        est.localize(X, top_k=0)


@pytest.mark.parametrize(
    "est",
    [GroupLassoClassifier(alpha=0.3), TwoStepClassifier(random_state=0), StdAttClassifier(**FAST_ATT)],
    ids=["group_lasso", "two_step", "stdatt"],
)
def test_classifier_api_with_string_labels(est, cls_data):
    X, y, _, _ = cls_data
    labels = np.array(["neg", "pos"])[y]
    est = clone(est).fit(X, labels)
    assert list(est.classes_) == ["neg", "pos"]
    proba = est.predict_proba(X)
    assert proba.shape == (len(X), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(est.predict(X)) <= {"neg", "pos"}
    assert est.decision_function(X).shape == (len(X),)
    assert 0.0 <= est.score(X, labels) <= 1.0
    with pytest.raises(ValueError, match="single class"):
        clone(est).fit(X, np.zeros(len(X)))


# -------------------------------------------------------------- group lasso
def test_group_lasso_of_singleton_groups_is_sklearn_lasso():
    rng = np.random.RandomState(0)
    X = rng.randn(80, 6)
    y = 2 * X[:, 0] - X[:, 3] + 0.3 * rng.randn(80)
    Xc, mean = gl.center(X)
    coef, c, info = gl.group_lasso(Xc, y[:, None], 1, 0.1, tol=1e-12)
    ref = Lasso(alpha=0.1, tol=1e-14, max_iter=100_000).fit(X, y)
    assert info["converged"]
    np.testing.assert_allclose(coef[:, 0], ref.coef_, atol=1e-8)
    np.testing.assert_allclose(c - mean @ coef, ref.intercept_, atol=1e-8)


@pytest.mark.parametrize("family", ["gaussian", "bernoulli", "categorical"])
def test_group_lasso_path_satisfies_kkt(family):
    rng = np.random.RandomState(1)
    X = rng.randn(60, 5 * 3)
    z = X[:, :3] @ np.array([1.0, -1.0, 2.0])
    Y = {
        "gaussian": (z + 0.3 * rng.randn(60))[:, None],
        "bernoulli": (z > 0)[:, None].astype(float),
        "categorical": np.eye(3)[np.digitize(z, [-1.0, 1.0])],
    }[family]
    Xc, _ = gl.center(X)
    alphas, coefs, intercepts = gl.group_lasso_path(Xc, Y, 3, family=family, n_alphas=6, tol=1e-10)
    for a, B, c in zip(alphas, coefs, intercepts):
        assert gl.kkt_violation(Xc, Y, B, c, a, 3, family) < 1e-6
    # alpha_max is exactly where the first group enters
    assert np.all(coefs[0] == 0) and np.any(coefs[1] != 0)


def test_group_lasso_estimator_satisfies_kkt_on_raw_design():
    rng = np.random.RandomState(2)
    X = rng.randn(70, 4, 3)
    y = X[:, 2] @ np.array([1.0, 0.5, -1.0]) + 0.1 * rng.randn(70)
    est = GroupLassoRegressor(alpha=0.2, tol=1e-10).fit(X, y)
    flat = X.reshape(70, -1)
    viol = gl.kkt_violation(flat, y[:, None], est.coef_.reshape(12, 1), est.intercept_, est.penalty_, 3)
    assert viol < 1e-6
    np.testing.assert_allclose(est.predict(X), flat @ est.coef_.reshape(12) + est.intercept_[0])


def test_group_lasso_recovers_a_fixed_common_support():
    rng = np.random.RandomState(3)
    X = [rng.randn(p, 3) for p in rng.randint(5, 9, size=300)]
    beta1, beta3 = np.array([1.0, -1.0, 0.5]), np.array([0.0, 2.0, 1.0])
    y = np.array([x[1] @ beta1 + x[3] @ beta3 for x in X]) + 0.1 * rng.randn(300)
    est = GroupLassoRegressor(alpha=0.1).fit(X, y)
    assert set(np.flatnonzero(est.group_norms_)) == {1, 3}
    assert all(sorted(r.tolist()) == [1, 3] for r in est.localize(X))
    assert all(r.tolist() == [3] for r in est.localize(X, top_k=1))  # ||beta3|| > ||beta1||
    assert est.score(X, y) > 0.95
    with pytest.raises(ValueError, match=r"X\[1\] has 9 rows, more than n_rows=8"):
        GroupLassoRegressor(n_rows=8).fit([np.ones((8, 3)), np.ones((9, 3))], [0.0, 1.0])


@pytest.mark.parametrize("Est", [GroupLassoRegressor, GroupLassoClassifier])
def test_group_lasso_samples_longer_than_training_get_zero_coefficients(Est, reg_data, cls_data):
    """Positions never seen in fit have no coefficient: longer samples are cut, not rejected."""
    X, y, _, _ = reg_data if Est is GroupLassoRegressor else cls_data
    width = max(x.shape[0] for x in X)  # 8
    est = Est(alpha=0.1, tol=1e-10).fit(X, y)
    assert est.n_rows_ == width
    rng = np.random.RandomState(6)
    longer = [rng.randn(width + 5, 3), rng.randn(3, 3), rng.randn(2 * width, 3)]
    out = est.predict(longer)
    # rows past n_rows_ contribute nothing: the same as cutting them off
    cut = [x[:width] for x in longer]
    np.testing.assert_array_equal(out, est.predict(cut))
    score = est.predict_proba if Est is GroupLassoClassifier else est.predict
    np.testing.assert_allclose(score(longer), score(cut))
    # ... and the same as a model whose padding covered them (all-zero blocks there)
    wide = Est(alpha=0.1, tol=1e-10, n_rows=2 * width).fit(X, y)
    assert np.all(wide.coef_[width:] == 0)
    np.testing.assert_allclose(wide.coef_[:width], est.coef_, atol=1e-8)
    np.testing.assert_allclose(score(longer), wide.predict_proba(longer)
                               if Est is GroupLassoClassifier else wide.predict(longer), atol=1e-8)
    for top_k in (None, 2):
        loc = est.localize(longer, top_k=top_k)
        assert all(r.dtype == np.int64 and np.all((r >= 0) & (r < min(x.shape[0], width)))
                   for r, x in zip(loc, longer))


def test_group_lasso_warm_started_path_matches_cold_fits(reg_data):
    X, y, _, _ = reg_data
    warm = GroupLassoRegressor(alpha=1.0, warm_start=True, tol=1e-9)
    for a in (1.0, 0.5, 0.2):
        warm.set_params(alpha=a).fit(X, y)
    cold = GroupLassoRegressor(alpha=0.2, tol=1e-9).fit(X, y)
    np.testing.assert_allclose(warm.coef_, cold.coef_, atol=1e-6)
    null = GroupLassoRegressor(alpha=1.0).fit(X, y)  # alpha_max: every group is zero
    assert np.all(null.coef_ == 0) and all(r.size == 0 for r in null.localize(X[:2]))
    np.testing.assert_allclose(null.predict(X), y.mean())


def test_group_lasso_in_grid_search(reg_data):
    X, y, _, _ = reg_data
    grid = GridSearchCV(GroupLassoRegressor(), {"alpha": [0.5, 0.1]}, cv=2).fit(X, y)
    assert grid.best_params_["alpha"] in (0.5, 0.1)


# ----------------------------------------------------------------- two-step
def _planted(n, p, d, n_signal, rng, shifts=(6.0, -6.0)):
    X, rows = [], []
    for _ in range(n):
        x = rng.randn(p, d)
        r = rng.choice(p, n_signal, replace=False)
        for k in range(n_signal):
            x[r[k]] += shifts[k]
        X.append(x)
        rows.append(r)
    return X, np.array(rows)


def test_two_step_finds_well_separated_planted_rows():
    rng = np.random.RandomState(4)
    X, rows = _planted(150, 8, 3, 2, rng)
    beta = rng.randn(2, 3)
    y = np.array([x[r[0]] @ beta[0] + x[r[1]] @ beta[1] for x, r in zip(X, rows)])
    est = TwoStepRegressor(n_signal=2, random_state=0).fit(X, y + 0.1 * rng.randn(150))
    assert crlr(rows, est.localize(X)) == 1.0
    assert rmse(y, est.predict(X)) < 0.3
    proba = est.signal_proba(X)
    assert all(p.shape == (x.shape[0],) for p, x in zip(proba, X))
    assert all(set(np.argsort(-p)[:2]) == set(r) for p, r in zip(proba, rows))


def test_two_step_classifier_with_two_signal_components():
    rng = np.random.RandomState(5)
    y = rng.randint(0, 2, 150)
    X, rows = _planted(150, 8, 3, 1, rng)
    for x, r, c in zip(X, rows, y):
        x[r[0]] = rng.randn(3) + (6.0 if c else -6.0)
    clf = TwoStepClassifier(n_components=3, random_state=0).fit(X, y)
    assert crlr(rows, clf.localize(X)) == 1.0
    assert clf.score(X, y) == 1.0


def test_two_step_same_random_state_is_identical(reg_data):
    X, y, _, _ = reg_data
    a = TwoStepRegressor(random_state=3).fit(X, y).predict(X)
    b = TwoStepRegressor(random_state=3).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ stdatt
def test_stdatt_attention_is_received_mass(fitted_std, reg_data):
    X = reg_data[0]
    att = fitted_std.attention(X)
    for x, w in zip(X, att):
        assert w.shape == (2, x.shape[0])
        np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-5)
    assert fitted_std.localize(X[:1], top_k=1)[0][0] == np.argmax(att[0].sum(axis=0))


def test_stdatt_same_random_state_is_bit_identical(fitted_std, reg_data):
    X, y, _, _ = reg_data
    b = StdAttRegressor(n_heads=2, **FAST_ATT).fit(X, y)
    for k in fitted_std.params_:
        np.testing.assert_array_equal(fitted_std.params_[k], b.params_[k])
    np.testing.assert_array_equal(fitted_std.predict(X), b.predict(X))


def test_stdatt_predictions_and_attention_do_not_depend_on_the_bucket_grid():
    X = grid_sensitive_samples()
    est = StdAttRegressor(**FAST_ATT).fit(X, np.array([x[:, 0].mean() for x in X]))
    assert est._bucket_growth == COARSE
    coarse = est.predict(X), est.attention(X)
    est._bucket_growth = FINE
    fine = est.predict(X), est.attention(X)
    np.testing.assert_allclose(coarse[0], fine[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(coarse[1], fine[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_stdatt_latent_objective_and_options_stay_finite(reg_data):
    X, y, _, _ = reg_data
    est = StdAttRegressor(objective="latent", key_dim=2, calibration_iter=1, **FAST_ATT).fit(X, y)
    assert np.all(np.isfinite(est.predict(X))) and np.all(np.isfinite(est.loss_curve_))
    assert est.n_iter_ == FAST_ATT["max_iter"] and len(est.loss_curve_) == FAST_ATT["max_iter"] + 1
    with pytest.raises(ValueError, match="objective"):
        StdAttRegressor(objective="x").fit(X, y)


def test_stdatt_learns_a_mean_shifted_row():
    # Standard attention can see a row whose mean differs from the others.
    X, y, rows, _ = make_individualized_regression(
        400, n_rows=6, n_features=3, signal=((6.0, 1.0),), random_state=6
    )
    est = StdAttRegressor(objective="latent", max_iter=12, random_state=0).fit(X[:300], y[:300])
    assert crlr(rows[300:], est.localize(X[300:], top_k=1)) > 0.6  # chance: 1/6


# ------------------------------------------------------------------ oracle
def test_oracle_reaches_the_noise_level_and_checks_rows():
    X, y, rows, truth = make_individualized_regression(
        400, n_rows=(4, 8), n_features=3, n_signal=2, noise=0.5, random_state=7
    )
    est = OracleRegressor().fit(X[:300], y[:300], rows[:300])
    assert rmse(y[300:], est.predict(X[300:], rows[300:])) < 0.6
    np.testing.assert_allclose(est.model_.coef_, truth.beta.ravel(), atol=0.15)
    assert [r.tolist() for r in est.localize(X[:2], rows=rows[:2])] == rows[:2].tolist()
    assert est.score(X[300:], y[300:], rows[300:]) > 0.9
    bad = rows[:3].copy()
    bad[2, 0] = X[2].shape[0]
    with pytest.raises(ValueError, match=r"rows\[2\] .* out of range for X\[2\]"):
        est.predict(X[:3], bad)
