"""The packed row layout: every DiagAtt objective equals its padded form, gradients included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from skdiagatt._shared.ragged import make_blocks, make_buckets
from skdiagatt.kernels.diagatt import diagatt_forward, diagatt_loss, head_weights, pooled_rows
from skdiagatt.kernels.rows import PackedRows, row_log_softmax, row_logsumexp, row_softmax, row_total
from skdiagatt.kernels.softmax import masked_log_softmax, masked_logsumexp

RNG = np.random.RandomState(3)
LENGTHS = (3, 9, 1, 14, 6, 2, 5)
SAMPLES = [RNG.randn(p, 4).astype(np.float32) for p in LENGTHS]


def _packed(samples, C, slots=None, garbage=0.0):
    """The packed minibatch of all ``samples`` (slot i = sample i), plus ``slots - n`` empty slots."""
    b = make_blocks(samples, C)
    X = b.X.copy()
    X[~b.valid] = garbage
    K = b.first[-1]
    seg = np.repeat(np.arange(len(samples)), np.diff(b.first)).astype(np.int32)
    n = slots or len(samples)
    # Two blocks of padding at the end, owned by the last slot as in training.
    pad = np.full(2, n - 1, np.int32)
    rows = PackedRows(valid=jnp.asarray(np.concatenate([b.valid[:K], b.valid[-1:], b.valid[-1:]])),
                      seg=jnp.asarray(np.concatenate([seg, pad])), n=n)
    Xp = np.concatenate([X[:K], np.full((2,) + X.shape[1:], garbage, np.float32)])
    return jnp.asarray(Xp), rows


def _one_bucket(samples, garbage=0.0):
    L = max(s.shape[0] for s in samples)
    X = np.full((len(samples), L, samples[0].shape[1]), garbage, np.float32)
    where = np.zeros((len(samples), L), bool)
    for i, s in enumerate(samples):
        X[i, : s.shape[0]], where[i, : s.shape[0]] = s, True
    return jnp.asarray(X), jnp.asarray(where)


# Scores near 1e4 (large inputs, a low temperature): exp(scores - logsumexp)
# lost their last digits there, and the weights summed to 1 +- 5e-4.
@pytest.mark.parametrize("offset", [0.0, 1e4])
@pytest.mark.parametrize("C", [1, 2, 3])
def test_reductions_equal_the_masked_ones(C, offset):
    a = [(RNG.randn(2, p) * 5 + offset).astype(np.float32) for p in LENGTHS]   # R = 2 heads
    Xp, rows = _packed([x.T[:, :1].repeat(4, 1) for x in a], C)     # only the layout is used
    packed = np.zeros((rows.valid.shape[0], 2, C), np.float32)
    b = make_blocks([x.T for x in a], C)
    packed[: b.first[-1]] = np.transpose(b.X[: b.first[-1]], (0, 2, 1))
    dense = np.full((len(a), 2, max(LENGTHS)), 7e3, np.float32)
    where = np.zeros((len(a), max(LENGTHS)), bool)
    for i, x in enumerate(a):
        dense[i, :, : x.shape[1]], where[i, : x.shape[1]] = x, True
    mask = where[:, None, :]
    np.testing.assert_allclose(row_logsumexp(jnp.asarray(packed), rows),
                               masked_logsumexp(jnp.asarray(dense), mask), rtol=1e-6)
    got = np.asarray(row_log_softmax(jnp.asarray(packed), rows))
    ref = np.asarray(masked_log_softmax(jnp.asarray(dense), mask))
    for i, x in enumerate(a):
        blocks = got[b.first[i] : b.first[i + 1]]                   # (k, 2, C)
        flat = np.transpose(blocks, (1, 0, 2)).reshape(2, -1)[:, : x.shape[1]]
        np.testing.assert_allclose(flat, ref[i, :, : x.shape[1]], rtol=1e-5, atol=1e-6)
    k = row_softmax(jnp.asarray(packed), rows)
    np.testing.assert_allclose(row_total(k.sum(axis=2), rows), 1.0, rtol=1e-6)
    for i, x in enumerate(a):
        flat = np.transpose(np.asarray(k)[b.first[i] : b.first[i + 1]], (1, 0, 2)).reshape(2, -1)
        np.testing.assert_allclose(flat[:, : x.shape[1]], np.exp(ref[i, :, : x.shape[1]]), rtol=1e-5, atol=1e-6)
    assert float(jnp.max(jnp.where(rows.valid[:, None, :], 0.0, k))) == 0.0


def test_a_slot_without_blocks_is_finite_and_zero():
    Xp, rows = _packed(SAMPLES[:2], 2, slots=4)
    a = jnp.asarray(RNG.randn(rows.valid.shape[0], 1, 2).astype(np.float32))
    lse = row_logsumexp(a, rows)
    assert lse.shape == (4, 1) and np.all(np.isfinite(lse))
    assert float(lse[2, 0]) == 0.0
    g = jax.grad(lambda a: jnp.sum(row_logsumexp(a, rows)))(a)
    assert np.all(np.isfinite(g))


def _params(R, t, low_rank, affine, d=4):
    p = {"log_scale": RNG.randn(R).astype(np.float32) * 0.1, "V": RNG.randn(R, d, t).astype(np.float32),
         "b": RNG.randn(t).astype(np.float32), "log_sigma": RNG.randn(t).astype(np.float32) * 0.1}
    if low_rank:
        p["L"] = RNG.randn(R, d, 2).astype(np.float32) * 0.5
        p["M"] = RNG.randn(R, d, 2).astype(np.float32) * 0.5
    else:
        p["W"] = RNG.randn(R, d, d).astype(np.float32) * 0.3
    if affine:
        p["U"] = RNG.randn(R, d).astype(np.float32)
    S = np.eye(d, dtype=np.float32) + 0.1 * RNG.randn(d, d).astype(np.float32)
    frozen = {"S": (S + S.T) / 2, "inv_tau": np.float32(0.5), "x_scale": np.float32(0.7),
              "alpha": np.float32(0.01), "alpha_value": np.float32(0.001)}
    return p, frozen


def _targets(family, t, n):
    if family == "gaussian":
        return RNG.randn(n, t).astype(np.float32)
    if family == "bernoulli":
        return RNG.randint(0, 2, (n, 1)).astype(np.float32)
    return np.eye(t, dtype=np.float32)[RNG.randint(0, t, n)]


CASES = [
    ("latent", "gaussian", 1, 1, False, True, False),
    ("latent", "gaussian", 2, 2, False, True, True),
    ("latent", "bernoulli", 2, 1, True, False, False),
    ("latent", "categorical", 3, 3, False, True, True),
    ("attention", "gaussian", 2, 1, True, True, False),
    ("attention", "bernoulli", 1, 1, False, True, False),
    ("attention", "categorical", 2, 3, False, False, True),
]


# Compiled: differentiated op by op, the cases took 4-20 s each.
_loss_and_grad = jax.jit(jax.value_and_grad(diagatt_loss), static_argnums=3)


@pytest.mark.parametrize("objective, family, R, t, low_rank, affine, exclusive", CASES)
@pytest.mark.parametrize("C", [2, 5])
def test_packed_objective_and_gradient_equal_the_padded_ones(objective, family, R, t, low_rank, affine,
                                                              exclusive, C):
    p, frozen = _params(R, t, low_rank, affine)
    if exclusive:
        frozen["exclusion"] = np.float32(1.0)
    n = len(SAMPLES)
    y = _targets(family, t, n)
    w = np.r_[np.ones(n - 1), 0.5].astype(np.float32)
    X, where = _one_bucket(SAMPLES, garbage=1e3)           # garbage in the padded rows
    Xp, rows = _packed(SAMPLES, C, slots=n + 2, garbage=1e3)  # two filler slots (weight 0)
    padded = {"X": X, "where": where, "y": jnp.asarray(y), "w": jnp.asarray(w)}
    packed = {"X": Xp, "where": rows, "y": jnp.asarray(np.r_[y, y[:2]]), "w": jnp.asarray(np.r_[w, 0, 0])}
    config = (objective, family)
    ref, g_ref = _loss_and_grad(p, frozen, padded, config)
    got, g_got = _loss_and_grad(p, frozen, packed, config)
    np.testing.assert_allclose(got, ref, rtol=2e-5)
    for k in p:
        assert np.all(np.isfinite(g_got[k])), k
        np.testing.assert_allclose(g_got[k], g_ref[k], rtol=2e-4, atol=2e-5, err_msg=k)


def test_forward_weights_and_pooled_rows_equal_the_padded_ones():
    p, frozen = _params(2, 2, False, True)
    buckets = make_buckets(SAMPLES, one_bucket_rows=0)
    Xp, rows = _packed(SAMPLES, 2)
    z, kappa = diagatt_forward(p, frozen, Xp, rows)
    H = pooled_rows(p, frozen, Xp, rows)
    np.testing.assert_allclose(head_weights(p, frozen, Xp, rows), kappa, rtol=1e-6)
    b = make_blocks(SAMPLES, 2)
    for bucket in buckets.buckets:
        zb, kb = diagatt_forward(p, frozen, jnp.asarray(bucket.X), jnp.asarray(bucket.where))
        Hb = pooled_rows(p, frozen, jnp.asarray(bucket.X), jnp.asarray(bucket.where))
        for j, i in enumerate(bucket.index):
            np.testing.assert_allclose(z[i], zb[j], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(H[i], Hb[j], rtol=1e-5, atol=1e-5)
            k = np.transpose(np.asarray(kappa[b.first[i] : b.first[i + 1]]), (1, 0, 2)).reshape(2, -1)
            np.testing.assert_allclose(k[:, : LENGTHS[i]], kb[j][:, : LENGTHS[i]], rtol=1e-5, atol=1e-7)
