"""The empirical-Bayes start (a Gaussian mixture over the rows) and the signal structures."""

import numpy as np
import pytest

from skdiagatt import DiagAttClassifier, DiagAttRegressor
from skdiagatt._shared.whitening import preconditioner
from skdiagatt.bayes import bayes_localize, bayes_predict
from skdiagatt.datasets import (
    SIGNAL_STRUCTURES,
    make_individualized_classification,
    make_individualized_regression,
    make_structured_regression,
)
from skdiagatt.diagatt._mixture import row_scores, rows_mixture, signal_mixture, stacked_rows, supervised_mixture
from skdiagatt.metrics import crlr, rmse

FAST = dict(max_iter=4, calibration_iter=2, random_state=0)


def _mixture_rows(X, n_components=1, seed=0):
    """The rows each component of the mixture fitted on ``X`` ranks first, per sample."""
    c, S = preconditioner(X, True)
    A, a = signal_mixture(X, c, S, n_components, random_state=np.random.RandomState(seed))
    out = []
    for x in X:
        z = c * np.asarray(x, float) @ S
        scores = np.stack([np.sum((z @ Ak) * z, axis=1) + z @ ak for Ak, ak in zip(A, a)])
        out.append(scores.argmax(axis=1))
    return np.stack(out), A, a


def test_mixture_alone_localizes_like_bayes_without_targets():
    X, _, rows, truth = make_individualized_regression(300, n_rows=30, n_features=8, random_state=0)
    found, _, _ = _mixture_rows(X)
    assert crlr(rows, found) >= crlr(rows, bayes_localize(X, truth)) - 0.03


@pytest.mark.parametrize("structure", SIGNAL_STRUCTURES)
def test_mixture_finds_the_signal_of_other_structures(structure):
    X, _, rows, truth = make_structured_regression(400, structure, n_rows=30, n_features=8,
                                                   random_state=1)
    found, _, _ = _mixture_rows(X)
    assert crlr(rows, found) >= crlr(rows, bayes_localize(X, truth)) - 0.08


def test_mixture_of_the_isotropic_signal_is_isotropic():
    # Signal N(0, 2 I) against N(0, I): the log-likelihood ratio is |z|^2 / 4.
    rng = np.random.RandomState(0)
    X = [rng.standard_normal((20, 5)) for _ in range(500)]
    for x in X:
        x[rng.randint(20)] *= np.sqrt(2.0)
    _, A, a = _mixture_rows(X)
    assert np.allclose(A[0], 0.25 * np.eye(5), atol=0.06)
    assert np.abs(a).max() < 0.2


def test_mixture_is_reproducible_and_draws_at_most_max_samples():
    X, _, _, _ = make_individualized_regression(60, n_rows=10, n_features=4, random_state=0)
    c, S = preconditioner(X, True)
    one = signal_mixture(X, c, S, max_samples=20, random_state=np.random.RandomState(3))
    two = signal_mixture(X, c, S, max_samples=20, random_state=np.random.RandomState(3))
    assert all(np.array_equal(u, v) for u, v in zip(one, two))
    other = signal_mixture(X, c, S, max_samples=20, random_state=np.random.RandomState(4))
    assert not np.array_equal(one[0], other[0])


def test_quadratic_scores_start_without_a_linear_term():
    X, _, _, _ = make_individualized_regression(80, n_rows=10, n_features=4, random_state=0)
    c, S = preconditioner(X, True)
    _, a = signal_mixture(X, c, S, affine=False)
    assert not a.any()


def test_default_start_localizes_at_small_n_where_uniform_start_does_not():
    X, y, rows, truth = make_individualized_regression(600, n_rows=40, n_features=20,
                                                       random_state=0)
    tr, te = slice(0, 200), slice(200, None)
    est = DiagAttRegressor(random_state=0).fit(X[tr], y[tr])
    zeros = DiagAttRegressor(init="zeros", random_state=0).fit(X[tr], y[tr])
    bayes = crlr(rows[te], bayes_localize(X[te], truth))
    assert crlr(rows[te], est.localize(X[te])) >= bayes - 0.05
    assert crlr(rows[te], zeros.localize(X[te])) < bayes - 0.05
    assert rmse(y[te], est.predict(X[te])) <= 1.6 * rmse(y[te], bayes_predict(X[te], truth))


def test_classifier_start_localizes_at_small_n():
    X, y, rows, _ = make_individualized_classification(500, n_rows=40, n_features=20,
                                                       random_state=0)
    clf = DiagAttClassifier(random_state=0).fit(X[:200], y[:200])
    assert crlr(rows[200:], clf.localize(X[200:])) >= 0.95
    assert np.mean(clf.predict(X[200:]) == y[200:]) >= 0.95


@pytest.mark.parametrize("kw", [dict(rank=3), dict(rank=3, symmetric=False),
                                dict(score_form="quadratic"), dict(init="mixture", n_heads=2)])
def test_start_serves_every_parameterization(kw):
    X, y, rows, _ = make_individualized_regression(120, n_rows=12, n_features=5, random_state=0)
    est = DiagAttRegressor(**kw, **FAST).fit(X, y)
    assert np.isfinite(est.predict(X)).all()


def test_penalty_shrinks_towards_the_start():
    # A huge alpha keeps the score parameters where the start put them.
    X, y, _, _ = make_individualized_regression(100, n_rows=12, n_features=5, random_state=0)
    c, S = preconditioner(X, True)
    Y = ((y - y.mean()) / y.std())[:, None]
    kw = dict(init="mixture", max_iter=3, calibration_iter=0, random_state=0)
    est = DiagAttRegressor(alpha=1e4, **kw).fit(X, y)
    from skdiagatt._shared.sources import TrainingSet

    start = DiagAttRegressor(init="mixture")._start(
        {"W": np.zeros((1, 5, 5), np.float32), "U": np.zeros((1, 5), np.float32)},
        TrainingSet(X, Y, len(X), data=None, batch_size=None), c, S, np.random.RandomState(0))
    # Adam's steps leave a jitter of about the step size around the minimum.
    assert np.abs(start["W"]).max() > 0.5
    assert np.allclose(est.params_["W"], start["W"], atol=0.01)
    zeros = DiagAttRegressor(init="zeros", alpha=1e4, max_iter=3, calibration_iter=0,
                             random_state=0).fit(X, y)
    assert np.abs(zeros.params_["W"]).max() < 0.01
    assert (est.start_, zeros.start_) == ("mixture", "zeros")


def _two_kinds(n, seed=0, p=12, d=8):
    """Rows N(0, I) but two per sample: one shifted along e_0, one spread 3x; y from both."""
    rng = np.random.RandomState(seed)
    X, rows, y = [], [], []
    for _ in range(n):
        x = rng.standard_normal((p, d))
        i, j = rng.choice(p, 2, replace=False)
        x[i, 0] += 4.0
        x[j] *= 3.0
        X.append(x)
        rows.append([i, j])
        y.append(x[i, 1] - 2.0 * x[j, 2] + 0.1 * rng.standard_normal())
    return X, np.array(y), np.array(rows)


def test_several_heads_start_on_distinct_kinds_of_signal_row():
    X, _, rows = _two_kinds(400)
    c, S = preconditioner(X, True)
    A, a = signal_mixture(X, c, S, 2, random_state=np.random.RandomState(0))
    found = []
    for x in X:
        z = c * x @ S
        s = np.stack([np.sum((z @ Ak) * z, axis=1) + z @ ak for Ak, ak in zip(A, a)])
        # The heads' competition for rows (exclusive_heads), one step.
        k = np.exp(s - s.max(axis=1, keepdims=True))
        free = np.log(np.maximum(1.0 - k / k.sum(axis=1, keepdims=True), 1e-6))
        found.append(np.unique((s + free.sum(axis=0) - free).argmax(axis=1)))
    assert crlr(rows, found) >= 0.9
    heads = DiagAttRegressor(n_heads=2, **FAST).fit(X, _two_kinds(400)[1])
    assert heads.start_.startswith("mixture")
    assert crlr(rows, heads.localize(X)) >= 0.9


def test_conditional_logit_recovers_the_weights_of_a_softmax():
    from skdiagatt.diagatt._mixture import _conditional_logit, segment_softmax

    rng = np.random.RandomState(0)
    F = rng.standard_normal((2000, 3))
    starts = np.arange(0, 2000, 10)
    theta = np.array([1.5, -0.5, 0.25])
    target = segment_softmax((F @ theta)[:, None], starts)[:, 0]
    assert np.allclose(_conditional_logit(F, starts, target, 0), theta, atol=1e-4)


def test_unusual_rows_that_do_not_move_the_response_do_not_capture_the_start():
    # Each sample has one far-out row unrelated to y, and one signal row
    # moved along the response's direction, by which y moves.
    rng = np.random.RandomState(0)
    beta = rng.standard_normal(6)
    X, y, rows = [], [], []
    for _ in range(500):
        x = rng.standard_normal((15, 6))
        far, j = rng.choice(15, 2, replace=False)
        x[far] *= 5.0
        x[j] += rng.choice([-3.0, 3.0]) * beta / np.linalg.norm(beta)
        X.append(x)
        rows.append([j])
        y.append(x[j] @ beta + 0.1 * rng.standard_normal())
    y = np.array(y)
    tr, te = slice(0, 300), slice(300, None)
    est = DiagAttRegressor(**FAST).fit(X[tr], y[tr])
    mixture = DiagAttRegressor(init="mixture", **FAST).fit(X[tr], y[tr])
    assert not est.start_.startswith("mixture")
    assert crlr(rows[te], est.localize(X[te])) > crlr(rows[te], mixture.localize(X[te])) + 0.2
    assert est.score(X[te], y[te]) > mixture.score(X[te], y[te])


def test_evidence_readout_keeps_small_fits_at_least_as_good_as_the_mean():
    # Few samples for the rows' dimension and a response of pure noise: the
    # read-out shrinks to the mean instead of fitting the noise.
    rng = np.random.RandomState(0)
    X = [rng.standard_normal((10, 30)) for _ in range(240)]
    y = rng.standard_normal(240)
    tr, te = slice(0, 40), slice(40, None)
    est = DiagAttRegressor(random_state=0).fit(X[tr], y[tr])
    plain = DiagAttRegressor(alpha_value=0.0, random_state=0).fit(X[tr], y[tr])
    mean = rmse(y[te], np.full(200, y[tr].mean()))
    assert rmse(y[te], est.predict(X[te])) <= 1.05 * mean
    assert rmse(y[te], plain.predict(X[te])) > 1.05 * mean


def test_mixture_counts_a_weight_of_two_as_a_repeated_sample():
    X, _, _, _ = make_individualized_regression(150, n_rows=10, n_features=4, random_state=0)
    c, S = preconditioner(X, True)
    w = np.ones(150)
    w[:30] = 2.0
    weighted = signal_mixture(X, c, S, sample_weight=w)
    repeated = signal_mixture(list(X) + list(X[:30]), c, S)
    for u, v in zip(weighted, repeated):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-9)


def test_evidence_ridge_counts_a_weight_of_two_as_a_repeated_sample():
    from skdiagatt.diagatt._evidence import evidence_ridge

    rng = np.random.RandomState(0)
    H, Y = rng.standard_normal((50, 4)), rng.standard_normal((50, 2))
    w = np.ones(50)
    w[:10] = 2.0
    weighted = evidence_ridge(H, Y, w)
    repeated = evidence_ridge(np.concatenate([H, H[:10]]), np.concatenate([Y, Y[:10]]))
    for u, v in zip(weighted, repeated):
        assert np.allclose(u, v)


@pytest.mark.parametrize("value", ["automatic", -1.0, np.nan])
def test_bad_alpha_value_is_rejected(value):
    X, y, _, _ = make_individualized_regression(20, n_rows=5, n_features=3, random_state=0)
    with pytest.raises(ValueError, match="alpha_value"):
        DiagAttRegressor(alpha_value=value).fit(X, y)


def test_bad_init_is_rejected():
    X, y, _, _ = make_individualized_regression(20, n_rows=5, n_features=3, random_state=0)
    with pytest.raises(ValueError, match="init must be"):
        DiagAttRegressor(init="random").fit(X, y)


@pytest.mark.parametrize("structure", SIGNAL_STRUCTURES)
def test_structured_data_and_its_bayes_references(structure):
    X, y, rows, truth = make_structured_regression(300, structure, n_rows=(10, 20), n_features=6,
                                                   random_state=0)
    assert len(X) == 300 and rows.shape == (300, 1) and truth.structure == structure
    assert all(x.shape[1] == 6 for x in X)
    assert crlr(rows, bayes_localize(X, truth)) > 0.6
    assert rmse(y, bayes_predict(X, truth)) < y.std()
    again = make_structured_regression(300, structure, n_rows=(10, 20), n_features=6, random_state=0)
    assert np.array_equal(again[1], y)


@pytest.mark.parametrize("kw, match", [(dict(structure="wave"), "structure must be"),
                                       (dict(n_directions=0), "n_directions"),
                                       (dict(spread=0.0), "spread")])
def test_structured_regression_rejects_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        make_structured_regression(10, **kw)


def test_the_mixture_start_stays_unless_another_is_better_beyond_one_standard_error():
    from skdiagatt.diagatt._starts import _one_standard_error

    rng = np.random.RandomState(0)
    w = np.ones(200)
    base = rng.exponential(size=200)
    noise = 0.05 * rng.standard_normal(200)
    # Better by 0.001 on average, with differences of spread 0.05: within the noise.
    close = {"mixture x1": base + 0.001 + noise - noise.mean(), "response x3": base}
    assert _one_standard_error(close, w, ["mixture x1"]) == "mixture x1"
    far = {"mixture x1": base + 1.0 + noise, "response x3": base}
    assert _one_standard_error(far, w, ["mixture x1"]) == "response x3"
    broken = {"mixture x1": np.full(200, np.inf), "uniform": base}
    assert _one_standard_error(broken, w, ["mixture x1"]) == "uniform"


def _weak_location(n=2000):
    """A location signal too weak for the rows alone: its mixture finds a quarter of the rows, Bayes a half."""
    return make_structured_regression(n, "location", n_rows=20, n_features=30, shift=2.0, random_state=0)


def test_targets_lift_the_mixture_to_bayes_where_the_rows_alone_do_not():
    X, y, rows, truth = _weak_location()
    tr, te = slice(0, 1000), slice(1000, None)
    c, S = preconditioner(X[tr], True)
    Z, starts = stacked_rows(list(X[tr]), c, S)
    Y = ((y[tr] - y[tr].mean()) / y[tr].std())[:, None]
    rows_only = rows_mixture(Z, starts, np.ones(1000))
    with_targets = supervised_mixture(Z, starts, np.ones(1000), Y, rows_only)
    Zt, st = stacked_rows(list(X[te]), c, S)

    def found(mixture):
        s = row_scores(Zt, *mixture)[:, 0]
        return np.array([np.argmax(s[b:b + 20]) for b in st])[:, None]

    bayes = crlr(rows[te], bayes_localize(X[te], truth))
    assert crlr(rows[te], found(rows_only)) < bayes - 0.2
    assert crlr(rows[te], found(with_targets)) >= bayes - 0.03


def test_supervised_start_is_chosen_only_when_the_rows_leave_the_signal_uncertain():
    X, y, rows, _ = _weak_location()
    est = DiagAttRegressor(**FAST).fit(X[:1000], y[:1000])
    assert est.start_.startswith("supervised mixture")
    sharp, ys, _, _ = make_structured_regression(300, "location", n_rows=20, n_features=30, random_state=0)
    assert DiagAttRegressor(**FAST).fit(sharp, ys).start_.startswith("mixture")
