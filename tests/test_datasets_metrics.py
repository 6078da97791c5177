import numpy as np
import pytest

from skdiagatt.bayes import bayes_localize, bayes_predict, bayes_predict_proba
from skdiagatt.datasets import make_individualized_classification, make_individualized_regression
from skdiagatt.metrics import crlr, rmse


def test_regression_simulator_shapes_and_truth():
    X, y, rows, truth = make_individualized_regression(50, n_rows=(3, 9), n_features=4, n_signal=2,
                                                       random_state=0)
    assert len(X) == 50 and y.shape == (50,) and rows.shape == (50, 2)
    assert all(3 <= x.shape[0] <= 9 and x.shape[1] == 4 for x in X)
    assert all(r[0] != r[1] for r in rows)
    assert truth.beta.shape == (2, 4) and truth.Sigma.shape == (4, 4)
    np.testing.assert_allclose(truth.Sigma[0, 2], 0.25)
    # y is the signal rows' read-out plus noise of sd 1
    signal = np.array([sum(X[i][rows[i, k]] @ truth.beta[k] for k in range(2)) for i in range(50)])
    resid = y - signal
    assert 0.6 < resid.std() < 1.4


def test_simulators_are_reproducible():
    a = make_individualized_regression(10, n_rows=5, n_features=3, random_state=3)
    b = make_individualized_regression(10, n_rows=5, n_features=3, random_state=3)
    np.testing.assert_array_equal(np.stack(a[0]), np.stack(b[0]))
    np.testing.assert_array_equal(a[1], b[1])


def test_signal_rows_follow_their_distribution():
    X, _, rows, truth = make_individualized_regression(4000, n_rows=5, n_features=3, random_state=1)
    act = np.stack([X[i][rows[i, 0]] for i in range(len(X))])
    np.testing.assert_allclose(act.mean(0), 2 * truth.mu, atol=0.1)
    np.testing.assert_allclose(np.cov(act.T), 2 * truth.Sigma, atol=0.2)
    mask = np.ones((4000, 5), bool)
    mask[np.arange(4000), rows[:, 0]] = False
    bg = np.stack(X)[mask]
    np.testing.assert_allclose(bg.mean(0), truth.mu, atol=0.05)


def test_classification_simulator():
    X, y, rows, truth = make_individualized_classification(2000, n_rows=4, n_features=3, random_state=0)
    assert set(np.unique(y)) == {0, 1} and 0.4 < y.mean() < 0.6
    act = np.stack([X[i][rows[i, 0]] for i in range(len(X))])
    np.testing.assert_allclose(act[y == 1].mean(0), 3 * truth.mu, atol=0.15)
    np.testing.assert_allclose(act[y == 0].mean(0), -3 * truth.mu, atol=0.15)


def test_bad_simulator_arguments():
    with pytest.raises(ValueError, match="n_rows"):
        make_individualized_regression(5, n_rows=(4, 2))
    with pytest.raises(ValueError, match="signal"):
        make_individualized_regression(5, n_signal=4)
    with pytest.raises(ValueError, match="fewer than n_signal"):
        make_individualized_regression(5, n_rows=1, n_signal=2)


def test_crlr_and_rmse():
    assert crlr([[1], [2]], [[1], [0, 2]]) == 1.0
    assert crlr([[1, 2]], [[2]]) == 0.5
    assert crlr(np.array([[0], [1]]), [np.array([3]), np.array([1])]) == 0.5
    with pytest.raises(ValueError, match="samples"):
        crlr([[1]], [[1], [2]])
    assert rmse([1.0, 1.0], [0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="shapes"):
        rmse([1.0], [1.0, 2.0])


def test_bayes_references_beat_chance_and_match_theory():
    X, y, rows, truth = make_individualized_regression(300, n_rows=20, n_features=20, random_state=0)
    assert crlr(rows, bayes_localize(X, truth)) > 0.8
    # The Bayes predictor is better than predicting the mean, worse than the noise floor.
    err = rmse(y, bayes_predict(X, truth))
    assert truth.noise * 0.8 < err < y.std()
    X, y, rows, truth = make_individualized_regression(200, n_rows=20, n_features=20, n_signal=2,
                                                       random_state=0)
    loc = bayes_localize(X, truth)
    assert np.all(loc[:, 0] != loc[:, 1])
    assert crlr(rows, loc) > 0.9
    Xc, yc, rc, tc = make_individualized_classification(300, n_rows=20, n_features=10, random_state=0)
    assert np.mean((bayes_predict_proba(Xc, tc) > 0.5) == yc) > 0.95
    assert crlr(rc, bayes_localize(Xc, tc)) > 0.95
