"""Standard multi-head self-attention, pooled, with a linear read-out (the DiagAtt paper, Section 3.1).

The competitor of DiagAtt that keeps the full query-key interaction.  Head r
computes ``A_r = softmax(Q_r K_r^T / sqrt(d))`` row-wise over the valid rows of a
sample, with ``Q_r = X S W_Q[r]`` and ``K_r = X S W_K[r]``; its output
``A_r X S W_V[r]`` is averaged over the valid query rows and read out linearly.
Because pooling and read-out are linear, ``W_V[r] W_O[r]`` collapses into one
value matrix ``V[r]`` (d, t) without changing the function class:

    z = b + sum_r <X^T m_r, S V_r>,   m_r[j] = mean_i A_r[i, j]

where ``m_r`` (the attention mass row j *receives*, averaged over the queries)
is a distribution over the rows of the sample; it is what ``localize`` ranks.

Parameters (a dict pytree):

- ``W_Q``, ``W_K`` (R, d, d_h) query and key projections;
- ``V`` (R, d, t) value read-out, ``b`` (t,) intercept;
- ``log_sigma`` (t,): noise scale of the latent-row objective (regression).

Fixed inputs (``frozen``): ``S`` (d, d) symmetric preconditioner (the rows in
use are ``c x S``), optionally ``x_scale`` = c, a scalar every row is
multiplied by first (default 1), ``inv_scale`` = ``1 / sqrt(d)``, penalties
``alpha`` (on the projections) and ``alpha_value`` (on ``V``).

Data: ``X`` (B, L, d) padded samples, ``where`` (B, L) True at real rows,
``y`` (B, t).  Padded rows are zeroed before any projection and are never keys,
so whatever they contain cannot change a result.
"""

import jax.numpy as jnp

from ._matmul import einsum
from .losses import LOGLIK, minibatch_objective, ridge_penalty
from .scores import project_rows
from .softmax import masked_log_softmax, masked_logsumexp, masked_softmax

__all__ = [
    "stdatt_scores",
    "stdatt_weights",
    "received_attention",
    "log_received_attention",
    "stdatt_forward",
    "stdatt_latent_loss",
    "stdatt_attention_loss",
    "stdatt_penalty",
    "stdatt_loss",
]


def _zeroed(X, where, frozen):
    # jnp.where, not a product: inf/NaN garbage in padded rows is discarded.
    # ``x_scale`` (optional) brings rows of any magnitude to unit scale first.
    X = jnp.where(where[..., None], X, jnp.zeros((), X.dtype))
    return X * frozen["x_scale"] if "x_scale" in frozen else X


def _pair_mask(where):
    """(B, 1, L, L): key j visible to query i.

    Valid queries see the valid keys; padded queries see every key so that
    their (discarded) softmax stays finite.
    """
    return where[:, None, None, :] | ~where[:, None, :, None]


def stdatt_scores(params, frozen, X, where):
    """Query-key scores ``psi[b, r, i, j] = <x_i S W_Q[r], x_j S W_K[r]> / sqrt(d)``.

    Parameters
    ----------
    params : dict
        ``W_Q``, ``W_K`` of shape (R, d, d_h).
    frozen : dict
        ``S`` (d, d), ``inv_scale`` (scalar), optionally ``x_scale`` (scalar).
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)

    Returns
    -------
    array, shape (B, R, L, L)
        Queries along axis 2, keys along axis 3.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import stdatt_scores
    >>> psi = stdatt_scores(params, frozen, X, where)
    >>> psi.shape                          # (B, R, L, L)
    (2, 2, 3, 3)
    >>> Q, K = (jnp.einsum("ld,rde->rle", X[0], params[k]) for k in ("W_Q", "W_K"))
    >>> bool(np.allclose(psi[0], jnp.einsum("rie,rje->rij", Q, K) / 2, atol=1e-5))  # S = I
    True
    """
    Xz = _zeroed(X, where, frozen)
    d, e = params["W_Q"].shape[1], params["W_Q"].shape[2]
    if 2 * e <= d:
        # Narrow heads: project both sides to d_h columns.
        Q = project_rows(Xz, einsum("ab,rbe->rae", frozen["S"], params["W_Q"]))
        K = project_rows(Xz, einsum("ab,rbe->rae", frozen["S"], params["W_K"]))
        return einsum("bire,bjre->brij", Q, K) * frozen["inv_scale"]
    # Wide heads: psi = X M_r X^T with M_r = S W_Q[r] W_K[r]^T S (d, d), one
    # 2-D matmul for X M_r and one batched product.
    M = einsum("ab,rbe,rce,cd->rad", frozen["S"], params["W_Q"], params["W_K"], frozen["S"])
    XM = project_rows(Xz, M)  # (B, L, R, d)
    return einsum("bird,bjd->brij", XM, Xz) * frozen["inv_scale"]


def stdatt_weights(params, frozen, X, where):
    """Row-stochastic attention ``A`` of every head, shape (B, R, L, L).

    Each valid query's weights sum to one over the valid keys and are exactly
    zero at padded keys.  Rows of padded queries are set to zero.

    Parameters
    ----------
    params, frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)

    Returns
    -------
    array, shape (B, R, L, L)
        Queries along axis 2, keys along axis 3.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import stdatt_weights
    >>> A = stdatt_weights(params, frozen, X, where)
    >>> np.round(np.asarray(A.sum(-1)), 4).tolist()[1]   # padded query: all 0
    [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]
    >>> float(jnp.abs(A[1, :, :, 2]).max())              # padded key: no weight
    0.0
    """
    A = masked_softmax(stdatt_scores(params, frozen, X, where), _pair_mask(where))
    return jnp.where(where[:, None, :, None], A, jnp.zeros((), A.dtype))


def received_attention(params, frozen, X, where):
    """Attention mass each row receives, averaged over the valid queries.

    Parameters
    ----------
    params, frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)

    Returns
    -------
    array, shape (B, R, L)
        ``m[b, r, j] = mean_i A[b, r, i, j]`` over valid queries i: non-negative,
        sums to one over the valid rows, zero at padded rows.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import received_attention
    >>> m = received_attention(params, frozen, X, where)
    >>> m.shape, float(m[1, 0, 2])         # (B, R, L); padded row
    ((2, 2, 3), 0.0)
    >>> np.round(np.asarray(m.sum(-1)), 4).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    A = stdatt_weights(params, frozen, X, where)
    n_valid = jnp.maximum(jnp.sum(where, axis=-1), 1).astype(A.dtype)
    return jnp.sum(A, axis=2) / n_valid[:, None, None]


def log_received_attention(params, frozen, X, where):
    """``log m`` of :func:`received_attention`, computed stably in log space.

    Parameters
    ----------
    params, frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)

    Returns
    -------
    array, shape (B, R, L)
        ``-inf`` at padded rows.

    Examples
    --------
    >>> import jax
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import log_received_attention, received_attention
    >>> log_m = jax.jit(log_received_attention)(params, frozen, X, where)  # one compilation, not one per operation
    >>> bool(np.allclose(jnp.exp(log_m), received_attention(params, frozen, X, where), atol=1e-6))
    True
    >>> log_m[1, :, 2].tolist()            # padded row
    [-inf, -inf]
    """
    logA = masked_log_softmax(stdatt_scores(params, frozen, X, where), _pair_mask(where))
    # Padded keys get a finite stand-in before the sum over queries: a column
    # of -inf would make log(0) there, whose infinite derivative turns the
    # zero cotangent into NaN.  Their result is replaced by -inf below.
    logA = jnp.where(where[:, None, None, :], logA, jnp.zeros((), logA.dtype))
    # Sum over the valid queries (axis 2).
    queries = jnp.broadcast_to(where[:, None, None, :], logA.shape)
    log_sum = masked_logsumexp(jnp.swapaxes(logA, 2, 3), queries)
    n_valid = jnp.maximum(jnp.sum(where, axis=-1), 1).astype(logA.dtype)
    out = log_sum - jnp.log(n_valid)[:, None, None]
    return jnp.where(where[:, None, :], out, -jnp.inf)


def _row_values(params, frozen, X, where):
    # (B, R, L, t): every row's read-out under every head (x S V_r).
    V = einsum("ab,rbt->rat", frozen["S"], params["V"])
    return jnp.transpose(project_rows(_zeroed(X, where, frozen), V), (0, 2, 1, 3))


def stdatt_forward(params, frozen, X, where):
    """Pooled multi-head attention prediction and the received attention.

    ``z = b + sum_r mean_i (A_r X S V_r)[i] = b + sum_r <X^T m_r, S V_r>``.

    Parameters
    ----------
    params, frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)

    Returns
    -------
    z : array, shape (B, t)
    m : array, shape (B, R, L)
        Attention mass received per row (see :func:`received_attention`).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import stdatt_forward
    >>> z, m = stdatt_forward(params, frozen, X, where)
    >>> z.shape, m.shape
    ((2, 1), (2, 2, 3))
    >>> ref = jnp.einsum("brl,bld,rdt->bt", m, X, params["V"])  # sum_r <X^T m_r, V_r>, S = I
    >>> bool(np.allclose(z, ref, atol=1e-5))
    True
    """
    m = received_attention(params, frozen, X, where)
    head_out = einsum("brl,brlt->brt", m, _row_values(params, frozen, X, where))
    return params["b"] + jnp.sum(head_out, axis=1), m


def stdatt_attention_loss(params, frozen, X, where, y, family):
    """Negative log-likelihood of the pooled prediction (the usual objective), per sample.

    For ``gaussian`` this is half the squared error.

    Parameters
    ----------
    params, frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    y : array, shape (B, t)
    family : {"gaussian", "bernoulli", "categorical"}

    Returns
    -------
    array, shape (B,)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import stdatt_attention_loss, stdatt_forward
    >>> z, _ = stdatt_forward(params, frozen, X, where)
    >>> loss = stdatt_attention_loss(params, frozen, X, where, z + 2.0, "gaussian")
    >>> np.round(np.asarray(loss), 4).tolist()   # 2^2 / 2
    [2.0, 2.0]
    """
    z, _ = stdatt_forward(params, frozen, X, where)
    return -LOGLIK[family](y, z, jnp.zeros(z.shape[-1], z.dtype))


def stdatt_latent_loss(params, frozen, X, where, y, family):
    """Latent-row negative log-likelihood with the received attention as row prior, per sample.

    The objective DiagAtt trains with, applied to standard attention: head r
    picks one row ``j ~ m_r`` and the response follows ``family`` with predictor
    ``b + x_j S V_r + sum_{l != r} <X^T m_l, S V_l>``.

    Parameters
    ----------
    params, frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    y : array, shape (B, t)
    family : {"gaussian", "bernoulli", "categorical"}

    Returns
    -------
    array, shape (B,)

    Examples
    --------
    When all rows of a sample are equal, which row is picked does not matter
    and the latent objective is the usual one:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import stdatt_attention_loss, stdatt_latent_loss
    >>> X_same = jnp.broadcast_to(X[:, :1], X.shape)
    >>> y = jnp.array([[1.0], [-1.0]])
    >>> latent = stdatt_latent_loss(params, frozen, X_same, where, y, "gaussian")
    >>> latent.shape
    (2,)
    >>> usual = stdatt_attention_loss(params, frozen, X_same, where, y, "gaussian")
    >>> bool(np.allclose(latent, usual, atol=1e-5))
    True
    """
    mask = where[:, None, :]
    log_m = log_received_attention(params, frozen, X, where)  # (B, R, L)
    rows = _row_values(params, frozen, X, where)  # (B, R, L, t)
    head_out = einsum("brl,brlt->brt", jnp.exp(log_m), rows)
    others = jnp.sum(head_out, axis=1, keepdims=True) - head_out
    z = params["b"] + others[:, :, None, :] + rows
    ll = LOGLIK[family](y[:, None, None, :], z, params["log_sigma"])
    per_head = masked_logsumexp(log_m + ll, mask)  # (B, R)
    return -jnp.mean(per_head, axis=1)


def stdatt_penalty(params, frozen):
    """``alpha * (||W_Q||^2 + ||W_K||^2) + alpha_value * ||V||^2``.

    Parameters
    ----------
    params : dict
        Any of ``W_Q``, ``W_K`` (R, d, d_h) and ``V`` (R, d, t); absent
        ones (held in ``frozen`` during a phase) are not penalised.
    frozen : dict
        ``alpha`` and ``alpha_value``, each 0 when absent.

    Returns
    -------
    scalar

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from skdiagatt.kernels.stdatt import stdatt_penalty
    >>> params = {"W_Q": jnp.ones((1, 2, 2)), "W_K": jnp.ones((1, 2, 2)), "V": jnp.ones((1, 2, 1))}
    >>> round(float(stdatt_penalty(params, {"alpha": 0.1, "alpha_value": 0.5})), 4)  # 0.1 * 8 + 0.5 * 2
    1.8
    >>> round(float(stdatt_penalty({"V": params["V"]}, {"alpha": 0.1, "alpha_value": 0.5})), 4)
    1.0
    """
    return ridge_penalty(params, frozen, ("W_Q", "W_K"))


_OBJECTIVES = {"latent": stdatt_latent_loss, "attention": stdatt_attention_loss}


def stdatt_loss(params, frozen, batch, config):
    """Weighted mean objective of a minibatch plus the penalty (the ``fit_loop`` form).

    Parameters
    ----------
    params : dict
        Trainable parameters; model parameters not trained in this phase come
        from ``frozen`` (merged, ``params`` first).
    frozen : dict
    batch : dict
        ``X`` (B, L, d), ``where`` (B, L), ``y`` (B, t), ``w`` (B,) sample
        weights (zero for filler samples).
    config : tuple
        ``(objective, family)``, static; ``objective`` in ``{"attention", "latent"}``.

    Returns
    -------
    scalar

    Examples
    --------
    A filler sample (weight 0) does not count:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import stdatt_inputs
    >>> params, frozen, X, where = stdatt_inputs()   # B=2 samples, L=3 rows (the 2nd: 2), d=4; R=2 heads
    >>> from skdiagatt.kernels.stdatt import stdatt_forward, stdatt_loss, stdatt_penalty
    >>> z, _ = stdatt_forward(params, frozen, X, where)
    >>> y = z + jnp.array([[2.0], [100.0]])
    >>> batch = {"X": X, "where": where, "y": y, "w": jnp.array([1.0, 0.0])}
    >>> loss = stdatt_loss(params, frozen, batch, ("attention", "gaussian"))
    >>> bool(np.isclose(loss, 2.0 + stdatt_penalty(params, frozen), atol=1e-5))
    True
    """
    return minibatch_objective(_OBJECTIVES, stdatt_penalty, params, frozen, batch, config)
