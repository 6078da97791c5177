"""Exact prefix attention (the NTK-Attention paper, Section 2.3); NTK-Attention is in :mod:`.ntk_attention`.

Conventions shared by every function in this module
---------------------------------------------------
* ``X`` : (B, L, d) padded batch; ``where`` : (B, L) bool, True = valid row.
  Padded rows are zeroed before any projection and never act as keys, so
  whatever they contain cannot change a valid output; their own output rows
  are exactly zero.
* Multi-head projections are stacked per head: ``W_Q``, ``W_K`` : (H, d, d_h),
  ``W_V`` : (H, d, d_v).
* The prefix ``P`` : (m, d) is a parameter shared by the whole batch; its rows
  are always visible (also under ``causal=True``, which only masks future
  rows of ``X``).
* Outputs are (B, L, H, d_v); attention weights are (B, H, L, n_keys).
* Scores are ``q . k / sqrt(d_h)``.

Everything is pure ``jax.numpy`` and follows the dtype of the inputs
(float32 by default, float64 when x64 is enabled).
"""

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from ._matmul import einsum
from .softmax import masked_softmax

__all__ = [
    "prefix_attention",
    "prefix_attention_streaming",
    "plain_attention",
    "attention_weights",
    "key_attention_mass",
]


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------
def _zero_padded(X, where):
    # jnp.where (not a product) so that inf/NaN garbage in padded rows is
    # discarded rather than propagated as 0 * inf.
    return jnp.where(where[..., None], X, jnp.zeros((), X.dtype))


def _project(X, W):
    """(B, L, d) x (H, d, e) -> (B, H, L, e)."""
    return einsum("bld,hde->bhle", X, W)


def _scores(Q, K):
    """(B, H, L, e) x (B, H, n, e) -> (B, H, L, n), scaled by 1/sqrt(e)."""
    return einsum("bhle,bhne->bhln", Q, K) / math.sqrt(Q.shape[-1])


def _key_mask(where, causal):
    """Which X rows each query may attend to: (B, 1, L, L) bool."""
    mask = where[:, None, None, :]
    if causal:
        L = where.shape[-1]
        mask = mask & jnp.tril(jnp.ones((L, L), bool))[None, None]
    # Padded queries see every (zeroed) row: their output is discarded, but
    # a row with no visible key would give 0/0 = NaN, which leaks into
    # gradients even through a jnp.where.
    return mask | ~where[:, None, :, None]


def _finish(out, where):
    """(B, H, L, e) -> (B, L, H, e) with padded query rows set to exactly 0."""
    out = jnp.where(where[:, None, :, None], out, jnp.zeros((), out.dtype))
    return jnp.transpose(out, (0, 2, 1, 3))


def _times_exp(x, log_scale):
    """``x * exp(log_scale)`` without ever forming ``exp(log_scale)``.

    Callers guarantee ``log|x| + log_scale <= 0`` so the result is at most
    ``|x|``-sized and cannot overflow, while ``exp(log_scale)`` alone could
    (e.g. ``exp(-row_max)`` for very negative scores). The double ``where``
    keeps both the value and the gradient finite at ``x == 0``.
    """
    nz = x != 0
    safe = jnp.where(nz, x, jnp.ones((), x.dtype))
    mag = jnp.exp(jnp.log(jnp.abs(safe)) + log_scale)
    value = jnp.where(nz, jnp.sign(safe) * mag, jnp.zeros((), x.dtype))
    # The where above has a zero derivative in x at x == 0, which would
    # freeze a state trained from Z = k = 0.  There, add a term that is
    # exactly 0 in value and carries d/dx = exp(log_scale) (capped below
    # overflow); elsewhere the first branch already has the derivative.
    cap = jnp.asarray(0.5 * jnp.log(jnp.finfo(x.dtype).max), x.dtype)
    slope = jnp.exp(jnp.minimum(lax.stop_gradient(log_scale), cap))
    slope = jnp.where(nz, jnp.zeros((), x.dtype), slope)
    return value + (x - lax.stop_gradient(x)) * slope


def _safe_log(x):
    """``log(x)`` for ``x >= 0`` with ``log(0) = -inf`` and a finite gradient."""
    pos = x > 0
    return jnp.where(pos, jnp.log(jnp.where(pos, x, jnp.ones((), x.dtype))), -jnp.inf)


# --------------------------------------------------------------------------
# exact attention
# --------------------------------------------------------------------------
def _dense_prefix(X, where, P, W_Q, W_K, causal):
    """Scores, mask and values of the exact prefix attention, all keys at once."""
    Xz = _zero_padded(X, where)
    Q = _project(Xz, W_Q)
    B, H, L, _ = Q.shape
    Kp = einsum("md,hde->hme", P, W_K)
    sp = einsum("bhle,hme->bhlm", Q, Kp) / math.sqrt(Q.shape[-1])
    scores = jnp.concatenate([sp, _scores(Q, _project(Xz, W_K))], axis=-1)
    prefix_visible = jnp.ones((B, 1, L, P.shape[0]), bool)
    mask = jnp.concatenate(
        [prefix_visible, jnp.broadcast_to(_key_mask(where, causal), (B, 1, L, L))], axis=-1
    )
    return scores, jnp.broadcast_to(mask, scores.shape), Xz


@functools.partial(jax.jit, static_argnames=("causal",))
def attention_weights(X, where, W_Q, W_K, P=None, causal=False):
    """Exact softmax attention weights over the keys ``[P; X]``.

    Parameters
    ----------
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    W_Q, W_K : array, shape (H, d, d_h)
    P : array, shape (m, d), optional
        Prefix rows; ``None`` means ``m = 0`` (plain self-attention).
    causal : bool, default=False

    Returns
    -------
    array, shape (B, H, L, m + L)
        Row-stochastic over visible keys; exactly 0 at padded keys (and at
        every key for padded queries). The first ``m`` columns are the prefix.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import attention_inputs
    >>> X, where, P, W_Q, W_K, W_V = attention_inputs()   # B=2, L=3 (the 2nd: 2 rows), d=4; m=5, H=2
    >>> from skdiagatt.kernels.attention import attention_weights
    >>> w = attention_weights(X, where, W_Q, W_K, P=P)
    >>> w.shape                            # (B, H, L, m + L)
    (2, 2, 3, 8)
    >>> np.round(np.asarray(w.sum(-1)), 4).tolist()[1]   # padded query: all 0
    [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]
    >>> float(jnp.abs(w[1, :, :, -1]).max())             # padded key: no weight
    0.0
    """
    if P is None:
        P = jnp.zeros((0, X.shape[-1]), X.dtype)
    scores, mask, _ = _dense_prefix(X, where, P, W_Q, W_K, causal)
    w = masked_softmax(scores, mask)
    return jnp.where(where[:, None, :, None], w, jnp.zeros((), w.dtype))


def key_attention_mass(weights, where):
    """Average attention each key row receives from the valid queries.

    Used for localization: the rows that receive most mass drove the output.

    Parameters
    ----------
    weights : array, shape (B, H, L, n)
        From :func:`attention_weights`; only the last ``L`` columns (the X
        rows) are read, so prefix columns may be present.
    where : bool array, shape (B, L)

    Returns
    -------
    array, shape (B, H, L)
        Sums to at most 1 over the rows of each sample (less when a prefix
        takes part of the mass); 0 at padded rows.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import attention_inputs
    >>> X, where, P, W_Q, W_K, W_V = attention_inputs()   # B=2, L=3 (the 2nd: 2 rows), d=4; m=5, H=2
    >>> from skdiagatt.kernels.attention import attention_weights, key_attention_mass
    >>> mass = key_attention_mass(attention_weights(X, where, W_Q, W_K), where)
    >>> mass.shape, float(mass[1, 0, 2])
    ((2, 2, 3), 0.0)
    >>> np.round(np.asarray(mass.sum(-1)), 4).tolist()  # no prefix: all mass on rows
    [[1.0, 1.0], [1.0, 1.0]]
    >>> with_prefix = key_attention_mass(attention_weights(X, where, W_Q, W_K, P=P), where)
    >>> bool((with_prefix.sum(-1) < 1).all())
    True
    """
    L = where.shape[-1]
    w = weights[..., -L:]
    n_valid = jnp.maximum(jnp.sum(where, axis=-1), 1).astype(w.dtype)
    return jnp.sum(w, axis=2) / n_valid[:, None, None]


@functools.partial(jax.jit, static_argnames=("causal",))
def prefix_attention(X, where, P, W_Q, W_K, W_V, causal=False):
    """Exact softmax attention of the rows of ``X`` over the keys ``[P; X]``.

    Queries come from ``X`` only; keys and values from the prefix ``P`` and
    the valid rows of ``X`` (the NTK-Attention paper, Definition 2.1, with the usual
    ``1/sqrt(d_h)``). This holds the full ``(B, H, L, m + L)`` score array;
    use :func:`prefix_attention_streaming` for long prefixes.

    Parameters
    ----------
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    P : array, shape (m, d)
        ``m = 0`` gives plain self-attention.
    W_Q, W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    causal : bool, default=False
        Mask future rows of ``X``; prefix rows stay visible.

    Returns
    -------
    array, shape (B, L, H, d_v)

    Examples
    --------
    Attending over the prefix is self-attention over ``[P; X]`` read at the
    rows of ``X``:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import attention_inputs
    >>> X, where, P, W_Q, W_K, W_V = attention_inputs()   # B=2, L=3 (the 2nd: 2 rows), d=4; m=5, H=2
    >>> from skdiagatt.kernels.attention import plain_attention, prefix_attention
    >>> out = prefix_attention(X, where, P, W_Q, W_K, W_V)
    >>> out.shape                          # (B, L, H, d_v)
    (2, 3, 2, 2)
    >>> XP = jnp.concatenate([jnp.broadcast_to(P, (2, 5, 4)), X], axis=1)
    >>> where_P = jnp.concatenate([jnp.ones((2, 5), bool), where], axis=1)
    >>> ref = plain_attention(XP, where_P, W_Q, W_K, W_V)[:, 5:]
    >>> bool(np.allclose(out, ref, atol=1e-5)), float(jnp.abs(out[1, 2]).max())
    (True, 0.0)
    """
    scores, mask, Xz = _dense_prefix(X, where, P, W_Q, W_K, causal)
    w = masked_softmax(scores, mask)
    m = P.shape[0]
    Vp = einsum("md,hde->hme", P, W_V)
    Vx = _project(Xz, W_V)
    out = einsum("bhlm,hme->bhle", w[..., :m], Vp) + einsum(
        "bhln,bhne->bhle", w[..., m:], Vx
    )
    return _finish(out, where)


def plain_attention(X, where, W_Q, W_K, W_V, causal=False):
    """Exact masked softmax self-attention (``prefix_attention`` with ``m = 0``).

    Parameters
    ----------
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    W_Q, W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    causal : bool, default=False

    Returns
    -------
    array, shape (B, L, H, d_v)

    Examples
    --------
    Padding never changes a valid row's output:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import attention_inputs
    >>> X, where, W_Q, W_K, W_V = attention_inputs(prefix=False)   # B=2, L=3 (the 2nd: 2 rows), d=4; H=2
    >>> from skdiagatt.kernels.attention import plain_attention
    >>> out = plain_attention(X, where, W_Q, W_K, W_V)
    >>> out.shape
    (2, 3, 2, 2)
    >>> alone = plain_attention(X[1:, :2], where[1:, :2], W_Q, W_K, W_V)  # unpadded
    >>> bool(np.allclose(out[1, :2], alone[0], atol=1e-6))
    True
    >>> first = plain_attention(X, where, W_Q, W_K, W_V, causal=True)[:, 0]
    >>> bool(np.allclose(first, jnp.einsum("bd,hde->bhe", X[:, 0], W_V), atol=1e-6))
    True
    """
    P = jnp.zeros((0, X.shape[-1]), X.dtype)
    return prefix_attention(X, where, P, W_Q, W_K, W_V, causal=causal)


def _blocks(P, block_size):
    """Pad ``P`` (m, d) to whole blocks: (n_blocks, block, d) rows and validity."""
    m, d = P.shape
    block = max(1, min(int(block_size), m))
    n_blocks = -(-m // block)
    pad = n_blocks * block - m
    Pb = jnp.concatenate([P, jnp.zeros((pad, d), P.dtype)]).reshape(n_blocks, block, d)
    valid = (jnp.arange(n_blocks * block) < m).reshape(n_blocks, block)
    return Pb, valid


@functools.partial(jax.jit, static_argnames=("causal", "block_size", "return_lse"))
def prefix_attention_streaming(
    X, where, P, W_Q, W_K, W_V, causal=False, block_size=4096, return_lse=False
):
    """Exact prefix attention streamed over blocks of prefix rows.

    Same result as :func:`prefix_attention`, but the prefix is visited in
    blocks of ``block_size`` rows with an online softmax (running max, running
    sum, running weighted values), so memory is ``O(B H L block_size)``
    whatever ``m`` is. Time is still ``O(m L d)``.

    Parameters
    ----------
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    P : array, shape (m, d), m >= 1
    W_Q, W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    causal : bool, default=False
    block_size : int, default=4096
    return_lse : bool, default=False
        Also return the log-partition ``log sum_j exp(s_ij)`` over all visible
        keys, so callers can recover exact weights block by block.

    Returns
    -------
    out : array, shape (B, L, H, d_v)
    lse : array, shape (B, L, H)
        Only if ``return_lse``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import attention_inputs
    >>> X, where, P, W_Q, W_K, W_V = attention_inputs()   # B=2, L=3 (the 2nd: 2 rows), d=4; m=5, H=2
    >>> from skdiagatt.kernels.attention import prefix_attention, prefix_attention_streaming
    >>> out, lse = prefix_attention_streaming(X, where, P, W_Q, W_K, W_V,
    ...                                       block_size=2, return_lse=True)
    >>> out.shape, lse.shape               # 5 prefix rows in 3 blocks
    ((2, 3, 2, 2), (2, 3, 2))
    >>> bool(np.allclose(out, prefix_attention(X, where, P, W_Q, W_K, W_V), atol=1e-5))
    True
    """
    Xz = _zero_padded(X, where)
    Q = _project(Xz, W_Q)
    s = _scores(Q, _project(Xz, W_K))
    s = jnp.where(_key_mask(where, causal), s, -jnp.inf)
    # The X block seeds the running statistics; a valid query always sees a
    # valid key (itself) so the max is finite there, padded queries get 0.
    run_max = jnp.max(s, axis=-1)
    run_max = jnp.where(jnp.isfinite(run_max), run_max, 0.0)
    e = jnp.exp(s - run_max[..., None])
    run_sum = jnp.sum(e, axis=-1)
    run_acc = einsum("bhln,bhne->bhle", e, _project(Xz, W_V))

    Pb, valid = _blocks(P, block_size)

    def step(carry, block):
        mx, sm, acc = carry
        rows, ok = block
        Kp = einsum("nd,hde->hne", rows, W_K)
        Vp = einsum("nd,hde->hne", rows, W_V)
        sb = einsum("bhle,hne->bhln", Q, Kp) / math.sqrt(Q.shape[-1])
        sb = jnp.where(ok, sb, -jnp.inf)
        new = jnp.maximum(mx, jnp.max(sb, axis=-1))
        shrink = jnp.exp(mx - new)
        eb = jnp.exp(sb - new[..., None])
        sm = sm * shrink + jnp.sum(eb, axis=-1)
        acc = acc * shrink[..., None] + einsum("bhln,hne->bhle", eb, Vp)
        return (new, sm, acc), None

    (mx, sm, acc), _ = lax.scan(step, (run_max, run_sum, run_acc), (Pb, valid))
    out = _finish(acc / sm[..., None], where)
    if not return_lse:
        return out
    lse = jnp.transpose(mx + jnp.log(sm), (0, 2, 1))
    return out, lse
