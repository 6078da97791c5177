"""Tests for skdiagatt.kernels.features (Taylor and elu feature maps)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skdiagatt.kernels.features import (
    apply_feature_map,
    elu_features,
    feature_dim,
    feature_map,
    taylor_feature_dim,
    taylor_features,
    taylor_products,
    taylor_remainder_bound,
    taylor_remainder_pointwise,
)


def _truncated_exp(t, degree):
    return sum(t**j / math.factorial(j) for j in range(degree + 1))


@pytest.mark.parametrize("d, degree", [(1, 4), (3, 1), (4, 2), (5, 3), (8, 2), (16, 3), (7, 0)])
def test_taylor_identity_float64(d, degree):
    # phi(q).phi(k) must be the truncated series itself, not an approximation.
    rng = np.random.default_rng(d * 10 + degree)
    q = rng.normal(size=(6, d))
    k = rng.normal(size=(6, d))
    with jax.enable_x64(True):
        pq = np.asarray(taylor_features(jnp.asarray(q), degree))
        pk = np.asarray(taylor_features(jnp.asarray(k), degree))
    assert pq.dtype == np.float64
    t = np.sum(q * k, axis=-1) / math.sqrt(d)
    np.testing.assert_allclose(np.sum(pq * pk, axis=-1), _truncated_exp(t, degree), rtol=1e-13, atol=1e-13)


def test_taylor_identity_all_pairs_and_scale():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(5, 6))
    k = rng.normal(size=(7, 6))
    with jax.enable_x64(True):
        pq = np.asarray(taylor_features(jnp.asarray(q), 3, scale=0.3))
        pk = np.asarray(taylor_features(jnp.asarray(k), 3, scale=0.3))
    np.testing.assert_allclose(pq @ pk.T, _truncated_exp(0.3 * q @ k.T, 3), rtol=1e-13)


@pytest.mark.parametrize("d, degree", [(1, 1), (2, 5), (4, 2), (10, 3), (64, 2), (64, 1), (5, 0)])
def test_feature_dim(d, degree):
    expected = math.comb(d + degree, degree)
    assert taylor_feature_dim(d, degree) == expected
    assert feature_dim("taylor", d, degree) == expected
    if d <= 10:
        assert taylor_features(jnp.ones((2, d)), degree).shape == (2, expected)


def test_monomials_are_deduplicated():
    # Distinct monomials are linearly independent functions: the feature
    # matrix of enough random points must have full column rank.
    rng = np.random.default_rng(2)
    d, degree = 4, 3
    x = rng.normal(size=(200, d))
    with jax.enable_x64(True):
        phi = np.asarray(taylor_features(jnp.asarray(x), degree))
    assert np.linalg.matrix_rank(phi) == taylor_feature_dim(d, degree)


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_truncation_error_within_lagrange_bound(degree):
    rng = np.random.default_rng(3)
    d = 8
    q = rng.normal(size=(50, d)) * 0.8
    k = rng.normal(size=(50, d)) * 0.8
    phi_q = np.asarray(taylor_features(jnp.asarray(q, jnp.float32), degree), np.float64)
    phi_k = np.asarray(taylor_features(jnp.asarray(k, jnp.float32), degree), np.float64)
    t = q @ k.T / math.sqrt(d)
    err = np.abs(phi_q @ phi_k.T - np.exp(t))
    pointwise = np.asarray(taylor_remainder_pointwise(t, degree, relative=False))
    assert np.all(err <= pointwise + 1e-5)
    rel = err / np.exp(t)
    assert np.all(rel <= np.asarray(taylor_remainder_pointwise(t, degree)) + 1e-5)
    uniform = taylor_remainder_bound(np.abs(t).max(), degree)
    assert err.max() <= uniform + 1e-5 and rel.max() <= uniform + 1e-5


def test_remainder_bound_values():
    assert taylor_remainder_bound(0.0, 2) == 0.0
    assert taylor_remainder_bound(1.0, 1) == pytest.approx(math.e / 2)
    assert taylor_remainder_bound(-0.5, 2) == pytest.approx(math.exp(0.5) * 0.5**3 / 6)
    np.testing.assert_allclose(
        taylor_remainder_bound(np.array([0.1, 0.2]), 3),
        np.exp([0.1, 0.2]) * np.array([0.1, 0.2]) ** 4 / 24,
    )
    # The uniform bound dominates every pointwise one on [-T, T].
    t = np.linspace(-1.5, 1.5, 101)
    for rel in (True, False):
        assert np.all(np.asarray(taylor_remainder_pointwise(t, 2, rel)) <= taylor_remainder_bound(1.5, 2) * (1 + 1e-6))


def test_elu_features_positive_and_shape():
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.normal(size=(3, 5, 16)) * 5, jnp.float32)
    phi = elu_features(x)
    assert phi.shape == x.shape and phi.dtype == jnp.float32
    assert bool(jnp.all(phi > 0))
    np.testing.assert_allclose(phi, jax.nn.elu(x / 16**0.25) + 1, rtol=1e-6)
    assert feature_dim("elu", 16) == 16


def test_dispatcher_and_dtype():
    x = jnp.ones((2, 3), jnp.float32)
    assert feature_map("taylor", 3)(x).shape == (2, taylor_feature_dim(3, 3))
    assert apply_feature_map(x, "elu").shape == (2, 3)
    assert apply_feature_map(x, "taylor", 2).dtype == jnp.float32
    with pytest.raises(ValueError, match="feature_map"):
        feature_map("relu")
    with pytest.raises(ValueError, match="feature_map"):
        feature_dim("relu", 3)


def test_taylor_features_jit_and_grad():
    f = jax.jit(taylor_features, static_argnames="degree")
    x = jnp.linspace(-1, 1, 12, dtype=jnp.float32).reshape(3, 4)
    np.testing.assert_allclose(f(x, degree=2), taylor_features(x, 2), rtol=1e-6)
    g = jax.grad(lambda z: jnp.sum(taylor_features(z, 3) ** 2))(x)
    assert bool(jnp.all(jnp.isfinite(g)))


def _features_float64(x, degree, scale):
    """Taylor features in float64 NumPy, straight from the definition: every monomial
    of degree <= g of sqrt(scale) x, weighted by 1 / sqrt(prod(counts!))."""
    import itertools

    xs = np.asarray(x, np.float64) * math.sqrt(scale)
    cols = [np.ones(xs.shape[:-1])]
    for j in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(xs.shape[-1]), j):
            counts = np.bincount(combo)
            w = 1.0 / math.sqrt(np.prod([math.factorial(c) for c in counts]))
            cols.append(w * np.prod(xs[..., list(combo)], axis=-1))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_taylor_products_are_the_features_times_the_state(degree):
    rng = np.random.default_rng(degree)
    d = 5
    x = rng.normal(size=(2, 3, d)).astype(np.float32)
    S = rng.normal(size=(taylor_feature_dim(d, degree), 4)).astype(np.float32)
    out, log_n = taylor_products(jnp.asarray(x), jnp.asarray(S), degree)
    assert out.shape == (2, 3, 4) and log_n.shape == (2, 3)
    ref = _features_float64(x, degree, 1 / math.sqrt(d)) @ S
    got = np.asarray(out, np.float64) * np.exp(np.asarray(log_n, np.float64))[..., None]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # The same products as the concatenated features of taylor_features.
    np.testing.assert_allclose(got, np.asarray(taylor_features(jnp.asarray(x), degree)) @ S, rtol=1e-4, atol=1e-4)


def test_taylor_products_stay_finite_where_the_features_overflow():
    rng = np.random.default_rng(7)
    d, degree = 6, 2
    x = 1e22 * rng.normal(size=(4, d))  # degree-2 monomials ~1e43: beyond float32
    S = rng.normal(size=(taylor_feature_dim(d, degree), 3))
    assert not np.all(np.isfinite(np.asarray(taylor_features(jnp.asarray(x, jnp.float32), degree))))
    out, log_n = taylor_products(jnp.asarray(x, jnp.float32), jnp.asarray(S, jnp.float32), degree)
    assert np.all(np.isfinite(np.asarray(out))) and np.all(np.isfinite(np.asarray(log_n)))
    ref = _features_float64(x, degree, 1 / math.sqrt(d)) @ S / np.exp(np.asarray(log_n, np.float64))[:, None]
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_taylor_products_gradient_in_the_state():
    rng = np.random.default_rng(3)
    d, degree = 4, 2
    x = jnp.asarray(rng.normal(size=(7, d)), jnp.float32)
    S = jnp.asarray(rng.normal(size=(taylor_feature_dim(d, degree), 2)), jnp.float32)

    def total(S):
        out, log_n = taylor_products(x, S, degree)
        return jnp.sum(out * jnp.exp(log_n)[:, None])

    # d/dS sum(phi(x) S) = phi(x)^T 1 in every column.
    expected = np.repeat(np.asarray(taylor_features(x, degree)).sum(0)[:, None], 2, axis=1)
    np.testing.assert_allclose(np.asarray(jax.grad(total)(S)), expected, rtol=1e-4, atol=1e-5)


def test_taylor_products_in_tiles_equal_the_whole_rows(monkeypatch):
    # Evaluated alone, many rows go through in tiles (padded, 4 here); under
    # differentiation they are taken whole. Both give the untiled numbers.
    from skdiagatt.kernels import features

    rng = np.random.default_rng(11)
    d, degree = 5, 2
    r = taylor_feature_dim(d, degree)
    x = jnp.asarray(3 * rng.normal(size=(2, 3, 47, d)), jnp.float32)  # heads, samples, rows
    S = jnp.asarray(rng.normal(size=(2, r, 4)), jnp.float32)

    def evaluate():
        # New functions each time: jit would reuse the first trace of the same ones.
        heads = jax.vmap(lambda x, S: taylor_products(x, S, degree))  # as ntk_attention maps them

        def total(S, x):
            out, log_n = heads(x, S)
            return jnp.sum(jnp.sin(out) * jnp.exp(log_n)[..., None])

        return jax.jit(heads)(x, S), jax.jit(jax.grad(total, argnums=(0, 1)))(S, x)

    whole = evaluate()
    monkeypatch.setattr(features, "_TILE_ELEMENTS", 40 * r)
    assert features._tile_rows(3 * 47, r) == 40
    tiled = evaluate()
    for a, b in zip(jax.tree.leaves(tiled), jax.tree.leaves(whole)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6 * float(jnp.max(jnp.abs(b))))
    ref = np.einsum("hbln,hnv->hblv", _features_float64(np.asarray(x), degree, 1 / math.sqrt(d)), np.asarray(S))
    got = np.asarray(tiled[0][0], np.float64) * np.exp(np.asarray(tiled[0][1], np.float64))[..., None]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
