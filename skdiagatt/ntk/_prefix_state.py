"""The NTK-Attention state of a random ``N(0, I)`` prefix of any length, in bounded memory."""

import math

import jax
import numpy as np

from ..kernels.cumulant import gaussian_cumulant_state
from ..kernels.ntk_attention import prefix_to_state
from ..kernels.prefix_moments import gaussian_prefix_state

__all__ = ["random_prefix_state", "EXACT_ROWS"]

# Prefixes up to this many rows are drawn and summed row by row; longer ones
# take the exact expectation plus the fluctuation of this many drawn rows.
EXACT_ROWS = 1 << 16
_BLOCK_ROWS = 4096

# One program each: run op by op, a state's dozens of operations would each
# compile (and, with the compilation cache, load) a program of their own.
_compressed = jax.jit(prefix_to_state, static_argnames=("feature_map", "degree", "block_size"))
_gaussian_cumulants = jax.jit(gaussian_cumulant_state, static_argnames="degree")


def _streamed_sum(m, W_K, W_V, feature_map, degree, rng):
    """Eq. 4 over ``m`` rows drawn from ``rng`` a block at a time.

    The rows are those of ``rng.standard_normal((m, d))``: NumPy draws a
    block after another as one long stream.  Blocks are summed in float64.
    """
    d = W_K.shape[1]
    Z = k = 0.0
    for start in range(0, m, _BLOCK_ROWS):
        rows = rng.standard_normal((min(_BLOCK_ROWS, m - start), d)).astype(np.float32)
        Zb, kb = _compressed(rows, W_K, W_V, feature_map=feature_map, degree=degree)
        Z, k = Z + np.asarray(Zb, np.float64), k + np.asarray(kb, np.float64)
    return Z, k


def _cumulant_prefix_state(m, W_K, W_V, degree, rng):
    """The cumulant state (:mod:`skdiagatt.kernels.cumulant`) of ``m`` rows ``N(0, I)``.

    The drawn rows' moments up to :data:`EXACT_ROWS` rows, the exact ones
    beyond, with mass ``m`` (1 for ``inf``: the state of one average row).
    """
    if m <= EXACT_ROWS:
        P = rng.standard_normal((int(m), W_K.shape[1])).astype(np.float32)
        Z, k = _compressed(P, W_K, W_V, feature_map="cumulant", degree=degree)
    else:
        Z, k = _gaussian_cumulants(W_K, W_V, 0.0 if math.isinf(m) else math.log(m), degree=degree)
    return np.asarray(Z, np.float32), np.asarray(k, np.float32)


def random_prefix_state(m, W_K, W_V, feature_map, degree, rng):
    """``(Z, k)`` of Eq. 4 for a prefix of ``m`` rows ``N(0, I)``, float32.

    Parameters
    ----------
    m : int or inf
        Up to :data:`EXACT_ROWS`: the rows are drawn from ``rng`` and summed,
        the same state as compressing ``rng.standard_normal((m, d))`` whole
        (up to the order of float summation).  Longer: ``m`` times the exact
        per-row expectation (:func:`gaussian_prefix_state`) plus the
        fluctuation of :data:`EXACT_ROWS` drawn rows about it scaled by
        ``sqrt(m / EXACT_ROWS)``, so the state has the mean and covariance of
        the sum of ``m`` rows.  ``inf``: the per-row expectation, that is the
        limit of ``Z / m`` and ``k / m``.
    W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    feature_map : {"taylor", "elu", "cumulant"}
        ``"cumulant"``: see :func:`_cumulant_prefix_state`.
    degree : int
    rng : numpy.random.RandomState

    Returns
    -------
    Z : ndarray, shape (H, r, d_v)
    k : ndarray, shape (H, r)
    """
    if feature_map == "cumulant":
        return _cumulant_prefix_state(m, W_K, W_V, degree, rng)
    if m <= EXACT_ROWS:
        Z, k = _streamed_sum(int(m), W_K, W_V, feature_map, degree, rng)
        return Z.astype(np.float32), k.astype(np.float32)
    Ze, ke = (np.asarray(a, np.float64) for a in gaussian_prefix_state(W_K, W_V, None, feature_map, degree))
    if math.isinf(m):
        return Ze.astype(np.float32), ke.astype(np.float32)
    Zs, ks = _streamed_sum(EXACT_ROWS, W_K, W_V, feature_map, degree, rng)
    grow = math.sqrt(m / EXACT_ROWS)
    Z = m * Ze + grow * (Zs - EXACT_ROWS * Ze)
    k = m * ke + grow * (ks - EXACT_ROWS * ke)
    return Z.astype(np.float32), k.astype(np.float32)
