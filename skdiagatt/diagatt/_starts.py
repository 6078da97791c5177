"""Where DiagAtt's training starts: candidate row scores, chosen by cross-validation.

A start is a score function ``s(z) = z^T A z + a^T z`` per head on the
whitened rows ``z = c S x``; the attention it gives pools each sample's rows
into ``H_i = sum_j softmax_j(s(z_ij)) z_ij``.  Four kinds of start are
candidates:

- *uniform* (``A = 0, a = 0``): mean pooling, the start that assumes nothing;
- *mixture*: the log-likelihood ratios of the rows' Gaussian mixture
  (:mod:`skdiagatt.diagatt._mixture`), at full and at half strength; right when the
  signal rows differ in distribution from the others;
- *supervised mixture*: the same mixture with the targets as further
  evidence of which row is the signal's (its E-step weighs each row by how
  well the read-out predicts its sample's target from it), at full and half
  strength; a candidate only with one head and where the rows' own posterior
  expects to find fewer than ``_CERTAIN`` of the signal rows, as happens
  when the signal and background distributions overlap; like the others,
  it must beat the plain mixture beyond one standard error;
- *response*: rows whose projection on the response's direction is large,
  ``s(z) = gamma / 2 * sum_t ((z - m)^T beta_t)^2 / v_t``, with ``beta`` the
  ridge coefficients of the targets on the mean-pooled rows and ``v_t`` the
  rows' variance along them; right when the signal rows are the ones that
  move the response (words of sentiment in a sentence, say), whatever their
  distribution.

The mixture can single out rows that are unusual but irrelevant to the
response, and the response's direction can be noise, so the targets decide:
each candidate's pooled rows feed a ridge read-out whose penalty maximizes the
evidence (:mod:`skdiagatt.diagatt._evidence`), and the candidate of least
cross-validated squared error is the start (the response direction and the
supervised mixture estimated without the held-out fold) -- unless a mixture
candidate is within one standard error of it: the mixture is the model the
estimator assumes, and with few samples the folds' noise alone can favour
another candidate.  Everything is NumPy on at most the samples the mixture
is fitted on.
"""

import numpy as np
from scipy.sparse import csr_matrix

from ._evidence import evidence_ridge
from ._mixture import (
    MAX_SAMPLES,
    row_scores,
    rows_mixture,
    segment_softmax,
    stacked_rows,
    subset_rows,
    supervised_mixture,
)

__all__ = ["at_most", "candidate_errors", "choose_start", "data_start", "scores_into_params"]

_FOLDS = 3
_MIXTURE_STRENGTHS = (1.0, 0.5)
_RESPONSE_STRENGTHS = (1.0, 3.0)
# Below this expected share of signal rows found by the rows' own posterior,
# the targets help the mixture (supervised candidates).
_CERTAIN = 0.95


def _weighted_sums(weights, starts, Z):
    """``sum_j weights_j z_j`` over each sample's rows (n, d), ``weights`` (N,).

    A sparse (n, N) product: one pass over the rows, no (N, d) temporary.
    """
    indptr = np.append(starts, len(Z))
    return csr_matrix((weights, np.arange(len(Z)), indptr), shape=(len(starts), len(Z))) @ Z


def _pool(Z, starts, scores):
    """Rows pooled by each head's softmax of its ``scores`` (N, R) within the samples: (n, R * d)."""
    k = segment_softmax(scores, starts)
    return np.concatenate([_weighted_sums(k[:, r], starts, Z) for r in range(k.shape[1])], axis=1)


def _response(H0, Y, w, Z, omega, m, strength):
    """The response start: its direction ``beta / sqrt(v)`` (d, t) and row scores (N,).

    ``w`` weighs the samples of ``H0``, ``omega`` the rows ``Z``; ``m`` (d,)
    is the rows' centre (zeros for scores without a linear term).
    """
    beta, _, _ = evidence_ridge(H0, Y, w)  # (d, t)
    u = Z @ beta - m @ beta  # projections of the centred rows, (N, t)
    scale = np.sqrt(np.maximum(omega @ u**2 / omega.sum(), 1e-12))
    return beta / scale, strength / 2.0 * np.sum((u / scale) ** 2, axis=1)


def _response_coefficients(unit, m, strength, n_heads, affine):
    """``(A, a)`` of ``strength / 2 * |unit^T (z - m)|^2`` for every head (the constant dropped)."""
    A = unit @ unit.T * (strength / 2.0)
    a = -2.0 * A @ m if affine else np.zeros(len(m))
    return np.repeat(A[None], n_heads, axis=0), np.repeat(a[None], n_heads, axis=0)


def _cv_errors(pooled, Y, w, folds):
    """Each sample's held-out squared error (n,) of the evidence ridge of ``Y`` on ``pooled(train)``.

    Infinite where a candidate's pooled rows are not finite (degenerate rows
    can overflow a score) or their decomposition fails.
    """
    err = np.full(len(Y), np.inf)
    with np.errstate(all="ignore"):
        for k in range(folds.max() + 1):
            test = folds == k
            H_tr, H_te = pooled(~test)
            if not (np.isfinite(H_tr).all() and np.isfinite(H_te).all()):
                return np.full(len(Y), np.inf)
            try:
                coef, intercept, _ = evidence_ridge(H_tr, Y[~test], w[~test])
            except np.linalg.LinAlgError:
                return np.full(len(Y), np.inf)
            err[test] = np.sum((H_te @ coef + intercept - Y[test]) ** 2, axis=1)
    return err


def _one_standard_error(errors, w, preferred):
    """The candidate of least weighted mean error, or a ``preferred`` one within one standard error of it.

    ``errors``: ``{name: per-sample errors}``.  The standard error is that of
    the paired differences over the samples (the "one standard error" rule
    of model selection, Hastie, Tibshirani and Friedman, *The Elements of
    Statistical Learning*, Section 7.10).
    """
    mean = {k: (w @ e / w.sum() if np.isfinite(e).all() else np.inf) for k, e in errors.items()}
    best = min(mean, key=mean.get)
    if best in preferred or not np.isfinite(mean[best]):
        return best
    n = w.sum()
    for k in sorted((k for k in preferred if np.isfinite(mean[k])), key=mean.get):
        diff = errors[k] - errors[best]
        spread = np.sqrt(max(w @ (diff - w @ diff / n) ** 2 / n, 0.0) / n)
        if mean[k] - mean[best] <= spread:
            return k
    return best


def choose_start(Z, starts, Y, mixture, *, affine=True, sample_weight=None, random_state=None):
    """The candidate start of least cross-validated error, the mixture within one standard error.

    Parameters
    ----------
    Z : ndarray of shape (N, d)
        The samples' whitened rows ``z = c S x``, stacked
        (:func:`~skdiagatt.diagatt._mixture.stacked_rows`).
    starts : ndarray of shape (n,)
        Each sample's first row in ``Z``.
    Y : ndarray of shape (n, t)
        Targets of the samples (standardized values, or 0/1 class columns).
    mixture : (ndarray (R, d, d), ndarray (R, d))
        The mixture's score coefficients, one per head.
    affine : bool, default=True
        Whether scores may have a linear term.
    sample_weight : ndarray of shape (n,) or None
        Positive weights of the samples in the read-outs and their errors.
    random_state : numpy RandomState
        Draws the folds.

    Returns
    -------
    A : ndarray of shape (R, d, d)
    a : ndarray of shape (R, d)
    name : str
        ``"uniform"``, ``"mixture"`` or ``"response"``, with its strength.
    """
    rng = np.random.RandomState(0) if random_state is None else random_state
    Y = np.asarray(Y, np.float64)
    n, R, d = len(starts), mixture[0].shape[0], Z.shape[1]
    if n < 2 * _FOLDS:
        return np.zeros((R, d, d)), np.zeros((R, d)), "uniform"  # too few samples to compare
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    folds = rng.permutation(np.arange(n) % _FOLDS)
    errors, strengths, (H0, omega, m) = candidate_errors(Z, starts, Y, mixture, w, folds, affine=affine)
    # The mixture is the model the estimator assumes: it stays the start
    # unless another candidate is better by more than the noise of the folds.
    name = _one_standard_error(errors, w, [k for k in errors if k.startswith("mixture")])
    g = strengths[name]
    if name == "uniform":
        return np.zeros((R, d, d)), np.zeros((R, d)), name
    if name.startswith("mixture"):
        return mixture[0] * g, mixture[1] * g, name
    if name.startswith("supervised"):
        A, a = supervised_mixture(Z, starts, w, Y, mixture, affine=affine)
        return A * g, a * g, name
    unit, _ = _response(H0, Y, w, Z, omega, m, g)
    return (*_response_coefficients(unit, m, g, R, affine), name)


def candidate_errors(Z, starts, Y, mixture, w, folds, *, affine=True, supervised=True):
    """Every candidate start's held-out errors on the whitened rows ``Z``: ``(errors, strengths, pooling)``.

    ``errors``: ``{name: per-sample errors}`` (:func:`_cv_errors` over
    ``folds``), ``strengths``: ``{name: g}``; ``pooling``: the mean-pooled
    rows ``H0`` (n, d), the rows' weights (N,) and their centre (d,).  The
    response's direction and the supervised mixture are estimated on the
    training folds only; ``supervised=False`` leaves the latter out.
    """
    counts = np.diff(np.append(starts, len(Z)))
    omega = np.repeat(w, counts)
    m = omega @ Z / omega.sum() if affine else np.zeros(Z.shape[1])
    H0 = _weighted_sums(1.0 / np.repeat(counts, counts), starts, Z)
    with np.errstate(all="ignore"):
        mixture_scores = row_scores(Z, *mixture)
    candidates = [("uniform", 0.0 * mixture_scores[:, :1], None)] + [
        (f"mixture x{g:g}", g * mixture_scores, g) for g in _MIXTURE_STRENGTHS
    ]
    errors, strengths = {}, {"uniform": None}
    for name, scores, g in candidates:
        with np.errstate(all="ignore"):
            H = _pool(Z, starts, scores)
        errors[name], strengths[name] = _cv_errors(lambda train, H=H: (H[train], H[~train]), Y, w, folds), g
    for g in _RESPONSE_STRENGTHS:
        def pooled(train, g=g):
            H = _pool(Z, starts, _response(H0[train], Y[train], w[train], Z, omega, m, g)[1][:, None])
            return H[train], H[~train]

        name = f"response x{g:g}"
        errors[name], strengths[name] = _cv_errors(pooled, Y, w, folds), g
    if supervised and mixture[0].shape[0] == 1 and _certainty(mixture_scores, starts, w) < _CERTAIN:
        fitted = _supervised_folds(Z, starts, Y, w, mixture, folds, affine)
        for g in _MIXTURE_STRENGTHS:
            def pooled(train, g=g):
                held_out = folds[np.argmin(train)]  # the fold of the first sample not in train
                with np.errstate(all="ignore"):
                    H = _pool(Z, starts, g * row_scores(Z, *fitted[held_out]))
                return H[train], H[~train]

            name = f"supervised mixture x{g:g}"
            errors[name], strengths[name] = _cv_errors(pooled, Y, w, folds), g
    return errors, strengths, (H0, omega, m)


def _certainty(scores, starts, w):
    """The share of signal rows the posterior ``softmax(scores)`` (N, 1) expects to find: mean of its maxima."""
    with np.errstate(all="ignore"):
        top = np.maximum.reduceat(segment_softmax(scores, starts)[:, 0], starts)
    return w @ top / w.sum() if np.isfinite(top).all() else 1.0


def _supervised_folds(Z, starts, Y, w, mixture, folds, affine):
    """:func:`~skdiagatt.diagatt._mixture.supervised_mixture` fitted without each fold: ``{fold: (A, a)}``."""
    fitted = {}
    for k in range(folds.max() + 1):
        train = folds != k
        fitted[k] = supervised_mixture(*subset_rows(Z, starts, train), w[train], Y[train], mixture, affine=affine)
    return fitted


def data_start(samples, Y, c, S, n_heads, *, affine, choose, sample_weight=None, random_state):
    """Score coefficients ``(A, a, name)`` of a start estimated from at most ``MAX_SAMPLES`` samples.

    The rows' mixture (:func:`~skdiagatt.diagatt._mixture.rows_mixture`) with
    ``n_heads`` signal components; with ``choose`` the candidate of
    :func:`choose_start` instead.  ``sample_weight`` weighs the samples in both.

    BLAS runs on one thread: these products are small, and multithreaded
    OpenBLAS collapses when other processes (or JAX's own threads) load the
    cores.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _data_start(samples, Y, c, S, n_heads, affine, choose, sample_weight, random_state)


def at_most(samples, Y, sample_weight, rng):
    """``(samples, Y, w)``, or ``MAX_SAMPLES`` of them drawn by ``rng``; ``w``: the weights (ones if None)."""
    w = np.ones(len(samples)) if sample_weight is None else np.asarray(sample_weight, np.float64)
    if len(samples) > MAX_SAMPLES:
        pick = np.sort(rng.choice(len(samples), MAX_SAMPLES, replace=False))
        samples, Y, w = [samples[i] for i in pick], Y[pick], w[pick]
    return samples, Y, w


def _data_start(samples, Y, c, S, n_heads, affine, choose, sample_weight, rng):
    samples, Y, w = at_most(samples, Y, sample_weight, rng)
    Z, starts = stacked_rows(samples, c, S)  # once, for the mixture and the choice
    A, a = rows_mixture(Z, starts, w, n_heads, affine=affine, random_state=rng)
    if not choose:
        return A, a, "mixture"
    return choose_start(Z, starts, Y, (A, a), affine=affine, sample_weight=w, random_state=rng)


def scores_into_params(params, A, a):
    """``params`` with the score coefficients ``A`` (R, d, d) and ``a`` (R, d), or ``a=None``.

    A low-rank parameterization (``L``, and ``M`` when not symmetric) takes
    the positive part of ``A``'s top eigenpairs.
    """
    params = dict(params)
    if "W" in params:
        params["W"] = A.astype(np.float32)
    else:
        ev, Q = np.linalg.eigh(A)  # ascending: the last q are the largest
        q = params["L"].shape[2]
        L = Q[:, :, -q:] * np.sqrt(np.maximum(ev[:, None, -q:], 0.0))
        params["L"] = L.astype(np.float32)
        if "M" in params:
            params["M"] = params["L"].copy()
    if a is not None:
        params["U"] = a.astype(np.float32)
    return params
