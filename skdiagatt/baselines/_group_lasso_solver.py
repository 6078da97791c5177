"""Group-lasso solver (NumPy, float64): accelerated proximal gradient on a working set.

Problem, for a design ``X`` (n, G * g) whose columns form G consecutive groups
of g columns, coefficients ``B`` (G * g, t) and an unpenalized intercept ``b`` (t,):

    minimize  sum_i v_i loss(y_i, x_i B + b)  +  alpha * sum_j w_j ||B_j||_F

with ``w_j = sqrt(g)`` (Yuan and Lin, 2006), ``v_i`` the sample weights
normalized to sum 1 (``1/n`` by default: the mean loss; a sample of weight 2
counts as two copies of it) and ``loss`` the datafit of the targets' ``family``,
``"gaussian"``, ``"bernoulli"`` or ``"categorical"`` (:mod:`._datafits`).

Method.  Columns are centred once, by their weighted mean (the intercept then decouples from the
groups up to the loss's curvature).  For each ``alpha`` a *working set* of
groups is solved by FISTA with backtracking and adaptive restart (Beck and
Teboulle, 2009; O'Donoghue and Candes, 2015); the full gradient then checks the
KKT conditions of every group outside the set, violators are added and the
loop repeats.  The first working set follows the sequential strong rule
(Tibshirani et al., 2012): groups with ``||X_j^T r|| >= w_j (2 alpha - alpha_prev)``.
Where the solution is sparse (the regime the validation split picks here) a
solve costs a few products with a thin slice of ``X``.

Everything here is deterministic: the same input gives bit-identical output.
"""

import warnings

import numpy as np

from ._datafits import DATAFITS

__all__ = [
    "center",
    "intercept_only",
    "alpha_max",
    "group_lasso",
    "group_lasso_path",
    "kkt_violation",
    "decision",
]


def _mean_weights(sample_weight):
    """The weights ``v`` of the mean loss, summing to 1; None for the plain mean."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    return w / w.sum()


def _mean(per_sample, v):
    """``sum_i v_i a_i`` over the first axis (the plain mean when ``v`` is None)."""
    return per_sample.mean(axis=0) if v is None else v @ per_sample


def _loss(z, Y, family, v=None):
    """Mean loss over samples of the predictor ``z`` (n, t), weighted by ``v`` (see :func:`_mean_weights`)."""
    return float(_mean(DATAFITS[family].value(z, Y), v))


def _dloss(z, Y, family, v=None):
    """Derivative of the (weighted) mean loss in ``z``, shape (n, t)."""
    g = DATAFITS[family].gradient(z, Y)
    return g / z.shape[0] if v is None else g * v[:, None]


def _group_norms(M, group_size):
    """Frobenius norm of each group of rows of ``M`` (G * g, t), shape (G,)."""
    G = M.shape[0] // group_size
    return np.sqrt(np.sum(M.reshape(G, group_size, -1) ** 2, axis=(1, 2)))


def _prox(M, thresh, group_size):
    """Group soft-thresholding: ``B_j * max(0, 1 - thresh_j / ||B_j||)``."""
    norms = _group_norms(M, group_size)
    scale = np.where(norms > thresh, 1.0 - thresh / np.where(norms > 0, norms, 1.0), 0.0)
    return (M.reshape(norms.size, group_size, -1) * scale[:, None, None]).reshape(M.shape)


def center(X, copy=True, sample_weight=None):
    """Centre the columns of ``X`` at their (weighted) mean.

    Returns
    -------
    Xc : ndarray of shape (n, D), float64
    mean : ndarray of shape (D,)
    """
    X = np.array(X, dtype=np.float64, copy=copy)
    mean = _mean(X, _mean_weights(sample_weight))
    X -= mean
    return X, mean


def intercept_only(Y, family, sample_weight=None):
    """Optimal intercept with every group at zero, shape (t,)."""
    return DATAFITS[family].intercept(_mean(Y, _mean_weights(sample_weight)))


def _weights(n_groups, group_size):
    return np.full(n_groups, np.sqrt(group_size))


def alpha_max(Xc, Y, group_size, family, sample_weight=None):
    """Smallest ``alpha`` at which every group is zero.

    Parameters
    ----------
    Xc : ndarray of shape (n, G * g)
        Centred design (see :func:`center`).
    Y : ndarray of shape (n, t)
    group_size : int
    family : {"gaussian", "bernoulli", "categorical"}
    sample_weight : ndarray of shape (n,), optional
        Non-negative weights of the samples in the loss, not all zero.

    Returns
    -------
    float
    """
    n = Xc.shape[0]
    c = intercept_only(Y, family, sample_weight)
    grad = Xc.T @ _dloss(np.broadcast_to(c, (n, Y.shape[1])), Y, family, _mean_weights(sample_weight))
    G = Xc.shape[1] // group_size
    return float(np.max(_group_norms(grad, group_size) / _weights(G, group_size)))


def _cols(groups, group_size):
    return (groups[:, None] * group_size + np.arange(group_size)[None, :]).ravel()


def _top_eig(A, v_mean=None, n_iter=30):
    """Largest eigenvalue of ``A^T V A`` (power iteration, deterministic start).

    ``V`` is the diagonal of the mean's weights ``v_mean`` (``1/n`` when None).
    """
    n, k = A.shape
    if k == 0:
        return 0.0
    v = np.ones(k) + 0.01 * np.arange(k) / max(k, 1)
    v /= np.linalg.norm(v)
    lam = 0.0
    for _ in range(n_iter):
        Av = A @ v
        w = A.T @ (Av / n if v_mean is None else v_mean * Av)
        lam = float(np.linalg.norm(w))
        if lam == 0.0:
            return 0.0
        v = w / lam
    return lam


def _fista(Xw, Y, B, c, thresh, group_size, family, tol_abs, max_iter, v=None):
    """FISTA with backtracking and adaptive restart on the working-set design ``Xw``.

    ``v``: the weights of the mean loss (:func:`_mean_weights`).

    Returns
    -------
    B, c, n_iter, converged
    """
    L = DATAFITS[family].curvature * max(_top_eig(Xw, v), 1.0)
    x, cx = B, c
    zx = Xw @ x
    y, cy, zy = x, cx, zx
    t = 1.0
    for it in range(1, max_iter + 1):
        zfull = zy + cy
        f_y = _loss(zfull, Y, family, v)
        Gz = _dloss(zfull, Y, family, v)
        gB = Xw.T @ Gz
        gc = Gz.sum(axis=0)
        while True:
            xn = _prox(y - gB / L, thresh / L, group_size)
            cn = cy - gc / L
            zn = Xw @ xn
            dx, dc = xn - y, cn - cy
            quad = float(np.sum(gB * dx) + np.sum(gc * dc))
            sq = float(np.sum(dx * dx) + np.sum(dc * dc))
            f_n = _loss(zn + cn, Y, family, v)
            if f_n <= f_y + quad + 0.5 * L * sq + 1e-12 * max(1.0, abs(f_y)):
                break
            L *= 2.0
        # Gradient mapping L (y - x+): zero exactly at a KKT point.
        gm = L * max(
            float(np.max(_group_norms(dx, group_size))) if dx.size else 0.0,
            float(np.max(np.abs(dc))),
        )
        if gm <= tol_abs:
            return xn, cn, it, True
        if np.sum((y - xn) * (xn - x)) + np.sum((cy - cn) * (cn - cx)) > 0:
            t = 1.0  # adaptive restart: momentum points uphill
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        mom = (t - 1.0) / t_next
        y = xn + mom * (xn - x)
        cy = cn + mom * (cn - cx)
        zy = zn + mom * (zn - zx)
        x, cx, zx, t = xn, cn, zn, t_next
    return xn, cn, max_iter, False


def group_lasso(
    Xc,
    Y,
    group_size,
    alpha,
    *,
    family="gaussian",
    coef_init=None,
    intercept_init=None,
    alpha_prev=None,
    tol=1e-6,
    max_iter=5000,
    alpha_scale=None,
    sample_weight=None,
):
    """Solve the group lasso at one ``alpha`` (absolute penalty).

    Parameters
    ----------
    Xc : ndarray of shape (n, G * g), float64
        Centred design (see :func:`center`); groups are consecutive blocks of
        ``group_size`` columns.
    Y : ndarray of shape (n, t)
    group_size : int
    alpha : float
        Absolute penalty, >= 0.
    family : {"gaussian", "bernoulli", "categorical"}
    coef_init : ndarray of shape (G * g, t), optional
        Warm start (e.g. the solution at the previous ``alpha`` of a path).
    intercept_init : ndarray of shape (t,), optional
        Warm-start intercept *of the centred problem*.
    alpha_prev : float, optional
        The previous penalty of a path, for the strong rule (default: the
        largest useful penalty, :func:`alpha_max`).
    tol : float
        Stop when the gradient mapping is below ``tol * alpha_scale`` for
        every group (and the KKT check passes with the same margin).
    max_iter : int
        FISTA iterations per working-set solve.
    alpha_scale : float, optional
        Scale of ``tol``; default :func:`alpha_max` (1 if that is 0).
    sample_weight : ndarray of shape (n,), optional
        Non-negative weights of the samples in the loss, not all zero; ``Xc``
        must be centred with the same weights.

    Returns
    -------
    coef : ndarray of shape (G * g, t)
    intercept : ndarray of shape (t,)
        Intercept of the *centred* problem: ``b = intercept - mean @ coef``.
    info : dict
        ``n_iter`` (total FISTA iterations), ``converged`` (bool),
        ``working_set`` (final group count).
    """
    if family not in DATAFITS:
        raise ValueError(f"family must be one of {tuple(DATAFITS)}, got {family!r}")
    n, D = Xc.shape
    t = Y.shape[1]
    G = D // group_size
    w = _weights(G, group_size)
    v = _mean_weights(sample_weight)
    amax = alpha_max(Xc, Y, group_size, family, sample_weight)
    scale = alpha_scale if alpha_scale is not None else (amax if amax > 0 else 1.0)
    tol_abs = tol * scale
    if alpha >= amax:
        # Every group is zero (exactly, not up to rounding in the prox).
        return np.zeros((D, t)), intercept_only(Y, family, sample_weight), {
            "n_iter": 0, "converged": True, "working_set": 0,
        }
    B = np.zeros((D, t)) if coef_init is None else np.array(coef_init, dtype=np.float64)
    c = intercept_only(Y, family, sample_weight) if intercept_init is None else np.array(intercept_init, float)

    # Strong rule from the gradient at the starting point.
    grad = Xc.T @ _dloss(Xc @ B + c, Y, family, v)
    prev = amax if alpha_prev is None else max(alpha_prev, alpha)
    norms = _group_norms(grad, group_size)
    active = _group_norms(B, group_size) > 0
    work = active | (norms >= w * (2 * alpha - prev))
    total_iter, converged = 0, False
    for _ in range(G + 1):
        groups = np.flatnonzero(work)
        cols = _cols(groups, group_size)
        Xw = Xc if groups.size == G else Xc[:, cols]
        Bw, c, it, converged = _fista(
            Xw, Y, B[cols], c, alpha * w[groups], group_size, family, tol_abs, max_iter, v
        )
        total_iter += it
        B = np.zeros((D, t))
        B[cols] = Bw
        grad = Xc.T @ _dloss(Xw @ Bw + c, Y, family, v)
        viol = (~work) & (_group_norms(grad, group_size) > alpha * w + tol_abs)
        if not viol.any():
            break
        work |= viol
    if not converged:
        warnings.warn(
            f"group lasso did not converge in {max_iter} iterations at alpha={alpha:.4g}; "
            "increase max_iter or tol",
            RuntimeWarning,
            stacklevel=2,
        )
    return B, c, {"n_iter": total_iter, "converged": converged, "working_set": int(work.sum())}


def group_lasso_path(
    Xc, Y, group_size, *, family="gaussian", alphas=None, n_alphas=10, eps=1e-2, tol=1e-6,
    max_iter=5000, sample_weight=None,
):
    """Solutions along a decreasing sequence of penalties, warm-started.

    Parameters
    ----------
    Xc : ndarray of shape (n, G * g)
        Centred design.
    Y : ndarray of shape (n, t)
    group_size : int
    family : {"gaussian", "bernoulli", "categorical"}
    alphas : sequence of float, optional
        Absolute penalties (sorted decreasing here).  Default: ``n_alphas``
        values log-spaced from :func:`alpha_max` down to ``eps`` times it.
    n_alphas, eps, tol, max_iter, sample_weight
        As above and in :func:`group_lasso`.

    Returns
    -------
    alphas : ndarray of shape (k,)
    coefs : ndarray of shape (k, G * g, t)
    intercepts : ndarray of shape (k, t)
        Intercepts of the centred problem.
    """
    amax = alpha_max(Xc, Y, group_size, family, sample_weight)
    if alphas is None:
        alphas = amax * np.logspace(0, np.log10(eps), n_alphas)
    alphas = np.sort(np.asarray(alphas, dtype=float))[::-1]
    coefs, intercepts = [], []
    B, c, prev = None, None, None
    for a in alphas:
        B, c, _ = group_lasso(
            Xc, Y, group_size, a, family=family, coef_init=B, intercept_init=c, alpha_prev=prev,
            tol=tol, max_iter=max_iter, alpha_scale=amax if amax > 0 else 1.0, sample_weight=sample_weight,
        )
        prev = a
        coefs.append(B)
        intercepts.append(c)
    return alphas, np.stack(coefs), np.stack(intercepts)


def kkt_violation(X, Y, coef, intercept, alpha, group_size, family="gaussian", sample_weight=None):
    """Largest violation of the optimality conditions, over groups and intercept.

    For a group with ``B_j != 0``: ``||X_j^T g + alpha w_j B_j / ||B_j|| ||``; for
    ``B_j = 0``: ``max(0, ||X_j^T g|| - alpha w_j)``; for the intercept ``|sum g|``;
    ``g`` is the derivative of the (weighted) mean loss in the predictor.

    Parameters
    ----------
    X : ndarray of shape (n, G * g)
        Design (centred or not: ``intercept`` must match it).
    Y : ndarray of shape (n, t)
    coef : ndarray of shape (G * g, t)
    intercept : ndarray of shape (t,)
    alpha : float
    group_size : int
    family : {"gaussian", "bernoulli", "categorical"}
    sample_weight : ndarray of shape (n,), optional
        The weights the solution was fitted with.

    Returns
    -------
    float
    """
    X = np.asarray(X, dtype=np.float64)
    Gz = _dloss(X @ coef + intercept, Y, family, _mean_weights(sample_weight))
    grad = X.T @ Gz
    G = coef.shape[0] // group_size
    w = _weights(G, group_size)
    norms = _group_norms(coef, group_size)
    gr = grad.reshape(G, group_size, -1)
    cf = coef.reshape(G, group_size, -1)
    safe = np.where(norms > 0, norms, 1.0)
    stat = np.sqrt(np.sum((gr + alpha * w[:, None, None] * cf / safe[:, None, None]) ** 2, axis=(1, 2)))
    slack = np.maximum(0.0, np.sqrt(np.sum(gr**2, axis=(1, 2))) - alpha * w)
    worst = np.where(norms > 0, stat, slack)
    return float(max(np.max(worst), np.max(np.abs(Gz.sum(axis=0)))))


def decision(X, coef, intercept):
    """Linear predictor ``X coef + intercept``, shape (n, t)."""
    return np.asarray(X, dtype=np.float64) @ coef + intercept
