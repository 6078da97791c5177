"""Helpers shared by the paper's simulators (``_simulators``) and the structured ones (``_structures``)."""

import numbers

import numpy as np


def _row_counts(n_samples, n_rows, rng):
    if isinstance(n_rows, numbers.Integral):
        if n_rows < 1:
            raise ValueError(f"n_rows must be >= 1, got {n_rows}")
        return np.full(n_samples, int(n_rows))
    low, high = n_rows
    if not (1 <= low <= high):
        raise ValueError(f"n_rows=(low, high) needs 1 <= low <= high, got {n_rows}")
    return rng.randint(low, high + 1, size=n_samples)


def _background(n_features, rng):
    idx = np.arange(n_features)
    sigma = 0.5 ** np.abs(idx[:, None] - idx[None, :])
    mu = 2.0 * rng.standard_normal(n_features) / np.sqrt(n_features)
    return mu, sigma, np.linalg.cholesky(sigma)


def _check_common(n_samples, n_features, noise, row_correlation):
    if n_samples < 1 or n_features < 1:
        raise ValueError("n_samples and n_features must be >= 1")
    if not 0.0 <= row_correlation < 1.0:
        raise ValueError(f"row_correlation must be in [0, 1), got {row_correlation}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
