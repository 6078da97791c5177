"""NTK-Attention (the NTK-Attention paper, Section 4): an infinitely long prefix compressed into ``Z`` and ``k``.

The conventions are those of :mod:`.attention` (padded ``X`` and row mask
``where``, per-head stacked projections, outputs (B, L, H, d_v)).
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax

from ._matmul import einsum
from .attention import _blocks, _finish, _key_mask, _project, _safe_log, _scores, _times_exp, _zero_padded
from .cumulant import prefix_to_cumulant_state
from .features import feature_dim, taylor_products
from .features import feature_map as _feature_map

__all__ = ["ntk_attention", "prefix_to_state", "eq6_error"]


def _cumulant_terms(Q, Z, k, degree):
    """``_prefix_terms`` of the cumulant state (:mod:`.cumulant`).

    Numerator ``exp(phi_2(Q) . k) phi_g(Q) Z`` and mass ``exp(phi_2(Q) . k)``:
    the mass is a pure scale, so it joins ``log_n`` and never meets ``exp``
    here; the constant feature (``phi_g[0] = 1``) appended to ``Z`` gives
    the mass's share of the same scaled product.
    """
    products = jax.vmap(functools.partial(taylor_products, degree=degree))
    unit = jnp.zeros(Z.shape[:2] + (1,), Z.dtype).at[:, 0].set(1.0)
    out, log_n = products(jnp.moveaxis(Q, 1, 0), jnp.concatenate([Z, unit], axis=-1))
    lp, log_p = jax.vmap(functools.partial(taylor_products, degree=2))(jnp.moveaxis(Q, 1, 0), k[..., None])
    # Clipped so that an absurd query gives a huge but finite log-mass.
    big = jnp.asarray(1e30, lp.dtype)
    log_mass = jnp.clip(lp[..., 0] * jnp.exp(jnp.minimum(log_p, 60.0)), -big, big)
    out, log_n = jnp.moveaxis(out, 0, 1), jnp.moveaxis(log_n + log_mass, 0, 1)
    return out[..., :-1], out[..., -1], log_n


def _prefix_terms(Q, Z, k, feature_map, degree):
    """``phi(Q) Z`` (B, H, L, d_v) and ``phi(Q) k`` (B, H, L), both divided by ``exp(log_n)``.

    The scale ``n`` per query keeps the products in range even for large
    queries; ``log_n`` (B, H, L) carries it back.
    """
    if feature_map == "cumulant":
        return _cumulant_terms(Q, Z, k, degree)
    if feature_map == "taylor":
        # One product for both, per head, without forming the (B, H, L, r) features.
        S = jnp.concatenate([Z, k[..., None]], axis=-1)  # (H, r, d_v + 1)
        products = jax.vmap(functools.partial(taylor_products, degree=degree))
        out, log_n = products(jnp.moveaxis(Q, 1, 0), S)
        out, log_n = jnp.moveaxis(out, 0, 1), jnp.moveaxis(log_n, 0, 1)
        return out[..., :-1], out[..., -1], log_n
    phi = _feature_map(feature_map, degree)(Q)  # (B, H, L, r)
    n = jnp.max(jnp.abs(phi), axis=-1)
    n = jnp.where(n > 0, n, jnp.ones((), n.dtype))
    phi = phi / n[..., None]
    return einsum("bhlr,hrv->bhlv", phi, Z), einsum("bhlr,hr->bhl", phi, k), jnp.log(n)


@functools.partial(jax.jit, static_argnames=("feature_map", "degree", "causal"))
def ntk_attention(X, where, Z, k, W_Q, W_K, W_V, feature_map="taylor", degree=2, causal=False):
    """NTK-Attention (the NTK-Attention paper, Algorithm 1), per head, numerically stable.

    ``T = (A V + phi(Q) Z) / (A 1 + max(phi(Q) k, 0))`` with
    ``A = exp(Q K^T / sqrt(d_h))`` over the valid (and, if ``causal``, past)
    rows of ``X``. With ``Z, k = prefix_to_state(P, ...)`` this approximates
    ``prefix_attention(X, where, P, ...)``; with ``Z = 0, k = 0`` it is plain
    attention.

    Parameters
    ----------
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    Z : array, shape (H, r, d_v)
    k : array, shape (H, r)
    W_Q, W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    feature_map : {"taylor", "elu"}, default="taylor"
    degree : int, default=2
        Taylor degree ``g``; ``r = C(d_h + g, g)`` (``r = d_h`` for elu).
    causal : bool, default=False

    Returns
    -------
    array, shape (B, L, H, d_v)
        Finite for every finite input whose scores and ``phi(Q) Z`` are
        representable; padded query rows are exactly 0.

    Notes
    -----
    *Positivity of the denominator.* The prefix mass ``phi(q) . k`` is a sum
    of kernel values and must be ``>= 0`` for ``T`` to be an attention
    average. It is automatically for a state built from a real prefix with
    the elu map or an even Taylor degree (``1 + t + t^2/2 > 0``), but not for
    odd degrees (``1 + t < 0`` when ``t < -1``) nor for a trained ``k``. The
    kernel clamps it, ``max(phi(q) . k, 0)``: a negative mass is treated as
    "no prefix mass", which keeps ``A 1 + max(., 0) >= A 1 > 0``, is continuous
    in ``k`` and leaves the caller free to parametrise ``k`` (the authors use
    ``|k|`` with the positive elu map, which never reaches the clamp).

    *No overflow.* Scores are shifted by a per-query scale ``M``, the largest
    of the row max of the scores and ``log`` of the prefix terms' size, and
    the prefix terms are multiplied by ``exp(-M)`` in log space, never by
    ``exp(M)`` or ``exp(-row_max)`` on their own (which overflow float32
    beyond ~88). Then every term of numerator and denominator is at most
    1 in size, the denominator is floored at the smallest normal number and
    ``|T| <= max|V| + 1 / tiny`` is finite. When the row max is large the
    prefix factor underflows to 0, which is right: the prefix is then
    negligible against ``exp(row_max)``.

    Examples
    --------
    With small scores, degree-4 Taylor features make the compressed prefix
    almost exact; an empty state is plain attention:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.attention import plain_attention, prefix_attention
    >>> from skdiagatt.kernels.ntk_attention import ntk_attention, prefix_to_state
    >>> rng = np.random.default_rng(0)
    >>> X = jnp.asarray(rng.standard_normal((2, 3, 4)), jnp.float32)
    >>> where = jnp.array([[True, True, True], [True, True, False]])
    >>> P = jnp.asarray(rng.standard_normal((5, 4)), jnp.float32)
    >>> W_Q, W_K, W_V = jnp.asarray(0.2 * rng.standard_normal((3, 2, 4, 2)), jnp.float32)
    >>> Z, k = prefix_to_state(P, W_K, W_V, degree=4)
    >>> out = ntk_attention(X, where, Z, k, W_Q, W_K, W_V, degree=4)
    >>> out.shape
    (2, 3, 2, 2)
    >>> exact = prefix_attention(X, where, P, W_Q, W_K, W_V)
    >>> bool(np.allclose(out, exact, atol=1e-3))
    True
    >>> empty = ntk_attention(X, where, jnp.zeros_like(Z), jnp.zeros_like(k), W_Q, W_K, W_V, degree=4)
    >>> bool(np.allclose(empty, plain_attention(X, where, W_Q, W_K, W_V), atol=1e-6))
    True
    """
    Xz = _zero_padded(X, where)
    Q = _project(Xz, W_Q)
    V = _project(Xz, W_V)
    s = jnp.where(_key_mask(where, causal), _scores(Q, _project(Xz, W_K)), -jnp.inf)
    row_max = jnp.max(s, axis=-1)  # (B, H, L); -inf only without any visible key

    u, c, log_n = _prefix_terms(Q, Z, k, feature_map, degree)
    # max(., 0) rather than relu: its derivative at exactly 0 is 1/2, not 0,
    # so a state trained from k = 0 is not stuck at the clamp.
    c = jnp.maximum(c, 0.0)

    prefix_log_size = log_n + _safe_log(jnp.maximum(c, jnp.max(jnp.abs(u), axis=-1)))
    M = jnp.maximum(row_max, prefix_log_size)
    M = lax.stop_gradient(jnp.where(jnp.isfinite(M), M, 0.0))  # shift-invariant

    w = jnp.exp(s - M[..., None])  # exactly 0 at masked keys
    num = einsum("bhln,bhne->bhle", w, V) + _times_exp(u, (log_n - M)[..., None])
    den = jnp.sum(w, axis=-1) + _times_exp(c, log_n - M)
    den = jnp.maximum(den, jnp.finfo(den.dtype).tiny)
    return _finish(num / den[..., None], where)


def _default_state_block(m, H, r, budget_elems=1 << 24):
    # ~64 MiB of float32 features per block: each block rewrites the whole
    # (r, d_v) state, so blocks must hold a few hundred rows even at
    # r ~ 5e4 (d_h = 64, g = 3) for the update not to be memory bound.
    return max(1, min(m, budget_elems // max(1, H * r)))


@functools.partial(jax.jit, static_argnames=("feature_map", "degree", "block_size"))
def prefix_to_state(P, W_K, W_V, feature_map="taylor", degree=2, block_size=None):
    """Compress a prefix into the NTK-Attention state (the NTK-Attention paper, Eq. 4).

    ``Z = sum_r phi(W_K^T P_r) (P_r W_V)``, ``k = sum_r phi(W_K^T P_r)`` per
    head, accumulated over blocks of prefix rows with ``lax.scan`` so the
    ``(m, r)`` feature matrix is never held whole.

    Parameters
    ----------
    P : array, shape (m, d)
    W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    feature_map : {"taylor", "elu"}, default="taylor"
    degree : int, default=2
    block_size : int, optional
        Prefix rows per block; default keeps one block's features near
        ``2^24`` elements.

    Returns
    -------
    Z : array, shape (H, r, d_v)
    k : array, shape (H, r)

    Examples
    --------
    ``k`` is the sum of the prefix keys' features, ``Z`` the same sum weighted
    by their values, whatever the block size:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.ntk_attention import prefix_to_state
    >>> from skdiagatt.kernels.features import taylor_features
    >>> rng = np.random.default_rng(0)
    >>> P = jnp.asarray(rng.standard_normal((5, 4)), jnp.float32)       # m=5, d=4
    >>> W_K, W_V = jnp.asarray(0.5 * rng.standard_normal((2, 2, 4, 3)), jnp.float32)  # H=2
    >>> Z, k = prefix_to_state(P, W_K, W_V, degree=2, block_size=2)
    >>> Z.shape, k.shape                   # r = C(3 + 2, 2) = 10
    ((2, 10, 3), (2, 10))
    >>> phi = taylor_features(jnp.einsum("md,hde->hme", P, W_K), degree=2)  # (H, m, r)
    >>> bool(np.allclose(k, phi.sum(1), atol=1e-5))
    True
    >>> bool(np.allclose(Z, jnp.einsum("hmr,md,hde->hre", phi, P, W_V), atol=1e-5))
    True
    """
    if feature_map == "cumulant":
        return prefix_to_cumulant_state(P, W_K, W_V, degree)
    fmap = _feature_map(feature_map, degree)
    m = P.shape[0]
    H, _, dh = W_K.shape
    dv = W_V.shape[-1]
    r = feature_dim(feature_map, dh, degree)
    if block_size is None:
        block_size = _default_state_block(m, H, r)
    Z0 = jnp.zeros((H, r, dv), P.dtype)
    k0 = jnp.zeros((H, r), P.dtype)
    if m == 0:
        return Z0, k0
    Pb, valid = _blocks(P, block_size)

    def step(carry, block):
        Z, k = carry
        rows, ok = block
        phi = fmap(einsum("nd,hde->hne", rows, W_K))
        # Padding rows are zero and phi(0) != 0 for Taylor, so mask them.
        # Appending the mask as an extra value column gets k from the same
        # matmul as Z: a separate sum over rows is a slow column reduction
        # on CPU.
        ok = ok.astype(P.dtype)
        vals = einsum("nd,hde->hne", rows, W_V) * ok[None, :, None]
        vals = jnp.concatenate([vals, jnp.broadcast_to(ok[None, :, None], (H, ok.shape[0], 1))], axis=-1)
        both = einsum("hnr,hne->hre", phi, vals)
        return (Z + both[..., :dv], k + both[..., dv]), None

    (Z, k), _ = lax.scan(step, (Z0, k0), (Pb, valid))
    return Z, k


# --------------------------------------------------------------------------
# metric
# --------------------------------------------------------------------------
def eq6_error(T, T_ref, score_absmax, where=None):
    """Approximation error of the NTK-Attention paper, Eq. 6.

    ``(1 / n) sum_i ||T_i - T_ref_i||_F^2 / (L_i d_out) / ||S_i||_inf``, the
    mean squared error per entry of each sample scaled by the largest
    absolute logit ``||S_i||_inf`` of that sample.

    Parameters
    ----------
    T, T_ref : array, shape (B, L, ...)
        Outputs, e.g. (B, L, H, d_v); trailing axes are flattened into
        ``d_out``.
    score_absmax : array, shape (B,) or scalar
        ``max |q . k| / sqrt(d_h)`` over the sample's queries and all its
        keys ``[P; X]`` -- the argument of ``exp``. The paper writes
        ``||Q_i K_i^T||_inf`` because its ``A = exp(Q K^T)`` has no
        ``1/sqrt(d)``; the intent (the size of the exponent) is the same.
    where : bool array, shape (B, L), optional
        Only valid rows count; ``L_i`` is their number.

    Returns
    -------
    scalar array

    Examples
    --------
    One sample of two valid rows (the padded third row does not count), a
    squared error of 1 per entry, scaled by ``1 / ||S||_inf``:

    >>> import jax.numpy as jnp
    >>> from skdiagatt.kernels.ntk_attention import eq6_error
    >>> T = jnp.ones((1, 3, 2, 2))         # (B, L, H, d_v)
    >>> T_ref = jnp.zeros((1, 3, 2, 2)).at[0, 2].set(9.0)
    >>> where = jnp.array([[True, True, False]])
    >>> float(eq6_error(T, T_ref, 4.0, where=where))
    0.25
    >>> float(eq6_error(T, T, 4.0))
    0.0
    """
    B, L = T.shape[:2]
    diff = (jnp.asarray(T) - jnp.asarray(T_ref)).reshape(B, L, -1)
    d_out = diff.shape[-1]
    if where is None:
        where = jnp.ones((B, L), bool)
    sq = jnp.sum(jnp.where(where[..., None], diff, 0.0) ** 2, axis=(1, 2))
    rows = jnp.maximum(jnp.sum(where, axis=-1), 1)
    per_sample = sq / (rows * d_out) / jnp.broadcast_to(jnp.asarray(score_absmax), (B,))
    return jnp.mean(per_sample)
