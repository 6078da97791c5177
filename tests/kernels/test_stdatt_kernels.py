"""Standard-attention kernels against float64 NumPy loops over unpadded samples."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from skdiagatt._shared.ragged import make_buckets
from skdiagatt.kernels import stdatt as K

# Jitted once here: run op by op, every jnp call would compile on its own.
log_received_attention = jax.jit(K.log_received_attention)
received_attention = jax.jit(K.received_attention)
stdatt_forward = jax.jit(K.stdatt_forward)
stdatt_weights = jax.jit(K.stdatt_weights)
stdatt_latent_loss = jax.jit(K.stdatt_latent_loss, static_argnames="family")
stdatt_attention_loss = jax.jit(K.stdatt_attention_loss, static_argnames="family")
stdatt_grad = jax.jit(jax.grad(K.stdatt_loss), static_argnames="config")

RNG = np.random.RandomState(0)
D = 4
SAMPLES = [RNG.randn(p, D).astype(np.float32) for p in (7, 5, 8, 3, 6)]
# Two buckets (lengths 4 and 8), both with padded rows: few shapes to compile.
BUCKETS = make_buckets(SAMPLES, one_bucket_rows=0)


def _params(R=2, t=1, e=3):
    p = {
        "W_Q": RNG.randn(R, D, e).astype(np.float32) * 0.6,
        "W_K": RNG.randn(R, D, e).astype(np.float32) * 0.6,
        "V": RNG.randn(R, D, t).astype(np.float32),
        "b": RNG.randn(t).astype(np.float32),
        "log_sigma": RNG.randn(t).astype(np.float32) * 0.1,
    }
    S = RNG.randn(D, D).astype(np.float32) * 0.2 + np.eye(D, dtype=np.float32)
    frozen = {"S": (S + S.T) / 2, "inv_scale": np.float32(1 / np.sqrt(D))}
    return p, frozen


def _ref(Xi, p, frozen):
    """float64: attention (R, p, p), received mass (R, p), prediction (t,), row values (R, p, t)."""
    S = frozen["S"].astype(float)
    Xs = Xi.astype(float) @ S
    A, rows = [], []
    for r in range(p["W_Q"].shape[0]):
        psi = (Xs @ p["W_Q"][r]) @ (Xs @ p["W_K"][r]).T * float(frozen["inv_scale"])
        A.append(softmax(psi, axis=1))
        rows.append(Xs @ p["V"][r].astype(float))
    A, rows = np.stack(A), np.stack(rows)
    m = A.mean(axis=1)
    z = p["b"] + np.einsum("rl,rlt->t", m, rows)
    return A, m, z, rows


def _each(fn):
    for b in BUCKETS.buckets:
        out = fn(jnp.asarray(b.X), jnp.asarray(b.where))
        for j, i in enumerate(b.index):
            yield i, SAMPLES[i].shape[0], jax.tree.map(lambda a: np.asarray(a)[j], out)


def test_weights_received_and_forward_match_numpy_loop():
    p, frozen = _params()
    for i, n_rows, (A, m, (z, m2)) in _each(
        lambda X, w: (
            stdatt_weights(p, frozen, X, w),
            received_attention(p, frozen, X, w),
            stdatt_forward(p, frozen, X, w),
        )
    ):
        A_ref, m_ref, z_ref, _ = _ref(SAMPLES[i], p, frozen)
        np.testing.assert_allclose(A[:, :n_rows, :n_rows], A_ref, rtol=1e-4, atol=1e-6)
        assert np.all(A[:, :, n_rows:] == 0) and np.all(A[:, n_rows:, :] == 0)
        np.testing.assert_allclose(m[:, :n_rows], m_ref, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(m, m2)
        np.testing.assert_allclose(z, z_ref, rtol=1e-4, atol=1e-4)


def test_narrow_and_wide_heads_give_the_same_scores():
    # key_dim <= d / 2 projects both sides, wider heads form S W_Q W_K^T S.
    p, frozen = _params(e=2)
    b = BUCKETS.buckets[-1]
    X, w = jnp.asarray(b.X), jnp.asarray(b.where)
    wide = {**p, "W_Q": np.concatenate([p["W_Q"], np.zeros_like(p["W_Q"])], axis=2),
            "W_K": np.concatenate([p["W_K"], np.zeros_like(p["W_K"])], axis=2)}
    np.testing.assert_allclose(stdatt_weights(p, frozen, X, w), stdatt_weights(wide, frozen, X, w),
                               rtol=1e-5, atol=1e-6)


def test_log_received_is_log_of_received():
    p, frozen = _params()
    for _, n_rows, (lm, m) in _each(
        lambda X, w: (log_received_attention(p, frozen, X, w), received_attention(p, frozen, X, w))
    ):
        np.testing.assert_allclose(np.exp(lm[:, :n_rows]), m[:, :n_rows], rtol=1e-4, atol=1e-7)
        assert np.all(lm[:, n_rows:] == -np.inf)


def _ref_latent(Xi, yi, p, frozen, family):
    _, m, _, rows = _ref(Xi, p, frozen)
    heads = np.einsum("rl,rlt->rt", m, rows)
    total = []
    for r in range(m.shape[0]):
        z = p["b"] + heads.sum(0) - heads[r] + rows[r]  # (p, t)
        if family == "gaussian":
            s = np.exp(p["log_sigma"].astype(float))
            ll = -0.5 * np.sum(((yi - z) / s) ** 2, axis=1) - np.sum(p["log_sigma"])
        else:
            ll = np.sum(yi * z - np.logaddexp(0, z), axis=1)
        total.append(logsumexp(np.log(m[r]) + ll))
    return -np.mean(total)


@pytest.mark.parametrize("family, t", [("gaussian", 2), ("bernoulli", 1)])
def test_losses_match_numpy_loop(family, t):
    p, frozen = _params(t=t)
    n = len(SAMPLES)
    Y = (RNG.randn(n, t) if family == "gaussian" else RNG.randint(0, 2, (n, 1))).astype(np.float32)
    for b in BUCKETS.buckets:
        args = (jnp.asarray(b.X), jnp.asarray(b.where), jnp.asarray(Y[b.index]))
        lat = np.asarray(stdatt_latent_loss(p, frozen, *args, family=family))
        att = np.asarray(stdatt_attention_loss(p, frozen, *args, family=family))
        for j, i in enumerate(b.index):
            np.testing.assert_allclose(lat[j], _ref_latent(SAMPLES[i], Y[i], p, frozen, family), rtol=1e-4, atol=1e-4)
            z = _ref(SAMPLES[i], p, frozen)[2]
            if family == "gaussian":
                ref = 0.5 * np.sum((Y[i] - z) ** 2)
            else:
                ref = -np.sum(Y[i] * z - np.logaddexp(0, z))
            np.testing.assert_allclose(att[j], ref, rtol=1e-4, atol=1e-4)


def test_padding_garbage_changes_nothing_and_gradients_stay_finite():
    p, frozen = _params()
    frozen = {**frozen, "alpha": np.float32(1e-3), "alpha_value": np.float32(0.0)}
    for b in BUCKETS.buckets[-1:]:
        garbage = np.where(b.where[..., None], b.X, 1e3).astype(np.float32)
        z1, m1 = stdatt_forward(p, frozen, jnp.asarray(b.X), jnp.asarray(b.where))
        z2, m2 = stdatt_forward(p, frozen, jnp.asarray(garbage), jnp.asarray(b.where))
        np.testing.assert_array_equal(np.asarray(z1), np.asarray(z2))
        np.testing.assert_array_equal(np.asarray(m1), np.asarray(m2))
        batch = {
            "X": jnp.asarray(garbage),
            "where": jnp.asarray(b.where),
            "y": jnp.ones((b.X.shape[0], 1)),
            "w": jnp.ones(b.X.shape[0]),
        }
        for objective in ("latent", "attention"):
            g = stdatt_grad(p, frozen, batch, config=(objective, "gaussian"))
            assert all(np.all(np.isfinite(np.asarray(v))) for v in g.values())


def test_received_attention_is_permutation_equivariant():
    p, frozen = _params()
    X = RNG.randn(1, 7, D).astype(np.float32)
    perm = RNG.permutation(7)
    where = jnp.ones((1, 7), bool)
    m = np.asarray(received_attention(p, frozen, jnp.asarray(X), where))
    mp = np.asarray(received_attention(p, frozen, jnp.asarray(X[:, perm]), where))
    np.testing.assert_allclose(mp, m[:, :, perm], rtol=1e-5, atol=1e-7)
