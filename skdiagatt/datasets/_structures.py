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

Each comes at two signal-to-noise presets (``snr``) and on three background
laws (``background``: Gaussian, multivariate t, a mixture of clusters; see
:mod:`skdiagatt.datasets._backgrounds`).
"""

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._backgrounds import BACKGROUNDS, background_law, check_background, draw_rows, truth_fields
from ._simulate import _background, _check_common, _row_counts

__all__ = ["BACKGROUNDS", "SIGNAL_STRUCTURES", "SNR_PRESETS", "make_structured_regression"]

#: The structures :func:`make_structured_regression` draws.
SIGNAL_STRUCTURES = ("subspace", "location", "sparse")

#: Default ``shift`` by ``snr`` and structure.  ``"high"``: the Bayes localizer
#: finds about 95% of the signal rows at 100 rows of 70 features on a Gaussian
#: background; ``"low"``: chosen so that it finds roughly 70% of them there.
SNR_PRESETS = {
    "high": {"subspace": 5.5, "location": 4.5, "sparse": 4.5},
    "low": {"subspace": 2.5, "location": 3.1, "sparse": 1.5},
}


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
    snr="high",
    background="gaussian",
    df=3.0,
    n_clusters=4,
    cluster_separation=4.0,
    random_state=None,
):
    """Individualized regression whose signal row is not the paper's.

    Background rows are ``N(mu, Sigma)`` as in
    :func:`~skdiagatt.datasets.make_individualized_regression`, or, with
    ``background``, heavy-tailed or clustered around ``mu``; one row per
    sample, at a random position, is drawn from the structure's Gaussian
    (``truth.signal_mean``, ``truth.signal_cov``) and ``y = <x_signal, beta> +
    noise * eps``.  :mod:`skdiagatt.bayes` computes the Bayes localizer and
    predictor from ``truth``, under the true background law.

    On the default Gaussian background ``df``, ``n_clusters`` and
    ``cluster_separation`` are unused, and a ``random_state`` draws what it
    drew before they existed.  The other backgrounds draw their extra random
    numbers after the signal's, so one ``random_state`` gives the same
    ``mu``, ``Sigma``, ``beta`` and signal law on every background.

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
        deviation (of ``Sigma``); None: the preset of ``snr`` for the
        structure, :data:`SNR_PRESETS`.
    spread : float, default=6.0
        Variance factor along the signal's directions (not ``"location"``).
    noise : float, default=1.0
    snr : {"high", "low"}, default="high"
        Which preset gives ``shift`` when it is None (an explicit ``shift``
        wins).  ``"high"``: 5.5 for ``"subspace"``, 4.5 otherwise; the Bayes
        localizer then finds about 95% of the signal rows at 100 rows of 70
        features.  ``"low"``: 2.5, 3.1 and 1.5 for ``"subspace"``,
        ``"location"`` and ``"sparse"``, chosen so that the Bayes localizer
        finds roughly 70% of signal rows at the default sizes (Gaussian
        background).
    background : {"gaussian", "t", "clusters"}, default="gaussian"
        Law of the background rows (:data:`BACKGROUNDS`).  ``"t"``: the
        multivariate Student t with location ``mu``, scale matrix ``Sigma``
        and ``df`` degrees of freedom, ``x = mu + L z / sqrt(g / df)`` with
        ``L L^T = Sigma``, ``z ~ N(0, I)``, ``g ~ chi2(df)``.
        ``"clusters"``: a mixture of ``n_clusters`` Gaussians ``N(m_k,
        Sigma)`` (shared covariance) with weights ``w ~ Dirichlet(5, ...,
        5)`` and centres in random directions, whose weighted mean is
        ``mu``.  On either, the signal row is drawn as on a Gaussian
        background, relative to ``mu`` and ``Sigma`` (so, with clusters,
        between them).
    df : float, default=3.0
        Degrees of freedom of the t background (> 0; its covariance
        ``df / (df - 2) Sigma`` exists for ``df > 2``).  Used only with
        ``background="t"``.
    n_clusters : int, default=4
        Clusters of the ``"clusters"`` background.
    cluster_separation : float, default=4.0
        Distance of each cluster centre from ``mu`` in whitened units
        (standard deviations of ``Sigma``), before the centres are moved
        together so that their weighted mean is ``mu``.
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_samples,)
    rows : ndarray of shape (n_samples, 1)
    truth : Bunch
        ``mu``, ``Sigma``, ``beta`` (1, d), ``signal_mean`` (1, d),
        ``signal_cov`` (1, d, d), ``structure``, ``noise``, ``shift``,
        ``background``; with ``"t"`` also ``df``; with ``"clusters"`` also
        ``cluster_weights`` (K,), ``cluster_means`` (K, d) and
        ``cluster_covs`` (K, d, d).

    Examples
    --------
    >>> from skdiagatt.bayes import bayes_localize
    >>> from skdiagatt.datasets import make_structured_regression
    >>> from skdiagatt.metrics import crlr
    >>> X, y, rows, truth = make_structured_regression(200, "location", n_rows=20,
    ...                                                n_features=10, random_state=0)
    >>> crlr(rows, bayes_localize(X, truth)) > 0.8
    True
    >>> X, y, rows, truth = make_structured_regression(5, n_rows=20, n_features=10,
    ...                                                background="clusters", random_state=0)
    >>> truth.background, truth.cluster_means.shape
    ('clusters', (4, 10))
    """
    if structure not in SIGNAL_STRUCTURES:
        raise ValueError(f"structure must be one of {SIGNAL_STRUCTURES}, got {structure!r}")
    if n_directions < 1:
        raise ValueError(f"n_directions must be >= 1, got {n_directions}")
    if spread <= 0:
        raise ValueError(f"spread must be > 0, got {spread}")
    if snr not in SNR_PRESETS:
        raise ValueError(f"snr must be one of {tuple(SNR_PRESETS)}, got {snr!r}")
    check_background(background, df, n_clusters, cluster_separation)
    rng = check_random_state(random_state)
    _check_common(n_samples, n_features, noise, 0.0)
    shift = SNR_PRESETS[snr][structure] if shift is None else float(shift)
    mu, sigma, chol = _background(n_features, rng)
    beta = rng.standard_normal((1, n_features))
    mean, cov = _signal_gaussian(structure, mu, sigma, chol, n_directions, shift, spread, rng)
    # After the signal's draws, so that a seed gives the same signal on every background.
    law = background_law(background, mu, sigma, chol, df, n_clusters, cluster_separation, rng)
    counts = _row_counts(n_samples, n_rows, rng)
    signal_chol = np.linalg.cholesky(cov)
    X, rows = [], np.empty((n_samples, 1), dtype=np.int64)
    for i, p in enumerate(counts):
        Xi = draw_rows(law, p, rng)
        j = rng.randint(p)
        Xi[j] = mean + signal_chol @ rng.standard_normal(n_features)
        X.append(Xi)
        rows[i, 0] = j
    y = np.array([X[i][rows[i, 0]] @ beta[0] for i in range(n_samples)])
    y += noise * rng.standard_normal(n_samples)
    truth = Bunch(mu=mu, Sigma=sigma, beta=beta, signal_mean=mean[None], signal_cov=cov[None],
                  structure=structure, noise=float(noise), shift=shift, **truth_fields(law))
    return X, y, rows, truth
