"""Diagonalized attention estimators (the DiagAtt paper): ``DiagAttRegressor``, ``DiagAttClassifier``."""

import jax
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._shared.base import check_finite_output
from .._shared.params import Boolean, Either, Integer, Options, Real, derived_init
from .._shared.sources import Samples
from .._shared.targets import LabelTargetsMixin, StandardizedTargetsMixin
from .._shared.two_phase import TwoPhaseEstimator
from .._training import map_device_data
from ..kernels.diagatt import (
    diagatt_forward,
    diagatt_loss,
    head_weights,
    pooled_rows,
    query_key,
    row_contributions,
)
from ._mil import STANDARD_MIL, AssumptionMixin, with_mil_rules
from ._mixture import MAX_SAMPLES
from ._readout import cv_logistic_readout, refit_readout
from ._row_kernel import RowKernelMixin
from ._spectrum import SpectrumRankMixin
from ._starts import data_start, scores_into_params

__all__ = ["DiagAttRegressor", "DiagAttClassifier"]

# alpha="auto": the prior's weight in samples, up to _PRIOR_FEATURES features.
_PRIOR_SAMPLES, _PRIOR_FEATURES = 30.0, 70


@jax.jit
def _linear_predictor(params, frozen, X, where):
    return diagatt_forward(params, frozen, X, where)[0]


_weights = jax.jit(head_weights)
_pooled = jax.jit(pooled_rows)
_contributions = jax.jit(row_contributions)


class _DiagAttBase(SpectrumRankMixin, RowKernelMixin, TwoPhaseEstimator):
    """Fitting logic shared by the regressor and the classifier."""

    _loss_fn = staticmethod(diagatt_loss)
    _linear_predictor = staticmethod(_linear_predictor)
    _pack = True
    _start_samples = MAX_SAMPLES
    # The inverse temperature stays out of the main phase (trained with W it would undo the
    # penalty: W shrinks, the scale grows); calibration fits it with v and b, W and U fixed.
    _held = ("log_scale",)
    _calibrated = ("log_scale", "V", "b")
    _shape_parameters = ("n_heads", "rank", "symmetric", "score_form")
    _parameter_rules = {
        **TwoPhaseEstimator._parameter_rules,
        "n_heads": Integer(1),
        "temperature": Either(Options(None), Real(0.0)),
        "rank": Either(Options("auto", None), Integer(1)),
        "symmetric": Boolean(),
        "score_form": Options("affine", "quadratic"),
        "kernel": Options("auto", "linear", "squares", "rbf", "squares+rbf"),
        "exclusive_heads": Boolean(),
        "alpha": Either(Options("auto"), Real(0.0, closed=True)),
        "alpha_value": Either(Options("auto"), Real(0.0, closed=True)),
        "value_refit": Boolean(),
        "init": Options("auto", "mixture", "zeros"),
        "max_iter": Either(Options("auto"), Integer(1)),
        "learning_rate": Either(Options("auto"), Real(0.0)),
    }
    _inert_when = {
        **TwoPhaseEstimator._inert_when,
        "symmetric": lambda est: f"rank={est.rank!r} (a full W)" if est.rank is None or est.rank == "auto" else None,
        "exclusive_heads": lambda est: "n_heads=1" if est.n_heads == 1 else None,
        "value_refit": lambda est: "alpha_value='auto', which refits" if isinstance(est.alpha_value, str) else None,
    }

    def __init__(
        self,
        n_heads=1,
        *,
        temperature=None,
        rank="auto",
        symmetric=True,
        score_form="affine",
        kernel="auto",
        exclusive_heads=True,
        alpha="auto",
        alpha_value="auto",
        value_refit=False,
        objective="latent",
        whiten=True,
        init="auto",
        calibration_iter=5,
        max_iter="auto",
        learning_rate="auto",
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
        self.temperature = temperature
        self.rank = rank
        self.symmetric = symmetric
        self.score_form = score_form
        self.kernel = kernel
        self.exclusive_heads = exclusive_heads
        self.alpha = alpha
        self.alpha_value = alpha_value
        self.value_refit = value_refit
        self.objective = objective
        self.whiten = whiten
        self.init = init
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
        # W starts at 0 (uniform attention); small random value vectors break
        # the symmetry between heads so they can specialise on different rows.
        params = {
            "log_scale": np.zeros(R, np.float32),
            "V": (0.1 / np.sqrt(d) * rng.standard_normal((R, d, t))).astype(np.float32),
            "b": np.zeros(t, np.float32),
            "log_sigma": np.zeros(t, np.float32),
        }
        if self.rank is None or self.rank == "auto":
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
        if self.score_form == "affine":
            params["U"] = np.zeros((R, d), np.float32)
        return params

    def _start(self, params, train, c, S, rng):
        """``init="mixture"`` / ``"auto"``: the start of the row scores from the data.

        ``"mixture"``: the scores of the rows' Gaussian mixture (:mod:`~skdiagatt.diagatt._mixture`),
        one signal component per head; ``"auto"``: the candidate start of least cross-validated
        error of its read-out (:mod:`~skdiagatt.diagatt._starts`).  Scores enter at the temperature
        of ``log_scale = 0``; a low-rank ``W`` starts from the positive part of ``A``.
        """
        self._chosen_start = "zeros"
        if self.init == "zeros" or (self.init == "auto" and getattr(self, "_mil", False)):
            return params
        affine = self.score_form == "affine"
        A, a, self._chosen_start = data_start(train.samples, train.Y, c, S, self.n_heads, affine=affine,
                                              choose=self.init == "auto", sample_weight=train.weights,
                                              random_state=rng)
        tau = self._temperature(S.shape[0])
        return scores_into_params(params, A * tau, a * tau if affine else None)

    def _shrinkage_target(self, params, n):
        # A Gaussian prior towards the start's scores weighs _PRIOR_SAMPLES samples
        # against the mean loss of n: the data decide more as there are more.
        # Whitened rows have |z|^2 ~ d: W entries of precision lambda give scores
        # z^T W z / sqrt(d) of variance ~ d / lambda, so beyond _PRIOR_FEATURES
        # the weight grows with d to hold the scores as firmly (not under
        # standard-mil, whose linear start is cross-validated unwhitened).
        d = next(params[k] for k in ("W", "L") if k in params).shape[1]
        auto = _PRIOR_SAMPLES * (1.0 if getattr(self, "_mil", False) else max(1.0, d / _PRIOR_FEATURES)) / n
        alpha = auto if isinstance(self.alpha, str) else self.alpha
        prior = {k: np.array(params[k]) for k in ("W", "L", "M", "U") if k in params}
        return {"prior": prior, "alpha": np.float32(alpha)}

    def _temperature(self, d):
        """tau: ``temperature``, by default ``sqrt(d)`` as in the paper."""
        return np.sqrt(d) if self.temperature is None else float(self.temperature)

    def _frozen(self, constants, d):
        frozen = {
            "x_scale": np.float32(constants["c"]),
            "S": constants["S"],
            "inv_tau": np.float32(1.0 / self._temperature(constants["S"].shape[0])),  # the rows' dimension
            "alpha_value": np.float32(self._value_penalty()),
        }
        # Under standard-mil each head scores instances on its own (any may be positive).
        if self.exclusive_heads and self.n_heads > 1 and not getattr(self, "_mil", False):
            frozen["exclusion"] = np.float32(1.0)
        return frozen

    def _step_size(self):
        """``learning_rate``; "auto": 0.1 under standard-mil, whose scores must grow to several units, else 0.01."""
        auto = 0.1 if getattr(self, "_mil", False) else 0.01
        return auto if self.learning_rate == "auto" else self.learning_rate

    def _value_penalty(self):
        """The L2 penalty on ``V`` during training: ``alpha_value``, 0 under "auto"."""
        return 0.0 if isinstance(self.alpha_value, str) else self.alpha_value

    def _refit_readout(self, params, frozen, data, family):
        """V and b refit with the weights fixed (``value_refit``, or ``alpha_value="auto"``; :mod:`~skdiagatt.diagatt._readout`).

        Under ``"auto"``: the ridge of largest evidence (Gaussian), the
        logistic regression of cross-validated penalty (classes).
        """
        auto = isinstance(self.alpha_value, str)
        if "V" not in params or not (self.value_refit or auto):
            return params
        H, Y, w = map_device_data(_pooled, data, params, frozen)
        if auto and family != "gaussian":
            return cv_logistic_readout(params, H, Y, frozen["S"], w)
        return refit_readout(params, H, Y, family, alpha_value=self._value_penalty(), evidence=auto, w=w)

    def _set_fitted(self, params, constants, n_features, phases, results, meta, continued, incremental):
        super()._set_fitted(params, constants, n_features, phases, results, meta, continued, incremental)
        # A continued fit keeps the start of the fit it continues.
        if not continued:
            self.start_ = self.__dict__.pop("_chosen_start")
        self._record_rank(params)
        return self

    def _accumulate_chunk(self, samples, statistics, weights=None):
        super()._accumulate_chunk(samples, statistics, weights)
        # Whole chunks until the start's mixture has its samples: one chunk draws as fit does.
        held = statistics.setdefault("start_samples", [])
        if len(held) < MAX_SAMPLES:
            held.extend(samples)

    # ------------------------------------------------------------- inference
    def _decision(self, X):
        """Linear predictor ``z`` of shape (n, t) in the internal target scale."""
        samples = self._validate_X(X, reset=False)
        z = self._map_samples(self._linear_predictor, samples, self.params_, self._frozen_fitted())
        return check_finite_output(z)

    def _head_weights(self, samples):
        return self._map_samples(_weights, samples, self.params_, self._frozen_fitted(), rows=True)

    def _internal_contributions(self, X):
        """Per sample ``(n_heads, p_i, t)`` terms in the internal scale, and ``z`` (n, t)."""
        samples = self._validate_X(X, reset=False)
        terms = self._map_samples(_contributions, samples, self.params_, self._frozen_fitted(), rows=True)
        terms = check_finite_output(terms, "row contribution")
        z = np.stack([c.sum(axis=(0, 1)) for c in terms]) + self.params_["b"]
        return terms, z

    def row_contributions(self, X):
        """Each row's additive term in the output, per head.

        With the attention weights fixed the output is linear in the rows:
        the terms ``kappa_rl x_l v_r`` of all heads r and rows l, plus
        ``intercept_``, give ``predict`` (regressor, in the targets' units)
        or ``decision_function`` (classifier, logits).  A term's sign says
        which way the row moves the output; a row can carry a large weight
        and a small term.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

        Returns
        -------
        list of ndarray of shape (n_heads, p_i), or (n_heads, p_i, n_outputs)
            The last axis for several targets or more than two classes.
        """
        terms, _ = self._internal_contributions(X)
        return [self._to_output(c, offset=False) for c in terms]

    @property
    def intercept_(self):
        """The output of a sample whose rows contribute nothing: ``b`` in output units.

        A float, or ndarray of shape (n_outputs,) for several targets or more
        than two classes.
        """
        check_is_fitted(self)
        out = self._to_output(np.asarray(self.params_["b"]))
        return float(out) if np.ndim(out) == 0 else out

    def _row_ranking(self, X, by):
        if by == "attention":
            return self.attention(X)
        if by != "contribution":
            raise ValueError(f'by must be "attention" or "contribution", got {by!r}')
        terms, z = self._internal_contributions(X)
        direction = self._push_direction(z, z - self.params_["b"])  # (n, t)
        return [c @ u for c, u in zip(terms, direction)]

    @property
    def query_key_(self):
        """Query-key matrices in input coordinates, temperature included, shape (n_heads, d, d).

        The score of row ``x`` under head r is ``x @ query_key_[r] @ x``.
        """
        frozen = self._frozen_fitted()
        Q = np.asarray(query_key(self.params_, frozen["S"]))
        scale = frozen["x_scale"] ** 2 * frozen["inv_tau"] * np.exp(self.params_["log_scale"])
        return Q * scale[:, None, None]

    @property
    def linear_score_(self):
        """Linear score terms in input coordinates, temperature included, shape (n_heads, d).

        The score of row ``x`` under head r is ``x @ query_key_[r] @ x +
        linear_score_[r] @ x``; zeros for ``score_form="quadratic"``.
        """
        frozen = self._frozen_fitted()
        if "U" not in self.params_:
            return np.zeros((self.params_["log_scale"].shape[0], frozen["S"].shape[0]), np.float32)
        scale = frozen["x_scale"] * frozen["inv_tau"] * np.exp(self.params_["log_scale"])
        return (np.asarray(self.params_["U"]) @ frozen["S"]) * scale[:, None]


class DiagAttRegressor(RegressorMixin, StandardizedTargetsMixin, _DiagAttBase):
    """Diagonalized-attention regression on matrix-valued samples.

    Each sample ``X_i`` (p_i rows, d features) is scored row by row,
    ``psi_r = diag(X_i W_r X_i^T) / tau``; ``kappa_r = softmax(psi_r)`` weighs the
    rows, and the prediction is ``b + sum_r <X_i^T kappa_r, v_r>``.  The number
    of parameters does not depend on n or p.

    Training has two phases.  First the *latent-row* objective: each head
    picks one row at random with probabilities ``kappa_r`` and the response is
    Gaussian around that row's read-out (exactly the simulator of the DiagAtt paper,
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
    rank : "auto", int or None, default="auto"
        None: full ``W_r`` (d x d).  "auto": full ``W_r``, its spectrum then shrunk to an
        isotropic part and the directions outside its noise bulk (:mod:`skdiagatt.diagatt._spectrum`).
        An int q: ``W_r = L_r L_r^T`` (or ``L_r M_r^T`` with ``symmetric=False``), rank q.
    symmetric : bool, default=True
        Low-rank form, used when ``rank`` is an int.
    score_form : {"affine", "quadratic"}, default="affine"
        "affine": ``x^T W_r x + u_r^T x``; "quadratic": the paper's score
        ``x^T W_r x``.  The log-likelihood ratio of two Gaussian row
        distributions has the affine form; a quadratic form alone cannot tell
        ``x`` from ``-x`` (``docs/results/diagatt_training.md``).
    kernel : {"auto", "linear", "squares", "rbf", "squares+rbf"}, default="auto"
        The rows the model sees.  "linear": as given.  "squares": standardized,
        with each feature's square appended (``2 d`` features, constant ones
        left out, at most 400: wider, their leading principal components), so
        that the pooled rows carry each feature's weighted spread as well as
        its mean.  "rbf": mapped into a Gaussian kernel's feature space (a
        Nystroem map of 100 landmark rows, ``gamma = 1 / d`` on standardized
        rows), so that the read-out is non-linear in the rows.  "squares+rbf":
        the "squares" rows followed by the "rbf" ones.  "auto": "squares+rbf"
        where the mean-pooled "rbf" rows predict better by more than a standard
        error, else "linear" (:mod:`skdiagatt.diagatt._row_kernel`).
    exclusive_heads : bool, default=True
        Heads compete for rows: head r's softmax also weighs each row by the
        other heads' ``1 - kappa_l``
        (:func:`skdiagatt.kernels.diagatt.competing_scores`), as one row per
        head and sample.  No effect with one head or under standard-mil.
    alpha : float or "auto", default="auto"
        L2 penalty on the query-key parameters (``W`` and ``u``), in whitened
        coordinates, towards where training starts (see ``init``), added to
        the mean loss over the training samples.  "auto": ``30 max(1, d / 70) / n``
        for n samples of d features (``30 / n`` under standard-mil), a Gaussian
        prior that weighs as much as 30 samples, more beyond 70 features (``partial_fit``: n of its first call).
    alpha_value : float or "auto", default="auto"
        L2 penalty on the value vectors.  "auto": none in training, then the
        regressor's ``V`` and ``b`` are refit as the ridge regression on the
        attention-pooled rows with the penalty of largest marginal likelihood
        (empirical Bayes); the classifier's ``V`` and ``b`` are refit as the
        L2 logistic (or softmax) regression on those rows whose penalty has
        the least cross-validated log-loss, the penalty acting in the input's
        coordinates, not the whitened ones.
    value_refit : bool, default=False
        After training, replace ``V`` and ``b`` by the exact minimiser of the
        attention objective with the weights fixed: a ridge / L2-logistic /
        L2-softmax regression on the attention-pooled rows (penalty
        ``alpha_value``), solved by L-BFGS (``docs/real_data.md``); implied by
        ``alpha_value="auto"``.  ``partial_fit`` does not refit.
    objective : {"latent", "attention"}, default="latent"
        Training objective: the latent-row likelihood followed by calibration,
        or the paper's squared loss of the attention prediction alone.
    whiten : bool, default=True
        Train ``W`` in coordinates whitened by the rows' second moment (``S W
        S``, ``S = E[x x^T]^{-1/2}``).  Either way rows are first divided by
        their root-mean-square (``input_scale_``), which tau refers to.
    init : {"auto", "mixture", "zeros"}, default="auto"
        Where the query-key parameters start, and what ``alpha`` shrinks
        them towards (the user guide's "Where training starts").  "mixture":
        the log-likelihood ratios of the rows' Gaussian mixture, one signal
        component per head.  "zeros": uniform attention.  "auto": of these and
        the rows large along the response's direction, the one of least
        cross-validated error (``start_``); standard-mil: see ``assumption``.
    calibration_iter : int, default=5
        Epochs of the calibration phase (0 skips it).
    max_iter : int or "auto", default="auto"
        Epochs of the main phase; the step size decays to 0 over them
        (cosine).  "auto": at least 20 epochs and 300 Adam steps, then up to 6
        restarts while they still gain (``docs/training.md``, section 5).
    learning_rate : float or "auto", default="auto"
        Adam step size.  "auto": 0.01, and 0.1 under
        ``assumption="standard-mil"``, whose scores must grow to several units.
    batch_size : int or "auto", default="auto"
        "auto": ``min(256, max(32, n // 16))``.  Samples of many lengths are
        trained packed: ``ceil(n / batch_size)`` minibatches an epoch, each
        holding samples from across the lengths (``docs/training.md``, section 5).
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
        > 0: say when the training programs compile, and print one line per
        epoch with its loss, its time and an estimate of the time left.
    callback : callable or None, default=None
        Called after every epoch of every phase with one
        :class:`~skdiagatt.EpochInfo` (``phase``, ``epoch``, ``train_loss``,
        ``valid_loss``, ``seconds``, ...).  A true return value ends the phase
        after that epoch, as early stopping would.  Not called while predicting.
    warm_start : bool, default=False
        Start from the previous fit's parameters; the history (``n_iter_``,
        ``loss_curve_``) continues too.

    Attributes
    ----------
    params_ : dict of ndarray
        Fitted parameters (``W`` (R, d, d) or ``L``/``M`` (R, d, q) in whitened
        coordinates, ``U`` (R, d) with ``score_form="affine"``, ``V`` (R, d, t),
        ``b`` (t,), ``log_scale`` (R,), ``log_sigma`` (t,)), in standardized target units.
    query_key_ : ndarray of shape (n_heads, d, d)
        Score matrices in input coordinates, temperature included.
    intercept_ : float or ndarray of shape (n_targets,)
        The prediction when every row's term (:meth:`row_contributions`) is 0.
    linear_score_ : ndarray of shape (n_heads, d)
        Linear score terms in input coordinates, temperature included (zeros
        unless ``score_form="affine"``).
    input_scale_ : float
        Factor applied to every row first: 1 / root-mean-square of the training rows.
    preconditioner_ : ndarray of shape (d, d)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.
    n_iter_ : int
        Epochs of the main phase (``max_iter``'s, not ``calibration_iter``'s); ``warm_start`` and ``partial_fit`` add to it.
    loss_curve_ : list of float
        Objective per epoch, both phases (continued under ``warm_start``); it
        jumps where one phase's objective ends and the other's starts.
    loss_curve_phase_ : list of str
        The phase of each ``loss_curve_`` entry: ``"main"`` or ``"calibration"``
        (:func:`skdiagatt.plotting.plot_history` marks the switch).
    validation_scores_ : list of float or None
        Validation objective per epoch when ``early_stopping``.
    rank_ : ndarray of shape (n_heads,)
        Directions each head keeps: under ``rank="auto"`` those outside the
        noise bulk of ``W_r``, else the rank its form allows.
    start_ : str
        Where training started: ``"zeros"``, ``"mixture"``, or the candidate
        "auto" chose (``"uniform"``, ``"mixture x0.5"``, ``"supervised mixture x1"``...).
    kernel_ : str
        The rows the model sees: ``kernel``, or what ``kernel="auto"`` chose ("linear" or "squares+rbf").
    row_map_ : sklearn.pipeline.Pipeline or None
        The fitted map of the rows (None: as given); ``params_`` live in its coordinates.
    y_mean_, y_scale_ : ndarray of shape (t,)
        Targets are standardized with these for training.

    Examples
    --------
    >>> from skdiagatt import DiagAttRegressor
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, _ = make_individualized_regression(200, n_rows=10, n_features=4,
    ...                                                random_state=0)
    >>> est = DiagAttRegressor(max_iter=5, random_state=0).fit(X, y)
    >>> est.predict(X[:3]).shape, len(est.localize(X[:2]))
    ((3,), 2)
    """


class DiagAttClassifier(ClassifierMixin, AssumptionMixin, LabelTargetsMixin, _DiagAttBase):
    """Diagonalized-attention classification on matrix-valued samples.

    The scores and weights are those of :class:`DiagAttRegressor`; the
    attention prediction ``z = b + sum_r <X^T kappa_r, V_r>`` is a logit (binary)
    or a vector of class logits (multiclass, ``V_r`` of shape (d, C)), trained
    with the logistic / softmax cross-entropy.  The latent-row phase treats the
    label as drawn from the row each head picks.

    Parameters
    ----------
    n_heads, temperature, rank, symmetric, score_form, exclusive_heads, alpha, alpha_value, value_refit, \
objective, whiten, init, calibration_iter, max_iter, learning_rate, batch_size, tol, n_iter_no_change, \
early_stopping, validation_fraction, random_state, verbose, callback, warm_start
        As in :class:`DiagAttRegressor`.
    assumption : {"individualized", "standard-mil"}, default="individualized"
        "individualized": the label may depend on any row, including rows
        whose presence signals the negative class (DiagAtt as in the DiagAtt paper).
        "standard-mil" (two classes only): a bag is positive because of its
        instances; no instance is evidence of the negative class.  Each head
        scores the instances as above; its presence logit is ``g_r = b_r +
        M_rho(psi_r)``, the smooth maximum ``M_rho(psi) = log(mean_l exp(rho
        psi_l)) / rho``, and ``P(y = classes_[1]) = prod_r sigmoid(g_r)``
        (:mod:`skdiagatt.kernels.mil`).  One head: the standard assumption;
        R heads: a positive bag needs an instance of each of R concepts.
        The fit starts from linear instance scores and a sharpness ``rho``
        in {1, 3, 10} cross-validated together (``sharpness_``).
        ``localize`` returns each head's highest-scoring instance.
        ``params_`` has no ``V``; ``b`` and ``intercept_`` hold the heads'
        offsets ``b_r``; ``learning_rate="auto"`` is 0.1.  ``value_refit``,
        ``exclusive_heads`` and ``row_contributions`` do not apply.  See
        ``docs/results/mil_assumptions.md``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_ : float or ndarray of shape (n_classes,)
        The logit(s) when every row's term (:meth:`row_contributions`) is 0:
        a float for two classes.
    params_, query_key_, linear_score_, preconditioner_, n_features_in_, feature_names_in_, n_iter_, \
loss_curve_, loss_curve_phase_, validation_scores_, rank_, start_, kernel_, row_map_
        As in :class:`DiagAttRegressor` (t = 1 for two classes, else n_classes).
    sharpness_ : float
        Under ``assumption="standard-mil"``: the pooling's chosen ``rho``.

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

    __init__ = derived_init(_DiagAttBase.__init__, add=[("assumption", "individualized")])
    _shape_parameters = _DiagAttBase._shape_parameters + ("assumption",)
    _parameter_rules = {**_DiagAttBase._parameter_rules, "assumption": Options("individualized", STANDARD_MIL)}
    _inert_when = with_mil_rules(_DiagAttBase._inert_when)

    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,)
            Labels of any comparable type (int, str, ...), at least two classes.
        sample_weight : array-like of shape (n,) or None, default=None
            As in :meth:`DiagAttRegressor.fit`.

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, sample_weight=sample_weight))

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch of the main objective over one chunk, continuing the previous state.

        As :meth:`DiagAttRegressor.partial_fit`.  ``classes`` lists every
        label; it is needed on the first call when that chunk does not hold
        them all (default: the labels of the first chunk).

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,)
        classes : array-like or None, default=None
        sample_weight : array-like of shape (n,) or None, default=None

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, classes, sample_weight), incremental=True)
