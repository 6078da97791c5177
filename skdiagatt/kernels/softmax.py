"""Masked softmax and log-sum-exp over the row axis of padded samples."""

import jax
import jax.numpy as jnp

__all__ = ["masked_softmax", "masked_log_softmax", "masked_logsumexp"]


def _finite_max(masked, axis):
    # The shift cancels from every result, so it carries no gradient: without
    # stop_gradient the backward pass would route one through the arg-max
    # (a compare and a scatter per row) only for it to sum to zero.
    m = jax.lax.stop_gradient(jnp.max(masked, axis=axis, keepdims=True))
    # A sample with no valid rows never reaches a kernel (the ragged layer
    # rejects it), but keep the arithmetic finite for fully padded rows.
    return jnp.where(jnp.isfinite(m), m, 0.0)


def _masked_shift(scores, where):
    # Padded rows get -inf so they carry exactly zero mass; the max is taken
    # over valid rows only so a garbage padded score cannot shift the result.
    neg = jnp.asarray(-jnp.inf, scores.dtype)
    masked = jnp.where(where, scores, neg)
    m = _finite_max(masked, -1)
    return masked - m


def masked_log_softmax(scores, where):
    """Log-softmax over the last axis restricted to ``where``.

    Parameters
    ----------
    scores : array, shape (..., p)
    where : bool array, shape (..., p)
        True for valid rows.

    Returns
    -------
    array, shape (..., p)
        ``-inf`` at invalid rows, log-probabilities elsewhere.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.softmax import masked_log_softmax
    >>> out = masked_log_softmax(jnp.array([[0.0, 0.0, 5.0]]),
    ...                          jnp.array([[True, True, False]]))
    >>> np.round(np.asarray(out, dtype=float), 4).tolist()
    [[-0.6931, -0.6931, -inf]]
    """
    z = _masked_shift(scores, where)
    lse = jnp.log(jnp.sum(jnp.where(where, jnp.exp(z), 0.0), axis=-1, keepdims=True))
    return jnp.where(where, z - lse, -jnp.inf)


def masked_softmax(scores, where):
    """Softmax over the last axis restricted to ``where``.

    Parameters
    ----------
    scores : array, shape (..., p)
    where : bool array, shape (..., p)

    Returns
    -------
    array, shape (..., p)
        Non-negative weights summing to one over valid rows, exactly zero at
        invalid rows.

    Examples
    --------
    A padded row (``where`` False) gets no weight, whatever its score:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.softmax import masked_softmax
    >>> scores = jnp.array([[1.0, 2.0, 1e30]])
    >>> where = jnp.array([[True, True, False]])
    >>> np.round(np.asarray(masked_softmax(scores, where), dtype=float), 4).tolist()
    [[0.2689, 0.7311, 0.0]]

    Scores far beyond ``exp``'s range stay finite (the row maximum is
    subtracted first):

    >>> np.asarray(masked_softmax(jnp.array([1e4, 1e4 - 1e3]), jnp.array([True, True]))).tolist()
    [1.0, 0.0]
    """
    z = _masked_shift(scores, where)
    e = jnp.where(where, jnp.exp(z), 0.0)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def masked_logsumexp(scores, where, axis=-1):
    """``log(sum(exp(scores)))`` over valid entries of ``axis``.

    Parameters
    ----------
    scores : array, shape (..., p)
    where : bool array, shape (..., p)
    axis : int

    Returns
    -------
    array, shape (...)
        ``-inf`` where no entry is valid.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.softmax import masked_logsumexp
    >>> out = masked_logsumexp(jnp.array([[0.0, 0.0, 7.0], [1e4, 1e4, 0.0]]),
    ...                        jnp.array([[True, True, False], [True, True, True]]))
    >>> np.round(np.asarray(out, dtype=float), 4).tolist()
    [0.6931, 10000.6934]
    """
    neg = jnp.asarray(-jnp.inf, scores.dtype)
    masked = jnp.where(where, scores, neg)
    m = _finite_max(masked, axis)
    s = jnp.sum(jnp.where(where, jnp.exp(masked - m), 0.0), axis=axis, keepdims=True)
    return jnp.squeeze(jnp.log(s) + m, axis=axis)
