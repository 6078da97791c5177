"""``rank="auto"``: the full query-key matrix with its spectrum shrunk out of the noise bulk."""

import numpy as np
import pytest

from skdiagatt import DiagAttClassifier, DiagAttRegressor
from skdiagatt.datasets import make_individualized_regression
from skdiagatt.diagatt._spectrum import MIN_BULK, shrink_spectrum


def _spiked(d, thetas, sigma, seed):
    """``sum_k theta_k u_k u_k^T + E``, E symmetric with off-diagonal entries of variance sigma^2."""
    rng = np.random.RandomState(seed)
    U, _ = np.linalg.qr(rng.randn(d, len(thetas)))
    G = rng.randn(d, d) * sigma
    signal = (U * np.asarray(thetas)) @ U.T
    return signal, signal + (G + G.T) / np.sqrt(2)


def _bulk_removed(A):
    """``A - mu I``, ``mu`` its median eigenvalue: what the shrinkage keeps beside the isotropic part."""
    return A - np.median(np.linalg.eigvalsh(A)) * np.eye(len(A))


@pytest.mark.parametrize("seed", [0, 1])
def test_spikes_kept_bulk_dropped_and_error_reduced(seed):
    d, sigma = 100, 0.1  # edge 2 sigma sqrt(d) = 2
    signal, W = _spiked(d, [6.0, -4.0, 3.0], sigma, seed)
    shrunk, ranks = shrink_spectrum(W[None])
    assert ranks.tolist() == [3]
    np.testing.assert_allclose(shrunk[0], shrunk[0].T)
    assert np.linalg.matrix_rank(_bulk_removed(shrunk[0]), tol=1e-4) == 3
    # Shrinkage beats both the raw matrix and its plain rank-3 truncation.
    lam, U = np.linalg.eigh(W)
    top = np.argsort(-np.abs(lam))[:3]
    truncated = (U[:, top] * lam[top]) @ U[:, top].T
    error = lambda A: np.linalg.norm(A - signal)  # noqa: E731
    assert error(shrunk[0]) < error(truncated) < error(W)
    # The outliers sit near theta + R^2 / (4 theta) (R = 2); shrunk, near theta - R^2 / (4 theta).
    kept = np.linalg.eigvalsh(_bulk_removed(shrunk[0]))[[0, -2, -1]]
    assert np.all(np.abs(kept) < np.abs(lam[[0, -2, -1]]))
    np.testing.assert_allclose(kept, [-4 + 1 / 4, 3 - 1 / 3, 6 - 1 / 6], atol=0.5)


def test_noise_around_an_isotropic_part_is_shrunk_to_it():
    _, W = _spiked(80, [], 0.3, 0)
    shrunk, ranks = shrink_spectrum(np.stack([W, 2 * W + 0.5 * np.eye(80)]))
    assert ranks.max() <= 2 and ranks.shape == (2,)
    assert np.linalg.norm(shrunk[0]) < 0.1 * np.linalg.norm(W)
    assert np.linalg.norm(shrunk[1] - 0.5 * np.eye(80)) < 0.1 * np.linalg.norm(2 * W)


def test_small_matrices_are_left_as_trained():
    W = np.random.RandomState(0).randn(1, MIN_BULK - 1, MIN_BULK - 1)
    shrunk, ranks = shrink_spectrum(W)
    np.testing.assert_array_equal(shrunk, W.astype(np.float32))
    assert ranks.tolist() == [MIN_BULK - 1]


@pytest.fixture(scope="module")
def wide_rows():
    X, y, _, _ = make_individualized_regression(300, n_rows=12, n_features=24, random_state=0)
    return X, y


def test_auto_rank_shrinks_the_fitted_query_key_matrix(wide_rows):
    X, y = wide_rows
    auto = DiagAttRegressor(max_iter=5, random_state=0).fit(X, y)
    full = DiagAttRegressor(rank=None, max_iter=5, random_state=0).fit(X, y)
    assert auto.rank_.shape == (1,) and 1 <= auto.rank_[0] < 24
    assert full.rank_.tolist() == [24]
    W = np.asarray(auto.params_["W"][0])
    np.testing.assert_allclose(W, W.T, atol=1e-6)
    assert np.linalg.matrix_rank(_bulk_removed(W), tol=1e-5) == auto.rank_[0]
    assert np.linalg.matrix_rank(np.asarray(full.params_["W"][0]), tol=1e-5) == 24
    # The same fit to the bit, and finite predictions.
    again = DiagAttRegressor(max_iter=5, random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.predict(X), auto.predict(X))
    assert np.all(np.isfinite(auto.predict(X)))


def test_rank_reports_the_form_of_low_rank_and_incremental_fits(wide_rows):
    X, y = wide_rows
    assert DiagAttRegressor(rank=3, max_iter=2, random_state=0).fit(X, y).rank_.tolist() == [3]
    est = DiagAttClassifier(n_heads=2, random_state=0).partial_fit(X, (y > np.median(y)).astype(int),
                                                                    classes=[0, 1])
    assert est.rank_.tolist() == [24, 24]
