"""Tests for skdiagatt.kernels.cumulant: the log-mass form of the NTK-Attention state."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skdiagatt.kernels.attention import prefix_attention
from skdiagatt.kernels.cumulant import gaussian_cumulant_state, log_mass_dim, prefix_to_cumulant_state
from skdiagatt.kernels.features import feature_dim, taylor_features
from skdiagatt.kernels.ntk_attention import ntk_attention, prefix_to_state
from skdiagatt.kernels.ntk_readout import ntk_row_mass

B, L, D, H, DH, DV = 3, 6, 5, 2, 4, 3


def _problem(seed=0, shift=0.0, m=4000, w_scale=0.35):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(B, L, D)).astype(np.float32)
    where = np.ones((B, L), bool)
    where[1, 4:] = False
    where[2, 2:] = False
    P = (rng.normal(size=(m, D)) + shift).astype(np.float32)
    W_Q, W_K, W_V = (rng.normal(size=(H, D, n)).astype(np.float32) * w_scale for n in (DH, DH, DV))
    return X, where, P, W_Q, W_K, W_V


def _np_cumulant_attention(X, where, Z, k, W_Q, W_K, W_V, degree):
    """``(A V + exp(phi_2(q) . k) phi_g(q) Z) / (A 1 + exp(phi_2(q) . k))`` in float64, row by row."""
    out = np.zeros(X.shape[:2] + (H, DV))
    with jax.enable_x64(True):
        for b in range(B):
            rows = np.flatnonzero(where[b])
            Xb = X[b, rows].astype(np.float64)
            for h in range(H):
                Q, K, V = (Xb @ W[h].astype(np.float64) for W in (W_Q, W_K, W_V))
                A = np.exp(Q @ K.T / math.sqrt(DH))
                mass = np.exp(np.asarray(taylor_features(jnp.asarray(Q), 2)) @ np.asarray(k[h], np.float64))
                vbar = np.asarray(taylor_features(jnp.asarray(Q), degree)) @ np.asarray(Z[h], np.float64)
                out[b, rows, h] = (A @ V + mass[:, None] * vbar) / (A.sum(1) + mass)[:, None]
    return out


@pytest.mark.parametrize("degree", [1, 2])
def test_kernel_matches_its_definition(degree):
    X, where, P, W_Q, W_K, W_V = _problem(1, shift=1.0)
    Z, k = prefix_to_cumulant_state(jnp.asarray(P), W_K, W_V, degree)
    assert Z.shape == (H, feature_dim("cumulant", DH, degree), DV) and k.shape == (H, log_mass_dim(DH))
    out = np.asarray(ntk_attention(X, where, Z, k, W_Q, W_K, W_V, feature_map="cumulant", degree=degree))
    ref = _np_cumulant_attention(X, where, Z, k, W_Q, W_K, W_V, degree)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    assert np.all(out[~where] == 0)


def test_a_shifted_gaussian_prefix_is_reproduced_where_taylor_features_are_not():
    """Keys and values of a Gaussian prefix are jointly Gaussian: the second-order cumulant state is
    exact up to sampling, at any mean; exp's Taylor series about 0 is not."""
    X, where, P, W_Q, W_K, W_V = _problem(2, shift=2.0, m=20000, w_scale=0.5)
    exact = np.asarray(prefix_attention(X, where, jnp.asarray(P), W_Q, W_K, W_V))
    Z, k = prefix_to_cumulant_state(jnp.asarray(P), W_K, W_V, 1)
    cumulant = np.asarray(ntk_attention(X, where, Z, k, W_Q, W_K, W_V, feature_map="cumulant", degree=1))
    Zt, kt = prefix_to_state(jnp.asarray(P), W_K, W_V, degree=2)
    taylor = np.asarray(ntk_attention(X, where, Zt, kt, W_Q, W_K, W_V, degree=2))
    err_c, err_t = np.abs(cumulant - exact)[where].max(), np.abs(taylor - exact)[where].max()
    assert err_c < 0.05 * np.abs(exact[where]).max()
    assert err_c < err_t / 5


def test_gaussian_state_is_the_limit_of_drawn_prefixes():
    _, _, P, _, W_K, W_V = _problem(3, shift=0.5, m=200_000)
    mean = np.full(D, 0.5, np.float32)
    Zg, kg = gaussian_cumulant_state(jnp.asarray(W_K), jnp.asarray(W_V), math.log(P.shape[0]), mean, degree=2)
    Zp, kp = prefix_to_cumulant_state(jnp.asarray(P), W_K, W_V, 2)
    np.testing.assert_allclose(kp, kg, atol=0.02)
    np.testing.assert_allclose(Zp, Zg, atol=0.02)
    assert np.all(np.asarray(Zg)[:, 1 + DH:] == 0)  # higher-degree value rows start at zero


def test_finite_for_extreme_queries_and_states_and_row_mass_is_a_share():
    X, where, P, W_Q, W_K, W_V = _problem(4)
    Z, k = prefix_to_cumulant_state(jnp.asarray(P), W_K, W_V, 2)
    for Xs, ks in [(X * 1e3, k), (X, k * 1e4), (X, -k * 1e4), (X * 1e3, -k * 1e3)]:
        out = np.asarray(ntk_attention(Xs, where, Z, ks, W_Q, W_K, W_V, feature_map="cumulant", degree=2))
        assert np.all(np.isfinite(out))
    grad = jax.grad(lambda kk: jnp.sum(ntk_attention(X, where, Z, kk, W_Q, W_K, W_V, feature_map="cumulant")))(k)
    assert np.all(np.isfinite(np.asarray(grad))) and np.any(np.asarray(grad) != 0)
    params = {"Z": Z, "k": k, "W_out": jnp.ones((H * DV, 1)), "b": jnp.zeros(1)}
    frozen = {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "alpha_value": 0.0}
    mass = np.asarray(ntk_row_mass(params, frozen, X, where, ("cumulant", 2, False, "mean")))
    total = mass.sum(-1)
    assert np.all(mass >= 0) and np.all(total < 1) and np.all(total > 0)
    assert np.all(mass[np.broadcast_to(~where[:, None], mass.shape)] == 0)
