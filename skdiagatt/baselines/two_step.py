"""Two-step competitors: ``TwoStepRegressor``, ``TwoStepClassifier``.

Step 1 pools the rows of all samples and fits a Gaussian mixture
(:class:`sklearn.mixture.GaussianMixture`); the heaviest component is taken as
the background, the others as signal components.  Each sample's signal rows are
the rows most probably drawn from the signal components.  Step 2 regresses the
response on the selected rows (concatenated in a fixed order) with a linear or
logistic model (the DiagAtt paper, Section 5: "Two-Step").

``sample_weight`` weighs the samples of step 2 only (see the estimators' Notes).
"""

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import logsumexp
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.mixture import GaussianMixture
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._shared.base import MatrixSampleEstimator, _check_positive_int, check_labels, check_targets, drop_zero_weight
from .._shared.params import Anything, Either, Integer, Options, Real

__all__ = ["TwoStepRegressor", "TwoStepClassifier"]

_CHUNK_ROWS = 1 << 17


def _log_resp(mixture, rows):
    """``log P(component k | row)`` for every row, shape (N, K), computed in chunks."""
    out = []
    for start in range(0, rows.shape[0], _CHUNK_ROWS):
        # Log-space, so that rows far from a component keep a finite ranking.
        wlp = mixture._estimate_weighted_log_prob(rows[start : start + _CHUNK_ROWS])
        out.append(wlp - logsumexp(wlp, axis=1, keepdims=True))
    return np.concatenate(out)


def _select_rows(log_resp, signal, n_select):
    """Rows of one sample attributed to the signal components.

    Parameters
    ----------
    log_resp : ndarray of shape (p, K)
    signal : ndarray of int
        Indices of the signal components.
    n_select : int

    Returns
    -------
    rows : ndarray of int, shape (n_select,)
        If there are as many signal components as rows to select, the
        assignment of distinct rows to components maximising the summed log
        posterior, in component order (so feature block k always comes from
        component k); otherwise the ``n_select`` rows of largest total signal
        posterior, largest first.
    score : ndarray of shape (p,)
        ``log P(row in any signal component)``.
    """
    score = logsumexp(log_resp[:, signal], axis=1)
    if signal.size == n_select:
        comps, rows = linear_sum_assignment(log_resp[:, signal].T, maximize=True)
        return rows[np.argsort(comps)].astype(np.int64), score
    return np.argsort(-score, kind="stable")[:n_select].astype(np.int64), score


_MIXTURE_RULES = {
    "n_signal": Integer(1),
    "n_components": Either(Options(None), Integer(2)),
    "covariance_type": Options("full", "tied", "diag", "spherical"),
    "max_rows": Integer(1),
    "n_init": Integer(1),
    "gmm_max_iter": Integer(1),
    "reg_covar": Real(0.0),
    "random_state": Anything(),
}


class _TwoStepBase(MatrixSampleEstimator):
    def __init__(
        self,
        n_signal=1,
        *,
        n_components=None,
        covariance_type="full",
        max_rows=100_000,
        n_init=1,
        gmm_max_iter=100,
        reg_covar=1e-6,
        random_state=None,
    ):
        self.n_signal = n_signal
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.max_rows = max_rows
        self.n_init = n_init
        self.gmm_max_iter = gmm_max_iter
        self.reg_covar = reg_covar
        self.random_state = random_state

    def __sklearn_is_fitted__(self):
        return hasattr(self, "model_")

    def _samples(self, X, reset):
        samples = self._validate_X(X, reset=reset, dtype=np.float64)
        for i, s in enumerate(samples):
            if s.shape[0] < self.n_signal:
                raise ValueError(
                    f"X[{i}] has {s.shape[0]} rows, fewer than n_signal={self.n_signal}"
                )
        return samples

    def _selection(self, samples):
        """Selected rows (n, n_signal) and per-sample signal scores."""
        lr = _log_resp(self.mixture_, np.concatenate(samples))
        bounds = np.cumsum([0] + [s.shape[0] for s in samples])
        rows, scores = [], []
        for i in range(len(samples)):
            r, sc = _select_rows(lr[bounds[i] : bounds[i + 1]], self.signal_components_, self.n_signal)
            rows.append(r)
            scores.append(sc)
        return np.stack(rows), scores

    @staticmethod
    def _features(samples, rows):
        return np.stack([s[r].ravel() for s, r in zip(samples, rows)])

    def _fit(self, X, y, sample_weight):
        self._validate_parameters()
        samples = self._samples(X, reset=True)
        samples, y, w = drop_zero_weight(samples, y, sample_weight)
        target = self._encode_targets(y, len(samples))
        rng = check_random_state(self.random_state)
        pooled = np.concatenate(samples)
        if pooled.shape[0] > self.max_rows:
            pooled = pooled[np.sort(rng.choice(pooled.shape[0], self.max_rows, replace=False))]
        K = self.n_signal + 1 if self.n_components is None else self.n_components
        mixture = GaussianMixture(
            n_components=K,
            covariance_type=self.covariance_type,
            n_init=self.n_init,
            max_iter=self.gmm_max_iter,
            reg_covar=self.reg_covar,
            random_state=rng.randint(np.iinfo(np.int32).max),
        ).fit(pooled)
        self.mixture_ = mixture
        self.background_component_ = int(np.argmax(mixture.weights_))
        self.signal_components_ = np.setdiff1d(np.arange(K), [self.background_component_])
        self.n_features_in_ = samples[0].shape[1]
        rows, _ = self._selection(samples)
        self.model_ = self._make_model().fit(self._features(samples, rows), target, sample_weight=w)
        return self

    def _predict_features(self, X):
        check_is_fitted(self)
        samples = self._samples(X, reset=False)
        rows, _ = self._selection(samples)
        return self._features(samples, rows)

    def attention(self, X):
        """Not available: use :meth:`signal_proba` for per-row posteriors."""
        raise NotImplementedError(
            f"{type(self).__name__} has no attention weights; use signal_proba() or localize()"
        )

    def signal_proba(self, X):
        """Posterior probability that each row comes from a signal component.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

        Returns
        -------
        list of ndarray of shape (p_i,)
        """
        check_is_fitted(self)
        _, scores = self._selection(self._samples(X, reset=False))
        return [np.exp(s) for s in scores]

    def localize(self, X, top_k=None):
        """Rows attributed to the signal components.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        top_k : int or None, default=None
            None: the ``n_signal`` rows the regression uses.  An int: the
            ``top_k`` rows of largest signal posterior, largest first.

        Returns
        -------
        list of ndarray of int
        """
        if top_k is not None:
            _check_positive_int(top_k, "top_k")
        check_is_fitted(self)
        rows, scores = self._selection(self._samples(X, reset=False))
        if top_k is None:
            return list(rows)
        return [np.argsort(-s, kind="stable")[:top_k].astype(np.int64) for s in scores]


_TS_NOTES_DOC = """    Notes
    -----
    ``sample_weight`` in ``fit`` weighs the samples of the second step only
    (as scikit-learn's estimator of that step weighs them): the mixture of
    step 1 models the rows without the response and takes no weights, so it
    is fitted on the rows of every sample of positive weight, each row once.
    A sample of weight 2 therefore counts twice in the regression, and once
    in the mixture, where a second copy of it would count twice; with
    components as well separated as the selection needs, both select the
    same rows and fit the same second step.  Samples of weight 0 are left
    out of both steps.

"""

_TS_PARAMS_DOC = """
    Parameters
    ----------
    n_signal : int, default=1
        Rows selected per sample (s).
    n_components : int or None, default=None
        Mixture components; None uses ``n_signal + 1`` (one background
        component and one per signal class).
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
    max_rows : int, default=100000
        The mixture is fitted on at most this many pooled rows, drawn at random
        (the posteriors are then computed for every row).
    n_init : int, default=1
    gmm_max_iter : int, default=100
        EM iterations of the mixture.
    reg_covar : float, default=1e-6
    random_state : int, RandomState instance or None
        Row subsample and mixture initialisation.
"""


class TwoStepRegressor(RegressorMixin, _TwoStepBase):
    __doc__ = (
        """Gaussian-mixture row selection, then ridge regression on the selected rows.
"""
        + _TS_PARAMS_DOC
        + """    alpha : float, default=1e-3
        Ridge penalty of the second step.

    Attributes
    ----------
    mixture_ : GaussianMixture
    background_component_ : int
        The heaviest component.
    signal_components_ : ndarray of int
    model_ : Ridge
        Fitted on the selected rows, concatenated in component order.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.

"""
        + _TS_NOTES_DOC
        + """    Examples
    --------
    >>> from skdiagatt.baselines import TwoStepRegressor
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, _ = make_individualized_regression(100, n_rows=6, n_features=3,
    ...                                                random_state=0)
    >>> est = TwoStepRegressor(random_state=0).fit(X, y)
    >>> est.predict(X[:2]).shape, len(est.localize(X[:2])[0])
    ((2,), 1)
    """
    )

    def __init__(
        self,
        n_signal=1,
        *,
        n_components=None,
        covariance_type="full",
        max_rows=100_000,
        n_init=1,
        gmm_max_iter=100,
        reg_covar=1e-6,
        alpha=1e-3,
        random_state=None,
    ):
        super().__init__(
            n_signal,
            n_components=n_components,
            covariance_type=covariance_type,
            max_rows=max_rows,
            n_init=n_init,
            gmm_max_iter=gmm_max_iter,
            reg_covar=reg_covar,
            random_state=random_state,
        )
        self.alpha = alpha

    _parameter_rules = {**_MIXTURE_RULES, "alpha": Real(0.0, closed=True)}

    def _encode_targets(self, y, n):
        return check_targets(y, n)

    def _make_model(self):
        return Ridge(alpha=self.alpha)

    def fit(self, X, y, sample_weight=None):
        """Fit the mixture, select rows, fit the regression.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets)
        sample_weight : array-like of shape (n,) or None, default=None
            Each sample's weight in the ridge regression; samples of weight 0
            are left out (see Notes).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def predict(self, X):
        """Predicted responses, shape (n,) or (n, n_targets)."""
        F = self._predict_features(X)
        return self.model_.predict(F)


class TwoStepClassifier(ClassifierMixin, _TwoStepBase):
    __doc__ = (
        """Gaussian-mixture row selection, then logistic regression on the selected rows.
"""
        + _TS_PARAMS_DOC
        + """    C : float, default=1.0
        Inverse L2 penalty of the logistic regression.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    mixture_, background_component_, signal_components_, n_features_in_, feature_names_in_
        As in :class:`TwoStepRegressor`.
    model_ : LogisticRegression

"""
        + _TS_NOTES_DOC
        + """    Examples
    --------
    >>> from skdiagatt.baselines import TwoStepClassifier
    >>> from skdiagatt.datasets import make_individualized_classification
    >>> X, y, rows, _ = make_individualized_classification(100, n_rows=6, n_features=3,
    ...                                                    random_state=0)
    >>> clf = TwoStepClassifier(n_components=3, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape, len(clf.localize(X[:2])[1])
    ((2, 2), 1)
    """
    )

    def __init__(
        self,
        n_signal=1,
        *,
        n_components=None,
        covariance_type="full",
        max_rows=100_000,
        n_init=1,
        gmm_max_iter=100,
        reg_covar=1e-6,
        C=1.0,
        random_state=None,
    ):
        super().__init__(
            n_signal,
            n_components=n_components,
            covariance_type=covariance_type,
            max_rows=max_rows,
            n_init=n_init,
            gmm_max_iter=gmm_max_iter,
            reg_covar=reg_covar,
            random_state=random_state,
        )
        self.C = C

    _parameter_rules = {**_MIXTURE_RULES, "C": Real(0.0)}

    def _encode_targets(self, y, n):
        y = check_labels(y, n)
        if np.unique(y).size < 2:
            raise ValueError(
                f"y has a single class {y[0]!r}: classification needs at least two"
            )
        return y

    def _make_model(self):
        return LogisticRegression(C=self.C, max_iter=1000)

    def fit(self, X, y, sample_weight=None):
        """Fit the mixture, select rows, fit the logistic regression.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,) or None, default=None
            Each sample's weight in the logistic regression; samples of
            weight 0 are left out (see Notes).

        Returns
        -------
        self
        """
        self._fit(X, y, sample_weight)
        self.classes_ = self.model_.classes_
        return self

    def decision_function(self, X):
        """Logits of the second step, shape (n,) or (n, n_classes)."""
        F = self._predict_features(X)
        return self.model_.decision_function(F)

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes)."""
        F = self._predict_features(X)
        return self.model_.predict_proba(F)

    def predict(self, X):
        """Most probable class, shape (n,)."""
        F = self._predict_features(X)
        return self.model_.predict(F)
