"""The closed-form state of a Gaussian prefix against drawn prefixes."""

import jax.numpy as jnp
import numpy as np
import pytest

from skdiagatt.kernels.ntk_attention import prefix_to_state
from skdiagatt.kernels.prefix_moments import gaussian_prefix_state, taylor_gaussian_moments


def _per_row_state(P, W_K, W_V, feature_map, degree):
    """phi(k) v^T and phi(k) of every row, float64: (m, H, r, d_v + 1)."""
    from skdiagatt.kernels.features import feature_map as fmap

    phi = np.asarray(fmap(feature_map, degree)(jnp.asarray(np.einsum("md,hde->mhe", P, W_K), jnp.float32)),
                     np.float64)
    v = np.einsum("md,hde->mhe", P, W_V)
    v = np.concatenate([v, np.ones(v.shape[:2] + (1,))], axis=-1)
    return phi[..., None] * v[:, :, None, :]


@pytest.mark.parametrize("feature_map, degree", [("taylor", 1), ("taylor", 2), ("taylor", 3), ("elu", 2)])
@pytest.mark.parametrize("shift", [0.0, 0.7])
def test_expectation_is_the_limit_of_the_empirical_mean(feature_map, degree, shift):
    """The empirical mean of drawn rows lies within 5 standard errors of the closed form."""
    rng = np.random.RandomState(0)
    d, m = 5, 50_000
    W_K, W_V = 0.6 * rng.randn(2, d, 3), rng.randn(2, d, 2)
    mean = shift * rng.randn(d)
    Z, k = gaussian_prefix_state(jnp.asarray(W_K, jnp.float32), jnp.asarray(W_V, jnp.float32),
                                 jnp.asarray(mean, jnp.float32), feature_map=feature_map, degree=degree)
    exact = np.concatenate([np.asarray(Z), np.asarray(k)[..., None]], axis=-1)
    rows = _per_row_state(rng.randn(m, d) + mean, W_K, W_V, feature_map, degree)
    se = rows.std(0) / np.sqrt(m)
    assert np.all(np.abs(rows.mean(0) - exact) <= 5 * se + 1e-4 * (1 + np.abs(exact)))
    assert np.abs(rows.mean(0) - exact).max() > 0  # a real comparison, not two copies


def test_gaussian_moments_are_isserlis():
    """Fourth moments of a correlated zero-mean Gaussian: E[x0^2 x1^2] = s00 s11 + 2 s01^2."""
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    M = np.asarray(taylor_gaussian_moments(jnp.zeros(2), jnp.asarray(cov), 4))
    # Degree-4 monomials in order: x0^4, x0^3 x1, x0^2 x1^2, x0 x1^3, x1^4 (after 1 + 2 + 3 + 4 lower ones).
    np.testing.assert_allclose(M[10:], [3 * 4.0, 3 * 2.0 * 0.5, 2.0 + 2 * 0.25, 3 * 0.5, 3.0], rtol=1e-6)
    np.testing.assert_allclose(M[6:10], 0.0, atol=1e-7)  # odd moments vanish


def test_sum_of_prefix_to_state_rows_matches_the_closed_form_in_scale():
    """Eq. 4 sums m rows: its state divided by m approaches the per-row expectation."""
    rng = np.random.RandomState(1)
    W_K = jnp.asarray(0.4 * rng.randn(1, 4, 2), jnp.float32)
    W_V = jnp.asarray(rng.randn(1, 4, 2), jnp.float32)
    Z, k = gaussian_prefix_state(W_K, W_V)
    errors = []
    for m in (1_000, 100_000):
        Zm, km = prefix_to_state(jnp.asarray(rng.randn(m, 4), jnp.float32), W_K, W_V)
        errors.append(float(jnp.abs(Zm / m - Z).max() + jnp.abs(km / m - k).max()))
    assert errors[1] < errors[0] / 3  # the 1 / sqrt(m) fluctuation: a tenth at 100x the rows
