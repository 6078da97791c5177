"""The empirical-Bayes start of DiagAtt: a Gaussian mixture over the rows.

Every sample carries many background rows and, per head, one signal row.
Read as a generative model, the rows of sample i are Gaussian ``N(m0, C0)``
except one row per head r, drawn at random, which is ``N(m_r, C_r)``.  The
posterior over which row is head r's is then a softmax over the rows of the
log-likelihood ratio

    log N(z; m_r, C_r) - log N(z; m0, C0) = z^T A_r z + a_r^T z + const,

    A_r = (P0 - P_r) / 2,    a_r = P_r m_r - P0 m0,    P = C^-1,

exactly DiagAtt's affine score.  Fitting the mixture by EM uses the
background rows, which outnumber the responses by the rows per sample, and no
response at all: at a few hundred samples it places the scores near the
Bayes localizer whenever the signal rows differ in distribution from the
others, which is what any row-wise score needs in order to find them.  The
supervised training then starts from it (and is shrunk towards it).

The signal covariances are estimated from about one row per sample, so they
are shrunk towards a multiple of the background covariance (in the
background's whitened coordinates, towards a multiple of the identity) by
the oracle approximating shrinkage of Chen, Wiesel, Eldar and Hero, "Shrinkage
Algorithms for MMSE Covariance Estimation", IEEE Trans. Signal Process. 58
(2010).  Several heads start as several signal components: the rows the one-
component fit weighs are split by a weighted k-means, then each component is
refined with its own responsibilities (a mean-field EM).

All arithmetic is float64 NumPy on at most ``max_samples`` samples: the start
needs a fraction of the rows of a large data set.
"""

import itertools

import numpy as np

from ._evidence import evidence_ridge

__all__ = ["MAX_SAMPLES", "signal_mixture", "rows_mixture", "subset_rows", "supervised_mixture"]

#: Samples the mixture is fitted on at most (drawn at random from more).
MAX_SAMPLES = 1024

# Components whose distinct-row posterior is summed exactly, over this many
# rows beyond the number of components in each sample.
_EXACT_COMPONENTS = 4
_SPARE_ROWS = 3


def stacked_rows(samples, c, S):
    """The whitened rows ``z = c S x`` of all samples (N, d) and each sample's first row."""
    lengths = np.array([len(x) for x in samples])
    Z = np.concatenate(samples).astype(np.float64) @ (float(c) * np.asarray(S, np.float64))
    return Z, np.concatenate([[0], np.cumsum(lengths)[:-1]])


def subset_rows(Z, starts, keep):
    """The stacked rows of the samples ``keep`` (bool, n) and each one's first row among them."""
    counts = np.diff(np.append(starts, len(Z)))
    return Z[np.repeat(keep, counts)], np.append(0, np.cumsum(counts[keep])[:-1])


def segment_softmax(scores, starts):
    """Softmax of ``scores`` (N, K) within each sample's rows (``starts``: first rows)."""
    top = np.maximum.reduceat(scores, starts, axis=0)
    counts = np.diff(np.append(starts, len(scores)))
    e = np.exp(scores - np.repeat(top, counts, axis=0))
    return e / np.repeat(np.add.reduceat(e, starts, axis=0), counts, axis=0)


def _responsibilities(scores, starts, n_sweeps=5):
    """Each component's posterior over the rows (N, K), its rows distinct from the others'.

    One row per component and sample, never the same row twice: the joint
    posterior of an assignment of distinct rows is proportional to
    ``exp(sum_k score_k(row_k))``.  For a few components it is summed exactly
    over the assignments among each sample's most likely rows
    (:func:`_assignment_marginals`); otherwise a few mean-field sweeps
    approximate it (each component's posterior times ``P(no other component's
    row is j)``).  Mean field alone lets two components settle half on the
    same rows, when both scores favour them.
    """
    K = scores.shape[1]
    counts = np.diff(np.append(starts, len(scores)))
    m = min(K + _SPARE_ROWS, counts.min())
    if 1 < K <= _EXACT_COMPONENTS and m >= K:
        return _assignment_marginals(scores, starts, counts, m)
    r = segment_softmax(scores, starts)
    for _ in range(n_sweeps if K > 1 else 0):
        free = np.log(np.maximum(1.0 - r, 1e-12))
        r = segment_softmax(scores + free.sum(axis=1, keepdims=True) - free, starts)
    return r


def _assignment_marginals(scores, starts, counts, m):
    """Exact marginals of distinct-row assignments among each sample's ``m`` best rows (N, K)."""
    K = scores.shape[1]
    assign = np.array(list(itertools.permutations(range(m), K)))  # (n_assign, K)
    best = scores.max(axis=1)
    cand = np.stack([s + np.argsort(-best[s:s + c], kind="stable")[:m] for s, c in zip(starts, counts)])
    logw = np.sum(scores[cand][:, assign, np.arange(K)], axis=-1)  # (n, n_assign)
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    r = np.zeros_like(scores)
    for k in range(K):
        r[cand, k] = w @ np.eye(m)[assign[:, k]]  # (n, m): mass of each candidate row
    return r


def _moments(Z, r, omega):
    """Count, first (d,) and second (d, d) moments of the rows ``Z`` (N, d) with weights ``omega r``.

    ``omega`` (N,) weighs each row by its sample's weight, as that many copies
    of it, each of responsibility ``r`` (N,); the fourth value, ``sum omega
    r^2``, gives the effective count ``count^2 / sum omega r^2``.  Only rows
    of non-negligible weight enter the product: a signal component's weight
    sits on about one row per sample.
    """
    w = r * omega
    keep = np.flatnonzero(w > 1e-9 * max(w.max(initial=0.0), 1e-300))
    Zk, wk = Z[keep], w[keep]
    return wk.sum(), wk @ Zk, (Zk * wk[:, None]).T @ Zk, wk @ r[keep]


def _gaussian(count, first, second):
    """Mean (d,) and covariance (d, d) from a count and moments."""
    mean = first / count
    return mean, second / count - np.outer(mean, mean)


def _component_moments(Z, r, omega):
    """:func:`_moments` of each component (K tuples) and of their union (count, first, second).

    The union's moments are the components' sum while no row's total
    responsibility exceeds one (mean field may overshoot; then it is clipped).
    """
    parts = [_moments(Z, r[:, k], omega) for k in range(r.shape[1])]
    total = r.sum(axis=1)
    if total.max(initial=0.0) <= 1.0 + 1e-9:
        return parts, tuple(sum(p[i] for p in parts) for i in range(3))
    return parts, _moments(Z, np.minimum(total, 1.0), omega)[:3]


def _oas(cov, n_eff, root):
    """``cov`` shrunk towards a multiple of the background covariance (OAS).

    ``root`` (d, d) whitens the background: ``root^T C0 root = I``.
    """
    d = cov.shape[0]
    C = root.T @ cov @ root
    mu = np.trace(C) / d
    tr2, tr_sq = np.sum(C * C), np.trace(C) ** 2
    den = (n_eff + 1 - 2 / d) * (tr2 - tr_sq / d)
    rho = 1.0 if den <= 0 else min(1.0, ((1 - 2 / d) * tr2 + tr_sq) / den)
    C = (1 - rho) * C + rho * mu * np.eye(d)
    inv_root = np.linalg.inv(root)
    return inv_root.T @ C @ inv_root


def _precision(cov):
    ev, Q = np.linalg.eigh((cov + cov.T) / 2)
    ev = np.maximum(ev, max(ev.max(), 1e-30) * 1e-6)
    return (Q / ev) @ Q.T


def row_scores(Z, A, a):
    """Scores ``z^T A_k z + a_k^T z`` (N, K) of the rows ``Z`` (N, d) under each ``(A_k, a_k)``."""
    return np.stack([np.sum((Z @ Ak) * Z, axis=1) for Ak in A], axis=1) + Z @ a.T


def _scores(Z, P0, m0, components):
    """Log-likelihood ratios (N, K) of the rows, up to a per-component constant, and (A, a)."""
    A = np.stack([(P0 - P) / 2 for _, P in components])
    a = np.stack([P @ m - P0 @ m0 for m, P in components])
    return row_scores(Z, A, a), A, a


def signal_mixture(samples, c, S, n_components=1, *, affine=True, n_iter=20,
                   max_samples=MAX_SAMPLES, sample_weight=None, random_state=None):
    """Score coefficients of the rows' Gaussian mixture, in the whitened coordinates ``z = c S x``.

    Parameters
    ----------
    samples : list of ndarray of shape (p_i, d)
    c : float
        Row scale.
    S : ndarray of shape (d, d)
        Symmetric whitener.
    n_components : int, default=1
        Signal components (heads).
    affine : bool, default=True
        Whether the scores have a linear term; without one the signal
        components keep the background's mean.
    n_iter : int, default=20
        EM iterations.
    max_samples : int, default=MAX_SAMPLES
        Samples drawn (without replacement) from a larger data set for the fit.
    sample_weight : ndarray of shape (n,) or None
        Positive weights: a sample of weight 2 counts as two copies of it.
    random_state : numpy RandomState
        Draws the samples and seeds the split into components.

    Returns
    -------
    A : ndarray of shape (n_components, d, d)
        Quadratic coefficients (symmetric).
    a : ndarray of shape (n_components, d)
        Linear coefficients (zeros unless ``affine``).  Both are zeros (uniform
        attention) when the rows are too degenerate for the fit.

    Examples
    --------
    Rows of 20 per sample, one of them drawn with twice the variance: the
    score is about ``|z|^2 / 4`` and picks that row.

    >>> import numpy as np
    >>> from skdiagatt.diagatt._mixture import signal_mixture
    >>> rng = np.random.RandomState(0)
    >>> X = [rng.standard_normal((20, 5)) for _ in range(300)]
    >>> for x in X:
    ...     x[0] *= np.sqrt(2.0)
    >>> A, a = signal_mixture(X, 1.0, np.eye(5), random_state=rng)
    >>> bool(np.allclose(np.diag(A[0]), 0.25, atol=0.08))
    True
    """
    rng = np.random.RandomState(0) if random_state is None else random_state
    weights = np.ones(len(samples)) if sample_weight is None else np.asarray(sample_weight, float)
    if len(samples) > max_samples:
        pick = np.sort(rng.choice(len(samples), max_samples, replace=False))
        samples, weights = [samples[i] for i in pick], weights[pick]
    Z, starts = stacked_rows(samples, c, S)
    return rows_mixture(Z, starts, weights, n_components, affine=affine, n_iter=n_iter, random_state=rng)


def rows_mixture(Z, starts, weights, n_components=1, *, affine=True, n_iter=20, random_state=None):
    """:func:`signal_mixture` of rows already stacked and whitened (:func:`stacked_rows`).

    ``Z`` (N, d), ``starts`` each sample's first row, ``weights`` (n,) the
    samples' weights.  Returns ``(A, a)`` as :func:`signal_mixture` does.
    """
    rng = np.random.RandomState(0) if random_state is None else random_state
    d = Z.shape[1]
    try:
        with np.errstate(all="ignore"):
            A, a = _fit(Z, starts, np.asarray(weights, float), n_components, affine, n_iter, rng)
    except np.linalg.LinAlgError:
        A = a = np.full(1, np.nan)
    if not (np.isfinite(A).all() and np.isfinite(a).all()):
        # Degenerate rows (all alike, or of extreme scale): the uniform start.
        return np.zeros((n_components, d, d)), np.zeros((n_components, d))
    return A, a


def _fit(Z, starts, weights, n_components, affine, n_iter, rng):
    omega = np.repeat(weights, np.diff(np.append(starts, len(Z))))
    moments = _moments(Z, np.ones(len(Z)), omega)[:3]
    m0, C0 = _gaussian(*moments)
    P0 = _precision(C0)
    # Start: the rows the background explains least (one head: a signal twice as spread).
    D = Z - m0
    if n_components == 1:
        r = segment_softmax(0.25 * np.sum((D @ P0) * D, axis=1)[:, None], starts)
    else:
        r = _clustered_outliers(Z, starts, np.sum((D @ P0) * D, axis=1), n_components, rng)
    r, scores, A, a = _em(Z, starts, moments, omega, r, affine, n_iter)
    if n_components > 1:
        A, a = _discriminate(scores, starts, r, A, a, weights)
    return A, a if affine else np.zeros_like(a)


def _discriminate(scores, starts, r, A, a, weights):
    """Scores that tell each component's rows from the other components' too.

    A component's log-likelihood ratio ``s_k`` against the background may
    favour another component's rows (a widely spread signal scores high on a
    shifted one), and the heads' softmaxes are independent: only the joint
    posterior keeps them apart.  Head k's score becomes ``sum_l theta_kl
    s_l``, still a quadratic, with ``theta_k`` the conditional-logit fit of
    the posterior ``r[:, k]`` on the rows' scores (:func:`_conditional_logit`).
    """
    theta = np.stack([_conditional_logit(scores, starts, r[:, k], k, weights) for k in range(A.shape[0])])
    return np.einsum("kl,lde->kde", theta, A), theta @ a


def _conditional_logit(F, starts, target, k, weights=None, n_iter=30, tol=1e-8):
    """``theta`` (K,) maximizing ``sum_i w_i sum_j target_ij log softmax_j(F_ij . theta)``, from ``e_k``.

    Newton's method with step halving on a concave objective; ``target``
    sums to one over each sample's rows; ``weights`` (n,) weigh the samples.
    """
    counts = np.diff(np.append(starts, len(F)))
    weights = np.ones(len(starts)) if weights is None else weights
    omega = np.repeat(weights, counts)

    def objective(theta):
        s = F @ theta
        top = np.maximum.reduceat(s, starts)
        norm = top + np.log(np.add.reduceat(np.exp(s - np.repeat(top, counts)), starts))
        return (omega * target) @ s - weights @ norm

    theta = np.eye(F.shape[1])[k]
    value = objective(theta)
    for _ in range(n_iter):
        p = segment_softmax((F @ theta)[:, None], starts)[:, 0]
        mean_p = np.add.reduceat(p[:, None] * F, starts, axis=0)
        grad = (omega * (target - p)) @ F
        hess = (F * (omega * p)[:, None]).T @ F - (mean_p * weights[:, None]).T @ mean_p
        step = np.linalg.lstsq(hess + 1e-9 * np.trace(hess) * np.eye(len(theta)), grad, rcond=None)[0]
        t = 1.0
        while t > 1e-4 and objective(theta + t * step) < value:
            t /= 2
        if t <= 1e-4:
            break
        theta, previous = theta + t * step, value
        value = objective(theta)
        if value - previous < tol * max(1.0, abs(value)):
            break
    return theta


def _clustered_outliers(Z, starts, distance, k, rng):
    """Responsibilities (N, k) of k signal components from each sample's k most outlying rows.

    The rows the background explains least are mostly signal rows; a
    Gaussian mixture (diagonal covariances) groups them into the k kinds of
    signal row, so that each component starts on one kind.
    """
    from sklearn.mixture import GaussianMixture

    counts = np.diff(np.append(starts, len(Z)))
    top = np.concatenate([
        s + np.argsort(-distance[s:s + c], kind="stable")[:k] for s, c in zip(starts, counts)
    ])
    mixture = GaussianMixture(k, covariance_type="diag", random_state=rng.randint(2**31 - 1))
    r = np.zeros((len(Z), k))
    r[top] = mixture.fit(Z[top]).predict_proba(Z[top])
    total = np.repeat(np.add.reduceat(r, starts, axis=0), counts, axis=0)
    return np.where(total > 0, r / np.maximum(total, 1e-300), 1.0 / np.repeat(counts, counts)[:, None])


def _em(Z, starts, moments, omega, r, affine, n_iter, tol=1e-3, evidence=None):
    """EM from the responsibilities ``r`` (N, K) until they move by less than ``tol``; ``omega``: row weights.

    ``evidence``: None, or a function of the responsibilities giving each
    row's further log-likelihood (N, 1) (:func:`_response_evidence`), added
    to the scores in the E-step.  Returns the responsibilities, the rows'
    scores (N, K) that gave them (without ``evidence``) and the scores'
    coefficients ``(A, a)``.
    """
    for _ in range(n_iter):
        parts, signal = _component_moments(Z, r, omega)
        # The background: every row, less what the components take.
        m0, C0 = _gaussian(*(whole - part for whole, part in zip(moments, signal)))
        P0 = _precision(C0)
        root = np.linalg.cholesky(P0)
        components = []
        for count, first, second, square in parts:
            m, C = _gaussian(count, first, second)
            components.append((m if affine else m0, _precision(_oas(C, count**2 / square, root))))
        scores, A, a = _scores(Z, P0, m0, components)
        extra = 0.0 if evidence is None else evidence(r)
        r, previous = _responsibilities(scores + extra, starts), r
        if np.max(np.abs(r - previous)) < tol:
            break
    return r, scores, A, a


def supervised_mixture(Z, starts, weights, Y, mixture, *, affine=True, n_iter=20):
    """One signal component fitted to the rows and the targets: ``(A, a)`` of shapes (1, d, d), (1, d).

    The model the read-out assumes, ``y_i = b + z_ij^T beta + eps`` for the
    signal row j of sample i, makes the targets evidence of which row that
    is: the E-step of :func:`rows_mixture` adds each row's log-likelihood of
    its sample's target (:func:`_response_evidence`).  The scores stay the
    log-likelihood ratio of the rows alone (a new sample has no target), but
    the signal's moments come from sharper responsibilities where the rows'
    distributions overlap.  EM starts from the responsibilities of
    ``mixture`` (one component), which come back if the fit degenerates.
    """
    counts = np.diff(np.append(starts, len(Z)))
    weights = np.asarray(weights, float)
    omega = np.repeat(weights, counts)
    moments = _moments(Z, np.ones(len(Z)), omega)[:3]
    evidence = _response_evidence(Z, starts, np.asarray(Y, np.float64), weights)
    with np.errstate(all="ignore"):
        r = segment_softmax(row_scores(Z, *mixture), starts)
        try:
            _, _, A, a = _em(Z, starts, moments, omega, r, affine, n_iter, evidence=evidence)
        except np.linalg.LinAlgError:
            return mixture
    if not (np.isfinite(A).all() and np.isfinite(a).all()):
        return mixture
    return A, a if affine else np.zeros_like(a)


def _response_evidence(Z, starts, Y, weights):
    """A function of the responsibilities ``r`` (N, 1): each row's log-likelihood of its target (N, 1).

    The read-out ``beta`` is the evidence ridge (:mod:`~skdiagatt.diagatt._evidence`)
    of the targets ``Y`` (n, t) on the rows pooled by ``r``, the noise
    variance ``sigma_t^2`` of each target that ridge's weighted residual; row
    j of sample i then has ``-1/2 sum_t (y_it - b_t - z_ij^T beta_t)^2 / sigma_t^2``.
    """
    rows = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(Z))))

    def evidence(r):
        H = np.add.reduceat(Z * r[:, :1], starts, axis=0)  # (n, d)
        coef, intercept, _ = evidence_ridge(H, Y, weights)
        sigma2 = np.maximum(weights @ (Y - H @ coef - intercept) ** 2 / weights.sum(), 1e-12)
        residual = Y[rows] - Z @ coef - intercept  # (N, t)
        return -0.5 * np.sum(residual**2 / sigma2, axis=1, keepdims=True)

    return evidence
