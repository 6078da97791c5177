"""Where the multiple-instance read-out starts: instance scores and pooling sharpness, cross-validated.

The read-out of :mod:`skdiagatt.kernels.mil` pools a bag's instance scores
``psi_l`` by the smooth maximum

    ``M_rho(psi) = (1 / rho) log( (1 / L) sum_l exp(rho psi_l) )``,

the mean of the scores at ``rho = 0`` (every instance counts: the collective
assumption of multiple-instance learning) and their maximum as ``rho`` grows
(one instance decides: the standard assumption; Foulds & Frank, "A review of
multi-instance learning assumptions", Knowledge Engineering Review 25, 2010).
How sharp suits a data set is an empirical question, so the fit asks the data:
linear instance scores ``psi = u^T x`` of the rows, a logistic model of the
bag labels with logit ``b + M_rho(u^T x)`` and an L2 penalty ``lam / 2 |u|^2``
on the standardized features, fitted by L-BFGS for every ``(rho, lam)`` of a
small grid, and the pair of least cross-validated deviance is refitted on all
bags.  The grid stops short of the mean: under the mean, an instance that
scores low is evidence *against* its bag, which the standard assumption rules
out (the poisoned unit tests of Raff & Holt, NeurIPS 2023, catch exactly
that); at ``rho >= 1`` one instance can lower the pool of a bag of ``L`` by at
most ``log(L / (L - 1)) / rho``.

The penalty acts on standardized, not whitened, features: whitening gives
every direction unit variance, so an isotropic penalty there shrinks the
noise directions of small variance no more than the signal ones.

Everything is NumPy/SciPy.  The BLAS calls are held to one thread: on these
matrix-vector products thread start-up costs more than the arithmetic.
"""

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from threadpoolctl import threadpool_limits

from ._mixture import subset_rows

__all__ = ["SHARPNESS_GRID", "choose_mil_start", "pool_scores", "positive_share"]

#: The sharpness values ``rho`` compared, ever closer to the maximum.
SHARPNESS_GRID = (1.0, 3.0, 10.0)
#: The L2 penalties of the instance scores compared (on the mean loss), strongest first.
_PENALTIES = tuple(np.logspace(1, -3, 5))
_FOLDS = 3


def pool_scores(s, starts, rho):
    """``M_rho`` of each bag's scores and its gradient in the scores.

    Parameters
    ----------
    s : ndarray of shape (N,)
        The instance scores, bags stacked.
    starts : ndarray of shape (n,)
        Each bag's first instance.
    rho : float
        The sharpness, 0 for the mean.

    Returns
    -------
    g : ndarray of shape (n,)
    weights : ndarray of shape (N,)
        ``d g_i / d s_l``: ``softmax(rho s)`` within each bag (``1 / L`` at 0).
    """
    counts = np.diff(np.append(starts, len(s)))
    if rho == 0.0:
        return np.add.reduceat(s, starts) / counts, np.repeat(1.0 / counts, counts)
    t = rho * s
    top = np.maximum.reduceat(t, starts)
    e = np.exp(t - np.repeat(top, counts))
    total = np.add.reduceat(e, starts)
    return (top + np.log(total / counts)) / rho, e / np.repeat(total, counts)


def positive_share(y, w):
    """The weighted share of positive bags, kept within [0.001, 0.999] so that its log-odds are finite."""
    return np.clip(w @ y / w.sum(), 1e-3, 1 - 1e-3)


def _fit(Z, starts, y, w, rho, lam, theta):
    """``(u, b)`` as one vector (d + 1,): the penalized logistic fit at ``(rho, lam)`` from ``theta``."""
    d = Z.shape[1]
    W = w.sum()
    counts = np.diff(np.append(starts, len(Z)))

    def objective(theta):
        u, b = theta[:d], theta[d]
        g, weights = pool_scores(Z @ u, starts, rho)
        z = g + b
        loss = -w @ (y * log_expit(z) + (1 - y) * log_expit(-z)) / W + 0.5 * lam * u @ u
        r = w * (expit(z) - y) / W  # d loss / d z, (n,)
        grad_u = Z.T @ (np.repeat(r, counts) * weights) + lam * u
        return loss, np.append(grad_u, r.sum())

    return minimize(objective, theta, jac=True, method="L-BFGS-B", options={"maxiter": 500}).x


def _deviance(theta, Z, starts, y, w, rho):
    """Weighted held-out deviance of ``theta``, per bag (n,)."""
    z = pool_scores(Z @ theta[:-1], starts, rho)[0] + theta[-1]
    return -w * (y * log_expit(z) + (1 - y) * log_expit(-z))


def _path(Z, starts, y, w, rho, theta, stop=None):
    """The fits along the first ``stop`` of ``_PENALTIES``, each warm-started from the previous."""
    out = []
    for lam in _PENALTIES[:stop]:  # None: all
        theta = _fit(Z, starts, y, w, rho, lam, theta)
        out.append(theta)
    return out


def _cross_validated(Z, starts, y, w, theta0, grid, rng):
    """The ``(rho, penalty index)`` of least deviance over ``_FOLDS`` folds of the bags."""
    n = len(starts)
    folds = rng.permutation(np.arange(n) % _FOLDS)
    loss = dict.fromkeys([(rho, k) for rho in grid for k in range(len(_PENALTIES))], 0.0)
    for f in range(_FOLDS):
        test = folds == f
        Z_tr, s_tr = subset_rows(Z, starts, ~test)
        Z_te, s_te = subset_rows(Z, starts, test)
        for rho in grid:
            for k, theta in enumerate(_path(Z_tr, s_tr, y[~test], w[~test], rho, theta0)):
                loss[rho, k] += _deviance(theta, Z_te, s_te, y[test], w[test], rho).sum()
    finite = {key: v for key, v in loss.items() if np.isfinite(v)}
    return min(finite, key=finite.get) if finite else (0.0, 0)


def choose_mil_start(X, starts, y, sample_weight=None, random_state=None, sharpness="auto"):
    """The instance scores, offset and sharpness of least cross-validated deviance.

    Parameters
    ----------
    X : ndarray of shape (N, d)
        The bags' instances, stacked.
    starts : ndarray of shape (n,)
        Each bag's first instance.
    y : ndarray of shape (n,)
        0/1 bag labels.
    sample_weight : ndarray of shape (n,) or None
    random_state : numpy RandomState
        Draws the folds.
    sharpness : "auto" or float
        A float fixes ``rho``; "auto" compares :data:`SHARPNESS_GRID`.

    Returns
    -------
    u : ndarray of shape (d,)
        The instance score ``u^T x`` acts on the rows as given.
    b : float
    rho : float

    Examples
    --------
    Positive bags hold one instance far out along the first feature: the
    scores find that feature.

    >>> import numpy as np
    >>> from skdiagatt.diagatt._mil_start import choose_mil_start
    >>> rng = np.random.RandomState(0)
    >>> bags = [rng.standard_normal((10, 3)) for _ in range(60)]
    >>> y = np.arange(60) % 2
    >>> for x, label in zip(bags, y):
    ...     x[0, 0] += 4.0 * label
    >>> u, b, rho = choose_mil_start(np.concatenate(bags), np.arange(0, 600, 10), y)
    >>> int(np.argmax(np.abs(u))), rho in (1.0, 3.0, 10.0)
    (0, True)
    """
    rng = np.random.RandomState(0) if random_state is None else random_state
    y = np.asarray(y, np.float64)
    n = len(starts)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature stays 0 and gets no weight
    Z = (X - mean) / scale
    share = positive_share(y, w)
    theta0 = np.append(np.zeros(Z.shape[1]), np.log(share / (1 - share)))
    grid = SHARPNESS_GRID if sharpness == "auto" else (float(sharpness),)
    with np.errstate(all="ignore"), threadpool_limits(1, user_api="blas"):
        if n < 2 * _FOLDS or min(y.sum(), n - y.sum()) < _FOLDS:
            # Too few bags of a class to compare: the strongest penalty.
            rho, k = grid[0], 0
        else:
            rho, k = _cross_validated(Z, starts, y, w, theta0, grid, rng)
        theta = _path(Z, starts, y, w, rho, theta0, k + 1)[k]
    u = theta[:-1] / scale
    # M_rho(psi + a) = M_rho(psi) + a: the centring moves into the offset.
    return u, float(theta[-1] - u @ mean), rho
