"""The rank of a full query-key matrix, chosen from its own spectrum (``rank="auto"``).

A full ``W`` (d x d) trained on n samples is the true matrix plus an
estimation error spread over all d^2 entries.  Read as a spiked Wigner
matrix around an isotropic part, ``sym(W) = mu I + sum_k theta_k u_k u_k^T +
E`` (``mu |x|^2`` scores a row by its norm, one number the d eigenvalues
pin down: their median), the error's eigenvalues fill a semicircle of
edge ``R = 2 sigma sqrt(d)`` around ``mu`` while each spike
``theta_k > R / 2`` shows at ``y_k = theta_k + R^2 / (4 theta_k)`` with an
eigenvector of squared overlap ``1 - R^2 / (4 theta_k^2)`` with ``u_k``
(Benaych-Georges and Nadakuditi, Adv. Math. 2011).  The value that
minimizes the Frobenius error given that overlap is ``theta (1 - R^2 / (4
theta^2))`` away from ``mu``, and ``mu`` itself inside the bulk (Donoho,
Gavish and Johnstone, Ann. Statist. 2018).  The edge is read from the median
absolute deviation of the eigenvalues from ``mu``, which the few spikes
barely move (Gavish and Donoho, IEEE Trans. Inf. Theory 2014): the data
choose how many directions the scores keep, and how far each shrinks.

Only ``sym(W)`` enters a score ``x^T W x``, so the antisymmetric part goes.
"""

import numpy as np
from scipy.optimize import brentq

__all__ = ["shrink_spectrum", "SpectrumRankMixin", "MIN_BULK"]

#: Below this many eigenvalues the bulk does not trace the semicircle, so its
#: median does not estimate the edge: smaller matrices are left as trained.
MIN_BULK = 20


def _semicircle_median():
    """``m / R``: the median of ``|lambda|`` under the semicircle law of edge ``R``.

    The folded semicircle has ``P(|lambda| <= u R) = (2 / pi) (asin u + u sqrt(1 - u^2))``.
    """
    cdf = lambda u: (2 / np.pi) * (np.arcsin(u) + u * np.sqrt(1 - u * u)) - 0.5  # noqa: E731
    return brentq(cdf, 0.0, 1.0)


_MEDIAN_OVER_EDGE = _semicircle_median()  # 0.404


def shrink_spectrum(W):
    """The eigenvalues of ``sym(W)`` shrunk to their spikes' optimal values, per head.

    Parameters
    ----------
    W : ndarray of shape (R, d, d)
        Query-key matrices, one per head.

    Returns
    -------
    W_shrunk : ndarray of shape (R, d, d), float32
        Symmetric, each head's outliers shrunk and its bulk set to its
        center ``mu``; ``W`` itself when ``d < MIN_BULK``.
    ranks : ndarray of shape (R,), int
        The directions each head keeps beside ``mu I`` (``d`` when left as trained).
    """
    W = np.asarray(W, np.float64)
    R, d, _ = W.shape
    if d < MIN_BULK:
        return W.astype(np.float32), np.full(R, d)
    lam, U = np.linalg.eigh((W + W.transpose(0, 2, 1)) / 2)  # (R, d), (R, d, d): every head at once
    center = np.median(lam, axis=1, keepdims=True)
    y = np.abs(lam - center)
    edge = np.median(y, axis=1, keepdims=True) / _MEDIAN_OVER_EDGE
    spike = y > edge
    # theta from y = theta + edge^2 / (4 theta), the root above edge / 2.
    theta = (y + np.sqrt(np.where(spike, y * y - edge * edge, 0.0))) / 2
    shrunk = np.where(spike, np.sign(lam - center) * (theta - edge * edge / (4 * np.maximum(theta, 1e-30))), 0.0)
    out = (U * (center + shrunk)[:, None, :]) @ U.transpose(0, 2, 1)
    return out.astype(np.float32), spike.sum(axis=1)


class SpectrumRankMixin:
    """DiagAtt's ``rank="auto"`` on the fit path, and the fitted ``rank_``."""

    def _after_main_phase(self, params):
        if self.rank != "auto" or "W" not in params:
            return params
        W, self._kept_ranks = shrink_spectrum(params["W"])
        return {**params, "W": W}

    def _record_rank(self, params):
        """``rank_``: the directions kept, else the rank each head's form allows (``L``'s columns, or d).

        ``partial_fit`` trains past any shrinkage, so its ``W`` keeps every direction.
        """
        kept = self.__dict__.pop("_kept_ranks", None)
        form = next(params[k] for k in ("L", "W") if k in params).shape[-1]
        self.rank_ = kept if kept is not None else np.full(self.n_heads, form)
