"""Target encoding shared by the estimators whose output is a linear predictor ``z``.

An estimator using these mixins implements ``_decision(X) -> (n, t)``: ``z`` in
the internal scale (standardized targets, or logits).
"""

import numpy as np
from scipy.special import logsumexp
from sklearn.preprocessing import LabelEncoder

from .base import check_labels, check_targets, standardize_targets

__all__ = ["StandardizedTargetsMixin", "LabelTargetsMixin"]


class StandardizedTargetsMixin:
    """Regression targets (n,) or (n, t), standardized per column for training."""

    def _encode_targets(self, y, lengths, *, warm, incremental=False, classes=None, sample_weight=None):
        """Returns ``(Y (n, t) float32, meta, family)``; a warm start keeps the first fit's units."""
        n = len(lengths)
        y = check_targets(y, n)
        Y = y.reshape(n, -1)
        if warm and Y.shape[1] != self.y_mean_.shape[0]:
            raise ValueError(
                f"y has {Y.shape[1]} targets but the warm-started model has {self.y_mean_.shape[0]}"
            )
        Y, mean, scale = standardize_targets(Y, (self.y_mean_, self.y_scale_) if warm else None, sample_weight)
        return Y, (y.ndim, mean, scale), "gaussian"

    def _set_target_meta(self, meta):
        self._y_ndim, self.y_mean_, self.y_scale_ = meta

    def _to_output(self, z, offset=True):
        """Internal ``z`` (..., t) in the targets' units; the last axis dropped for 1-D y.

        ``offset=False`` for terms that add up to ``z`` minus its intercept:
        they are scaled but not shifted by the targets' mean.
        """
        z = z.astype(np.float64) * self.y_scale_ + (self.y_mean_ if offset else 0.0)
        return z[..., 0] if self._y_ndim == 1 else z

    @staticmethod
    def _push_direction(z, terms):
        """(n, t): each target's sign of the prediction's departure from the intercept."""
        return np.sign(terms)

    def predict(self, X):
        """Predicted responses.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

        Returns
        -------
        ndarray of shape (n,) or (n, n_targets)
        """
        return self._to_output(self._decision(X))


class LabelTargetsMixin:
    """Class labels of any comparable type; one logit for two classes, else one per class."""

    def _encode_targets(self, y, lengths, *, warm, incremental=False, classes=None, sample_weight=None):
        """Returns ``(Y, classes, family)``: 0/1 column (binary) or one-hot rows.

        ``incremental`` (``partial_fit``): the first call fixes the label set,
        ``classes`` or its own labels; later chunks may hold any subset of it.
        """
        y = check_labels(y, len(lengths))
        if incremental:
            known = self._partial_classes(y, warm, classes)
            unknown = ~np.isin(y, known)
            if np.any(unknown):
                raise ValueError(
                    f"y has labels {np.unique(y[unknown]).tolist()} that are not in "
                    f"classes {known.tolist()}; pass classes=[...] to the first partial_fit"
                )
            codes = np.searchsorted(known, y)
        else:
            try:
                codes = (enc := LabelEncoder()).fit_transform(y)
            except TypeError as exc:
                raise TypeError(f"y has labels that cannot be compared: {exc}") from None
            known = enc.classes_
            if known.size < 2:
                raise ValueError(f"y has a single class {known[0]!r}: classification needs at least two")
            if warm and not np.array_equal(known, self.classes_):
                raise ValueError(
                    f"y has classes {known.tolist()} but the warm-started model was fitted "
                    f"with {self.classes_.tolist()}"
                )
        if known.size == 2:
            return codes[:, None].astype(np.float32), known, "bernoulli"
        return np.eye(known.size, dtype=np.float32)[codes], known, "categorical"

    def _partial_classes(self, y, continued, classes):
        """The label set of a ``partial_fit`` call: fixed by the first call."""
        if not continued:
            known = np.unique(np.asarray(y if classes is None else classes))
            if known.size < 2:
                raise ValueError(
                    "the first partial_fit call needs at least two classes: pass "
                    "classes=[...] listing every label"
                )
            return known
        if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            raise ValueError(
                f"classes={np.unique(np.asarray(classes)).tolist()} differs from the "
                f"classes of the first call {self.classes_.tolist()}"
            )
        return self.classes_

    def _set_target_meta(self, classes):
        self.classes_ = classes

    def _to_output(self, z, offset=True):
        """Internal logits (..., t) as float64; the last axis dropped for two classes."""
        z = z.astype(np.float64)
        return z[..., 0] if len(self.classes_) == 2 else z

    @staticmethod
    def _push_direction(z, terms):
        """(n, t): towards the predicted class (the logit's sign, or its centred one-hot)."""
        if z.shape[1] == 1:
            return np.where(z > 0, 1.0, -1.0)
        return np.eye(z.shape[1])[np.argmax(z, axis=1)] - 1.0 / z.shape[1]

    def decision_function(self, X):
        """Logits: shape (n,) for two classes (positive = ``classes_[1]``), else (n, n_classes)."""
        return self._to_output(self._decision(X))

    def predict_log_proba(self, X):
        """Log class probabilities, shape (n, n_classes), finite for any finite logit."""
        z = self.decision_function(X)
        if z.ndim == 1:
            return -np.logaddexp(0.0, np.column_stack([z, -z]))
        return z - logsumexp(z, axis=1, keepdims=True)

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes), columns in ``classes_`` order."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        """Most probable class of each sample, shape (n,)."""
        log_proba = self.predict_log_proba(X)  # checks the fitted state first
        return self.classes_[np.argmax(log_proba, axis=1)]
