"""DiagAtt kernels against float64 NumPy loops over unpadded samples."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import logsumexp

from skdiagatt._shared.ragged import make_buckets
from skdiagatt.kernels._matmul import einsum
from skdiagatt.kernels.diagatt import (
    attention_loss,
    diagatt_forward,
    latent_row_loss,
    query_key,
)
from skdiagatt.kernels.losses import bernoulli_loglik, categorical_loglik, gaussian_loglik
from skdiagatt.kernels.scores import diag_scores, diag_scores_and_values, linear_scores, lowrank_scores
from tests.conftest import numpy_diagatt

RNG = np.random.RandomState(0)
SAMPLES = [RNG.randn(p, 4).astype(np.float32) for p in (3, 9, 1, 14, 6)]


def _padded():
    b = make_buckets(SAMPLES, one_bucket_rows=0)
    return b


def test_diag_scores_full_and_low_rank():
    X = RNG.randn(2, 5, 4).astype(np.float32)
    W = RNG.randn(3, 4, 4).astype(np.float32)
    ref = np.einsum("nla,rac,nlc->nrl", X.astype(float), W.astype(float), X.astype(float))
    np.testing.assert_allclose(diag_scores(jnp.asarray(X), jnp.asarray(W)), ref, rtol=1e-4, atol=1e-4)
    L = RNG.randn(3, 4, 2).astype(np.float32)
    M = RNG.randn(3, 4, 2).astype(np.float32)
    for right in (None, M):
        Wl = np.einsum("raq,rbq->rab", L, L if right is None else right).astype(float)
        ref = np.einsum("nla,rac,nlc->nrl", X.astype(float), Wl, X.astype(float))
        got = lowrank_scores(jnp.asarray(X), jnp.asarray(L), None if right is None else jnp.asarray(M))
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_affine_scores_add_the_linear_term_in_the_values_matmul():
    X = RNG.randn(2, 5, 4).astype(np.float32)
    W = RNG.randn(3, 4, 4).astype(np.float32)
    V = RNG.randn(3, 4, 2).astype(np.float32)
    U = RNG.randn(3, 4).astype(np.float32)
    ref = np.einsum("nla,rac,nlc->nrl", X.astype(float), W.astype(float), X.astype(float))
    ref = ref + np.einsum("nla,ra->nrl", X.astype(float), U.astype(float))
    Xj = jnp.asarray(X)
    np.testing.assert_allclose(diag_scores(Xj, jnp.asarray(W)) + linear_scores(Xj, jnp.asarray(U)),
                               ref, rtol=1e-4, atol=1e-4)
    psi, values = diag_scores_and_values(Xj, jnp.asarray(V), W=jnp.asarray(W), U=jnp.asarray(U))
    np.testing.assert_allclose(psi, ref, rtol=1e-4, atol=1e-4)
    _, plain = diag_scores_and_values(Xj, jnp.asarray(V), W=jnp.asarray(W))
    # The same values to float32 rounding: how XLA orders the fused sums varies with the CPU.
    np.testing.assert_allclose(values, plain, rtol=1e-5, atol=1e-6)



@pytest.mark.parametrize("R, affine", [(1, False), (1, True), (3, True)])
def test_scores_and_values_gradient_matches_autodiff_of_the_formula(R, affine):
    # The kernel has a hand-written backward pass (one matmul for all
    # parameter gradients); every cotangent, X's included, must equal the
    # derivative JAX takes of the plain formula.
    import jax

    X = jnp.asarray(RNG.randn(3, 5, 4), jnp.float32)
    W = jnp.asarray(RNG.randn(R, 4, 4), jnp.float32)
    V = jnp.asarray(RNG.randn(R, 4, 2), jnp.float32)
    U = jnp.asarray(RNG.randn(R, 4), jnp.float32) if affine else None
    gp = jnp.asarray(RNG.randn(3, R, 5), jnp.float32)
    gv = jnp.asarray(RNG.randn(3, R, 5, 2), jnp.float32)

    def formula(X, W, V, U):  # at float32 precision, as the kernel (TF32 on a GPU otherwise)
        psi = einsum("bla,rac,blc->brl", X, W, X)
        if U is not None:
            psi = psi + einsum("bla,ra->brl", X, U)
        return psi, einsum("bla,rat->brlt", X, V)

    def kernel(X, W, V, U):
        return diag_scores_and_values(X, V, W=W, U=U)

    def objective(f):
        return lambda *a: sum(jnp.sum(o * g) for o, g in zip(f(*a), (gp, gv)))

    argnums = (0, 1, 2, 3) if affine else (0, 1, 2)
    want = jax.grad(objective(formula), argnums)(X, W, V, U)
    got = jax.grad(objective(kernel), argnums)(X, W, V, U)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)

def _params(R=2, t=1, d=4, low_rank=False, affine=False):
    p = {
        "log_scale": RNG.randn(R).astype(np.float32) * 0.1,
        "V": RNG.randn(R, d, t).astype(np.float32),
        "b": RNG.randn(t).astype(np.float32),
        "log_sigma": RNG.randn(t).astype(np.float32) * 0.1,
    }
    if low_rank:
        p["L"] = RNG.randn(R, d, 2).astype(np.float32) * 0.5
    else:
        p["W"] = RNG.randn(R, d, d).astype(np.float32) * 0.3
    if affine:
        p["U"] = RNG.randn(R, d).astype(np.float32)
    S = RNG.randn(d, d).astype(np.float32) * 0.2 + np.eye(d, dtype=np.float32)
    S = (S + S.T) / 2
    frozen = {"S": S, "inv_tau": np.float32(0.5), "x_scale": np.float32(0.7)}
    return p, frozen


def _effective(p, frozen):
    Q = np.asarray(query_key(p, frozen["S"]), np.float64)
    c = float(frozen["x_scale"])
    Q = Q * (c * c * frozen["inv_tau"] * np.exp(p["log_scale"]))[:, None, None]
    V = c * np.einsum("ab,rbt->rat", frozen["S"], p["V"]).astype(np.float64)
    lin = None
    if "U" in p:
        lin = (c * frozen["inv_tau"] * np.exp(p["log_scale"]))[:, None] * (p["U"] @ frozen["S"])
    return Q, V, lin


@pytest.mark.parametrize("low_rank, affine", [(False, False), (True, False), (False, True), (True, True)])
def test_forward_matches_numpy_loop(low_rank, affine):
    p, frozen = _params(low_rank=low_rank, affine=affine)
    Q, V, lin = _effective(p, frozen)
    ref_z, ref_k = numpy_diagatt(SAMPLES, Q, V, p["b"].astype(float), lin)
    for bucket in _padded().buckets:
        z, k = diagatt_forward(p, frozen, jnp.asarray(bucket.X), jnp.asarray(bucket.where))
        for j, i in enumerate(bucket.index):
            n_rows = SAMPLES[i].shape[0]
            np.testing.assert_allclose(z[j], ref_z[i], rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(k[j][:, :n_rows], ref_k[i], rtol=1e-4, atol=1e-6)


def _ref_competing(psi, exclusion):
    """Scores (R, p) of heads competing for rows, float64."""
    if not exclusion:
        return psi
    k = np.exp(psi - logsumexp(psi, axis=1, keepdims=True))
    free = np.log(np.maximum(1.0 - k, 1e-6))
    return psi + exclusion * (free.sum(0, keepdims=True) - free)


def _ref_latent(Xi, yi, Q, V, b, log_sigma, family, exclusion=0.0):
    Xi = Xi.astype(np.float64)
    psi = _ref_competing(np.einsum("pa,rab,pb->rp", Xi, Q, Xi), exclusion)
    logk = psi - logsumexp(psi, axis=1, keepdims=True)
    k = np.exp(logk)
    heads = np.stack([k[r] @ Xi @ V[r] for r in range(Q.shape[0])])  # (R, t)
    total = []
    for r in range(Q.shape[0]):
        others = heads.sum(0) - heads[r]
        z = b + others + Xi @ V[r]  # (p, t)
        if family == "gaussian":
            s = np.exp(log_sigma)
            ll = -0.5 * np.sum(((yi - z) / s) ** 2, axis=1) - np.sum(log_sigma)
        elif family == "bernoulli":
            ll = np.sum(yi * z - np.logaddexp(0, z), axis=1)
        else:
            ll = np.sum(yi * (z - logsumexp(z, axis=1, keepdims=True)), axis=1)
        total.append(logsumexp(logk[r] + ll))
    return -np.mean(total)


@pytest.mark.parametrize("family, t, exclusion", [("gaussian", 2, 0.0), ("bernoulli", 1, 0.0),
                                                  ("categorical", 3, 0.0), ("gaussian", 2, 1.0)])
def test_latent_row_loss_matches_numpy_loop(family, t, exclusion):
    p, frozen = _params(t=t)
    if exclusion:
        frozen["exclusion"] = np.float32(exclusion)
    Q, V, _ = _effective(p, frozen)
    n = len(SAMPLES)
    if family == "gaussian":
        Y = RNG.randn(n, t).astype(np.float32)
    elif family == "bernoulli":
        Y = RNG.randint(0, 2, size=(n, 1)).astype(np.float32)
    else:
        Y = np.eye(t, dtype=np.float32)[RNG.randint(0, t, size=n)]
    for bucket in _padded().buckets:
        got = latent_row_loss(
            p, frozen, jnp.asarray(bucket.X), jnp.asarray(bucket.where), jnp.asarray(Y[bucket.index]), family
        )
        for j, i in enumerate(bucket.index):
            ref = _ref_latent(SAMPLES[i], Y[i], Q, V, p["b"], p["log_sigma"], family, exclusion)
            np.testing.assert_allclose(got[j], ref, rtol=1e-4, atol=1e-4)


def test_attention_loss_is_half_squared_error():
    p, frozen = _params(t=1)
    Q, V, _ = _effective(p, frozen)
    ref_z, _ = numpy_diagatt(SAMPLES, Q, V, p["b"].astype(float))
    Y = RNG.randn(len(SAMPLES), 1).astype(np.float32)
    for bucket in _padded().buckets:
        got = attention_loss(p, frozen, jnp.asarray(bucket.X), jnp.asarray(bucket.where), jnp.asarray(Y[bucket.index]), "gaussian")
        np.testing.assert_allclose(got, 0.5 * np.sum((Y[bucket.index] - ref_z[bucket.index]) ** 2, axis=1), rtol=1e-4, atol=1e-5)


def test_logliks():
    z = np.array([[0.3, -1.2], [2.0, 0.1]], np.float32)
    y = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    ref = np.sum(y * (z - logsumexp(z, axis=1, keepdims=True)), axis=1)
    np.testing.assert_allclose(categorical_loglik(y, z), ref, rtol=1e-6)
    zb = np.array([[0.3], [-2.0]], np.float32)
    yb = np.array([[1.0], [0.0]], np.float32)
    ref = np.log(1 / (1 + np.exp(-0.3))) + np.log(1 - 1 / (1 + np.exp(2.0)))
    np.testing.assert_allclose(np.sum(bernoulli_loglik(yb, zb)), ref, rtol=1e-6)
    np.testing.assert_allclose(
        gaussian_loglik(np.float32(1.0)[None], np.float32(3.0)[None], np.log(np.float32([2.0]))),
        -0.5 - np.log(2.0), rtol=1e-6,
    )


@pytest.mark.parametrize("exclusion", [None, 1.0])
def test_padding_garbage_changes_nothing(exclusion):
    p, frozen = _params()
    if exclusion:
        frozen["exclusion"] = np.float32(exclusion)
    for bucket in _padded().buckets:
        X = np.where(bucket.where[..., None], bucket.X, 1e3).astype(np.float32)
        z1, k1 = diagatt_forward(p, frozen, jnp.asarray(bucket.X), jnp.asarray(bucket.where))
        z2, k2 = diagatt_forward(p, frozen, jnp.asarray(X), jnp.asarray(bucket.where))
        np.testing.assert_array_equal(np.asarray(z1), np.asarray(z2))
        np.testing.assert_array_equal(np.asarray(k1), np.asarray(k2))


@pytest.mark.parametrize("strength", [1.0, 0.5])
def test_competing_heads_match_numpy(strength):
    p, frozen = _params()
    frozen["exclusion"] = np.float32(strength)
    Q, V, _ = _effective(p, frozen)
    for bucket in _padded().buckets:
        z, k = diagatt_forward(p, frozen, jnp.asarray(bucket.X), jnp.asarray(bucket.where))
        for j, i in enumerate(bucket.index):
            Xi = SAMPLES[i].astype(np.float64)
            psi = _ref_competing(np.einsum("pa,rab,pb->rp", Xi, Q, Xi), strength)
            ref_k = np.exp(psi - logsumexp(psi, axis=1, keepdims=True))
            ref_z = p["b"] + sum(ref_k[r] @ Xi @ V[r] for r in range(len(V)))
            np.testing.assert_allclose(k[j][:, : len(Xi)], ref_k, rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(z[j], ref_z, rtol=1e-4, atol=1e-4)


def test_competing_heads_stay_finite_when_a_head_is_certain():
    """A head with all its mass on one row (1 - kappa = 0) must not give inf or NaN gradients."""
    import jax

    p, frozen = _params()
    frozen["exclusion"] = np.float32(1.0)
    bucket = _padded().buckets[-1]
    X = jnp.asarray(bucket.X) * 30.0  # scores of order 1e3: saturated softmaxes
    where = jnp.asarray(bucket.where)
    y = jnp.ones((X.shape[0], 1), jnp.float32)

    def loss(params):
        return jnp.sum(latent_row_loss({**frozen, **params}, frozen, X, where, y, "gaussian"))

    value, grads = jax.value_and_grad(loss)(p)
    assert np.isfinite(float(value))
    assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))
    z, k = diagatt_forward(p, frozen, X, where)
    assert np.all(np.isfinite(np.asarray(z))) and np.all(np.isfinite(np.asarray(k)))

