"""DiagAtt's read-out refit once the attention weights are fixed.

With the weights fixed the prediction ``b + sum_r <H_r, V_r>`` is linear in
the read-out ``(V, b)``, ``H`` the attention-pooled rows, so ``V`` and ``b``
can be set at the exact minimum of a convex problem instead of where Adam's
last epoch left them: the ridge regression with the penalty of largest
evidence (:mod:`skdiagatt.diagatt._evidence`), the logistic regression whose penalty
is chosen by cross-validation (:func:`cv_logistic_readout`), or the
L2-penalized GLM read-out of :func:`skdiagatt.kernels.glm.fit_readout` at a
given penalty.
"""

import inspect
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler

from .._training import round_count
from ..kernels.glm import fit_readout
from ._evidence import evidence_ridge

__all__ = ["cv_logistic_readout", "refit_readout"]

#: Inverse penalties of the cross-validated logistic read-out, on standardized pooled rows.
_CS = np.logspace(-4, 2, 13)
#: Folds of its cross-validation (fewer when a class has fewer samples).
_FOLDS = 5


def _l2_logistic_path(**kwargs):
    """:class:`~sklearn.linear_model.LogisticRegressionCV` of an L2 penalty, in the installed scikit-learn's words.

    Recent releases name the penalty by ``l1_ratios`` and give some fitted
    attributes a new form (``coef_`` and ``intercept_``, all that is read
    here, keep theirs), and warn until both are chosen; older ones take L2
    by default and know neither argument.
    """
    accepted = inspect.signature(LogisticRegressionCV).parameters
    if accepted["l1_ratios"].default == "warn":
        kwargs["l1_ratios"] = (0.0,)
    if "use_legacy_attributes" in accepted:
        kwargs["use_legacy_attributes"] = False
    return LogisticRegressionCV(**kwargs)


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


def cv_logistic_readout(params, H, Y, S, w):
    """``params`` with ``V`` (R, d, t) and ``b`` (t,) the L2 logistic read-out of cross-validated penalty.

    The penalty must not act in the whitened coordinates of ``H = c S X^T
    kappa``: there the directions of least variance, often noise, would be
    the least penalized.  The pooled rows are taken back to the input's
    coordinates (``H S^{-1}``) and standardized, the inverse penalty ``C``
    is chosen among ``_CS`` by stratified cross-validation of the log-loss
    (:class:`~sklearn.linear_model.LogisticRegressionCV`, which follows the
    path of penalties warm-started on each fold), and the
    coefficients are mapped back to ``V``, so that ``b + sum_r <H_r, V_r>``
    is the fitted logit (two classes) or the class logits.

    ``Y`` (n, t): the 0/1 column or one-hot rows; ``w`` (n,) the weights.
    """
    R, d, t = params["V"].shape
    n = len(H)
    S = np.asarray(S, np.float64)
    G = np.linalg.solve(S, np.asarray(H, np.float64).reshape(n * R, d).T).T.reshape(n, R * d)
    labels = Y[:, 0] if t == 1 else np.argmax(Y, axis=1)
    # The folds follow the samples' order; a canonical order (by content)
    # makes the read-out the same however the samples were arranged (the
    # buckets of one process, the shards of several).
    order = np.lexsort(np.column_stack([G, labels]).T)
    G, labels, w = G[order], labels[order], (None if w is None else np.asarray(w)[order])
    counts = np.bincount(labels.astype(np.int64))
    if np.count_nonzero(counts) != max(t, 2):
        return params  # a class without samples of positive weight: keep the trained read-out
    scaler = StandardScaler().fit(G, sample_weight=w)
    # Columns constant up to rounding (a constant feature, whitened and back)
    # carry no information: left out, not blown up by a tiny scale.
    live = scaler.scale_ > 1e-6 * scaler.scale_.max()
    Z = np.where(live, scaler.transform(G), 0.0)
    model = LogisticRegression(max_iter=1000)
    if counts.min() >= 2:  # else no fold split keeps every class: the default penalty (C = 1)
        # The path of penalties on each fold, each fit warm-started from the last.
        folds = StratifiedKFold(int(min(_FOLDS, counts.min())))
        model = _l2_logistic_path(Cs=_CS, cv=folds, scoring="neg_log_loss", max_iter=1000)
    with warnings.catch_warnings():
        # On separable folds the weakest penalties of the grid need not converge
        # within max_iter; cross-validation judges them as they stand.
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = model.fit(Z, labels, sample_weight=w)
    beta = np.where(live, model.coef_, 0.0) / scaler.scale_  # (t, R d) in the input's coordinates
    intercept = model.intercept_ - beta @ scaler.mean_
    B = beta.reshape(t, R, d).transpose(1, 2, 0)  # (R, d, t)
    V = np.stack([np.linalg.solve(S, B[r]) for r in range(R)])
    return {**params, "V": V.astype(np.float32), "b": intercept.astype(np.float32)}
