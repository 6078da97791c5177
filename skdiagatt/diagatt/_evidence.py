"""A ridge read-out whose penalty maximizes the evidence (empirical Bayes).

Once the attention weights are fixed, DiagAtt's prediction ``b + <H, v>`` is
linear in the read-out, with ``H`` the attention-pooled rows.  With few
samples per feature of ``H`` the least-squares read-out overfits; a Gaussian
prior ``v ~ N(0, sigma^2 / lambda I)`` with the noise ``eps ~ N(0, sigma^2)``
gives the ridge read-out, and ``lambda`` is chosen where the marginal
likelihood of the targets is largest (MacKay, "Bayesian interpolation",
Neural Computation 4 (1992); Bishop, *Pattern Recognition and Machine
Learning*, Section 3.5).  Few samples or a weak signal give a large penalty
(towards predicting the mean), many samples a vanishing one.

In the singular-value basis of the centred ``H = U diag(s) Q^T`` and with
``u = U^T y``, the marginal likelihood with ``sigma^2`` profiled out is, up
to a constant,

    -1/2 [ sum_k log(1 + s_k^2 / lambda) + m log sigma^2(lambda) ],
    sigma^2(lambda) = (sum_k u_k^2 / (1 + s_k^2 / lambda) + |y|^2 - |u|^2) / m,

with ``m`` the samples less one for the intercept: a function of one
variable, maximized on a fine logarithmic grid.
"""

import numpy as np

__all__ = ["evidence_ridge"]

# The grid of lambda spans this many decades on each side of the largest s_k^2.
_DECADES = 8.0
_GRID = 321


def _log_evidence(s2, u2, rest, m, lam):
    """Profiled log marginal likelihood (up to a constant) at each ``lam`` (G,)."""
    shrink = 1.0 + s2[None, :] / lam[:, None]  # (G, r)
    sigma2 = (np.sum(u2[None, :] / shrink, axis=1) + rest) / m
    return -0.5 * (np.sum(np.log(shrink), axis=1) + m * np.log(np.maximum(sigma2, 1e-300)))


def evidence_ridge(H, Y, w=None):
    """Ridge coefficients of ``Y`` on ``H``, each output's penalty at its maximal evidence.

    Parameters
    ----------
    H : ndarray of shape (n, k)
        Features.
    Y : ndarray of shape (n, t)
        Targets; each column gets its own penalty.
    w : ndarray of shape (n,) or None
        Non-negative sample weights (a weight of 2 counts a sample twice).

    Returns
    -------
    coef : ndarray of shape (k, t)
    intercept : ndarray of shape (t,)
    penalty : ndarray of shape (t,)
        The chosen ``lambda`` of each output (on the sum of squares).

    Examples
    --------
    A strong linear signal keeps its slope; pure noise is shrunk to the mean.

    >>> import numpy as np
    >>> from skdiagatt.diagatt._evidence import evidence_ridge
    >>> rng = np.random.RandomState(0)
    >>> H = rng.standard_normal((200, 3))
    >>> Y = np.stack([H @ [1.0, -2.0, 0.5] + 0.1 * rng.standard_normal(200),
    ...               rng.standard_normal(200)], axis=1)
    >>> coef, intercept, penalty = evidence_ridge(H, Y)
    >>> np.round(coef[:, 0], 1).tolist()
    [1.0, -2.0, 0.5]
    >>> bool(np.abs(coef[:, 1]).max() < 0.05)
    True
    """
    H = np.asarray(H, np.float64)
    Y = np.asarray(Y, np.float64)
    w = np.ones(len(H)) if w is None else np.asarray(w, np.float64)
    keep = w > 0
    H, Y, w = H[keep], Y[keep], w[keep]
    h_mean = w @ H / w.sum()
    y_mean = w @ Y / w.sum()
    root = np.sqrt(w)[:, None]
    Hc, Yc = (H - h_mean) * root, (Y - y_mean) * root
    U, s, Qt = np.linalg.svd(Hc, full_matrices=False)
    s2 = s**2
    m = max(w.sum() - 1.0, 1.0)
    top = max(s2.max(initial=0.0), 1e-300)
    lam = top * np.logspace(-_DECADES, _DECADES, _GRID)
    coef = np.zeros((H.shape[1], Y.shape[1]))
    penalty = np.zeros(Y.shape[1])
    for j in range(Y.shape[1]):
        u = U.T @ Yc[:, j]
        rest = max(Yc[:, j] @ Yc[:, j] - u @ u, 0.0)
        best = lam[np.argmax(_log_evidence(s2, u**2, rest, m, lam))]
        coef[:, j] = Qt.T @ (s / (s2 + best) * u)
        penalty[j] = best
    return coef, y_mean - h_mean @ coef, penalty
