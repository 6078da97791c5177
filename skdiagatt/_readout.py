"""DiagAtt's read-out refit once the attention weights are fixed.

With the weights fixed the prediction ``b + sum_r <H_r, V_r>`` is linear in
the read-out ``(V, b)``, ``H`` the attention-pooled rows, so ``V`` and ``b``
can be set at the exact minimum of a convex problem instead of where Adam's
last epoch left them: the ridge regression with the penalty of largest
evidence (:mod:`skdiagatt._evidence`), or the L2-penalized GLM read-out of
:func:`skdiagatt.kernels.glm.fit_readout`.
"""

import numpy as np

from ._evidence import evidence_ridge
from ._training import round_count
from .kernels.glm import fit_readout

__all__ = ["refit_readout"]


def refit_readout(params, H, Y, family, *, alpha_value, evidence, w):
    """``params`` with ``V`` (R, d, t) and ``b`` (t,) refit on the pooled rows ``H`` (n, R, d).

    ``evidence``: the Gaussian read-out of largest evidence; otherwise the
    GLM read-out of ``family`` with the penalty ``alpha_value``.  ``w`` (n,):
    the samples' weights.
    """
    R, d, t = params["V"].shape
    if evidence:
        coef, intercept, _ = evidence_ridge(H.reshape(len(H), R * d), Y, w)
        return {**params, "V": coef.reshape(R, d, t).astype(np.float32), "b": intercept.astype(np.float32)}
    # Padded like the training buckets (weight-0 filler up to a rounded
    # count), so that fits of similar size reuse the compiled solver.
    n = len(H)
    fill = round_count(n) - n
    w = np.concatenate([np.asarray(w, np.float32), np.zeros(fill, np.float32)])
    pad = lambda a: np.pad(a, [(0, fill)] + [(0, 0)] * (a.ndim - 1))  # noqa: E731
    V, b, _ = fit_readout(
        params["V"], params["b"], pad(H), pad(Y), params["log_sigma"], np.float32(alpha_value), family, w=w,
    )
    return {**params, "V": np.asarray(V), "b": np.asarray(b)}
