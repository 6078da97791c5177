"""Group-lasso solver (NumPy, float64): accelerated proximal gradient on a working set.

Problem, for a design ``X`` (n, G * g) whose columns form G consecutive groups
of g columns, coefficients ``B`` (G * g, t) and an unpenalized intercept ``b`` (t,):

    minimize  (1/n) sum_i loss(y_i, x_i B + b)  +  alpha * sum_j w_j ||B_j||_F

with ``w_j = sqrt(g)`` (Yuan and Lin, 2006) and ``loss`` one of

- ``"squared"``:     ``1/2 ||y - z||^2``                (y real, t >= 1);
- ``"logistic"``:    ``log(1 + e^z) - y z``             (y in {0, 1}, t = 1);
- ``"multinomial"``: ``logsumexp(z) - <y, z>``          (y one-hot, t = C).

Method.  Columns are centred once (the intercept then decouples from the
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
from scipy.special import expit, logsumexp, softmax

__all__ = [
    "LOSSES",
    "center",
    "intercept_only",
    "alpha_max",
    "group_lasso",
    "group_lasso_path",
    "kkt_violation",
    "decision",
]

LOSSES = ("squared", "logistic", "multinomial")
# Curvature bound of each loss in z: the Lipschitz constant of its gradient.
_CURVATURE = {"squared": 1.0, "logistic": 0.25, "multinomial": 0.5}


def _loss(z, Y, loss):
    """Mean loss over samples of the predictor ``z`` (n, t)."""
    n = z.shape[0]
    if loss == "squared":
        r = z - Y
        return 0.5 * float(np.sum(r * r)) / n
    if loss == "logistic":
        return float(np.sum(np.logaddexp(0.0, z) - Y * z)) / n
    return float(np.sum(logsumexp(z, axis=1) - np.sum(Y * z, axis=1))) / n


def _dloss(z, Y, loss):
    """Derivative of the mean loss in ``z``, shape (n, t)."""
    n = z.shape[0]
    if loss == "squared":
        return (z - Y) / n
    if loss == "logistic":
        return (expit(z) - Y) / n
    return (softmax(z, axis=1) - Y) / n


def _group_norms(M, group_size):
    """Frobenius norm of each group of rows of ``M`` (G * g, t), shape (G,)."""
    G = M.shape[0] // group_size
    return np.sqrt(np.sum(M.reshape(G, group_size, -1) ** 2, axis=(1, 2)))


def _prox(M, thresh, group_size):
    """Group soft-thresholding: ``B_j * max(0, 1 - thresh_j / ||B_j||)``."""
    norms = _group_norms(M, group_size)
    scale = np.where(norms > thresh, 1.0 - thresh / np.where(norms > 0, norms, 1.0), 0.0)
    return (M.reshape(norms.size, group_size, -1) * scale[:, None, None]).reshape(M.shape)


def center(X, copy=True):
    """Centre the columns of ``X``.

    Returns
    -------
    Xc : ndarray of shape (n, D), float64
    mean : ndarray of shape (D,)
    """
    X = np.array(X, dtype=np.float64, copy=copy)
    mean = X.mean(axis=0)
    X -= mean
    return X, mean


def intercept_only(Y, loss):
    """Optimal intercept with every group at zero, shape (t,)."""
    m = Y.mean(axis=0)
    if loss == "squared":
        return m
    if loss == "logistic":
        m = np.clip(m, 1e-12, 1 - 1e-12)
        return np.log(m / (1 - m))
    m = np.clip(m, 1e-12, None)
    return np.log(m) - np.log(m).mean()


def _weights(n_groups, group_size):
    return np.full(n_groups, np.sqrt(group_size))


def alpha_max(Xc, Y, group_size, loss):
    """Smallest ``alpha`` at which every group is zero.

    Parameters
    ----------
    Xc : ndarray of shape (n, G * g)
        Centred design (see :func:`center`).
    Y : ndarray of shape (n, t)
    group_size : int
    loss : {"squared", "logistic", "multinomial"}

    Returns
    -------
    float
    """
    n = Xc.shape[0]
    c = intercept_only(Y, loss)
    grad = Xc.T @ _dloss(np.broadcast_to(c, (n, Y.shape[1])), Y, loss)
    G = Xc.shape[1] // group_size
    return float(np.max(_group_norms(grad, group_size) / _weights(G, group_size)))


def _cols(groups, group_size):
    return (groups[:, None] * group_size + np.arange(group_size)[None, :]).ravel()


def _top_eig(A, n_iter=30):
    """Largest eigenvalue of ``A^T A / n`` (power iteration, deterministic start)."""
    n, k = A.shape
    if k == 0:
        return 0.0
    v = np.ones(k) + 0.01 * np.arange(k) / max(k, 1)
    v /= np.linalg.norm(v)
    lam = 0.0
    for _ in range(n_iter):
        w = A.T @ (A @ v) / n
        lam = float(np.linalg.norm(w))
        if lam == 0.0:
            return 0.0
        v = w / lam
    return lam


def _fista(Xw, Y, B, c, thresh, group_size, loss, tol_abs, max_iter):
    """FISTA with backtracking and adaptive restart on the working-set design ``Xw``.

    Returns
    -------
    B, c, n_iter, converged
    """
    L = _CURVATURE[loss] * max(_top_eig(Xw), 1.0)
    x, cx = B, c
    zx = Xw @ x
    y, cy, zy = x, cx, zx
    t = 1.0
    for it in range(1, max_iter + 1):
        zfull = zy + cy
        f_y = _loss(zfull, Y, loss)
        Gz = _dloss(zfull, Y, loss)
        gB = Xw.T @ Gz
        gc = Gz.sum(axis=0)
        while True:
            xn = _prox(y - gB / L, thresh / L, group_size)
            cn = cy - gc / L
            zn = Xw @ xn
            dx, dc = xn - y, cn - cy
            quad = float(np.sum(gB * dx) + np.sum(gc * dc))
            sq = float(np.sum(dx * dx) + np.sum(dc * dc))
            f_n = _loss(zn + cn, Y, loss)
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
    loss="squared",
    coef_init=None,
    intercept_init=None,
    alpha_prev=None,
    tol=1e-6,
    max_iter=5000,
    alpha_scale=None,
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
    loss : {"squared", "logistic", "multinomial"}
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

    Returns
    -------
    coef : ndarray of shape (G * g, t)
    intercept : ndarray of shape (t,)
        Intercept of the *centred* problem: ``b = intercept - mean @ coef``.
    info : dict
        ``n_iter`` (total FISTA iterations), ``converged`` (bool),
        ``working_set`` (final group count).
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    n, D = Xc.shape
    t = Y.shape[1]
    G = D // group_size
    w = _weights(G, group_size)
    amax = alpha_max(Xc, Y, group_size, loss)
    scale = alpha_scale if alpha_scale is not None else (amax if amax > 0 else 1.0)
    tol_abs = tol * scale
    if alpha >= amax:
        # Every group is zero (exactly, not up to rounding in the prox).
        return np.zeros((D, t)), intercept_only(Y, loss), {
            "n_iter": 0, "converged": True, "working_set": 0,
        }
    B = np.zeros((D, t)) if coef_init is None else np.array(coef_init, dtype=np.float64)
    c = intercept_only(Y, loss) if intercept_init is None else np.array(intercept_init, float)

    # Strong rule from the gradient at the starting point.
    grad = Xc.T @ _dloss(Xc @ B + c, Y, loss)
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
            Xw, Y, B[cols], c, alpha * w[groups], group_size, loss, tol_abs, max_iter
        )
        total_iter += it
        B = np.zeros((D, t))
        B[cols] = Bw
        grad = Xc.T @ _dloss(Xw @ Bw + c, Y, loss)
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
    Xc, Y, group_size, *, loss="squared", alphas=None, n_alphas=10, eps=1e-2, tol=1e-6,
    max_iter=5000,
):
    """Solutions along a decreasing sequence of penalties, warm-started.

    Parameters
    ----------
    Xc : ndarray of shape (n, G * g)
        Centred design.
    Y : ndarray of shape (n, t)
    group_size : int
    loss : {"squared", "logistic", "multinomial"}
    alphas : sequence of float, optional
        Absolute penalties (sorted decreasing here).  Default: ``n_alphas``
        values log-spaced from :func:`alpha_max` down to ``eps`` times it.
    n_alphas, eps, tol, max_iter
        As above and in :func:`group_lasso`.

    Returns
    -------
    alphas : ndarray of shape (k,)
    coefs : ndarray of shape (k, G * g, t)
    intercepts : ndarray of shape (k, t)
        Intercepts of the centred problem.
    """
    amax = alpha_max(Xc, Y, group_size, loss)
    if alphas is None:
        alphas = amax * np.logspace(0, np.log10(eps), n_alphas)
    alphas = np.sort(np.asarray(alphas, dtype=float))[::-1]
    coefs, intercepts = [], []
    B, c, prev = None, None, None
    for a in alphas:
        B, c, _ = group_lasso(
            Xc, Y, group_size, a, loss=loss, coef_init=B, intercept_init=c, alpha_prev=prev,
            tol=tol, max_iter=max_iter, alpha_scale=amax if amax > 0 else 1.0,
        )
        prev = a
        coefs.append(B)
        intercepts.append(c)
    return alphas, np.stack(coefs), np.stack(intercepts)


def kkt_violation(X, Y, coef, intercept, alpha, group_size, loss="squared"):
    """Largest violation of the optimality conditions, over groups and intercept.

    For a group with ``B_j != 0``: ``||X_j^T g + alpha w_j B_j / ||B_j|| ||``; for
    ``B_j = 0``: ``max(0, ||X_j^T g|| - alpha w_j)``; for the intercept ``|sum g|``;
    ``g`` is the derivative of the mean loss in the predictor.

    Parameters
    ----------
    X : ndarray of shape (n, G * g)
        Design (centred or not: ``intercept`` must match it).
    Y : ndarray of shape (n, t)
    coef : ndarray of shape (G * g, t)
    intercept : ndarray of shape (t,)
    alpha : float
    group_size : int
    loss : str

    Returns
    -------
    float
    """
    X = np.asarray(X, dtype=np.float64)
    Gz = _dloss(X @ coef + intercept, Y, loss)
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
