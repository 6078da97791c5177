"""Softmax and sums over each sample's rows, for padded or packed minibatches.

A minibatch of ``n`` samples reaches the kernels in one of two layouts:

- **padded**: ``X`` (n, L, d) and a bool mask ``where`` (n, L); block ``b`` is
  sample ``b``.
- **packed** (:class:`PackedRows`): ``X`` (K, C, d) holds blocks of ``C``
  rows; block ``k`` belongs to sample ``seg[k]`` (non-decreasing) and
  ``valid`` (K, C) marks its real rows.  Samples of many lengths then share
  one minibatch and compute their own rows (a block's last rows are padding),
  not the rows of the longest sample.

Per-row arrays have the block axis first, the head axis second and the row
axis third: scores are (K, R, C); per-sample results are (n, R, ...).  The
functions here are the only ones that look at the layout, so a kernel written
with them serves both.  On the padded layout they are the masked functions of
:mod:`skdiagatt.kernels.softmax`, operation for operation.
"""

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp

from .softmax import _finite_max, masked_log_softmax, masked_logsumexp, masked_softmax

__all__ = ["PackedRows", "row_log_softmax", "row_softmax", "row_logsumexp", "row_total", "per_block"]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class PackedRows:
    """The row layout of a packed minibatch.

    Parameters
    ----------
    valid : bool array, shape (K, C)
        Real rows of each block (a block of padding has none).
    seg : int array, shape (K,)
        The sample (0 .. n-1) each block belongs to, non-decreasing.
    n : int
        Samples in the minibatch (static); a sample may own no block (a
        filler slot), its sums are then 0.

    Examples
    --------
    Samples of 3 and 1 rows in blocks of 2 rows:

    >>> import numpy as np
    >>> from skdiagatt.kernels.rows import PackedRows
    >>> rows = PackedRows(valid=np.array([[True, True], [True, False], [True, False]]),
    ...                   seg=np.array([0, 0, 1]), n=2)
    >>> rows.valid.sum(axis=1).tolist()
    [2, 1, 1]
    """

    valid: jax.Array
    seg: jax.Array
    n: int = field(metadata={"static": True})


def _mask(where, ndim):
    """The (K, 1, C) mask of a (K, R, C) array (more trailing axes: more ones)."""
    m = where.valid if isinstance(where, PackedRows) else where
    return m[:, None, :].reshape(m.shape[:1] + (1,) + m.shape[1:] + (1,) * (ndim - 3))


def per_block(s, where):
    """A per-sample array (n, ...) as seen by each block: shape (K, ...).

    Parameters
    ----------
    s : array, shape (n, ...)
    where : bool array (n, L) or PackedRows

    Returns
    -------
    array, shape (K, ...)
        ``s`` itself for the padded layout; ``s[seg]`` for the packed one.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels.rows import PackedRows, per_block
    >>> rows = PackedRows(valid=np.ones((3, 2), bool), seg=np.array([0, 0, 1]), n=2)
    >>> per_block(np.array([10.0, 20.0]), rows).tolist()
    [10.0, 10.0, 20.0]
    """
    if isinstance(where, PackedRows):
        return s[where.seg]
    return s


def row_total(partial, where):
    """Sum per sample of per-block sums: (K, ...) -> (n, ...).

    Parameters
    ----------
    partial : array, shape (K, ...)
        Each block's contribution, its rows already summed (padded rows must
        contribute 0: sum weights that are 0 there).
    where : bool array (n, L) or PackedRows

    Returns
    -------
    array, shape (n, ...)

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels.rows import PackedRows, row_total
    >>> rows = PackedRows(valid=np.ones((3, 2), bool), seg=np.array([0, 0, 1]), n=3)
    >>> row_total(np.array([1.0, 2.0, 5.0]), rows).tolist()      # sample 2 owns no block
    [3.0, 5.0, 0.0]
    """
    if isinstance(where, PackedRows):
        return jax.ops.segment_sum(partial, where.seg, where.n, indices_are_sorted=True)
    return partial


def row_logsumexp(scores, where):
    """``log sum_j exp(scores_j)`` over each sample's real rows.

    Parameters
    ----------
    scores : array, shape (K, R, C)
    where : bool array (n, L) or PackedRows

    Returns
    -------
    array, shape (n, R)
        Padded layout: ``-inf`` for a sample without rows; packed layout: 0
        for a sample that owns no block (a filler slot).

    Examples
    --------
    Sample 0's rows are split over two blocks; the result is that of its
    padded form:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.rows import PackedRows, row_logsumexp
    >>> a = jnp.array([[[0.0, 1.0]], [[2.0, 9.0]], [[3.0, 0.0]]])     # (K=3, R=1, C=2)
    >>> rows = PackedRows(valid=np.array([[True, True], [True, False], [True, False]]),
    ...                   seg=np.array([0, 0, 1]), n=2)
    >>> got = row_logsumexp(a, rows)
    >>> ref = [np.log(np.exp([0.0, 1.0, 2.0]).sum()), 3.0]
    >>> np.allclose(got[:, 0], ref)
    True
    """
    if not isinstance(where, PackedRows):
        return masked_logsumexp(scores, _mask(where, scores.ndim))
    _, _, total, m = _shifted(scores, where)
    return jnp.log(total) + m


def _shifted(scores, where):
    """Packed layout: ``z = scores - m`` and ``exp(z)`` (K, R, C), their sums (n, R) and ``m`` (n, R).

    ``m`` is each sample's largest score (0 without rows); ``z`` is ``-inf``
    and ``exp(z)`` 0 at padded rows.  A filler slot sums nothing: its sum is
    1, not 0, so that its logarithm, its quotients, its weight-0 loss and
    their gradients stay finite.  The log-softmax and softmax are formed from
    ``z``, as in the padded form: ``scores - logsumexp`` would lose the last
    digits of large scores (near 1e4, weights summed to 1 +- 5e-4).
    """
    mask = _mask(where, scores.ndim)
    masked = jnp.where(mask, scores, jnp.asarray(-jnp.inf, scores.dtype))
    # Two stages: the dense max and sum over a block's rows, then over the
    # blocks of a sample (C times fewer scattered elements than per row).
    block_max = _finite_max(masked, 2)[:, :, 0]  # (K, R), no gradient
    m = jax.ops.segment_max(block_max, where.seg, where.n, indices_are_sorted=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    z = masked - per_block(m, where)[:, :, None]
    e = jnp.where(mask, jnp.exp(z), 0.0)
    total = row_total(jnp.sum(e, axis=2), where)
    return z, e, jnp.where(total > 0, total, 1.0), m


def row_log_softmax(scores, where):
    """Log-softmax over each sample's real rows, shape (K, R, C).

    Parameters
    ----------
    scores : array, shape (K, R, C)
    where : bool array (n, L) or PackedRows

    Returns
    -------
    array, shape (K, R, C)
        ``-inf`` at padded rows.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.rows import PackedRows, row_log_softmax
    >>> a = jnp.array([[[0.0, 0.0]], [[0.0, 5.0]]])                   # one sample, 3 real rows
    >>> rows = PackedRows(valid=np.array([[True, True], [True, False]]), seg=np.array([0, 0]), n=1)
    >>> np.round(np.exp(row_log_softmax(a, rows)).ravel().astype(float), 4).tolist()
    [0.3333, 0.3333, 0.3333, 0.0]
    """
    if not isinstance(where, PackedRows):
        return masked_log_softmax(scores, _mask(where, scores.ndim))
    z, _, total, _ = _shifted(scores, where)
    return jnp.where(_mask(where, scores.ndim), z - per_block(jnp.log(total), where)[:, :, None], -jnp.inf)


def row_softmax(scores, where):
    """Softmax over each sample's real rows, shape (K, R, C); exactly 0 at padded rows.

    Parameters
    ----------
    scores : array, shape (K, R, C)
    where : bool array (n, L) or PackedRows

    Returns
    -------
    array, shape (K, R, C)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.rows import PackedRows, row_softmax, row_total
    >>> a = jnp.array([[[1.0, 2.0]], [[3.0, 0.0]]])
    >>> rows = PackedRows(valid=np.array([[True, True], [True, False]]), seg=np.array([0, 0]), n=1)
    >>> k = row_softmax(a, rows)
    >>> bool(np.isclose(row_total(k.sum(axis=2), rows)[0, 0], 1.0)), float(k[1, 0, 1])
    (True, 0.0)
    """
    if not isinstance(where, PackedRows):
        return masked_softmax(scores, _mask(where, scores.ndim))
    _, e, total, _ = _shifted(scores, where)
    return e / per_block(total, where)[:, :, None]

