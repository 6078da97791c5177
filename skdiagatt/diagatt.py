"""Diagonalized attention estimators (paper 000): ``DiagAttRegressor``, ``DiagAttClassifier``."""

import numpy as np
import jax
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state

from ._base import (
    MatrixSampleEstimator,
    _check_positive_float,
    _check_positive_int,
    check_finite_output,
    check_targets,
)
from ._ragged import check_ragged, unpad
from ._training import fit_loop, map_buckets
from .kernels.diagatt import diagatt_forward, diagatt_loss, head_weights, query_key

__all__ = ["DiagAttRegressor", "DiagAttClassifier"]

_forward = jax.jit(diagatt_forward)
_weights = jax.jit(head_weights)


def _preconditioner(samples, whiten):
    """Row scale ``c`` and whitener ``S`` of the training rows.

    ``c = 1 / sqrt(mean ||x||^2 / d)`` brings the rows to unit root-mean-square,
    so float32 scores stay in range for inputs of any magnitude.  With
    ``whiten``, ``S = M^{-1/2}`` for the uncentred second moment ``M`` of the
    scaled rows (uncentred, because the scores ``x^T W x`` are not translation
    invariant), eigenvalues floored at 1e-6 of the largest so constant or
    duplicated features do not blow up; else the identity.

    Returns
    -------
    c : float
    S : ndarray of shape (d, d), float32
    """
    d = samples[0].shape[1]
    M = np.zeros((d, d))
    rows = 0
    for s in samples:
        s = s.astype(np.float64)
        M += s.T @ s
        rows += s.shape[0]
    M /= rows
    rms = np.sqrt(np.trace(M) / d)
    c = 1.0 / rms if rms > 0 else 1.0
    if not whiten:
        return np.float32(c), np.eye(d, dtype=np.float32)
    ev, U = np.linalg.eigh(M * c * c)
    ev = np.maximum(ev, max(ev.max(), 1e-30) * 1e-6)
    return np.float32(c), ((U / np.sqrt(ev)) @ U.T).astype(np.float32)


class _DiagAttBase(MatrixSampleEstimator):
    """Fitting logic shared by the regressor and the classifier."""

    def __init__(
        self,
        n_heads=1,
        *,
        temperature=None,
        rank=None,
        symmetric=True,
        alpha=3e-3,
        alpha_value=0.0,
        objective="latent",
        whiten=True,
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
        warm_start=False,
    ):
        self.n_heads = n_heads
        self.temperature = temperature
        self.rank = rank
        self.symmetric = symmetric
        self.alpha = alpha
        self.alpha_value = alpha_value
        self.objective = objective
        self.whiten = whiten
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
        self.warm_start = warm_start

    # ----------------------------------------------------------------- checks
    def _check_params(self):
        _check_positive_int(self.n_heads, "n_heads")
        if self.temperature is not None:
            _check_positive_float(self.temperature, "temperature")
        if self.rank is not None:
            _check_positive_int(self.rank, "rank")
        _check_positive_float(self.alpha, "alpha", allow_zero=True)
        _check_positive_float(self.alpha_value, "alpha_value", allow_zero=True)
        if self.objective not in ("latent", "attention"):
            raise ValueError(f"objective must be 'latent' or 'attention', got {self.objective!r}")
        _check_positive_int(self.calibration_iter, "calibration_iter", minimum=0)
        self._check_training_params()

    # ------------------------------------------------------------ parameters
    def _init_params(self, d, t, rng):
        R = self.n_heads
        # W starts at 0 (uniform attention); small random value vectors break
        # the symmetry between heads so they can specialise on different rows.
        params = {
            "log_scale": np.zeros(R, np.float32),
            "V": (0.1 / np.sqrt(d) * rng.standard_normal((R, d, t))).astype(np.float32),
            "b": np.zeros(t, np.float32),
            "log_sigma": np.zeros(t, np.float32),
        }
        if self.rank is None:
            params["W"] = np.zeros((R, d, d), np.float32)
        else:
            # L L^T has a saddle at L = 0: start the factors small but non-zero.
            q = min(self.rank, d)
            scale = 0.1 / np.sqrt(d)
            params["L"] = (scale * rng.standard_normal((R, d, q))).astype(np.float32)
            if not self.symmetric:
                params["M"] = params["L"] + (scale * rng.standard_normal((R, d, q))).astype(
                    np.float32
                )
        return params

    def _frozen(self, c, S, d):
        tau = np.sqrt(d) if self.temperature is None else float(self.temperature)
        return {
            "x_scale": np.float32(c),
            "S": S,
            "inv_tau": np.float32(1.0 / tau),
            "alpha": np.float32(self.alpha),
            "alpha_value": np.float32(self.alpha_value),
        }

    def _fit(self, X, y):
        """Validate, train both phases, then set the fitted attributes at once."""
        self._check_params()
        samples = check_ragged(X)
        n, d = len(samples), samples[0].shape[1]
        warm = self.warm_start and hasattr(self, "params_")
        if warm and d != self.n_features_in_:
            raise ValueError(
                f"X has {d} features but the warm-started model was fitted with "
                f"{self.n_features_in_}"
            )
        Y, meta, family = self._encode_targets(y, n, warm)  # Y: (n, t) float32
        rng = check_random_state(self.random_state)

        train_samples, loop = self._training_data(samples, Y, rng)

        if warm:
            c, S = self.input_scale_, self.preconditioner_
            params = {k: v.copy() for k, v in self.params_.items()}
        else:
            c, S = _preconditioner(train_samples, self.whiten)
            params = self._init_params(d, Y.shape[1], rng)
        frozen = self._frozen(c, S, d)
        # The inverse temperature stays out of the main phase: trained
        # alongside W it would undo the penalty (W shrinks, the scale grows).
        frozen["log_scale"] = params.pop("log_scale")
        params, first = fit_loop(
            diagatt_loss,
            (self.objective, family),
            params,
            frozen,
            max_iter=self.max_iter,
            learning_rate=self.learning_rate,
            label=f"{type(self).__name__} {self.objective}",
            **loop,
        )
        curves = [first]
        if self.objective == "latent" and self.calibration_iter > 0:
            # The latent-row objective localizes; the attention prediction is
            # then calibrated on its own loss: per-head inverse temperature,
            # value vectors and intercept, with the query-key matrices fixed.
            params["log_scale"] = frozen.pop("log_scale")
            trained = ("log_scale", "V", "b")
            fixed = {k: v for k, v in params.items() if k not in trained}
            params2, second = fit_loop(
                diagatt_loss,
                ("attention", family),
                {k: params[k] for k in trained},
                {**frozen, **fixed},
                max_iter=self.calibration_iter,
                learning_rate=self.learning_rate,
                label=f"{type(self).__name__} calibration",
                **loop,
            )
            params = {**params, **params2}
            curves.append(second)
        else:
            params["log_scale"] = frozen.pop("log_scale")

        self.params_ = params
        self.input_scale_ = c
        self.preconditioner_ = S
        self.n_features_in_ = d
        self.n_iter_ = sum(c.n_iter for c in curves)
        self.loss_curve_ = [v for c in curves for v in c.loss_curve]
        self.validation_scores_ = (
            [v for c in curves for v in c.validation_curve] if self.early_stopping else None
        )
        self._set_target_meta(meta)
        return self

    # ------------------------------------------------------------- inference
    def _frozen_fitted(self):
        return self._frozen(self.input_scale_, self.preconditioner_, self.n_features_in_)

    def _decision(self, X):
        """Linear predictor ``z`` of shape (n, t) in the internal target scale."""
        buckets = self._buckets(X)
        frozen = self._frozen_fitted()
        z = map_buckets(lambda X_, w_: _forward(self.params_, frozen, X_, w_)[0], buckets)
        return check_finite_output(unpad(buckets, z, rows=False))

    def _head_weights(self, buckets):
        frozen = self._frozen_fitted()
        return map_buckets(lambda X_, w_: _weights(self.params_, frozen, X_, w_), buckets)

    @property
    def query_key_(self):
        """Query-key matrices in input coordinates, temperature included, shape (n_heads, d, d).

        The score of row ``x`` under head r is ``x @ query_key_[r] @ x``.
        """
        frozen = self._frozen_fitted()
        Q = np.asarray(query_key(self.params_, frozen["S"]))
        scale = frozen["x_scale"] ** 2 * frozen["inv_tau"] * np.exp(self.params_["log_scale"])
        return Q * scale[:, None, None]


class DiagAttRegressor(RegressorMixin, _DiagAttBase):
    """Diagonalized-attention regression on matrix-valued samples.

    Each sample ``X_i`` (p_i rows, d features) is scored row by row,
    ``psi_r = diag(X_i W_r X_i^T) / tau``; ``kappa_r = softmax(psi_r)`` weighs the
    rows, and the prediction is ``b + sum_r <X_i^T kappa_r, v_r>``.  The number
    of parameters does not depend on n or p.

    Training has two phases.  First the *latent-row* objective: each head
    picks one row at random with probabilities ``kappa_r`` and the response is
    Gaussian around that row's read-out (exactly the simulator of paper 000,
    under which DiagAtt is the Bayes predictor); its gradient uses the rows'
    posterior responsibilities and localizes far faster than the squared loss.
    Then a calibration phase fits the per-head inverse temperature, ``v_r`` and
    ``b`` to the squared loss of the attention prediction itself.

    Parameters
    ----------
    n_heads : int, default=1
        R, at most R distinct rows of interest per sample.
    temperature : float or None, default=None
        tau; None uses ``sqrt(n_features)`` as in the paper.
    rank : int or None, default=None
        None: full ``W_r`` (d x d).  An int q: ``W_r = L_r L_r^T`` (or
        ``L_r M_r^T`` with ``symmetric=False``), rank q.
    symmetric : bool, default=True
        Low-rank form, used when ``rank`` is set.
    alpha : float, default=3e-3
        L2 penalty on the query-key parameters, in whitened coordinates.
    alpha_value : float, default=0.0
        L2 penalty on the value vectors.
    objective : {"latent", "attention"}, default="latent"
        Training objective: the latent-row likelihood followed by calibration,
        or the paper's squared loss of the attention prediction alone.
    whiten : bool, default=True
        Train ``W`` in coordinates whitened by the rows' second moment (the
        matrix in use is ``S W S``, ``S = E[x x^T]^{-1/2}``).  Either way rows
        are first divided by their root-mean-square over the training rows
        (``input_scale_``), which the temperature then refers to.
    calibration_iter : int, default=5
        Epochs of the calibration phase (0 skips it).
    max_iter : int, default=20
        Epochs of the main phase; the step size decays to 0 over them (cosine).
    learning_rate : float, default=0.01
        Adam step size.
    batch_size : int or "auto", default="auto"
        "auto": ``min(256, max(32, n // 16))``, so small data sets still get
        enough optimizer steps per epoch.
    tol : float, default=1e-4
    n_iter_no_change : int, default=5
        Stop a phase when its monitored loss has not improved by ``tol`` for
        this many epochs.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the samples, monitor their loss and
        keep the best epoch.
    validation_fraction : float, default=0.1
    random_state : int, RandomState instance or None
        Initial value vectors, minibatch order and the validation split.  The
        same value gives bit-identical fits on the same machine.
    verbose : int, default=0
        Print one line per epoch when > 0.
    warm_start : bool, default=False
        Start from the previous fit's parameters.

    Attributes
    ----------
    params_ : dict of ndarray
        Fitted parameters (``W`` (R, d, d) or ``L``/``M`` (R, d, q) in whitened
        coordinates, ``V`` (R, d, t), ``b`` (t,), ``log_scale`` (R,),
        ``log_sigma`` (t,)), in standardized target units.
    query_key_ : ndarray of shape (n_heads, d, d)
        Score matrices in input coordinates, temperature included.
    input_scale_ : float
        Factor applied to every row first: 1 / root-mean-square of the training rows.
    preconditioner_ : ndarray of shape (d, d)
    n_features_in_ : int
    n_iter_ : int
        Epochs run, both phases.
    loss_curve_ : list of float
        Objective per epoch, both phases.
    validation_scores_ : list of float or None
        Validation objective per epoch when ``early_stopping``.
    y_mean_, y_scale_ : ndarray of shape (t,)
        Targets are standardized with these for training.

    Examples
    --------
    >>> from skdiagatt import DiagAttRegressor
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, _ = make_individualized_regression(200, n_rows=10, n_features=4,
    ...                                                random_state=0)
    >>> est = DiagAttRegressor(max_iter=5, random_state=0).fit(X, y)
    >>> est.predict(X[:3]).shape
    (3,)
    >>> [r.tolist() for r in est.localize(X[:2])]  # doctest: +SKIP
    [[4], [7]]
    """

    def _encode_targets(self, y, n, warm):
        y = check_targets(y, n)
        Y = y.reshape(n, -1)
        if warm:
            # Parameters continue in the first fit's target units.
            if Y.shape[1] != self.y_mean_.shape[0]:
                raise ValueError(
                    f"y has {Y.shape[1]} targets but the warm-started model has "
                    f"{self.y_mean_.shape[0]}"
                )
            mean, scale = self.y_mean_, self.y_scale_
        else:
            mean = Y.mean(axis=0)
            scale = Y.std(axis=0)
            scale = np.where(scale > 0, scale, 1.0)
        Y = ((Y - mean) / scale).astype(np.float32)
        return Y, (y.ndim, mean, scale), "gaussian"

    def _set_target_meta(self, meta):
        self._y_ndim, self.y_mean_, self.y_scale_ = meta

    def fit(self, X, y):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets)

        Returns
        -------
        self
        """
        return self._fit(X, y)

    def predict(self, X):
        """Predicted responses.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

        Returns
        -------
        ndarray of shape (n,) or (n, n_targets)
        """
        z = self._decision(X).astype(np.float64) * self.y_scale_ + self.y_mean_
        return z[:, 0] if self._y_ndim == 1 else z


class DiagAttClassifier(ClassifierMixin, _DiagAttBase):
    """Diagonalized-attention classification on matrix-valued samples.

    The scores and weights are those of :class:`DiagAttRegressor`; the
    attention prediction ``z = b + sum_r <X^T kappa_r, V_r>`` is a logit (binary)
    or a vector of class logits (multiclass, ``V_r`` of shape (d, C)), trained
    with the logistic / softmax cross-entropy.  The latent-row phase treats the
    label as drawn from the row each head picks.

    Parameters
    ----------
    n_heads, temperature, rank, symmetric, alpha, alpha_value, objective, whiten, \
calibration_iter, max_iter, learning_rate, batch_size, tol, n_iter_no_change, \
early_stopping, validation_fraction, random_state, verbose, warm_start
        As in :class:`DiagAttRegressor`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    params_, query_key_, preconditioner_, n_features_in_, n_iter_, loss_curve_, \
validation_scores_
        As in :class:`DiagAttRegressor` (t = 1 for two classes, else n_classes).

    Examples
    --------
    >>> from skdiagatt import DiagAttClassifier
    >>> from skdiagatt.datasets import make_individualized_classification
    >>> X, y, rows, _ = make_individualized_classification(100, n_rows=8, n_features=4,
    ...                                                    random_state=0)
    >>> clf = DiagAttClassifier(max_iter=5, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    """

    def _encode_targets(self, y, n, warm):
        y = check_targets(y, n, numeric=False)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (n,) for classification, got shape {y.shape}")
        enc = LabelEncoder()
        try:
            codes = enc.fit_transform(y)
        except TypeError as exc:
            raise TypeError(f"y has labels that cannot be compared: {exc}") from None
        classes = enc.classes_
        if classes.size < 2:
            raise ValueError(
                f"y has a single class {classes[0]!r}: classification needs at least two"
            )
        if warm and not np.array_equal(classes, self.classes_):
            raise ValueError(
                f"y has classes {classes.tolist()} but the warm-started model was fitted "
                f"with {self.classes_.tolist()}"
            )
        if classes.size == 2:
            return codes[:, None].astype(np.float32), classes, "bernoulli"
        return np.eye(classes.size, dtype=np.float32)[codes], classes, "categorical"

    def _set_target_meta(self, classes):
        self.classes_ = classes

    def fit(self, X, y):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,)
            Labels of any comparable type (int, str, ...), at least two classes.

        Returns
        -------
        self
        """
        return self._fit(X, y)

    def decision_function(self, X):
        """Logits: shape (n,) for two classes (positive = ``classes_[1]``), else (n, n_classes)."""
        z = self._decision(X).astype(np.float64)
        return z[:, 0] if len(self.classes_) == 2 else z

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes), columns in ``classes_`` order."""
        z = self.decision_function(X)
        if z.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-z))
            return np.column_stack([1.0 - p1, p1])
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X):
        """Most probable class of each sample, shape (n,)."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
