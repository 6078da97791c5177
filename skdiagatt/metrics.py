"""Scores for individualized regression: localization next to prediction."""

import numpy as np

__all__ = ["attention_entropy", "crlr", "rmse"]


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


def attention_entropy(weights):
    """Entropy of each sample's attention weights, relative to uniform weights.

    ``H(a) / log p`` for the weights ``a`` of one head over a sample's ``p``
    rows, averaged over heads: 1 means the rows are pooled evenly (the model
    is mean pooling, and its arg-max row rests on small differences), 0 that
    one row holds all the weight.  A sample of one row has no choice to make
    and gets NaN.

    Parameters
    ----------
    weights : sequence of n arrays of shape (n_heads, p_i) or (p_i,)
        Attention weights per sample, each head summing to one (what
        ``attention`` returns).

    Returns
    -------
    ndarray of shape (n,), values in [0, 1] (NaN where p_i = 1)

    Raises
    ------
    ValueError
        If a sample's weights are negative, not finite, or do not sum to one.

    Examples
    --------
    >>> attention_entropy([[0.25, 0.25, 0.25, 0.25], [[1.0, 0.0], [0.0, 1.0]], [1.0]])
    array([ 1.,  0., nan])
    """
    out = np.full(len(weights), np.nan)
    for i, a in enumerate(weights):
        a = np.atleast_2d(np.asarray(a, dtype=float))
        if not np.all(np.isfinite(a)) or np.any(a < 0) or not np.allclose(a.sum(-1), 1.0, atol=1e-4):
            raise ValueError(f"sample {i}: attention weights must be finite, non-negative "
                             "and sum to one over the rows of each head")
        p = a.shape[-1]
        if p > 1:
            # 0 log 0 = 0: rows of zero weight add nothing.
            h = -np.sum(np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0), axis=-1)
            out[i] = float(np.mean(h) / np.log(p))
    return out
