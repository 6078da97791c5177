"""Tests for skdiagatt.kernels.attention and .ntk_attention against float64 NumPy loops."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skdiagatt.kernels.attention import (
    attention_weights,
    key_attention_mass,
    plain_attention,
    prefix_attention,
    prefix_attention_streaming,
)
from skdiagatt.kernels.features import feature_dim, taylor_features, taylor_remainder_pointwise
from skdiagatt.kernels.ntk_attention import eq6_error, ntk_attention, prefix_to_state

B, L, D, H, DH, DV, M = 3, 6, 5, 2, 4, 3, 9


def _problem(seed=0, w_scale=0.25, m=M, dtype=np.float32):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(B, L, D))
    where = np.ones((B, L), bool)
    where[1, 4:] = False  # ragged: sample 1 has 4 rows, sample 2 has 2
    where[2, 2:] = False
    P = rng.normal(size=(m, D))
    W_Q = rng.normal(size=(H, D, DH)) * w_scale
    W_K = rng.normal(size=(H, D, DH)) * w_scale
    W_V = rng.normal(size=(H, D, DV))
    cast = lambda a: a.astype(dtype)  # noqa: E731
    return cast(X), where, cast(P), cast(W_Q), cast(W_K), cast(W_V)


def _np_prefix_attention(X, where, P, W_Q, W_K, W_V, causal=False):
    """Float64 loop over unpadded samples and heads: the definition itself."""
    X, P, W_Q, W_K, W_V = (np.asarray(a, np.float64) for a in (X, P, W_Q, W_K, W_V))
    out = np.zeros(X.shape[:2] + (W_V.shape[0], W_V.shape[-1]))
    m = P.shape[0]
    for b in range(X.shape[0]):
        rows = np.flatnonzero(where[b])
        Xb = X[b, rows]
        S = np.vstack([P, Xb])
        for h in range(W_Q.shape[0]):
            Q, K, V = Xb @ W_Q[h], S @ W_K[h], S @ W_V[h]
            for i in range(len(rows)):
                s = K @ Q[i] / math.sqrt(Q.shape[1])
                visible = np.ones(m + len(rows), bool)
                if causal:
                    visible[m + i + 1 :] = False
                e = np.exp(s[visible] - s[visible].max())
                out[b, rows[i], h] = e @ V[visible] / e.sum()
    return out


def _np_state(P, W_K, W_V, degree):
    with jax.enable_x64(True):
        Z, k = [], []
        for h in range(W_K.shape[0]):
            phi = np.asarray(taylor_features(jnp.asarray(np.asarray(P, np.float64) @ W_K[h]), degree))
            Z.append(phi.T @ (np.asarray(P, np.float64) @ W_V[h]))
            k.append(phi.sum(0))
    return np.stack(Z), np.stack(k)


def _garbage(X, where, value=1e3):
    return np.where(where[..., None], X, value).astype(X.dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_prefix_attention_matches_numpy(causal):
    X, where, P, W_Q, W_K, W_V = _problem(1)
    ref = _np_prefix_attention(X, where, P, W_Q, W_K, W_V, causal)
    out = prefix_attention(X, where, P, W_Q, W_K, W_V, causal=causal)
    assert out.shape == (B, L, H, DV) and out.dtype == jnp.float32
    np.testing.assert_allclose(out, ref, atol=2e-6, rtol=1e-5)
    stream = prefix_attention_streaming(X, where, P, W_Q, W_K, W_V, causal=causal, block_size=4)
    np.testing.assert_allclose(stream, ref, atol=2e-6, rtol=1e-5)
    plain = plain_attention(X, where, W_Q, W_K, W_V, causal=causal)
    np.testing.assert_allclose(plain, _np_prefix_attention(X, where, P[:0], W_Q, W_K, W_V, causal), atol=2e-6, rtol=1e-5)


def test_float64_kernels():
    X, where, P, W_Q, W_K, W_V = _problem(2, dtype=np.float64)
    ref = _np_prefix_attention(X, where, P, W_Q, W_K, W_V, causal=True)
    with jax.enable_x64(True):
        out = prefix_attention(X, where, P, W_Q, W_K, W_V, causal=True)
        Z, k = prefix_to_state(P, W_K, W_V, degree=2)
        ntk0 = ntk_attention(X, where, 0 * Z, 0 * k, W_Q, W_K, W_V, causal=True)
        assert out.dtype == jnp.float64 and Z.dtype == jnp.float64 and ntk0.dtype == jnp.float64
        plain = plain_attention(X, where, W_Q, W_K, W_V, causal=True)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(ntk0, plain, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_ntk_matches_prefix_up_to_truncation(degree):
    """|T_ntk - T_exact| must respect the term-wise Lagrange bound.

    With e_r the exact prefix weights and |e~_r - e_r| <= rho_r e_r
    (rho_r = relative Taylor remainder at t_r), the output error is at most
    (sum_r rho_r w_r |v_r| + |T| sum_r rho_r w_r) / (1 - sum_r rho_r w_r).
    """
    X, where, P, W_Q, W_K, W_V = _problem(3, w_scale=0.2, m=40)
    exact = _np_prefix_attention(X, where, P, W_Q, W_K, W_V)
    Z, k = prefix_to_state(P, W_K, W_V, degree=degree, block_size=16)
    Zn, kn = _np_state(P, W_K, W_V, degree)
    np.testing.assert_allclose(Z, Zn, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k, kn, rtol=1e-4, atol=1e-4)
    approx = np.asarray(ntk_attention(X, where, Z, k, W_Q, W_K, W_V, degree=degree))
    P64 = P.astype(np.float64)
    for b in range(B):
        rows = np.flatnonzero(where[b])
        Xb = X[b, rows].astype(np.float64)
        for h in range(H):
            Q = Xb @ W_Q[h]
            s_all = Q @ np.vstack([P64 @ W_K[h], Xb @ W_K[h]]).T / math.sqrt(DH)
            lse = np.log(np.exp(s_all).sum(1, keepdims=True))
            w_p = np.exp(s_all[:, : len(P)] - lse)
            rho = np.asarray(taylor_remainder_pointwise(s_all[:, : len(P)], degree))
            Vp = np.abs(P64 @ W_V[h])
            s0 = (rho * w_p).sum(1)
            assert np.all(s0 < 1)
            bound = ((rho * w_p) @ Vp + np.abs(exact[b, rows, h]) * s0[:, None]) / (1 - s0[:, None])
            err = np.abs(approx[b, rows, h] - exact[b, rows, h])
            assert np.all(err <= bound + 1e-5)
            assert np.all(bound < 0.3)  # the check is not vacuous
    # ...and a higher degree really is closer.
    if degree < 3:
        Z3, k3 = prefix_to_state(P, W_K, W_V, degree=3)
        better = ntk_attention(X, where, Z3, k3, W_Q, W_K, W_V, degree=3)
        assert np.abs(better - exact).max() < np.abs(approx - exact).max()


@pytest.mark.parametrize("causal", [False, True])
def test_zero_state_is_plain_attention(causal):
    X, where, _, W_Q, W_K, W_V = _problem(4)
    for fmap in ("taylor", "elu"):
        r = feature_dim(fmap, DH, 2)
        out = ntk_attention(
            X, where, jnp.zeros((H, r, DV)), jnp.zeros((H, r)), W_Q, W_K, W_V, feature_map=fmap, causal=causal
        )
        np.testing.assert_allclose(out, plain_attention(X, where, W_Q, W_K, W_V, causal=causal), rtol=1e-6, atol=1e-7)


def test_padding_invariance_with_garbage():
    X, where, P, W_Q, W_K, W_V = _problem(5)
    Xg = _garbage(X, where)
    Z, k = prefix_to_state(P, W_K, W_V, degree=2)
    for causal in (False, True):
        calls = [
            lambda A: prefix_attention(A, where, P, W_Q, W_K, W_V, causal=causal),
            lambda A: prefix_attention_streaming(A, where, P, W_Q, W_K, W_V, causal=causal, block_size=4),
            lambda A: ntk_attention(A, where, Z, k, W_Q, W_K, W_V, causal=causal),
            lambda A: ntk_attention(A, where, jnp.abs(Z[:, :DH]), jnp.abs(k[:, :DH]), W_Q, W_K, W_V, feature_map="elu", causal=causal),
            lambda A: attention_weights(A, where, W_Q, W_K, P=P, causal=causal),
        ]
        for f in calls:
            clean, dirty = np.asarray(f(X)), np.asarray(f(Xg))
            assert np.all(np.isfinite(dirty))
            np.testing.assert_array_equal(clean, dirty)
    # Padded output rows are exactly zero.
    out = ntk_attention(Xg, where, Z, k, W_Q, W_K, W_V)
    assert np.all(np.asarray(out)[~where] == 0)
    # A sample padded at the end equals the same sample alone, unpadded.
    alone = ntk_attention(X[2:3, :2], where[2:3, :2], Z, k, W_Q, W_K, W_V)
    np.testing.assert_allclose(out[2:3, :2], alone, rtol=1e-6, atol=1e-7)


def test_stability_huge_scores_float32():
    X, where, P, W_Q, W_K, W_V = _problem(6)
    Z, k = prefix_to_state(P, W_K, W_V, degree=2)
    Qb, Kb = W_Q * 90.0, W_K * 90.0  # scores reach ~1e4
    smax = max(np.abs((X[b] @ Qb[h]) @ (X[b] @ Kb[h]).T).max() for b in range(B) for h in range(H))
    assert smax / math.sqrt(DH) > 5e3
    for causal in (False, True):
        out = np.asarray(ntk_attention(X, where, Z, k, Qb, Kb, W_V, causal=causal))
        assert np.all(np.isfinite(out))
        zero = ntk_attention(X, where, 0 * Z, 0 * k, Qb, Kb, W_V, causal=causal)
        np.testing.assert_allclose(zero, _np_prefix_attention(X, where, P[:0], Qb, Kb, W_V, causal), atol=1e-4)
        exact = prefix_attention(X, where, P, Qb, Kb, W_V, causal=causal)
        np.testing.assert_allclose(exact, _np_prefix_attention(X, where, P, Qb, Kb, W_V, causal), atol=1e-4)
    # Very negative row maxima: every query is anti-aligned with every key, so
    # exp(-row_max) = exp(+1e4) would overflow; the prefix then dominates.
    rng = np.random.default_rng(7)
    Xa = (np.ones((B, L, D)) + 0.01 * rng.normal(size=(B, L, D))).astype(np.float32)
    Wa = rng.normal(size=(H, D, DH)).astype(np.float32) * 20
    for state in [(Z, k), (0 * Z, 0 * k)]:
        out = np.asarray(ntk_attention(Xa, where, state[0], state[1], Wa, -Wa, W_V))
        assert np.all(np.isfinite(out))
    zero_out = ntk_attention(Xa, where, 0 * Z, 0 * k, Wa, -Wa, W_V)
    np.testing.assert_allclose(zero_out, _np_prefix_attention(Xa, where, P[:0], Wa, -Wa, W_V), rtol=1e-4, atol=1e-5)
    # A tiny uniform prefix state must win against exp(-1e4) in-sample mass.
    r = Z.shape[1]
    zp = jnp.zeros((H, r, DV)).at[:, 0].set(1.0)
    kp = jnp.zeros((H, r)).at[:, 0].set(1e-3)  # phi_0 == 1: mass 1e-3, value 1e3
    out = np.asarray(ntk_attention(Xa, where, zp, kp, Wa, -Wa, W_V))
    np.testing.assert_allclose(out[where], 1e3, rtol=1e-5)
    assert np.all(np.isfinite(np.asarray(prefix_attention_streaming(Xa, where, P, Wa, -Wa, W_V))))


def test_negative_k_is_clamped_and_finite():
    X, where, P, W_Q, W_K, W_V = _problem(8)
    Z, k = prefix_to_state(P, W_K, W_V, degree=2)
    out = np.asarray(ntk_attention(X, where, Z, -k, W_Q, W_K, W_V))
    assert np.all(np.isfinite(out))
    # phi(q).(-k) < 0 everywhere here, so the clamp drops the prefix mass:
    # T = (A V + phi(Q) Z) / A 1, checked in float64.
    X64 = X.astype(np.float64)
    for b in range(B):
        rows = np.flatnonzero(where[b])
        for h in range(H):
            Q, K, V = (X64[b, rows] @ W[h] for W in (W_Q, W_K, W_V))
            A = np.exp(Q @ K.T / math.sqrt(DH))
            with jax.enable_x64(True):
                phi = np.asarray(taylor_features(jnp.asarray(Q), 2))
            assert np.all(phi @ -np.asarray(k[h], np.float64) < 0)
            ref = (A @ V + phi @ np.asarray(Z[h], np.float64)) / A.sum(1, keepdims=True)
            np.testing.assert_allclose(out[b, rows, h], ref, rtol=1e-4, atol=1e-5)
    # Random signed states with odd degree stay finite too.
    rng = np.random.default_rng(9)
    r1 = feature_dim("taylor", DH, 1)
    out = ntk_attention(X, where, rng.normal(size=(H, r1, DV)), rng.normal(size=(H, r1)) * 5, W_Q, W_K, W_V, degree=1)
    assert np.all(np.isfinite(np.asarray(out)))


def test_causal_ignores_future_rows():
    X, where, P, W_Q, W_K, W_V = _problem(10)
    Z, k = prefix_to_state(P, W_K, W_V, degree=2)
    X2 = X.copy()
    X2[:, 3:] += 5.0
    for f in (
        lambda A: ntk_attention(A, where, Z, k, W_Q, W_K, W_V, causal=True),
        lambda A: prefix_attention(A, where, P, W_Q, W_K, W_V, causal=True),
    ):
        a, b = np.asarray(f(X)), np.asarray(f(X2))
        np.testing.assert_array_equal(a[:, :3], b[:, :3])
        assert not np.allclose(a[0, 3:], b[0, 3:])
    w = np.asarray(attention_weights(X, where, W_Q, W_K, P=P, causal=True))
    assert np.all(w[..., M:][..., np.triu_indices(L, 1)[0], np.triu_indices(L, 1)[1]] == 0)


def test_multi_head_equals_single_heads():
    X, where, P, W_Q, W_K, W_V = _problem(11)
    Z, k = prefix_to_state(P, W_K, W_V, degree=2)
    full = ntk_attention(X, where, Z, k, W_Q, W_K, W_V)
    for h in range(H):
        sl = slice(h, h + 1)
        one = ntk_attention(X, where, Z[sl], k[sl], W_Q[sl], W_K[sl], W_V[sl])
        np.testing.assert_allclose(full[:, :, sl], one, rtol=1e-6, atol=1e-7)
        Zh, kh = prefix_to_state(P, W_K[sl], W_V[sl], degree=2)
        np.testing.assert_allclose(Zh, Z[sl], rtol=1e-6, atol=1e-6)


def test_state_block_size_invariance():
    _, _, P, _, W_K, W_V = _problem(12, m=37)
    Z1, k1 = prefix_to_state(P, W_K, W_V, degree=3, block_size=37)
    Z2, k2 = prefix_to_state(P, W_K, W_V, degree=3, block_size=5)
    np.testing.assert_allclose(Z1, Z2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k1, k2, rtol=1e-5, atol=1e-5)
    Ze, ke = prefix_to_state(P, W_K, W_V, feature_map="elu", block_size=8)
    assert Ze.shape == (H, DH, DV) and ke.shape == (H, DH)
    phi = np.asarray(jax.nn.elu(np.einsum("md,hde->hme", P, W_K) / DH**0.25) + 1)
    np.testing.assert_allclose(ke, phi.sum(1), rtol=1e-5)


def test_gradients_wrt_state_are_finite():
    X, where, P, W_Q, W_K, W_V = _problem(13)
    Z, k = prefix_to_state(P, W_K, W_V, degree=2)

    def loss(Z, k):
        return jnp.sum(ntk_attention(X, where, Z, k, W_Q, W_K, W_V, causal=True) ** 2)

    for state in [(Z, k), (0 * Z, 0 * k), (Z, -k), (-Z, k * 0 - 1e-30)]:
        gZ, gk = jax.grad(loss, argnums=(0, 1))(*state)
        assert np.all(np.isfinite(gZ)) and np.all(np.isfinite(gk))
    # The gradient is the true one: compare with a finite difference.
    gZ, gk = jax.grad(loss, argnums=(0, 1))(Z, k)
    with jax.enable_x64(True):
        args64 = [jnp.asarray(a, jnp.float64) for a in (X, Z, k, W_Q, W_K, W_V)]
        f = lambda kk: jnp.sum(ntk_attention(args64[0], where, args64[1], kk, *args64[3:], causal=True) ** 2)  # noqa: E731
        e = jnp.zeros_like(args64[2]).at[0, 1].set(1e-6)
        fd = (f(args64[2] + e) - f(args64[2] - e)) / 2e-6
    np.testing.assert_allclose(gk[0, 1], fd, rtol=1e-3, atol=1e-6)


def test_attention_weights_and_mass():
    X, where, P, W_Q, W_K, _ = _problem(14)
    w = np.asarray(attention_weights(X, where, W_Q, W_K))
    assert w.shape == (B, H, L, L)
    np.testing.assert_allclose(w.sum(-1)[where[:, None, :].repeat(H, 1)], 1, rtol=1e-6)
    assert np.all(w[~where[:, None, :, None].repeat(H, 1).repeat(L, 3)] == 0)
    assert np.all(w.transpose(0, 2, 1, 3)[np.broadcast_to(~where[:, None, None, :], (B, L, H, L))] == 0)
    mass = np.asarray(key_attention_mass(w, where))
    assert mass.shape == (B, H, L)
    np.testing.assert_allclose(mass.sum(-1), 1, rtol=1e-6)
    assert np.all(mass[np.broadcast_to(~where[:, None, :], mass.shape)] == 0)
    wp = np.asarray(attention_weights(X, where, W_Q, W_K, P=P))
    assert wp.shape == (B, H, L, M + L)
    assert np.all(np.asarray(key_attention_mass(wp, where)).sum(-1) < 1)


def test_eq6_error():
    rng = np.random.default_rng(15)
    T = rng.normal(size=(B, L, H, DV))
    R = rng.normal(size=(B, L, H, DV))
    s = np.array([1.0, 2.0, 4.0])
    expected = np.mean([np.sum((T[i] - R[i]) ** 2) / (L * H * DV) / s[i] for i in range(B)])
    assert float(eq6_error(T, R, s)) == pytest.approx(expected, rel=1e-5)
    where = np.ones((B, L), bool)
    where[0, 3:] = False
    T2 = T.copy()
    T2[0, 3:] = 1e3  # padded rows must not count
    expected = np.mean(
        [np.sum((T[0, :3] - R[0, :3]) ** 2) / (3 * H * DV) / s[0]]
        + [np.sum((T[i] - R[i]) ** 2) / (L * H * DV) / s[i] for i in (1, 2)]
    )
    assert float(eq6_error(T2, R, s, where=where)) == pytest.approx(expected, rel=1e-5)
