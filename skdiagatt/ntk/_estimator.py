"""NTK-Attention regression (the NTK-Attention paper): ``NTKPrefixRegressor``."""

import math
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score

from .._shared.base import check_finite_output, check_sample_weight, check_targets, standardize_targets
from .._shared.params import TRAINING_RULES, Anything, Boolean, Either, Integer, Options, Real
from .._shared.phased import Phase, PhasedEstimator
from .._shared.ragged import COARSE
from .._shared.sources import Samples
from .._training import TrainResult
from ..kernels.cumulant import log_mass_dim
from ..kernels.features import feature_dim
from ..kernels.ntk_readout import ntk_readout_forward, ntk_readout_loss, ntk_row_mass
from ._prefix_state import random_prefix_state
from ._solve import ALPHAS, LOG_GATES, fit_varpro, mass_path

__all__ = ["NTKPrefixRegressor"]

_forward = jax.jit(ntk_readout_forward, static_argnames=("config",))
_row_mass = jax.jit(ntk_row_mass, static_argnames=("config",))
_PROJECTIONS = ("W_Q", "W_K", "W_V")
#: ``alpha_value="auto"`` under Adam, which has no closed-form criterion to choose it by.
_ADAM_ALPHA = 1e-4
#: ``degree="auto"``: the cumulant state's mean value of degree 2 where the exact solve's design,
#: ``H (d_v + C(d_h + 2, 2))`` columns, is at most this wide (a cost bound: its second moment and
#: every row's features grow with its square and width), else of degree 1.
_AUTO_DEGREE_COLUMNS = 2048


@partial(jax.jit, static_argnames=("config",))
def _row_forward(params, frozen, X, where, config):
    """Per-row predictions (``pooling=None``) with the targets as the head axis: (B, t, L)."""
    return jnp.swapaxes(ntk_readout_forward(params, frozen, X, where, config), 1, 2)


def _state_scaled_loss(params, frozen, batch, config):
    """``ntk_readout_loss`` with ``Z`` and ``k`` stored divided by ``frozen["state_scale"]``.

    Adam moves every parameter by about ``learning_rate`` per step whatever its
    size, so the scale the state is stored in sets how fast it can change
    relative to its size (see ``state_scale`` in :class:`NTKPrefixRegressor`).
    """
    s = frozen["state_scale"]
    return ntk_readout_loss({**params, "Z": params["Z"] * s, "k": params["k"] * s}, frozen, batch, config)


class NTKPrefixRegressor(RegressorMixin, PhasedEstimator):
    """Attention with an infinitely long trainable prefix, compressed into ``Z`` and ``k``.

    NTK-Attention (the NTK-Attention paper, Algorithm 1) replaces the keys and values of a
    prefix ``P`` (m rows) by two sums, ``Z = sum_r phi(W_K^T P_r) (P_r W_V)`` and
    ``k = sum_r phi(W_K^T P_r)``, where ``phi(q) . phi(k') ~ exp(q . k' / sqrt(d_h))``.
    Each row's output is ``T = (A V + phi(Q) Z) / (A 1 + phi(Q) k)`` with
    ``A = exp(Q K^T / sqrt(d_h))`` over the sample's rows; its cost does not
    depend on m.  The attention projections are frozen (taken from a
    pretrained layer, or drawn at random); ``Z``, ``k`` and a linear read-out of
    the pooled (or per-row) outputs are trained.

    Parameters
    ----------
    n_heads : int, default=1
    head_dim : int or None, default=None
        d_h = d_v per head; None uses ``max(1, d // n_heads)``.  Ignored when
        ``attention_weights`` is given.
    attention_weights : dict or None, default=None
        Frozen projections ``{"W_Q", "W_K", "W_V"}``, each of shape
        (n_heads, d, d_h) or (d, n_heads * d_h).  None draws them from
        ``random_state`` with entries ``N(0, 1 / (2 d))``, so that
        ``q . k / sqrt(d_h)`` is of order one for standardized rows.
    feature_map : {"cumulant", "taylor", "elu"}, default="cumulant"
        ``"cumulant"``: the log of the prefix's mass expanded to second order
        in the query (its keys' cumulants) and its attention-weighted mean
        value to order ``degree`` (:mod:`skdiagatt.kernels.cumulant`):
        ``T = (A V + exp(phi_2(Q) k) phi_g(Q) Z) / (A 1 + exp(phi_2(Q) k))``,
        exact for jointly Gaussian prefix keys and values of any mean, with
        ``k`` of dimension ``C(d_h + 2, 2)`` and ``Z`` of
        ``C(d_h + degree, degree)`` rows.  ``"taylor"``: truncated Taylor
        features of exp (polynomial method, paper Eq. 4), dimension
        ``C(d_h + degree, degree)``; accurate only while ``|q . k| / sqrt(d_h)``
        stays small for the prefix's keys.  ``"elu"``: ``elu(x / d_h^(1/4)) + 1``
        as in the authors' public code, dimension d_h.
    degree : int or "auto", default="auto"
        Taylor degree of ``phi``; for ``"cumulant"`` that of the prefix's
        mean value (1 is exact for a Gaussian prefix; 2 also absorbs part of
        what a finite or non-Gaussian prefix adds, at ``C(d_h + 2, 2)`` rows
        of ``Z`` per head: 561 for heads of 32, which the exact solve then
        carries for every row).  ``"auto"``: for ``"cumulant"`` 2 where the
        exact solve's design, ``n_heads (d_v + C(d_h + 2, 2))`` columns, is
        at most 2,048 wide (up to three heads of 32, twelve of 16), else 1; 2 for
        ``"taylor"`` (the lowest degree whose denominator stays positive);
        ``"elu"`` has none.
    prefix_length : int or np.inf, default=1024
        m, the length of the random prefix ``P ~ N(0, I)`` that
        ``init="prefix"`` compresses; any length costs the same memory.  Up to
        2^16 rows are drawn from ``random_state`` a block at a time and
        summed.  Longer prefixes are ``m`` times the exact expectation of one
        row's ``(phi(k) v^T, phi(k))`` plus the fluctuation of 2^16 drawn rows
        about it scaled by ``sqrt(m / 2^16)``: the mean and covariance of the
        sum of m rows.  ``np.inf`` is the limit of the state divided by m,
        the expectation of one row: a prefix of infinitely many rows whose
        attention weight together is that of a single row of average key
        and value.
    init : {"auto", "prefix", "zeros"}, default="auto"
        ``"auto"``, for the cumulant state under the exact solve
        (``solver``): the prefix's state with its mass scaled by the factor
        of least generalized cross-validation error on a path from no mass,
        which is frozen attention and wins ties, to the whole prefix
        (factors ``e^-8`` to 1; ``prefix_log_gate_``): ``k`` starts from
        frozen attention and the prefix enters only as far as the data
        support it; otherwise as ``"prefix"``.
        ``"prefix"``: ``Z, k`` from a prefix ``P ~ N(0, I)`` (paper Eq. 4;
        for ``"cumulant"`` the moments of its keys and values, with log-mass
        ``log m``); ``"zeros"``: ``Z = 0, k = 0``, plain attention for
        ``"taylor"`` and ``"elu"`` (for ``"cumulant"`` a prefix of one row's
        mass and value zero: a zero mass has no finite logarithm).
    pooling : {"mean", "first"} or None, default="mean"
        How row outputs become one vector per sample; None predicts one target
        per row (``y`` is then a ragged list of (p_i,) or (p_i, t) arrays).
    causal : bool, default=False
        Rows attend only to earlier rows (and the prefix).
    train_state : bool, default=True
        Train ``Z`` and ``k``; False keeps them at their initial value and
        trains the read-out alone (with ``init="zeros"``: frozen plain attention).
    state_scale : "auto" or float, default="auto"
        Unit in which Adam trains ``Z`` and ``k``: the optimiser
        sees ``Z / state_scale`` and ``k / state_scale``, so each Adam step
        changes them by about ``learning_rate * state_scale``.  ``"auto"``
        uses ``sqrt(prefix_length)`` with ``init="prefix"`` and a finite
        prefix and ``"taylor"`` or ``"elu"``, else 1 (the cumulant state holds the
        log of the mass, not the mass); 1.0 trains them in raw units.  Eq. 4 sums m rows, so
        the initial state's entries are of size ~m (``k[0] == m`` exactly for
        ``"taylor"``) or ~sqrt(m) (sums of mean-zero terms), while Adam moves
        every entry by about ``learning_rate`` per step whatever its size:
        in raw units a long prefix's state barely moves.  sqrt(m) is a
        heuristic (``docs/results/ntk_learning.md`` compares units); variable
        projection ignores it.
    solver : {"auto", "adam", "varpro"}, default="auto"
        ``"adam"``: ``Z``, ``k`` and the read-out trained jointly by
        minibatch Adam (``max_iter`` epochs).  ``"varpro"``: given ``k`` the
        prediction is linear in the read-out and in ``Z`` times the read-out,
        so those are solved exactly (a ridge regression on all the training
        data) and ``k`` alone is trained by full-batch L-BFGS on the loss at
        that optimum (``max_iter`` iterations; see
        :mod:`skdiagatt.kernels.ntk_varpro`); with ``early_stopping`` the
        exact solve uses the training part and the ``k`` of least
        validation loss is kept.  Needs ``train_state=True`` and at most d_v
        targets; :meth:`partial_fit` and :meth:`fit_chunks` always use Adam.  ``"auto"``: ``"varpro"``
        where it applies, else ``"adam"``.
    alpha_value : float or "auto", default="auto"
        L2 penalty on the read-out; with ``solver="varpro"`` on the read-out
        and ``Z`` times it, relative to the mean variance of their inputs.
        ``"auto"``: under the exact solve, the penalty of least generalized
        cross-validation error among ``1e-6`` to ``100`` (``alpha_value_``),
        chosen with ``init="auto"``'s point and kept while ``k`` trains;
        under Adam ``1e-4``.
    max_iter, learning_rate, batch_size, tol, n_iter_no_change, early_stopping, \
validation_fraction, random_state, verbose, callback, warm_start
        Training, as in :class:`skdiagatt.DiagAttRegressor`.

    Attributes
    ----------
    params_ : dict of ndarray
        Trained ``Z`` (H, r, d_h), ``k`` (H, r) (``(H, C(d_h + 2, 2))`` for
        ``"cumulant"``), ``W_out`` (H * d_h, t), ``b`` (t,).
    attention_weights_ : dict of ndarray
        The frozen projections, each (H, d, d_h).
    alpha_value_ : float
        The read-out penalty the fit used (``alpha_value``, or the one
        ``"auto"`` chose).
    prefix_log_gate_ : float
        The log of the factor ``init="auto"`` scaled the initial prefix's
        mass by (``-inf``: none, frozen attention; 0 otherwise).
    n_features_in_, feature_names_in_, n_iter_, loss_curve_, validation_scores_, y_mean_, y_scale_

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt import NTKPrefixRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = [rng.randn(rng.randint(3, 9), 4) for _ in range(40)]
    >>> y = np.array([x[:, 0].mean() for x in X])
    >>> est = NTKPrefixRegressor(max_iter=3, prefix_length=16, random_state=0).fit(X, y)
    >>> est.predict(X[:2]).shape
    (2,)
    """

    _bucket_growth = COARSE  # fewer programs to compile (docs/results/performance.md, section 7)
    _chunk_large_data = False  # the exact solve reads the training samples whole
    _loss_fn = staticmethod(ntk_readout_loss)
    _shape_parameters = ("n_heads", "head_dim", "attention_weights", "feature_map", "degree")
    _parameter_rules = {
        **TRAINING_RULES,
        "n_heads": Integer(1),
        "head_dim": Either(Options(None), Integer(1)),
        "attention_weights": Anything(),  # checked with the data (_projections)
        "feature_map": Options("cumulant", "taylor", "elu"),
        "degree": Either(Options("auto"), Integer(1)),
        "prefix_length": Either(Integer(1), Options(np.inf)),
        "init": Options("auto", "prefix", "zeros"),
        "pooling": Options("mean", "first", None),
        "causal": Boolean(),
        "train_state": Boolean(),
        "state_scale": Either(Options("auto"), Real(0.0)),
        "solver": Options("auto", "adam", "varpro"),
        "alpha_value": Either(Options("auto"), Real(0.0, closed=True)),
    }

    def __init__(
        self,
        n_heads=1,
        *,
        head_dim=None,
        attention_weights=None,
        feature_map="cumulant",
        degree="auto",
        prefix_length=1024,
        init="auto",
        pooling="mean",
        causal=False,
        train_state=True,
        state_scale="auto",
        solver="auto",
        alpha_value="auto",
        max_iter=50,
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
        self.head_dim = head_dim
        self.attention_weights = attention_weights
        self.feature_map = feature_map
        self.degree = degree
        self.prefix_length = prefix_length
        self.init = init
        self.pooling = pooling
        self.causal = causal
        self.train_state = train_state
        self.state_scale = state_scale
        self.solver = solver
        self.alpha_value = alpha_value
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

    # ----------------------------------------------------------------- checks
    def _check_combination(self):
        if self.solver == "varpro" and not self.train_state:
            raise ValueError("solver='varpro' trains Z and k: use solver='adam' with train_state=False")

    def _state_unit(self):
        """The value ``state_scale`` stands for (see the class docstring)."""
        if isinstance(self.state_scale, str):
            if self.init != "zeros" and self.feature_map != "cumulant" and not math.isinf(self.prefix_length):
                return math.sqrt(self.prefix_length)
            return 1.0
        return float(self.state_scale)

    def _projections(self, d, rng):
        """The frozen (H, d, d_h) projections, validated or drawn."""
        H = self.n_heads
        if self.attention_weights is None:
            dh = self.head_dim or max(1, d // H)
            if self.head_dim is None and H > 1:
                # As in a transformer layer more heads are narrower heads: say so,
                # since a narrower head also sees a smaller share of the features.
                warnings.warn(f"{type(self).__name__}: n_heads={H} splits the {d} features into heads of "
                              f"head_dim = d // n_heads = {dh}; set head_dim to choose their width", UserWarning)
            std = math.sqrt(0.5 / d)
            return {k: (std * rng.standard_normal((H, d, dh))).astype(np.float32) for k in _PROJECTIONS}
        given = self.attention_weights
        if not isinstance(given, dict) or set(given) != set(_PROJECTIONS):
            raise ValueError("attention_weights must be a dict with exactly the keys W_Q, W_K, W_V")
        out = {}
        for key in _PROJECTIONS:
            W = np.asarray(given[key], dtype=np.float32)
            if W.ndim == 2 and W.shape[0] == d and W.shape[1] % H == 0:
                W = W.reshape(d, H, W.shape[1] // H).transpose(1, 0, 2)
            if W.ndim != 3 or W.shape[:2] != (H, d):
                raise ValueError(
                    f"attention_weights[{key!r}] has shape {np.shape(given[key])}; expected "
                    f"({H}, {d}, d_h) or ({d}, {H} * d_h) for n_heads={H} and {d} features"
                )
            if not np.all(np.isfinite(W)):
                raise ValueError(f"attention_weights[{key!r}] contains NaN or infinity")
            out[key] = W
        if out["W_Q"].shape != out["W_K"].shape:
            raise ValueError("attention_weights W_Q and W_K must have the same shape")
        return out

    def _config(self, W=None):
        """The kernels' static settings for the projections ``W`` (default: the fitted ones)."""
        return (self.feature_map, self._degree(self.attention_weights_ if W is None else W), bool(self.causal),
                self.pooling)

    def _degree(self, W):
        """``degree``, with ``"auto"`` resolved for the projections ``W`` (see the class docstring)."""
        if self.degree != "auto":
            return int(self.degree)
        if self.feature_map != "cumulant":
            return 2
        H, _, dh = W["W_K"].shape
        return 2 if H * (W["W_V"].shape[-1] + feature_dim("cumulant", dh, 2)) <= _AUTO_DEGREE_COLUMNS else 1

    # -------------------------------------------------------------- targets
    def _encode_targets(self, y, lengths, *, warm, incremental=False, classes=None, sample_weight=None):
        n = len(lengths)
        if self.pooling is None:
            if not isinstance(y, (list, tuple)) or len(y) != n:
                raise ValueError(
                    "with pooling=None, y must be a list of one (p_i,) or (p_i, t) array per sample"
                )
            rows = []
            for i, (yi, p) in enumerate(zip(y, lengths)):
                yi = check_targets(yi, p)
                rows.append(yi.reshape(p, -1))
                if rows[-1].shape[1] != rows[0].shape[1]:
                    raise ValueError(f"y[{i}] has {rows[-1].shape[1]} targets, y[0] has {rows[0].shape[1]}")
            flat, ndim = np.concatenate(rows), np.ndim(y[0])
        else:
            yy = check_targets(y, n)
            flat, ndim = yy.reshape(n, -1), yy.ndim
            rows = None
        if warm:
            if flat.shape[1] != self.y_mean_.shape[0]:
                raise ValueError(
                    f"y has {flat.shape[1]} targets but the warm-started model has {self.y_mean_.shape[0]}"
                )
        if sample_weight is not None and rows is not None:
            sample_weight = np.repeat(sample_weight, [r.shape[0] for r in rows])  # each row its sample's
        Y, mean, scale = standardize_targets(flat, (self.y_mean_, self.y_scale_) if warm else None, sample_weight)
        if rows is not None:
            Y = np.split(Y, np.cumsum([r.shape[0] for r in rows])[:-1])
        return Y, (ndim, mean, scale), "gaussian"

    def _set_target_meta(self, meta):
        self._y_ndim, self.y_mean_, self.y_scale_ = meta

    # ------------------------------------------------------- the one fit path
    def fit(self, X, y, sample_weight=None):
        """Fit ``Z``, ``k`` and the read-out; the projections stay frozen.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets); with ``pooling=None`` a
            list of (p_i,) or (p_i, n_targets) arrays
        sample_weight : array-like of shape (n,) or None, default=None
            As in :meth:`skdiagatt.DiagAttRegressor.fit` (with ``pooling=None``
            a sample's weight is each of its rows').

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, sample_weight=sample_weight))

    def partial_fit(self, X, y, sample_weight=None):
        """One epoch over one chunk, continuing the previous state.

        The first call (on an unfitted model) draws the projections and the
        initial state and fixes the target standardisation from its chunk;
        every call runs one epoch of Adam at the constant ``learning_rate``
        and keeps the optimizer state and the random state for the next call.
        NTK-Attention has a single objective, so repeated calls train the
        whole model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets); with ``pooling=None`` a
            list of (p_i,) or (p_i, n_targets) arrays
        sample_weight : array-like of shape (n,) or None, default=None
            As in :meth:`fit`.

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, sample_weight=sample_weight), incremental=True)

    def _phases(self, family, incremental):
        held = () if self.train_state else ("Z", "k")
        return [Phase("main", None, 1 if incremental else self.max_iter, held=held)]  # config: in _train

    def _draw_constants(self, d, rng):
        return self._projections(d, rng)

    def _fitted_constants(self):
        return self.attention_weights_

    def _store_constants(self, constants):
        self.attention_weights_ = constants

    def _frozen(self, constants, d):
        return {**constants, "alpha_value": np.float32(_ADAM_ALPHA if self.alpha_value == "auto" else self.alpha_value)}

    def _initial_params(self, d, t, constants, train, rng):
        return self._init_params(constants, t, rng)

    def _param_shapes(self, d, t):
        W = self._projections(d, np.random.RandomState(0))
        H, _, dh = W["W_K"].shape
        dv = W["W_V"].shape[-1]
        r = feature_dim(self.feature_map, dh, self._degree(W))
        return {"Z": (H, r, dv), "k": (H, self._mass_dim(W)), "W_out": (H * dv, t), "b": (t,)}

    def _mass_dim(self, W):
        """Length of ``k``: the log-mass coefficients for ``"cumulant"``, else ``phi``'s dimension."""
        dh = W["W_K"].shape[-1]
        return log_mass_dim(dh) if self.feature_map == "cumulant" else feature_dim(self.feature_map, dh, self._degree(W))

    def _training_form(self, loss_fn, params, frozen, state):
        # partial_fit keeps the unit of its first call.
        s = state.setdefault("state_unit", self._state_unit())
        if "Z" not in params or s == 1.0:
            return loss_fn, params, frozen
        params = {**params, "Z": params["Z"] / np.float32(s), "k": params["k"] / np.float32(s)}
        return _state_scaled_loss, params, {**frozen, "state_scale": np.float32(s)}

    def _fitted_form(self, params, frozen):
        if "state_scale" not in frozen:
            return params
        s = frozen["state_scale"]
        return {**params, "Z": params["Z"] * s, "k": params["k"] * s}

    def _train(self, phases, params, frozen, train, state, incremental):
        """Variable projection in ``fit``; Adam otherwise (and always in ``partial_fit``, ``fit_chunks``)."""
        self.__dict__.pop("_pending_path", None)  # a fit that failed leaves none
        # degree="auto" depends on the projections' shapes, drawn after _phases.
        phases = [phase._replace(config=self._config(frozen)) for phase in phases]
        t, dv = params["b"].shape[0], frozen["W_V"].shape[-1]
        if self.solver == "auto":
            varpro = self.train_state and t <= dv
        else:
            varpro = self.solver == "varpro"
        if not varpro or incremental or train.steps_per_epoch is not None:
            return super()._train(phases, params, frozen, train, state, incremental)
        if t > dv:
            raise ValueError(f"solver='varpro' needs at most d_v = {dv} targets (Z W_out must reach any "
                             f"product), got {t}: use solver='adam' or a larger head_dim")
        projections = {k: frozen[k] for k in _PROJECTIONS}
        k, gate, alpha = params["k"], 0.0, self.alpha_value
        path = self.init == "auto" and self.feature_map == "cumulant"
        if path or alpha == "auto":
            k, gate, alpha, _ = mass_path(k, projections, train.data, phases[0].config,
                                          ALPHAS if alpha == "auto" else [alpha], LOG_GATES if path else (0.0,))
        try:
            solved, curve, scores = fit_varpro(
                k, projections, train.data, phases[0].config, alpha, self.max_iter,
                self.tol, self.n_iter_no_change, self.verbose, self.callback, validation=train.validation)
        except FloatingPointError as exc:
            # Rows large enough to overflow the float32 solve; Adam keeps its
            # last finite parameters instead, so "auto" falls back to it.
            if self.solver == "varpro":
                raise ValueError(f"solver='varpro' failed: {exc}; the inputs are too large for float32 "
                                 "arithmetic: rescale X or use solver='adam'") from exc
            warnings.warn(f"{type(self).__name__}: the exact solve failed ({exc}); trained by Adam instead",
                          ConvergenceWarning, stacklevel=4)
            return super()._train(phases, params, frozen, train, state, incremental)
        self._pending_path = (alpha, gate)
        return solved, [TrainResult(loss_curve=list(curve), validation_curve=list(scores), n_iter=len(curve) - 1)]

    def _set_fitted(self, *args):
        super()._set_fitted(*args)
        alpha = _ADAM_ALPHA if self.alpha_value == "auto" else float(self.alpha_value)
        self.alpha_value_, gate = self.__dict__.pop("_pending_path", (alpha, 0.0))
        if "k" in self.params_:  # a prefix state (the baselines train other parts)
            self.prefix_log_gate_ = gate
        return self

    def _init_params(self, frozen, t, rng):
        H, d, dh = frozen["W_K"].shape
        dv = frozen["W_V"].shape[-1]
        r = feature_dim(self.feature_map, dh, self._degree(frozen))
        if self.init != "zeros":
            Z, k = random_prefix_state(self.prefix_length, frozen["W_K"], frozen["W_V"],
                                       self.feature_map, self._degree(frozen), rng)
        else:
            Z, k = np.zeros((H, r, dv), np.float32), np.zeros((H, self._mass_dim(frozen)), np.float32)
        return {"Z": Z, "k": k, "W_out": np.zeros((H * dv, t), np.float32), "b": np.zeros(t, np.float32)}

    # ------------------------------------------------------------ inference
    def predict(self, X):
        """Predicted responses.

        Returns
        -------
        ndarray of shape (n,) or (n, n_targets); with ``pooling=None`` a list of
        (p_i,) or (p_i, n_targets) arrays
        """
        samples = self._validate_X(X, reset=False)
        args = (self.params_, self._frozen_fitted())
        if self.pooling is None:
            rows = self._map_samples(partial(_row_forward, config=self._config()), samples, *args, rows=True)
            out = [r.T.astype(np.float64) * self.y_scale_ + self.y_mean_ for r in check_finite_output(rows)]
            return [o[:, 0] for o in out] if self._y_ndim == 1 else out
        out = self._map_samples(partial(_forward, config=self._config()), samples, *args)
        out = check_finite_output(out).astype(np.float64)
        out = out * self.y_scale_ + self.y_mean_
        return out[:, 0] if self._y_ndim == 1 else out

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions (pooled over all rows when ``pooling=None``).

        With ``pooling=None`` every row target of sample ``i`` carries its
        sample's weight ``sample_weight[i]``.
        """
        if self.pooling is None:
            w = check_sample_weight(sample_weight, len(y))
            counts = [np.size(v) for v in y]
            return r2_score(np.concatenate([np.ravel(v) for v in y]),
                            np.concatenate([np.ravel(v) for v in self.predict(X)]),
                            sample_weight=None if w is None else np.repeat(w, counts))
        return super().score(X, y, sample_weight=sample_weight)

    def _head_weights(self, samples):
        row_mass = partial(_row_mass, config=self._config())
        return self._map_samples(row_mass, samples, self.params_, self._frozen_fitted(), rows=True)

    def attention(self, X):
        """Average attention mass each row receives from the sample's rows, per head.

        Returns
        -------
        list of ndarray of shape (n_heads, p_i)
            Sums to at most one per head: the rest goes to the prefix.
        """
        return super().attention(X)
