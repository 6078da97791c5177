"""Row scale and whitener of the training rows, shared by the attention estimators."""

import numpy as np

__all__ = ["oas_shrunk", "second_moment", "preconditioner", "preconditioner_from_moment"]


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
    invariant), shrunk towards a multiple of the identity by the
    oracle-approximating shrinkage (:func:`oas_shrunk`) so that few rows
    per feature do not make a whitener that amplifies noise directions, and
    eigenvalues floored at 1e-6 of the largest so constant or duplicated
    features do not blow up; else the identity.  ``weights``: the
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
    ev, U = np.linalg.eigh(oas_shrunk(M * c * c, rows))
    ev = np.maximum(ev, max(ev.max(), 1e-30) * 1e-6)
    return np.float32(c), ((U / np.sqrt(ev)) @ U.T).astype(np.float32)


def oas_shrunk(M, rows):
    """``M`` shrunk towards ``mu I`` by the oracle-approximating shrinkage, (d, d) float64.

    Chen, Wiesel, Eldar & Hero, "Shrinkage algorithms for MMSE covariance
    estimation", IEEE Trans. Signal Processing 58 (2010), in the form of
    :func:`sklearn.covariance.oas` (``assume_centered=True``), computed from
    the moment itself: the rows are streamed in chunks and never stacked.
    With ``mu = tr(M) / d`` and ``a = mean(M_jk^2)`` the weight of the target
    is ``min(1, (a + mu^2) / ((n + 1)(a - mu^2 / d)))`` for ``n`` rows: large
    when the rows are few per feature, vanishing as they grow.
    """
    d = M.shape[0]
    mu = np.trace(M) / d
    a = np.mean(M**2)
    den = (rows + 1) * (a - mu**2 / d)
    shrinkage = 1.0 if den <= 0 else min((a + mu**2) / den, 1.0)
    out = (1.0 - shrinkage) * M
    out.flat[:: d + 1] += shrinkage * mu
    return out
