"""Row scale and whitener of the training rows, shared by the attention estimators."""

import numpy as np

__all__ = ["second_moment", "preconditioner", "preconditioner_from_moment"]


def second_moment(samples, weights=None):
    """``sum_i w_i X_i^T X_i`` in float64 and the total row count ``sum_i w_i p_i`` (``w_i = 1`` by default).

    The sum runs with BLAS on one thread: for these small products that is as
    fast, and it does not collapse when other processes load the machine
    (multithreaded OpenBLAS then spins on its barriers).  The order of the
    sum is unchanged, so the result is bit-identical.
    """
    from threadpoolctl import threadpool_limits

    d = samples[0].shape[1]
    M = np.zeros((d, d))
    rows = 0
    with threadpool_limits(limits=1, user_api="blas"):
        for i, s in enumerate(samples):
            s = s.astype(np.float64)
            if weights is None:
                M += s.T @ s
                rows += s.shape[0]
            else:
                M += weights[i] * (s.T @ s)
                rows += weights[i] * s.shape[0]
    return M, rows


def preconditioner(samples, whiten, weights=None):
    """Row scale ``c`` and whitener ``S`` of the training rows.

    ``c = 1 / sqrt(mean ||x||^2 / d)`` brings the rows to unit root-mean-square,
    so float32 scores stay in range for inputs of any magnitude.  With
    ``whiten``, ``S = M^{-1/2}`` for the uncentred second moment ``M`` of the
    scaled rows (uncentred, because the scores ``x^T W x`` are not translation
    invariant), eigenvalues floored at 1e-6 of the largest so constant or
    duplicated features do not blow up; else the identity.  ``weights``: the
    samples' weights, each sample's rows counted as often.

    Returns
    -------
    c : float
    S : ndarray of shape (d, d), float32
    """
    M, rows = second_moment(samples, weights)
    return preconditioner_from_moment(M, rows, whiten)


def preconditioner_from_moment(M, rows, whiten):
    """:func:`preconditioner` from ``sum_i X_i^T X_i`` (float64) and the row count."""
    d = M.shape[0]
    M = M / rows
    rms = np.sqrt(np.trace(M) / d)
    c = 1.0 / rms if rms > 0 else 1.0
    if not whiten:
        return np.float32(c), np.eye(d, dtype=np.float32)
    ev, U = np.linalg.eigh(M * c * c)
    ev = np.maximum(ev, max(ev.max(), 1e-30) * 1e-6)
    return np.float32(c), ((U / np.sqrt(ev)) @ U.T).astype(np.float32)
