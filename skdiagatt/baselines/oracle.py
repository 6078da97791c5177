"""The oracle reference: told the true rows, it only has to estimate the regression.

Not a competitor -- no method can know the rows -- but the floor for RMSE in the
simulation study: with the true rows given, the least-squares fit of
``y = b + sum_k <x_{S_k}, beta_k>`` has RMSE close to the noise level.
"""

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.linear_model import Ridge
from sklearn.utils.validation import check_is_fitted

from .._shared.base import MatrixSampleEstimator, _check_positive_int, check_sample_weight, check_targets
from .._shared.params import Real

__all__ = ["OracleRegressor"]


def _check_rows(rows, samples):
    """Validate the true rows: (n, s) integers, distinct, inside each sample."""
    if rows is None:
        raise ValueError("the oracle needs the true rows: pass rows=(n, s) array of row indices")
    rows = np.asarray(rows)
    if rows.ndim == 1:
        rows = rows[:, None]
    if rows.ndim != 2 or rows.shape[0] != len(samples):
        raise ValueError(
            f"rows must have shape (n, s) with n={len(samples)} samples, got {rows.shape}"
        )
    if not np.issubdtype(rows.dtype, np.integer):
        raise TypeError(f"rows must be integers, got dtype {rows.dtype}")
    for i, (r, s) in enumerate(zip(rows, samples)):
        if np.any(r < 0) or np.any(r >= s.shape[0]):
            raise ValueError(f"rows[{i}] = {r.tolist()} is out of range for X[{i}] with {s.shape[0]} rows")
    return rows.astype(np.int64)


class OracleRegressor(RegressorMixin, MatrixSampleEstimator):
    """Regression on the *true* rows of each sample (a reference, not a method).

    ``fit``, ``predict``, ``score`` and ``localize`` take the true rows of the
    samples (e.g. the ``rows`` returned by
    :func:`skdiagatt.datasets.make_individualized_regression`); the features
    are the true rows concatenated in class order, regressed on by ridge.

    Parameters
    ----------
    alpha : float, default=1e-6
        Ridge penalty (least squares for practical purposes).

    Attributes
    ----------
    model_ : Ridge
    n_signal_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.

    Examples
    --------
    >>> from skdiagatt.baselines import OracleRegressor
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, _ = make_individualized_regression(300, n_rows=5, n_features=3,
    ...                                                noise=0.5, random_state=0)
    >>> est = OracleRegressor().fit(X, y, rows)
    >>> round(float(est.score(X, y, rows)), 2) > 0.9
    True
    """

    _parameter_rules = {"alpha": Real(0.0, closed=True)}

    def __init__(self, alpha=1e-6):
        self.alpha = alpha

    def __sklearn_is_fitted__(self):
        return hasattr(self, "model_")

    def _features(self, X, rows, reset):
        samples = self._validate_X(X, reset=reset, dtype=np.float64)
        rows = _check_rows(rows, samples)
        if not reset and rows.shape[1] != self.n_signal_:
            raise ValueError(f"rows has {rows.shape[1]} columns, the oracle was fitted with {self.n_signal_}")
        return np.stack([s[r].ravel() for s, r in zip(samples, rows)]), rows, samples

    def fit(self, X, y, rows, sample_weight=None):
        """Fit the regression on the true rows.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets)
        rows : array-like of int, shape (n, s)
            The true rows of each sample, in class order.
        sample_weight : array-like of shape (n,) or None, default=None
            Each sample's weight in the least-squares fit.

        Returns
        -------
        self
        """
        self._validate_parameters()
        F, rows, samples = self._features(X, rows, reset=True)
        y = check_targets(y, len(samples))
        self.model_ = Ridge(alpha=self.alpha).fit(F, y, sample_weight=check_sample_weight(sample_weight, len(samples)))
        self.n_signal_ = rows.shape[1]
        self.n_features_in_ = samples[0].shape[1]
        return self

    def predict(self, X, rows):
        """Predictions from the true rows, shape (n,) or (n, n_targets)."""
        check_is_fitted(self)
        F, _, _ = self._features(X, rows, reset=False)
        return self.model_.predict(F)

    def score(self, X, y, rows, sample_weight=None):
        """R^2 of :meth:`predict` (the true rows are needed here too)."""
        from sklearn.metrics import r2_score

        return r2_score(y, self.predict(X, rows), sample_weight=sample_weight)

    def attention(self, X):
        """Not available: the oracle is told the rows."""
        raise NotImplementedError("OracleRegressor has no attention weights; it is told the rows")

    def localize(self, X, top_k=None, *, rows):
        """The true rows it was told (the first ``top_k`` of them if given).

        Returns
        -------
        list of ndarray of int
        """
        if top_k is not None:
            _check_positive_int(top_k, "top_k")
        check_is_fitted(self)
        _, rows, _ = self._features(X, rows, reset=False)
        return [r if top_k is None else r[:top_k] for r in rows]
