"""Scores for individualized regression: localization next to prediction."""

import numpy as np

__all__ = ["crlr", "rmse"]


def crlr(true_rows, selected_rows):
    """Correct ROI localization rate (the DiagAtt paper, Section 5.1).

    ``mean_i |S_i ∩ Ŝ_i| / |S_i|``: the share of each sample's true rows that the
    selection found, averaged over samples.

    Parameters
    ----------
    true_rows : sequence of n array-likes of int
        True rows of interest ``S_i`` per sample (e.g. the ``rows`` array of
        shape (n, s) returned by the simulators).
    selected_rows : sequence of n array-likes of int
        Selected rows ``Ŝ_i`` per sample (e.g. what ``localize`` returns).

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> crlr([[0], [3]], [[0, 1], [2]])
    0.5
    """
    if len(true_rows) != len(selected_rows):
        raise ValueError(
            f"true_rows has {len(true_rows)} samples, selected_rows has {len(selected_rows)}"
        )
    if len(true_rows) == 0:
        raise ValueError("crlr needs at least one sample")
    rates = []
    for i, (s, s_hat) in enumerate(zip(true_rows, selected_rows)):
        s = np.unique(np.asarray(s, dtype=np.int64).ravel())
        if s.size == 0:
            raise ValueError(f"sample {i} has no true rows")
        hit = np.isin(s, np.asarray(s_hat, dtype=np.int64).ravel())
        rates.append(hit.mean())
    return float(np.mean(rates))


def rmse(y_true, y_pred):
    """Root mean squared error ``||y - ŷ||_2 / sqrt(n)`` (all outputs pooled).

    Parameters
    ----------
    y_true : array-like of shape (n,) or (n, n_targets)
    y_pred : array-like of the same shape as ``y_true``

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the shapes differ.

    Examples
    --------
    >>> rmse([0.0, 2.0], [0.0, 0.0])
    1.4142135623730951
    >>> rmse([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 2.0]])
    1.0
    """
    y_true = np.asarray(y_true, dtype=float)
    y_pred = np.asarray(y_pred, dtype=float)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"shapes differ: y_true {y_true.shape}, y_pred {y_pred.shape}")
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))
