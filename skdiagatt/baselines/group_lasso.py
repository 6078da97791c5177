"""Group-lasso competitors: ``GroupLassoRegressor``, ``GroupLassoClassifier``.

Each sample is zero-padded to ``n_rows_`` rows and flattened; row j of every
sample forms group j (its d coefficients), so the model is
``z = b + sum_j <x_j, B_j>`` with one coefficient block per row *position*,
shared by all samples (the DiagAtt paper, Section 5: "GroupLasso treats each row as a
group").  It cannot follow a signal row whose position changes from sample to
sample, which is the point of the comparison.  The solver is
:mod:`skdiagatt.baselines._group_lasso_solver`.
"""

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_is_fitted

from .._shared.base import MatrixSampleEstimator, _check_positive_int, check_labels, check_targets, drop_zero_weight
from .._shared.params import Boolean, Either, Integer, Options, Real
from . import _group_lasso_solver as solver

__all__ = ["GroupLassoRegressor", "GroupLassoClassifier"]


def _flatten(samples, n_rows, *, truncate=False, name="X"):
    """Zero-pad every sample to ``n_rows`` rows and flatten: (n, n_rows * d) float64.

    With ``truncate``, rows past ``n_rows`` are dropped, which is exact at
    predict time: those positions have no coefficient block, i.e. a zero one.
    """
    d = samples[0].shape[1]
    out = np.zeros((len(samples), n_rows * d))
    for i, s in enumerate(samples):
        if s.shape[0] > n_rows:
            if not truncate:
                raise ValueError(
                    f"{name}[{i}] has {s.shape[0]} rows, more than n_rows={n_rows} "
                    "(samples are zero-padded to n_rows rows in fit)"
                )
            s = s[:n_rows]
        out[i, : s.size] = s.ravel()
    return out


class _GroupLassoBase(MatrixSampleEstimator):
    _parameter_rules = {
        "alpha": Real(0.0, closed=True),
        "n_rows": Either(Options(None), Integer(1)),
        "tol": Real(0.0),
        "max_iter": Integer(1),
        "warm_start": Boolean(),
    }

    def __init__(
        self,
        alpha=0.1,
        *,
        n_rows=None,
        tol=1e-6,
        max_iter=5000,
        warm_start=False,
    ):
        self.alpha = alpha
        self.n_rows = n_rows
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def __sklearn_is_fitted__(self):
        return hasattr(self, "coef_")

    def _fit(self, X, y, sample_weight):
        self._validate_parameters()
        samples = self._validate_X(X, reset=True, dtype=np.float64)
        samples, y, w = drop_zero_weight(samples, y, sample_weight)
        n, d = len(samples), samples[0].shape[1]
        P = self.n_rows if self.n_rows is not None else max(s.shape[0] for s in samples)
        Y, family, meta = self._encode_targets(y, n)
        Xc, mean = solver.center(_flatten(samples, P), copy=False, sample_weight=w)
        amax = solver.alpha_max(Xc, Y, d, family, w)
        penalty = self.alpha * amax
        init, prev = None, None
        warm = (
            self.warm_start
            and hasattr(self, "coef_")
            and self.coef_.shape == (P, d, Y.shape[1])
        )
        if warm:
            init = self.coef_.reshape(P * d, -1)
            prev = self.penalty_
        B, c, info = solver.group_lasso(
            Xc,
            Y,
            d,
            penalty,
            family=family,
            coef_init=init,
            intercept_init=None if init is None else self.intercept_ + mean @ init,
            alpha_prev=prev,
            tol=self.tol,
            max_iter=self.max_iter,
            alpha_scale=amax if amax > 0 else 1.0,
            sample_weight=w,
        )
        self.coef_ = B.reshape(P, d, -1)
        self.intercept_ = c - mean @ B
        self.group_norms_ = np.sqrt(np.sum(self.coef_**2, axis=(1, 2)))
        self.alpha_max_ = amax
        self.penalty_ = penalty
        self.n_iter_ = info["n_iter"]
        self.n_rows_ = P
        self.n_features_in_ = d
        self._set_target_meta(meta)
        return self

    def _decision(self, X):
        samples = self._validate_X(X, reset=False, dtype=np.float64)
        flat = _flatten(samples, self.n_rows_, truncate=True)
        return solver.decision(flat, self.coef_.reshape(flat.shape[1], -1), self.intercept_)

    def attention(self, X):
        """Not available: the group lasso has no per-sample weights over rows."""
        raise NotImplementedError(
            f"{type(self).__name__} has no attention weights; use localize() or group_norms_"
        )

    def localize(self, X, top_k=None):
        """Rows with a non-zero coefficient block, largest group norm first.

        The selection depends on the row position only (the same for every
        sample), cut to each sample's rows; rows past ``n_rows_`` have no
        coefficient and are never selected.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        top_k : int or None, default=None
            None: every row whose group is non-zero.  An int: at most the
            ``top_k`` of them with the largest group norm.

        Returns
        -------
        list of ndarray of int
        """
        if top_k is not None:
            _check_positive_int(top_k, "top_k")
        check_is_fitted(self)
        samples = self._validate_X(X, reset=False)
        order = np.argsort(-self.group_norms_, kind="stable")
        order = order[self.group_norms_[order] > 0].astype(np.int64)
        out = []
        for s in samples:
            rows = order[order < s.shape[0]]
            out.append(rows if top_k is None else rows[:top_k])
        return out


_GL_PARAMS_DOC = """
    Parameters
    ----------
    alpha : float, default=0.1
        Penalty as a fraction of ``alpha_max_``, the smallest penalty at which
        every group is zero (so ``alpha >= 1`` gives the intercept-only model
        and a grid of fractions means the same on every data set).  The
        absolute penalty is ``penalty_ = alpha * alpha_max_`` on
        ``sum_j sqrt(d) ||B_j||`` and the mean loss (weighted by
        ``sample_weight`` in ``fit``).
    n_rows : int or None, default=None
        Row positions with a coefficient block (``n_rows_``): every sample is
        zero-padded to this many rows; None uses the longest sample of
        ``fit``.  A training sample longer than ``n_rows`` is an error.  At
        predict time a sample may be longer than ``n_rows_``: a position never
        seen in training has no coefficient to estimate, so its block is zero
        and rows past ``n_rows_`` contribute nothing to the prediction (they
        are never localized either).  Setting ``n_rows`` above the longest
        training sample changes nothing, since positions that are always
        padding get zero blocks in the fit as well.
    tol : float, default=1e-6
        Stop when the gradient mapping (zero exactly at the optimum) is below
        ``tol * alpha_max_`` for every group.
    max_iter : int, default=5000
        Proximal-gradient iterations per working-set solve.
    warm_start : bool, default=False
        Start from the previous fit's coefficients (a path: refit with
        decreasing ``alpha``).
"""


class GroupLassoRegressor(RegressorMixin, _GroupLassoBase):
    __doc__ = (
        """Group-lasso regression with the rows of zero-padded samples as groups.

    ``y ~ b + sum_j <x_j, B_j>`` over row positions j, fitted by minimising
    ``1/(2n) ||y - z||^2 + penalty_ * sum_j sqrt(d) ||B_j||`` (with
    ``sample_weight``, the weighted mean ``sum_i w_i (y_i - z_i)^2 / (2 sum_i w_i)``).
"""
        + _GL_PARAMS_DOC
        + """
    Attributes
    ----------
    coef_ : ndarray of shape (P, n_features, n_targets)
        One coefficient block per row position, P = ``n_rows_``.
    intercept_ : ndarray of shape (n_targets,)
    group_norms_ : ndarray of shape (P,)
        ``||B_j||``; ``localize`` ranks rows by it.
    alpha_max_, penalty_ : float
    n_iter_ : int
    n_rows_, n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.baselines import GroupLassoRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 5, 3)
    >>> y = X[:, 1] @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.randn(200)
    >>> est = GroupLassoRegressor(alpha=0.05).fit(X, y)
    >>> [r.tolist() for r in est.localize(X[:1], top_k=1)]
    [[1]]
    """
    )

    def _encode_targets(self, y, n):
        y = check_targets(y, n)
        return y.reshape(n, -1), "gaussian", y.ndim

    def _set_target_meta(self, meta):
        self._y_ndim = meta

    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets)
        sample_weight : array-like of shape (n,) or None, default=None
            Each sample's weight in the mean loss (the column means that
            centre the design, and so ``alpha_max_``, use them too): weight
            2 counts a sample as if it were given twice.  Samples of weight
            0 are left out (also from the default ``n_rows``).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def predict(self, X):
        """Predicted responses, shape (n,) or (n, n_targets)."""
        z = self._decision(X)
        return z[:, 0] if self._y_ndim == 1 else z


class GroupLassoClassifier(ClassifierMixin, _GroupLassoBase):
    __doc__ = (
        """Group-lasso logistic (binary) or multinomial classification, rows as groups.
"""
        + _GL_PARAMS_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (P, n_features, t)
        t = 1 for two classes (logit of ``classes_[1]``), else n_classes.
    intercept_, group_norms_, alpha_max_, penalty_, n_iter_, n_rows_, n_features_in_, feature_names_in_
        As in :class:`GroupLassoRegressor`.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.baselines import GroupLassoClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 4, 2)
    >>> y = (X[:, 2, 0] > 0).astype(int)
    >>> clf = GroupLassoClassifier(alpha=0.2).fit(X, y)
    >>> clf.predict_proba(X[:3]).shape, [r.tolist() for r in clf.localize(X[:1], top_k=1)]
    ((3, 2), [[2]])
    """
    )

    def _encode_targets(self, y, n):
        y = check_labels(y, n)
        enc = LabelEncoder()
        codes = enc.fit_transform(y)
        classes = enc.classes_
        if classes.size < 2:
            raise ValueError(
                f"y has a single class {classes[0]!r}: classification needs at least two"
            )
        if classes.size == 2:
            return codes[:, None].astype(np.float64), "bernoulli", classes
        return np.eye(classes.size)[codes], "categorical", classes

    def _set_target_meta(self, classes):
        self.classes_ = classes

    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,) or None, default=None
            Each sample's weight in the mean loss (the column means that
            centre the design, and so ``alpha_max_``, use them too): weight
            2 counts a sample as if it were given twice.  Samples of weight
            0 are left out (also from the default ``n_rows`` and ``classes_``).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def decision_function(self, X):
        """Logits: shape (n,) for two classes (positive = ``classes_[1]``), else (n, n_classes)."""
        z = self._decision(X)
        return z[:, 0] if len(self.classes_) == 2 else z

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes)."""
        z = self.decision_function(X)
        if z.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-z))
            return np.column_stack([1.0 - p1, p1])
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Most probable class of each sample, shape (n,)."""
        proba = self.predict_proba(X)  # checks the fitted state first
        return self.classes_[np.argmax(proba, axis=1)]
