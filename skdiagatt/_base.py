"""The scikit-learn shell shared by every estimator on matrix-valued samples.

No arithmetic on data lives here: validation goes through ``_ragged``, the
numbers through ``kernels`` and ``_training``.
"""

import numbers

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._ragged import check_ragged, make_buckets, unpad
from ._training import device_buckets

__all__ = ["MatrixSampleEstimator", "check_targets", "check_finite_output", "FORMAT_VERSION"]

#: Version of the fitted-state layout stored in pickles; bump it whenever the
#: fitted attributes change meaning, so old models fail loudly, not silently.
FORMAT_VERSION = 1


def check_targets(y, n_samples, *, numeric=True):
    """Validate the response of ``fit``: one entry per sample, finite if numeric.

    Returns
    -------
    ndarray of shape (n,) or (n, t)
    """
    if y is None:
        raise ValueError("y is required: this estimator is supervised")
    if isinstance(y, (list, tuple)) and any(np.ndim(v) > 0 for v in y):
        y = np.asarray(y, dtype=object if not numeric else None)
    y = np.asarray(y)
    if y.ndim == 0:
        raise ValueError(f"y must be 1-D (n,) or 2-D (n, t), got a scalar {y!r}")
    if y.ndim > 2:
        raise ValueError(f"y must be 1-D (n,) or 2-D (n, t), got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"y has {y.shape[0]} entries but X has {n_samples} samples")
    if numeric:
        if y.dtype == object or not np.issubdtype(y.dtype, np.number) and y.dtype != bool:
            raise TypeError(f"y must be numeric for regression, got dtype {y.dtype}")
        y = y.astype(np.float64)
        bad = np.flatnonzero(~np.all(np.isfinite(y.reshape(n_samples, -1)), axis=1))
        if bad.size:
            raise ValueError(f"y[{bad[0]}] is not finite ({y[bad[0]]})")
        if y.ndim == 2 and y.shape[1] == 0:
            raise ValueError("y has 0 targets")
    return y


def check_finite_output(values, name="prediction"):
    """Raise if any sample's output is not finite; ``values`` is (n, ...) or a list of n arrays.

    Inputs pass validation when they are finite in float32, but products of
    huge values can still overflow; no NaN or infinity may leave a model.
    """
    for i, v in enumerate(values):
        if not np.all(np.isfinite(v)):
            raise ValueError(
                f"X[{i}] gives a non-finite {name}: its values are too large for "
                "float32 arithmetic; rescale the input"
            )
    return values


def _check_positive_int(value, name, minimum=1):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_positive_float(value, name, allow_zero=False):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


class MatrixSampleEstimator(BaseEstimator):
    """Base of the estimators: ragged input, fitted-state checks, localization.

    Subclasses implement ``_head_weights(buckets)`` returning, per bucket, the
    attention weights of shape (m_b, H, L_b).
    """

    def __getstate__(self):
        state = super().__getstate__()
        if hasattr(self, "params_"):
            state["_skdiagatt_format"] = FORMAT_VERSION
        return state

    def __setstate__(self, state):
        fmt = state.get("_skdiagatt_format", FORMAT_VERSION if "params_" not in state else None)
        if fmt != FORMAT_VERSION:
            raise ValueError(
                f"this {type(self).__name__} was saved with skdiagatt model format {fmt}, "
                f"but this version of skdiagatt reads format {FORMAT_VERSION}; refit the "
                "model or load it with the skdiagatt version that saved it"
            )
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Samples are matrices (a list of 2-D arrays or a 3-D array), not rows
        # of a 2-D table: the generic 2-D estimator checks do not apply.
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    def _validate_X(self, X, *, reset):
        """Validated samples, checked against ``n_features_in_`` unless ``reset``."""
        if reset:
            return check_ragged(X)
        check_is_fitted(self)
        return check_ragged(X, n_features=self.n_features_in_)

    def _check_training_params(self):
        """Check the parameters every trained estimator shares."""
        _check_positive_int(self.max_iter, "max_iter")
        _check_positive_float(self.learning_rate, "learning_rate")
        if self.batch_size != "auto":
            _check_positive_int(self.batch_size, "batch_size")
        _check_positive_float(self.tol, "tol", allow_zero=True)
        _check_positive_int(self.n_iter_no_change, "n_iter_no_change")
        if not 0.0 < self.validation_fraction < 1.0:
            raise ValueError(
                f"validation_fraction must be in (0, 1), got {self.validation_fraction!r}"
            )

    def _training_data(self, samples, Y, rng):
        """Split off the validation samples (``early_stopping``) and upload both parts.

        Parameters
        ----------
        samples : list of ndarray (p_i, d)
        Y : ndarray (n, t) or list of n row-level target arrays
        rng : numpy RandomState

        Returns
        -------
        train_samples : list of ndarray
        loop_kwargs : dict
            ``data`` and the keyword arguments of ``fit_loop`` shared by every
            phase (``batch_size``, ``random_state``, ``tol``,
            ``n_iter_no_change``, ``validation``, ``verbose``).
        """
        n = len(samples)
        take = (lambda idx: [Y[i] for i in idx]) if isinstance(Y, list) else (lambda idx: Y[idx])
        idx_train, validation = np.arange(n), None
        if self.early_stopping:
            n_val = int(round(self.validation_fraction * n))
            if n_val < 1 or n - n_val < 1:
                raise ValueError(
                    "early_stopping needs at least one training and one validation sample; "
                    f"n={n}, validation_fraction={self.validation_fraction}"
                )
            perm = rng.permutation(n)
            idx_train, idx_val = np.sort(perm[n_val:]), np.sort(perm[:n_val])
            validation = device_buckets(make_buckets([samples[i] for i in idx_val]), take(idx_val))
        train_samples = [samples[i] for i in idx_train]
        data = device_buckets(make_buckets(train_samples), take(idx_train))
        # Small data sets get smaller batches, hence enough optimizer steps.
        batch_size = self.batch_size
        if batch_size == "auto":
            batch_size = min(256, max(32, idx_train.size // 16))
        return train_samples, dict(
            data=data,
            batch_size=batch_size,
            random_state=rng,
            tol=self.tol,
            n_iter_no_change=self.n_iter_no_change,
            validation=validation,
            verbose=self.verbose,
        )

    def _buckets(self, X):
        return make_buckets(self._validate_X(X, reset=False))

    def __sklearn_is_fitted__(self):
        return hasattr(self, "params_")

    def attention(self, X):
        """Attention weights of every head over each sample's rows.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

        Returns
        -------
        list of ndarray of shape (n_heads, p_i)
            Non-negative, each head's weights sum to one over the sample's rows.
        """
        buckets = self._buckets(X)
        return check_finite_output(unpad(buckets, self._head_weights(buckets)), "attention weight")

    def localize(self, X, top_k=None):
        """Rows of interest of each sample.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        top_k : int or None, default=None
            None: the arg-max row of each head (at most ``n_heads`` distinct
            rows, in head order).  An int: the ``top_k`` rows of largest total
            attention weight over the heads, largest first (all rows if the
            sample has fewer).

        Returns
        -------
        list of ndarray of int
        """
        if top_k is not None:
            _check_positive_int(top_k, "top_k")
        out = []
        for w in self.attention(X):
            if top_k is None:
                rows = np.argmax(w, axis=1)
                _, first = np.unique(rows, return_index=True)
                out.append(rows[np.sort(first)].astype(np.int64))
            else:
                total = w.sum(axis=0)
                out.append(np.argsort(-total, kind="stable")[:top_k].astype(np.int64))
        return out
