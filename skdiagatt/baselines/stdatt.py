"""Standard multi-head attention competitors: ``StdAttRegressor``, ``StdAttClassifier``.

The model is in :mod:`skdiagatt.kernels.stdatt`; training goes through the
project's one loop (:func:`skdiagatt._training.fit_loop`), exactly as DiagAtt.
"""

import jax
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from .._shared.params import Either, Integer, Options, Real
from .._shared.ragged import COARSE
from .._shared.sources import Samples
from .._shared.targets import LabelTargetsMixin, StandardizedTargetsMixin
from .._shared.two_phase import TwoPhaseEstimator
from ..kernels.stdatt import received_attention, stdatt_forward, stdatt_loss

__all__ = ["StdAttRegressor", "StdAttClassifier"]


@jax.jit
def _linear_predictor(params, frozen, X, where):
    return stdatt_forward(params, frozen, X, where)[0]


_received = jax.jit(received_attention)


class _StdAttBase(TwoPhaseEstimator):
    """Fitting logic shared by the regressor and the classifier."""

    _loss_fn = staticmethod(stdatt_loss)
    _bucket_growth = COARSE  # fewer programs to compile (docs/results/performance.md, section 7)
    # After the latent objective the projections stay fixed and the read-out
    # is calibrated on the loss of the pooled prediction (as DiagAtt).
    _calibrated = ("V", "b")
    _shape_parameters = ("n_heads", "key_dim")
    _parameter_rules = {
        **TwoPhaseEstimator._parameter_rules,
        "n_heads": Integer(1),
        "key_dim": Either(Options(None), Integer(1)),
        "alpha": Real(0.0, closed=True),
        "alpha_value": Real(0.0, closed=True),
        "init_scale": Real(0.0),
    }

    def __init__(
        self,
        n_heads=1,
        *,
        key_dim=None,
        alpha=1e-3,
        alpha_value=0.0,
        objective="attention",
        whiten=True,
        init_scale=0.5,
        calibration_iter=5,
        max_iter=20,
        learning_rate=0.01,
        batch_size="auto",
        tol=1e-4,
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=0.1,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
    ):
        self.n_heads = n_heads
        self.key_dim = key_dim
        self.alpha = alpha
        self.alpha_value = alpha_value
        self.objective = objective
        self.whiten = whiten
        self.init_scale = init_scale
        self.calibration_iter = calibration_iter
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    # ------------------------------------------------------------ parameters
    def _init_params(self, d, t, rng):
        R = self.n_heads
        e = d if self.key_dim is None else self.key_dim
        # In whitened coordinates ||x S||^2 ~ d, so entries N(0, c^2 / d) give
        # scores of size ~ c^2: near-uniform attention but a non-zero gradient
        # (W_Q = W_K = 0 is a saddle point).
        scale = self.init_scale / np.sqrt(d)
        return {
            "W_Q": (scale * rng.standard_normal((R, d, e))).astype(np.float32),
            "W_K": (scale * rng.standard_normal((R, d, e))).astype(np.float32),
            "V": (0.1 / np.sqrt(d) * rng.standard_normal((R, d, t))).astype(np.float32),
            "b": np.zeros(t, np.float32),
            "log_sigma": np.zeros(t, np.float32),
        }

    def _frozen(self, constants, d):
        return {
            "x_scale": np.float32(constants["c"]),
            "S": constants["S"],
            "inv_scale": np.float32(1.0 / np.sqrt(d)),
            "alpha": np.float32(self.alpha),
            "alpha_value": np.float32(self.alpha_value),
        }

    # ------------------------------------------------------------- inference
    def _decision(self, X):
        """Linear predictor ``z`` of shape (n, t) in the internal target scale."""
        samples = self._validate_X(X, reset=False)
        return self._map_samples(_linear_predictor, samples, self.params_, self._frozen_fitted())

    def _head_weights(self, samples):
        # The attention mass each row receives (mean over the queries).
        return self._map_samples(_received, samples, self.params_, self._frozen_fitted(), rows=True)


_STD_PARAMS_DOC = """
    Parameters
    ----------
    n_heads : int, default=1
        R, the number of attention heads.
    key_dim : int or None, default=None
        Width d_h of the query and key projections; None uses n_features.
    alpha : float, default=1e-3
        L2 penalty on the query and key projections (whitened coordinates).
    alpha_value : float, default=0.0
        L2 penalty on the value read-out.
    objective : {"attention", "latent"}, default="attention"
        "attention": the loss of the pooled prediction (the usual training).
        "latent": the latent-row likelihood DiagAtt trains with, using the
        received attention as the row prior, followed by ``calibration_iter``
        epochs of the pooled loss on the read-out.
    whiten : bool, default=True
        Work with rows ``c x S``, ``S = E[(c x) (c x)^T]^{-1/2}`` (as DiagAtt);
        either way rows are first scaled by ``c``, 1 / their root-mean-square.
    init_scale : float, default=0.5
        Initial projections are N(0, init_scale^2 / d): scores of size about
        ``init_scale^2``.
    calibration_iter : int, default=5
        Epochs of read-out calibration after the latent objective.
    max_iter : int, default=20
        Epochs; the step size decays to 0 over them (cosine).
    learning_rate : float, default=0.01
    batch_size : int or "auto", default="auto"
        "auto": ``min(256, max(32, n // 16))``.
    tol : float, default=1e-4
    n_iter_no_change : int, default=5
    early_stopping : bool, default=False
    validation_fraction : float, default=0.1
    random_state : int, RandomState instance or None
        Initial parameters, minibatch order, validation split; the same value
        gives bit-identical fits on the same machine.
    verbose : int, default=0
    callback : callable or None, default=None
        As in :class:`skdiagatt.DiagAttRegressor`.
    warm_start : bool, default=False
"""


class StdAttRegressor(RegressorMixin, StandardizedTargetsMixin, _StdAttBase):
    __doc__ = (
        """Standard multi-head self-attention regression (the StdAtt competitor, the DiagAtt paper, S3.1).

    Head r attends with ``A_r = softmax(X W_Q[r] (X W_K[r])^T / sqrt(d))`` over each
    sample's rows; ``A_r X W_V[r]`` is averaged over the rows and read out
    linearly.  The value and read-out matrices collapse into one ``V[r]``
    (d, t), so the prediction is ``b + sum_r <X^T m_r, V_r>`` with ``m_r`` the
    attention mass each row receives; ``attention`` returns ``m_r`` and
    ``localize`` ranks rows by it.  Unlike DiagAtt, the score of a row depends
    on every other row of the sample.
"""
        + _STD_PARAMS_DOC
        + """
    Attributes
    ----------
    params_ : dict of ndarray
        ``W_Q``, ``W_K`` (R, d, d_h), ``V`` (R, d, t), ``b`` (t,), ``log_sigma`` (t,),
        in whitened coordinates and standardized target units.
    input_scale_ : float
        Factor applied to every row first: 1 / root-mean-square of the training rows.
    preconditioner_ : ndarray of shape (d, d)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.
    n_iter_ : int
        Epochs of the main phase (``max_iter``'s, not ``calibration_iter``'s); ``warm_start`` adds to it.
    loss_curve_ : list of float
        Objective per epoch, both phases (continued under ``warm_start``).
    loss_curve_phase_ : list of str
        The phase of each ``loss_curve_`` entry: ``"main"`` or ``"calibration"``.
    validation_scores_ : list of float or None
    y_mean_, y_scale_ : ndarray of shape (t,)

    Examples
    --------
    >>> from skdiagatt.baselines import StdAttRegressor
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, _ = make_individualized_regression(100, n_rows=6, n_features=3,
    ...                                                random_state=0)
    >>> est = StdAttRegressor(max_iter=2, random_state=0).fit(X, y)
    >>> est.predict(X[:3]).shape
    (3,)
    >>> est.attention(X[:1])[0].shape
    (1, 6)
    """
    )


class StdAttClassifier(ClassifierMixin, LabelTargetsMixin, _StdAttBase):
    __doc__ = (
        """Standard multi-head self-attention classification (the StdAtt competitor).

    The model of :class:`StdAttRegressor` with the pooled prediction used as a
    logit (binary) or class logits (multiclass), trained with the logistic /
    softmax cross-entropy.
"""
        + _STD_PARAMS_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    params_, input_scale_, preconditioner_, n_features_in_, feature_names_in_, n_iter_, loss_curve_, \
loss_curve_phase_, validation_scores_
        As in :class:`StdAttRegressor`.

    Examples
    --------
    >>> from skdiagatt.baselines import StdAttClassifier
    >>> from skdiagatt.datasets import make_individualized_classification
    >>> X, y, rows, _ = make_individualized_classification(60, n_rows=5, n_features=3,
    ...                                                    random_state=0)
    >>> StdAttClassifier(max_iter=2, random_state=0).fit(X, y).predict_proba(X[:2]).shape
    (2, 2)
    """
    )

    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,) or None, default=None
            As in :meth:`StdAttRegressor.fit`.

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, sample_weight=sample_weight))

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch of the main objective over one chunk, continuing the previous state.

        As :meth:`StdAttRegressor.partial_fit`; ``classes`` lists every label,
        needed on the first call when that chunk does not hold them all.

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, classes, sample_weight), incremental=True)
