"""DiagAtt estimators tested by what users do with them."""

import math
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import estimator_checks

from skdiagatt import DiagAttClassifier, DiagAttRegressor, _testing
from skdiagatt.diagatt._estimators import _linear_predictor
from skdiagatt.metrics import crlr
from tests.conftest import DATA_FREE_CHECKS

FAST = dict(max_iter=4, calibration_iter=2, batch_size=32, random_state=0)


@pytest.fixture(scope="module")
def fitted_reg(reg_data):
    X, y, _, _ = reg_data
    return DiagAttRegressor(n_heads=2, **FAST).fit(X, y)


@pytest.fixture(scope="module")
def fitted_clf(cls_data):
    X, y, _, _ = cls_data
    return DiagAttClassifier(**FAST).fit(X, y)


# ---------------------------------------------------------------- API checks
# DiagAtt also runs scikit-learn's tag checks on its declared tags.
TAG_AND_DATA_FREE_CHECKS = DATA_FREE_CHECKS + ["check_valid_tag_types", "check_estimator_tags_renamed"]


@pytest.mark.parametrize("Est", [DiagAttRegressor, DiagAttClassifier])
@pytest.mark.parametrize("check", TAG_AND_DATA_FREE_CHECKS)
def test_sklearn_data_free_checks(Est, check):
    getattr(estimator_checks, check)(Est.__name__, Est())


@pytest.mark.parametrize("Est", [DiagAttRegressor, DiagAttClassifier])
def test_tags_declare_matrix_input(Est):
    tags = Est().__sklearn_tags__()
    assert tags.input_tags.two_d_array is False
    assert tags.input_tags.three_d_array is True


def test_unfitted_raises(reg_data):
    X = reg_data[0]
    for method in ("predict", "localize", "attention", "row_contributions"):
        with pytest.raises(NotFittedError):
            getattr(DiagAttRegressor(), method)(X)
    with pytest.raises(NotFittedError):
        DiagAttClassifier().intercept_


# -------------------------------------------------------------- user flows
def test_clone_and_set_params(fitted_reg):
    c = clone(fitted_reg)
    assert not hasattr(c, "params_")
    assert c.get_params() == fitted_reg.get_params()
    c.set_params(n_heads=3, temperature=2.0)
    assert c.n_heads == 3 and c.temperature == 2.0


def test_pickle_round_trip_predicts_identically(fitted_reg, reg_data):
    X = reg_data[0]
    again = pickle.loads(pickle.dumps(fitted_reg))
    np.testing.assert_array_equal(again.predict(X), fitted_reg.predict(X))
    for a, b in zip(again.attention(X), fitted_reg.attention(X)):
        np.testing.assert_array_equal(a, b)


def test_same_random_state_is_bit_identical(reg_data):
    X, y, _, _ = reg_data
    a = DiagAttRegressor(**FAST).fit(X, y)
    b = DiagAttRegressor(**FAST).fit(X, y)
    for k in a.params_:
        np.testing.assert_array_equal(a.params_[k], b.params_[k])
    assert a.loss_curve_ == b.loss_curve_
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_pipeline_with_ragged_function_transformer(reg_data):
    X, y, _, _ = reg_data
    pipe = make_pipeline(FunctionTransformer(lambda Xs: [x * 2.0 for x in Xs]), DiagAttRegressor(**FAST))
    pipe.fit(X, y)
    assert pipe.predict(X).shape == (len(X),)
    assert np.isfinite(pipe.score(X, y))


def test_grid_search_and_cross_val_score(reg_data):
    X, y, _, _ = reg_data
    grid = GridSearchCV(
        DiagAttRegressor(**FAST), {"n_heads": [1, 2], "temperature": [None, 2.0]}, cv=2
    ).fit(X, y)
    assert grid.best_params_["n_heads"] in (1, 2)
    assert len(grid.cv_results_["mean_test_score"]) == 4
    scores = cross_val_score(DiagAttClassifier(**FAST), *_cls_xy(), cv=3)
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))


def _cls_xy():
    from skdiagatt.datasets import make_individualized_classification

    X, y, _, _ = make_individualized_classification(60, n_rows=(3, 8), n_features=3, random_state=2)
    return X, y


def test_train_test_split_on_lists(reg_data):
    X, y, rows, _ = reg_data
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=0)
    assert isinstance(X_tr, list)
    est = DiagAttRegressor(**FAST).fit(X_tr, y_tr)
    assert est.predict(X_te).shape == (len(X_te),)


def test_three_d_array_equals_list(reg_data):
    rng = np.random.RandomState(0)
    X3 = rng.randn(40, 6, 3)
    y = rng.randn(40)
    a = DiagAttRegressor(**FAST).fit(X3, y)
    b = DiagAttRegressor(**FAST).fit(list(X3), y)
    np.testing.assert_array_equal(a.predict(X3), b.predict(list(X3)))


# ----------------------------------------------------------- invariances
def test_subset_prediction_equals_full(fitted_reg, reg_data):
    X = reg_data[0]
    full = fitted_reg.predict(X)
    idx = [5, 0, 17, 3]
    np.testing.assert_allclose(fitted_reg.predict([X[i] for i in idx]), full[idx], rtol=1e-6)
    single = fitted_reg.predict([X[9]])
    np.testing.assert_allclose(single, full[[9]], rtol=1e-6)


def test_attention_is_permutation_equivariant(fitted_reg, reg_data):
    X = reg_data[0][:10]
    rng = np.random.RandomState(3)
    perms = [rng.permutation(x.shape[0]) for x in X]
    base = fitted_reg.attention(X)
    moved = fitted_reg.attention([x[p] for x, p in zip(X, perms)])
    for w, wp, p in zip(base, moved, perms):
        np.testing.assert_allclose(wp, w[:, p], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        fitted_reg.predict([x[p] for x, p in zip(X, perms)]), fitted_reg.predict(X), rtol=1e-5
    )


def test_attention_and_localize_shapes(fitted_reg, reg_data):
    X = reg_data[0]
    for x, w in zip(X, fitted_reg.attention(X)):
        assert w.shape == (2, x.shape[0])
        np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-5)
    loc = fitted_reg.localize(X)
    assert all(1 <= len(r) <= 2 and np.all(r < x.shape[0]) for r, x in zip(loc, X))
    top = fitted_reg.localize(X, top_k=3)
    assert all(len(r) == min(3, x.shape[0]) for r, x in zip(top, X))
    w = fitted_reg.attention(X[:1])[0].sum(axis=0)
    assert top[0][0] == np.argmax(w)
    short = [X[0], X[1][:2]]
    with pytest.warns(UserWarning, match=r"top_k=3 exceeds the rows of 1 sample\(s\) \(X\[1\] has 2\)"):
        top = fitted_reg.localize(short, top_k=3)
    assert [len(r) for r in top] == [3, 2]


def _outputs_and_contributions(est, X):
    out = est.decision_function(X) if hasattr(est, "classes_") else est.predict(X)
    return out, est.row_contributions(X)


def test_row_contributions_add_up_to_the_output(fitted_reg, reg_data, cls_data):
    X, y, _, _ = reg_data
    Xc, yc, _, _ = cls_data
    models = [
        (fitted_reg, X, ()),
        (DiagAttRegressor(**FAST).fit(X, np.column_stack([y, 1 - 2 * y])), X, (2,)),
        (DiagAttClassifier(**FAST).fit(Xc, np.array(["neg", "pos"])[yc]), Xc, ()),
        (DiagAttClassifier(n_heads=2, **FAST).fit(Xc, np.arange(len(Xc)) % 3), Xc, (3,)),
    ]
    for est, data, tail in models:
        out, terms = _outputs_and_contributions(est, data[:12])
        assert np.shape(est.intercept_) == tail
        for x, c, o in zip(data[:12], terms, out):
            assert c.shape == (est.n_heads, x.shape[0]) + tail
            np.testing.assert_allclose(c.sum(axis=(0, 1)) + est.intercept_, o, rtol=1e-4, atol=1e-5)


def test_localize_by_contribution_follows_the_prediction(fitted_reg, reg_data, cls_data):
    X = reg_data[0][:15]
    pred, terms = fitted_reg.predict(X), fitted_reg.row_contributions(X)
    top = fitted_reg.localize(X, top_k=2, by="contribution")
    heads = fitted_reg.localize(X, by="contribution")
    for c, p, t, h in zip(terms, pred, top, heads):
        push = np.sign(p - fitted_reg.intercept_) * c  # (R, p_i), signed towards the prediction
        assert t.tolist() == np.argsort(-push.sum(axis=0), kind="stable")[:2].tolist()
        assert set(h.tolist()) == set(np.argmax(push, axis=1).tolist())
    Xc, yc, rows, _ = cls_data
    clf = DiagAttClassifier(**FAST).fit(Xc, yc)
    sign = np.where(clf.predict(Xc) == clf.classes_[1], 1.0, -1.0)
    chosen = clf.localize(Xc, top_k=1, by="contribution")
    for c, s, r in zip(clf.row_contributions(Xc), sign, chosen):
        assert r[0] == np.argmax(s * c[0])
    with pytest.raises(ValueError, match='by must be "attention" or "contribution"'):
        clf.localize(Xc, by="weight")


# ---------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "bad, err, match",
    [
        (lambda X: X[:3] + [np.ones((2, 5))] + X[4:], ValueError, r"X\[3\] has 5 features, expected 3"),
        (lambda X: X[:2] + [np.full((3, 3), np.nan)] + X[3:], ValueError, r"X\[2\] contains NaN"),
        (lambda X: X[:1] + [np.full((3, 3), np.inf)] + X[2:], ValueError, r"X\[1\] contains infinity"),
        (lambda X: X[:4] + [np.ones((0, 3))] + X[5:], ValueError, r"X\[4\] is empty"),
    ],
)
def test_bad_X_is_rejected_and_model_untouched(fitted_reg, reg_data, bad, err, match):
    X, y, _, _ = reg_data
    before = fitted_reg.predict(X)
    est = pickle.loads(pickle.dumps(fitted_reg))
    with pytest.raises(err, match=match):
        est.fit(bad(list(X)), y)
    with pytest.raises(err, match=match):
        est.predict(bad(list(X)))
    np.testing.assert_array_equal(est.predict(X), before)


@pytest.mark.parametrize(
    "y_bad, match",
    [
        (lambda y: y[:-1], r"y has 119 entries but X has 120 samples"),
        (lambda y: np.where(np.arange(y.size) == 7, np.nan, y), r"y\[7\] is not finite"),
        (lambda y: y.reshape(-1, 1, 1), r"y must be 1-D"),
    ],
)
def test_bad_y_regression(reg_data, y_bad, match):
    X, y, _, _ = reg_data
    with pytest.raises(ValueError, match=match):
        DiagAttRegressor(**FAST).fit(X, y_bad(y))


def test_predict_with_wrong_feature_count(fitted_reg):
    with pytest.raises(ValueError, match=r"X\[0\] has 4 features, expected 3 \(as seen in fit\)"):
        fitted_reg.predict([np.ones((3, 4))])


def test_classifier_rejects_single_class_and_unseen_warm_classes(cls_data):
    X, y, _, _ = cls_data
    with pytest.raises(ValueError, match="single class"):
        DiagAttClassifier(**FAST).fit(X, np.zeros(len(X)))
    clf = DiagAttClassifier(warm_start=True, **FAST).fit(X, y)
    y3 = y.copy()
    y3[:5] = 2
    with pytest.raises(ValueError, match=r"y has classes \[0, 1, 2\]"):
        clf.fit(X, y3)


@pytest.mark.parametrize("param, value", [("n_heads", 0), ("temperature", -1.0), ("objective", "x"),
                                          ("learning_rate", 0.0), ("rank", 0), ("validation_fraction", 1.5),
                                          ("score_form", "cubic"), ("exclusive_heads", "yes"),
                                          ("value_refit", "yes")])
def test_bad_parameters(reg_data, param, value):
    X, y, _, _ = reg_data
    with pytest.raises(ValueError, match=param):
        DiagAttRegressor(**{**FAST, param: value}).fit(X, y)


# ----------------------------------------------------- targets and classes
def test_multi_target_regression(reg_data):
    X, y, _, _ = reg_data
    Y = np.column_stack([y, -2 * y + 1])
    est = DiagAttRegressor(**FAST).fit(X, Y)
    assert est.predict(X).shape == (len(X), 2)


def test_classifier_string_labels_and_multiclass(cls_data):
    X, y, _, _ = cls_data
    labels = np.array(["neg", "pos"])[y]
    clf = DiagAttClassifier(**FAST).fit(X, labels)
    assert set(clf.predict(X)) <= {"neg", "pos"}
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.decision_function(X).shape == (len(X),)
    multi = np.array(["a", "b", "c"])[np.arange(len(X)) % 3]
    clf3 = DiagAttClassifier(n_heads=2, **FAST).fit(X, multi)
    assert list(clf3.classes_) == ["a", "b", "c"]
    assert clf3.predict_proba(X).shape == (len(X), 3)
    assert clf3.decision_function(X).shape == (len(X), 3)


# ------------------------------------------------------------ training
def test_learns_to_localize_on_easy_data():
    from skdiagatt.datasets import make_individualized_regression

    X, y, rows, _ = make_individualized_regression(600, n_rows=10, n_features=6, random_state=4)
    est = DiagAttRegressor(max_iter=15, random_state=0).fit(X[:500], y[:500])
    # chance is 0.1; the Bayes localizer reaches 0.84 on these test samples
    assert crlr(rows[500:], est.localize(X[500:])) > 0.65
    assert est.score(X[500:], y[500:]) > 0.35


def test_classifier_learns_on_easy_data():
    from skdiagatt.datasets import make_individualized_classification

    X, y, rows, _ = make_individualized_classification(400, n_rows=10, n_features=6, random_state=5)
    clf = DiagAttClassifier(max_iter=15, random_state=0).fit(X[:300], y[:300])
    assert clf.score(X[300:], y[300:]) > 0.85
    assert crlr(rows[300:], clf.localize(X[300:])) > 0.8


def test_affine_score_tells_opposite_means_apart():
    """Signal rows ~ N(-mu, Sigma) among N(mu, Sigma): the quadratic form is even in x,
    so both kinds of row have the same distribution of quadratic scores.

    The log-likelihood ratio is linear here, so ``score_form="quadratic"`` is
    at chance while the affine score localizes.
    """
    from skdiagatt.datasets import make_individualized_regression

    X, y, rows, _ = make_individualized_regression(700, n_rows=8, n_features=5, signal=((-1.0, 1.0),),
                                                   random_state=3)
    tr, te = slice(0, 500), slice(500, None)
    kw = dict(max_iter=15, random_state=0)
    affine = DiagAttRegressor(score_form="affine", **kw).fit(X[tr], y[tr])
    quadratic = DiagAttRegressor(score_form="quadratic", **kw).fit(X[tr], y[tr])
    assert crlr(rows[te], affine.localize(X[te])) > 0.6
    assert crlr(rows[te], quadratic.localize(X[te])) < 0.35  # chance 0.125
    # linear_score_ is the score's linear part, in input coordinates.
    x = X[te][0].astype(float)
    psi = np.einsum("pa,ab,pb->p", x, affine.query_key_[0], x) + x @ affine.linear_score_[0]
    k = np.exp(psi - psi.max())
    np.testing.assert_allclose(affine.attention([x])[0][0], k / k.sum(), rtol=1e-4, atol=1e-6)
    assert not np.any(quadratic.linear_score_)


def test_exclusive_heads_split_the_rows_between_heads():
    """Rows around +m mu and -m mu: independent heads may both settle on one of them."""
    from skdiagatt.datasets import make_individualized_regression

    X, y, rows, _ = make_individualized_regression(900, n_rows=10, n_features=6, n_signal=2,
                                                   signal=((4, 2), (-4, 2)), random_state=3)
    tr, te = slice(0, 700), slice(700, None)
    # From uniform attention, so that the heads' competition alone separates them.
    kw = dict(n_heads=2, max_iter=15, init="zeros", random_state=0)
    plain = DiagAttRegressor(exclusive_heads=False, **kw).fit(X[tr], y[tr])
    excl = DiagAttRegressor(exclusive_heads=True, **kw).fit(X[tr], y[tr])
    # localize(): the arg-max row of each head, so both rows are found only
    # when the heads take one each.
    assert crlr(rows[te], excl.localize(X[te])) > 0.95
    assert crlr(rows[te], excl.localize(X[te])) > crlr(rows[te], plain.localize(X[te])) + 0.1
    assert excl.score(X[te], y[te]) > plain.score(X[te], y[te])


def test_exclusive_heads_change_nothing_with_one_head(reg_data):
    X, y, _, _ = reg_data
    plain = DiagAttRegressor(**FAST).fit(X, y)
    excl = DiagAttRegressor(exclusive_heads=True, **FAST).fit(X, y)
    np.testing.assert_array_equal(plain.predict(X), excl.predict(X))



def _mean_pooled_problem(seed=0, n=150):
    rng = np.random.RandomState(seed)
    X = [rng.randn(rng.randint(2, 8), 3) for _ in range(n)]
    y = np.array([int(x.mean(0) @ [1.5, -1.0, 0.5] + 0.3 * rng.randn() > 0) for x in X])
    return X, y


def test_value_refit_with_uniform_attention_is_logistic_regression_on_mean_pooled_rows():
    """A huge temperature makes the attention uniform: the refitted read-out is
    then L2-logistic regression on the mean-pooled (scaled, whitened) rows."""
    from sklearn.linear_model import LogisticRegression

    X, y = _mean_pooled_problem()
    av = 0.02
    clf = DiagAttClassifier(temperature=1e9, init="zeros", objective="attention", value_refit=True,
                            alpha_value=av, max_iter=2, random_state=0).fit(X, y)
    H = np.array([clf.input_scale_ * x.mean(0) @ clf.preconditioner_ for x in X])
    # scikit-learn minimises C sum(loss) + ||w||^2 / 2, ours mean(loss) + av ||V||^2.
    ref = LogisticRegression(C=1.0 / (2 * len(X) * av), tol=1e-10, max_iter=10_000).fit(H, y)
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(H), atol=2e-4)
    np.testing.assert_allclose(clf.params_["V"][0, :, 0], ref.coef_[0], rtol=1e-3, atol=1e-3)


def test_value_refit_reaches_the_minimum_of_the_readout_objective(reg_data):
    import jax

    from skdiagatt.diagatt._estimators import _pooled
    from skdiagatt.kernels.glm import readout_objective

    X, y, _, _ = reg_data
    plain = DiagAttRegressor(n_heads=2, alpha_value=0.01, **FAST).fit(X, y)
    refit = DiagAttRegressor(n_heads=2, alpha_value=0.01, value_refit=True, **FAST).fit(X, y)
    # Same scores (the refit comes after training), new read-out.
    np.testing.assert_array_equal(plain.query_key_, refit.query_key_)
    frozen = refit._frozen_fitted()
    samples = [np.asarray(x, np.float32) for x in X]
    # Jitted, one sample at a time: one program per length, not per operation.
    H = np.concatenate([np.asarray(_pooled(refit.params_, frozen, x[None], np.ones((1, len(x)), bool)))
                        for x in samples])
    Y = ((y[:, None] - refit.y_mean_) / refit.y_scale_).astype(np.float32)

    def objective(p):
        return readout_objective(p["V"], p["b"], H, Y, p["log_sigma"], 0.01, "gaussian")

    grads = jax.grad(objective)(refit.params_)
    assert max(float(np.max(np.abs(grads[k]))) for k in ("V", "b")) < 1e-4
    assert objective(refit.params_) < objective({**plain.params_})


def test_warm_start_with_other_score_form_is_refused(reg_data):
    X, y, _, _ = reg_data
    est = DiagAttRegressor(warm_start=True, **FAST).fit(X, y)
    with pytest.raises(ValueError, match="score_form"):
        est.set_params(score_form="quadratic").fit(X, y)


@pytest.mark.parametrize("kw", [dict(rank=2), dict(rank=2, symmetric=False), dict(objective="attention"),
                                dict(score_form="affine"), dict(score_form="affine", rank=2),
                                dict(whiten=False), dict(early_stopping=True, validation_fraction=0.25),
                                dict(n_heads=2, exclusive_heads=True),
                                dict(n_heads=2, value_refit=True, alpha_value=0.01)])
def test_options_fit_and_stay_finite(reg_data, kw):
    X, y, _, _ = reg_data
    est = DiagAttRegressor(**{**FAST, **kw}).fit(X, y)
    assert np.all(np.isfinite(est.predict(X)))
    assert np.all(np.isfinite(est.loss_curve_))
    assert est.n_iter_ == est.loss_curve_phase_.count("main") >= 1
    if kw.get("early_stopping"):
        assert len(est.validation_scores_) == len(est.loss_curve_)


def test_warm_start_continues(reg_data):
    X, y, _, _ = reg_data
    est = DiagAttRegressor(warm_start=True, **FAST).fit(X, y)
    first = {k: v.copy() for k, v in est.params_.items()}
    est.fit(X, y)
    assert not np.array_equal(first["W"], est.params_["W"])
    cold = DiagAttRegressor(**FAST).fit(X, y)
    np.testing.assert_array_equal(cold.params_["W"], first["W"])


def test_verbose_prints_progress(reg_data, capsys):
    X, y, _, _ = reg_data
    DiagAttRegressor(**{**FAST, "verbose": 1}).fit(X, y)
    out = capsys.readouterr().out
    assert "epoch 1/4" in out and "loss" in out and "calibration" in out


def test_second_fit_on_same_buckets_compiles_nothing(reg_data):
    X, y, _, _ = reg_data
    rng = np.random.RandomState(9)
    # New data, same bucket lengths and sample counts as the first fit.
    X2 = [x + 0.1 * rng.randn(*x.shape) for x in X]
    DiagAttRegressor(**FAST).fit(X, y).predict(X)
    steps, fwd = _testing.train_steps._cache_size(), _linear_predictor._cache_size()
    DiagAttRegressor(**FAST).fit(X2, y[::-1].copy()).predict(X2)
    assert _testing.train_steps._cache_size() == steps
    assert _linear_predictor._cache_size() == fwd


def test_more_steps_per_epoch_on_the_same_shapes_compile_nothing():
    # 260 and 280 samples are both stored as 288 (round_count), so the step
    # programs are the same; only the number of steps per epoch differs (17
    # and 18 with batches of 16).  Nothing else may compile (the epoch's losses
    # were once stacked on the device: one program per number of steps).
    rng = np.random.RandomState(0)
    X = rng.randn(280, 6, 3)
    y = X[:, 0, 0] + 0.1 * rng.randn(280)
    kw = dict(FAST, batch_size=16)
    DiagAttRegressor(**kw).fit(X[:260], y[:260])
    before = _testing.compile_count()
    DiagAttRegressor(**kw).fit(X, y)
    assert _testing.compile_count() == before


def test_query_key_and_linear_score_match_attention(fitted_reg, reg_data):
    # Independent heads: each head's weights are the softmax of its own scores.
    fitted_reg = clone(fitted_reg).set_params(exclusive_heads=False).fit(*reg_data[:2])
    x = reg_data[0][0].astype(float)
    Q = fitted_reg.query_key_
    psi = np.einsum("pa,rab,pb->rp", x, Q, x) + fitted_reg.linear_score_ @ x.T
    k = np.exp(psi - psi.max(axis=1, keepdims=True))
    k /= k.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(fitted_reg.attention([x])[0], k, rtol=1e-4, atol=1e-6)


def test_pickle_stores_a_format_version(fitted_reg):
    import skdiagatt._shared.base as base

    blob = pickle.dumps(fitted_reg)
    assert pickle.loads(blob).__dict__["_skdiagatt_format"] == base.FORMAT_VERSION
    state = fitted_reg.__getstate__()
    state["_skdiagatt_format"] = base.FORMAT_VERSION + 1
    fresh = DiagAttRegressor.__new__(DiagAttRegressor)
    with pytest.raises(ValueError, match="model format"):
        fresh.__setstate__(state)


def test_auto_budget_restarts_shrink_and_stop_once_a_restart_gains_within_noise(reg_data, monkeypatch):
    from skdiagatt._shared import phased

    calls = []

    def recording(*args, **kwargs):
        params, result = fit_loop(*args, **kwargs)
        calls.append((kwargs["max_iter"], kwargs["learning_rate"], result))
        return params, result

    fit_loop = phased.fit_loop
    monkeypatch.setattr(phased, "fit_loop", recording)
    X, y, _, _ = reg_data
    est = DiagAttRegressor(max_iter="auto", calibration_iter=0, tol=0.0, random_state=0).fit(X, y)
    epochs = [e for e, _, _ in calls]
    assert len(calls) >= 2  # tol=0: the first cycle's loss still falls at its end
    # Restarts are counted in steps, half those of the last, from half of _AUTO_STEPS.
    per_epoch = calls[0][2].steps // calls[0][2].n_iter
    assert epochs[1:] == [math.ceil(phased._AUTO_STEPS / 2**c / per_epoch) for c in range(1, len(calls))]
    assert [lr for _, lr, _ in calls] == [calls[0][1] * 0.5**c for c in range(len(calls))]
    assert est.n_iter_ == sum(epochs) <= 2 * epochs[0] + len(calls)  # ceil: an epoch each at most
    ends = [r.loss_curve[-1] for _, _, r in calls]
    gains = np.subtract(ends[:-1], ends[1:])
    # Every restart but the last gained more than the loss's standard error;
    # the last one either did not (and is marked so) or ran out of restarts.
    assert all(g >= r.loss_se for g, (_, _, r) in zip(gains[:-1], calls[1:-1]))
    last = calls[-1][2]
    assert last.loss_se > 0
    assert (gains[-1] < last.loss_se) == (last.stopped == "resolution")
    assert last.stopped == "resolution" or len(calls) == 7
