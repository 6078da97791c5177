"""Signal structures other than the paper's, with the Gaussians the Bayes references need.

The paper's simulator draws the signal row from ``N(m mu, v Sigma)``: a
multiple of the background's mean and covariance, so that in whitened
coordinates the Bayes score is isotropic.  Real signals need not look like
that; these structures do not:

- ``"subspace"``: the signal row differs from the background only along a few
  random directions (in the background's whitened coordinates), where it is
  shifted and more spread; elsewhere it is a background row.
- ``"location"``: the signal row is a background row shifted along one random
  direction; its covariance is the background's (the Bayes score is linear).
- ``"sparse"``: the signal row differs in a few coordinates of the raw
  features (not of the whitened ones): shifted and more spread there.
"""

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .datasets import _background, _check_common, _row_counts

__all__ = ["SIGNAL_STRUCTURES", "make_structured_regression"]

#: The structures :func:`make_structured_regression` draws.
SIGNAL_STRUCTURES = ("subspace", "location", "sparse")


def _signal_gaussian(structure, mu, sigma, chol, n_directions, shift, spread, rng):
    """Mean (d,) and covariance (d, d) of the signal row."""
    d = mu.shape[0]
    if structure == "sparse":
        idx = rng.choice(d, size=min(n_directions, d), replace=False)
        mean = mu.copy()
        mean[idx] += shift / np.sqrt(idx.size) * np.sqrt(np.diag(sigma)[idx])
        scale = np.ones(d)
        scale[idx] = np.sqrt(spread)
        return mean, sigma * np.outer(scale, scale)
    k = 1 if structure == "location" else min(n_directions, d)
    Q, _ = np.linalg.qr(rng.standard_normal((d, k)))
    mean = mu + chol @ (Q @ np.full(k, shift / np.sqrt(k)))
    inner = np.eye(d) + (0.0 if structure == "location" else spread - 1.0) * (Q @ Q.T)
    return mean, chol @ inner @ chol.T


def make_structured_regression(
    n_samples,
    structure="subspace",
    n_rows=100,
    n_features=70,
    n_directions=3,
    shift=None,
    spread=6.0,
    noise=1.0,
    random_state=None,
):
    """Individualized regression whose signal row is not the paper's.

    Background rows are ``N(mu, Sigma)`` as in
    :func:`~skdiagatt.datasets.make_individualized_regression`; one row per
    sample, at a random position, is drawn from the structure's Gaussian
    (``truth.signal_mean``, ``truth.signal_cov``) and ``y = <x_signal, beta> +
    noise * eps``.  :mod:`skdiagatt.bayes` computes the Bayes localizer and
    predictor from ``truth``.

    Parameters
    ----------
    n_samples : int
    structure : {"subspace", "location", "sparse"}, default="subspace"
        See :data:`SIGNAL_STRUCTURES` and the module docstring.
    n_rows : int or (int, int), default=100
    n_features : int, default=70
    n_directions : int, default=3
        Directions (``"subspace"``) or coordinates (``"sparse"``) where the
        signal differs; ``"location"`` shifts along one.
    shift : float or None, default=None
        Length of the mean shift in units of the background's standard
        deviation; None: 5.5 for ``"subspace"``, 4.5 otherwise (the Bayes
        localizer then finds about 95% of the signal rows at 100 rows of 70
        features).
    spread : float, default=6.0
        Variance factor along the signal's directions (not ``"location"``).
    noise : float, default=1.0
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_samples,)
    rows : ndarray of shape (n_samples, 1)
    truth : Bunch
        ``mu``, ``Sigma``, ``beta`` (1, d), ``signal_mean`` (1, d),
        ``signal_cov`` (1, d, d), ``structure``, ``noise``.

    Examples
    --------
    >>> from skdiagatt.bayes import bayes_localize
    >>> from skdiagatt.datasets import make_structured_regression
    >>> from skdiagatt.metrics import crlr
    >>> X, y, rows, truth = make_structured_regression(200, "location", n_rows=20,
    ...                                                n_features=10, random_state=0)
    >>> crlr(rows, bayes_localize(X, truth)) > 0.8
    True
    """
    if structure not in SIGNAL_STRUCTURES:
        raise ValueError(f"structure must be one of {SIGNAL_STRUCTURES}, got {structure!r}")
    if n_directions < 1:
        raise ValueError(f"n_directions must be >= 1, got {n_directions}")
    if spread <= 0:
        raise ValueError(f"spread must be > 0, got {spread}")
    rng = check_random_state(random_state)
    _check_common(n_samples, n_features, noise, 0.0)
    shift = (5.5 if structure == "subspace" else 4.5) if shift is None else float(shift)
    mu, sigma, chol = _background(n_features, rng)
    beta = rng.standard_normal((1, n_features))
    mean, cov = _signal_gaussian(structure, mu, sigma, chol, n_directions, shift, spread, rng)
    counts = _row_counts(n_samples, n_rows, rng)
    signal_chol = np.linalg.cholesky(cov)
    X, rows = [], np.empty((n_samples, 1), dtype=np.int64)
    for i, p in enumerate(counts):
        Xi = mu + rng.standard_normal((p, n_features)) @ chol.T
        j = rng.randint(p)
        Xi[j] = mean + signal_chol @ rng.standard_normal(n_features)
        X.append(Xi)
        rows[i, 0] = j
    y = np.array([X[i][rows[i, 0]] @ beta[0] for i in range(n_samples)])
    y += noise * rng.standard_normal(n_samples)
    truth = Bunch(mu=mu, Sigma=sigma, beta=beta, signal_mean=mean[None], signal_cov=cov[None],
                  structure=structure, noise=float(noise))
    return X, y, rows, truth
