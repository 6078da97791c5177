"""Simulated individualized-regression data (the DiagAtt paper, Section 5; DESIGN.md section 4).

Every sample is a matrix whose rows are mostly background draws from
``N(mu, Sigma)``; a few sample-specific *active* rows are drawn from shifted and
scaled Gaussians and carry the response.  The generators return the truth
(``mu``, ``Sigma``, ``beta``, the active rows) so that localization can be scored
and the Bayes references computed.
"""

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._simulate import _background, _check_common, _row_counts

__all__ = [
    "make_individualized_regression",
    "make_individualized_classification",
    "PAPER_SIGNALS",
]

#: Signal parameters ``(m_k, v_k)`` of the paper's settings, by number of active rows.
PAPER_SIGNALS = {
    1: ((2.0, 2.0),),
    2: ((1.0, 3.0), (4.0, 2.0)),
    3: ((1.0, 3.0), (4.0, 2.0), (-4.0, 2.0)),
}


def _draw_rows(counts, n_active, mu, chol, row_correlation, rng):
    """Background rows of every sample and the positions of its active rows."""
    d = mu.shape[0]
    X, active = [], np.empty((counts.shape[0], n_active), dtype=np.int64)
    for i, p in enumerate(counts):
        if p < n_active:
            raise ValueError(f"sample {i} has {p} rows, fewer than n_signal={n_active}")
        Z = rng.standard_normal((p, d))
        if row_correlation > 0:
            # One factor shared by every row of the sample makes rows dependent.
            common = rng.standard_normal(d)
            Z = np.sqrt(1 - row_correlation) * Z + np.sqrt(row_correlation) * common
        X.append(mu + Z @ chol.T)
        active[i] = rng.choice(p, size=n_active, replace=False)
    return X, active


def make_individualized_regression(
    n_samples,
    n_rows=100,
    n_features=70,
    n_signal=1,
    signal=None,
    row_correlation=0.0,
    noise=1.0,
    random_state=None,
):
    """Simulate the Gaussian individualized regression of the DiagAtt paper, Section 5.1.

    Parameters
    ----------
    n_samples : int
        Number of samples n.
    n_rows : int or (int, int), default=100
        Rows per sample p, or an inclusive ``(low, high)`` range drawn uniformly
        per sample for ragged data.
    n_features : int, default=70
        Columns d shared by every sample.
    n_signal : int, default=1
        Active rows per sample s.
    signal : sequence of (float, float), default=None
        ``(m_k, v_k)`` per active class: its row is ``N(m_k * mu, v_k * Sigma)``.
        ``None`` takes the paper's setting for ``n_signal`` in 1..3.
    row_correlation : float in [0, 1), default=0.0
        Weight rho of a factor ``N(0, Sigma)`` shared by the rows of a sample.
    noise : float, default=1.0
        Standard deviation of the additive Gaussian noise.
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_samples,)
    rows : ndarray of shape (n_samples, n_signal)
        ``rows[i, k]`` is the index of the active row of class k in ``X[i]``.
    truth : Bunch
        ``mu`` (d,), ``Sigma`` (d, d), ``beta`` (n_signal, d), ``signal``,
        ``noise``.

    Examples
    --------
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, truth = make_individualized_regression(5, n_rows=10, n_features=3,
    ...                                                    random_state=0)
    >>> len(X), X[0].shape, y.shape, rows.shape
    (5, (10, 3), (5,), (5, 1))
    """
    rng = check_random_state(random_state)
    _check_common(n_samples, n_features, noise, row_correlation)
    if signal is None:
        if n_signal not in PAPER_SIGNALS:
            raise ValueError(f"give `signal` explicitly for n_signal={n_signal}")
        signal = PAPER_SIGNALS[n_signal]
    signal = tuple((float(m), float(v)) for m, v in signal)
    if len(signal) != n_signal:
        raise ValueError(f"signal has {len(signal)} entries, expected n_signal={n_signal}")
    if any(v <= 0 for _, v in signal):
        raise ValueError("every signal variance v_k must be > 0")

    mu, sigma, chol = _background(n_features, rng)
    beta = rng.standard_normal((n_signal, n_features))
    counts = _row_counts(n_samples, n_rows, rng)
    X, rows = _draw_rows(counts, n_signal, mu, chol, row_correlation, rng)
    y = np.empty(n_samples)
    for i in range(n_samples):
        for k, (m_k, v_k) in enumerate(signal):
            j = rows[i, k]
            # Replace the background draw, keeping its shared factor if any.
            deviation = X[i][j] - mu
            X[i][j] = m_k * mu + np.sqrt(v_k) * deviation
        y[i] = sum(X[i][rows[i, k]] @ beta[k] for k in range(n_signal))
    y += noise * rng.standard_normal(n_samples)
    truth = Bunch(mu=mu, Sigma=sigma, beta=beta, signal=signal, noise=float(noise))
    return X, y, rows, truth


def make_individualized_classification(
    n_samples,
    n_rows=100,
    n_features=70,
    positive=(3.0, 2.0),
    negative=(-3.0, 2.0),
    weights=0.5,
    row_correlation=0.0,
    random_state=None,
):
    """Simulate the Gaussian-mixture classification of the DiagAtt paper, Section 5.2.

    ``y ~ Bernoulli(weights)``; one active row per sample drawn from
    ``N(m_P mu, v_P Sigma)`` if ``y = 1`` and ``N(m_N mu, v_N Sigma)`` if ``y = 0``;
    the other rows from ``N(mu, Sigma)``.

    Parameters
    ----------
    n_samples : int
    n_rows : int or (int, int), default=100
    n_features : int, default=70
    positive, negative : (float, float)
        ``(m, v)`` of the active row of each class.
    weights : float, default=0.5
        Probability of the positive class.
    row_correlation : float in [0, 1), default=0.0
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_samples,), values in {0, 1}
    rows : ndarray of shape (n_samples, 1)
    truth : Bunch
        ``mu``, ``Sigma``, ``signal`` = ``(negative, positive)``.

    Examples
    --------
    >>> from skdiagatt.datasets import make_individualized_classification
    >>> X, y, rows, truth = make_individualized_classification(4, n_rows=6, n_features=2,
    ...                                                        random_state=0)
    >>> sorted(set(y.tolist())) <= [0, 1]
    True
    """
    rng = check_random_state(random_state)
    _check_common(n_samples, n_features, 0.0, row_correlation)
    if not 0.0 < weights < 1.0:
        raise ValueError(f"weights must be in (0, 1), got {weights}")
    signal = (tuple(map(float, negative)), tuple(map(float, positive)))
    mu, sigma, chol = _background(n_features, rng)
    counts = _row_counts(n_samples, n_rows, rng)
    X, rows = _draw_rows(counts, 1, mu, chol, row_correlation, rng)
    y = (rng.random_sample(n_samples) < weights).astype(np.int64)
    for i in range(n_samples):
        m_k, v_k = signal[y[i]]
        j = rows[i, 0]
        X[i][j] = m_k * mu + np.sqrt(v_k) * (X[i][j] - mu)
    truth = Bunch(mu=mu, Sigma=sigma, signal=signal)
    return X, y, rows, truth
