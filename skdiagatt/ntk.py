"""NTK-Attention regression (the NTK-Attention paper): ``NTKPrefixRegressor``."""

import math
import numbers
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils import check_random_state

from ._base import (
    MatrixSampleEstimator,
    _check_positive_float,
    _check_positive_int,
    check_finite_output,
    check_targets,
    chunk_factory,
    standardize_targets,
)
from ._ntk_solve import fit_varpro
from ._prefix_state import random_prefix_state
from ._ragged import COARSE, check_ragged
from ._training import fit_loop, training_data
from .kernels.features import feature_dim
from .kernels.ntk_readout import ntk_readout_forward, ntk_readout_loss, ntk_row_mass

__all__ = ["NTKPrefixRegressor"]

_forward = jax.jit(ntk_readout_forward, static_argnames=("config",))
_row_mass = jax.jit(ntk_row_mass, static_argnames=("config",))
_PROJECTIONS = ("W_Q", "W_K", "W_V")


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


class NTKPrefixRegressor(RegressorMixin, MatrixSampleEstimator):
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
    feature_map : {"taylor", "elu"}, default="taylor"
        ``"taylor"``: truncated Taylor features of exp (polynomial method),
        dimension ``C(d_h + degree, degree)``.  ``"elu"``: ``elu(x / d_h^(1/4)) + 1``
        as in the authors' public code, dimension d_h.
    degree : int, default=2
        Taylor degree.
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
    init : {"prefix", "zeros"}, default="prefix"
        ``"prefix"``: ``Z, k`` from a prefix ``P ~ N(0, I)`` (paper Eq. 4);
        ``"zeros"``: start as plain attention.
    pooling : {"mean", "first"} or None, default="mean"
        How row outputs become one vector per sample; None predicts one target
        per row (``y`` is then a ragged list of (p_i,) or (p_i, t) arrays).
    causal : bool, default=False
        Rows attend only to earlier rows (and the prefix).
    train_state : bool, default=True
        Train ``Z`` and ``k``; False keeps them at their initial value and
        trains the read-out alone (with ``init="zeros"``: frozen plain attention).
    state_scale : "auto" or float, default="auto"
        Unit in which ``solver="adam"`` trains ``Z`` and ``k``: the optimiser
        sees ``Z / state_scale`` and ``k / state_scale``, so each Adam step
        changes them by about ``learning_rate * state_scale``.  ``"auto"``
        uses ``sqrt(prefix_length)`` with ``init="prefix"`` and a finite
        prefix, else 1; 1.0 trains them in raw units.  Eq. 4 sums m rows, so
        the initial state's entries are of size ~m (``k[0] == m`` exactly for
        ``"taylor"``) or ~sqrt(m) (sums of mean-zero terms), while Adam moves
        every entry by about ``learning_rate`` per step whatever its size:
        in raw units a long prefix's state barely moves.  sqrt(m) is a
        heuristic (``docs/ntk_learning.md`` compares units); ``solver="varpro"``
        ignores it.
    solver : {"adam", "varpro"}, default="adam"
        ``"adam"``: ``Z``, ``k`` and the read-out trained jointly by
        minibatch Adam (``max_iter`` epochs).  ``"varpro"``: given ``k`` the
        prediction is linear in the read-out and in ``Z`` times the read-out,
        so those are solved exactly (a ridge regression on all the training
        data) and ``k`` alone is trained by full-batch L-BFGS on the loss at
        that optimum (``max_iter`` iterations; see
        :mod:`skdiagatt.kernels.ntk_varpro`).  Needs ``train_state=True``,
        no ``early_stopping`` and at most d_v targets; :meth:`partial_fit`
        and :meth:`fit_chunks` always use Adam.
    alpha : float, default=1e-4
        L2 penalty on the read-out; with ``solver="varpro"`` on the read-out
        and ``Z`` times it, relative to the mean variance of their inputs.
    max_iter, learning_rate, batch_size, tol, n_iter_no_change, early_stopping, \
validation_fraction, random_state, verbose, callback, warm_start
        Training, as in :class:`skdiagatt.DiagAttRegressor`.

    Attributes
    ----------
    params_ : dict of ndarray
        Trained ``Z`` (H, r, d_h), ``k`` (H, r), ``W_out`` (H * d_h, t), ``b`` (t,).
    attention_weights_ : dict of ndarray
        The frozen projections, each (H, d, d_h).
    n_features_in_, n_iter_, loss_curve_, validation_scores_, y_mean_, y_scale_

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

    _bucket_growth = COARSE  # fewer programs to compile (docs/performance.md, section 7)

    def __init__(
        self,
        n_heads=1,
        *,
        head_dim=None,
        attention_weights=None,
        feature_map="taylor",
        degree=2,
        prefix_length=1024,
        init="prefix",
        pooling="mean",
        causal=False,
        train_state=True,
        state_scale="auto",
        solver="adam",
        alpha=1e-4,
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
        self.alpha = alpha
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
    def _check_params(self):
        _check_positive_int(self.n_heads, "n_heads")
        if self.head_dim is not None:
            _check_positive_int(self.head_dim, "head_dim")
        if self.feature_map not in ("taylor", "elu"):
            raise ValueError(f"feature_map must be 'taylor' or 'elu', got {self.feature_map!r}")
        _check_positive_int(self.degree, "degree")
        m = self.prefix_length
        if not (isinstance(m, (numbers.Integral, float)) and not isinstance(m, bool) and (m == np.inf or (
                isinstance(m, numbers.Integral) and m >= 1))):
            raise ValueError(f"prefix_length must be an integer >= 1 or np.inf, got {m!r}")
        if self.init not in ("prefix", "zeros"):
            raise ValueError(f"init must be 'prefix' or 'zeros', got {self.init!r}")
        if self.pooling not in ("mean", "first", None):
            raise ValueError(f"pooling must be 'mean', 'first' or None, got {self.pooling!r}")
        if not (isinstance(self.state_scale, str) and self.state_scale == "auto"):
            _check_positive_float(self.state_scale, "state_scale")
        _check_positive_float(self.alpha, "alpha", allow_zero=True)
        if self.solver not in ("adam", "varpro"):
            raise ValueError(f"solver must be 'adam' or 'varpro', got {self.solver!r}")
        if self.solver == "varpro" and (not self.train_state or self.early_stopping):
            raise ValueError("solver='varpro' trains Z and k on all the training data: use "
                             "solver='adam' with train_state=False or early_stopping=True")
        self._check_training_params()

    def _state_unit(self):
        """The value ``state_scale`` stands for (see the class docstring)."""
        if isinstance(self.state_scale, str):
            if self.init == "prefix" and not math.isinf(self.prefix_length):
                return math.sqrt(self.prefix_length)
            return 1.0
        return float(self.state_scale)

    def _projections(self, d, rng):
        """The frozen (H, d, d_h) projections, validated or drawn."""
        H = self.n_heads
        if self.attention_weights is None:
            dh = self.head_dim or max(1, d // H)
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

    def _config(self):
        return (self.feature_map, int(self.degree), bool(self.causal), self.pooling)

    # -------------------------------------------------------------- targets
    def _encode_targets(self, y, samples, warm):
        n = len(samples)
        if self.pooling is None:
            if not isinstance(y, (list, tuple)) or len(y) != n:
                raise ValueError(
                    "with pooling=None, y must be a list of one (p_i,) or (p_i, t) array per sample"
                )
            rows = []
            for i, (yi, xi) in enumerate(zip(y, samples)):
                yi = check_targets(yi, xi.shape[0])
                rows.append(yi.reshape(xi.shape[0], -1))
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
        Y, mean, scale = standardize_targets(flat, (self.y_mean_, self.y_scale_) if warm else None)
        if rows is not None:
            Y = np.split(Y, np.cumsum([r.shape[0] for r in rows])[:-1])
        return Y, (ndim, mean, scale)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Fit ``Z``, ``k`` and the read-out; the projections stay frozen.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets); with ``pooling=None`` a
            list of (p_i,) or (p_i, n_targets) arrays

        Returns
        -------
        self
        """
        self._check_params()
        samples = check_ragged(X)
        d = samples[0].shape[1]
        warm = self.warm_start and hasattr(self, "params_")
        if warm and d != self.n_features_in_:
            raise ValueError(
                f"X has {d} features but the warm-started model was fitted with {self.n_features_in_}"
            )
        Y, meta = self._encode_targets(y, samples, warm)
        rng = check_random_state(self.random_state)
        frozen = self.attention_weights_ if warm else self._projections(d, rng)
        _, _, loop = self._training_data(samples, Y, rng)
        if warm:
            params = {k: v.copy() for k, v in self.params_.items()}
        else:
            params = self._init_params(frozen, meta[1].shape[0], rng)
        if self.solver == "varpro":
            return self._fit_varpro(params, frozen, meta, d, samples, Y)
        fixed = {} if self.train_state else {k: params.pop(k) for k in ("Z", "k")}
        result = self._run(params, frozen, meta, d, fixed, loop, type(self).__name__, max_iter=self.max_iter)
        self.n_iter_ = result.n_iter
        self.loss_curve_ = result.loss_curve
        self.validation_scores_ = result.validation_curve if self.early_stopping else None
        self.__dict__.pop("_partial_state", None)  # a later partial_fit starts a fresh optimizer
        return self

    def _fit_varpro(self, params, frozen, meta, d, samples, Y):
        t, dv = meta[1].shape[0], frozen["W_V"].shape[-1]
        if t > dv:
            raise ValueError(f"solver='varpro' needs at most d_v = {dv} targets (Z W_out must reach any "
                             f"product), got {t}: use solver='adam' or a larger head_dim")
        data = training_data(samples, Y, False, self._bucket_growth)
        params, curve = fit_varpro(params["k"], frozen, data, self._config(), self.alpha, self.max_iter,
                                   self.tol, self.n_iter_no_change, self.verbose, self.callback)
        self.params_ = params
        self.attention_weights_ = frozen
        self.n_features_in_ = d
        self._y_ndim, self.y_mean_, self.y_scale_ = meta
        self.n_iter_ = len(curve) - 1
        self.loss_curve_ = curve
        self.validation_scores_ = None
        self.__dict__.pop("_partial_state", None)
        return self

    # ------------------------------------------------------ beyond memory
    def _run(self, params, frozen, meta, d, fixed, loop, result_label, state_unit=None, **extra):
        s = self._state_unit() if state_unit is None else state_unit
        scaled = "Z" in params and s != 1.0
        fixed_inputs = {**frozen, **fixed, "alpha": np.float32(self.alpha)}
        loss = ntk_readout_loss
        if scaled:
            params = {**params, "Z": params["Z"] / np.float32(s), "k": params["k"] / np.float32(s)}
            fixed_inputs["state_scale"] = np.float32(s)
            loss = _state_scaled_loss
        params, result = fit_loop(
            loss,
            self._config(),
            params,
            fixed_inputs,
            learning_rate=self.learning_rate,
            label=result_label,
            **extra,
            **loop,
        )
        if scaled:
            params = {**params, "Z": params["Z"] * np.float32(s), "k": params["k"] * np.float32(s)}
        self.params_ = {**params, **fixed}
        self.attention_weights_ = frozen
        self.n_features_in_ = d
        self._y_ndim, self.y_mean_, self.y_scale_ = meta
        return result

    def fit_chunks(self, chunks, y=None, *, chunk_size=None):
        """Fit on data read one chunk at a time (larger than memory).

        The data are read ``1 + max_iter`` times (the targets, then once per
        epoch), one chunk on the device at a time.  An epoch visits the chunks
        in order and, within a chunk, the minibatches that :meth:`fit` forms
        on that chunk; with a single chunk the result is exactly that of
        :meth:`fit`.  The targets of all chunks are held in memory.

        Parameters
        ----------
        chunks : list of (X_k, y_k) pairs, callable, or array-like
            As in :meth:`skdiagatt.DiagAttRegressor.fit_chunks`.
        y : array-like or list, optional
            Targets when ``chunks`` is the samples themselves.
        chunk_size : int, optional

        Returns
        -------
        self
        """
        self._check_params()
        if self.early_stopping:
            raise ValueError(
                "early_stopping is not available with fit_chunks: hold out a validation "
                "set yourself and compare est.score on it"
            )
        make = chunk_factory(chunks, y, chunk_size)
        warm = self.warm_start and hasattr(self, "params_")
        scan = self._scan_chunks(make, n_features=self.n_features_in_ if warm else None)
        d, n = scan["n_features"], sum(scan["sizes"])
        lengths = np.concatenate(scan["lengths"])
        # _encode_targets reads only the row count of each sample.
        shapes = [np.empty((int(p), 0), np.float32) for p in lengths]
        parts = scan["y"]
        if self.pooling is None:
            y_all = [v for part in parts for v in part]
        else:
            y_all = np.concatenate([np.asarray(part) for part in parts])
        Y, meta = self._encode_targets(y_all, shapes, warm)
        rng = check_random_state(self.random_state)
        frozen = self.attention_weights_ if warm else self._projections(d, rng)
        if warm:
            params = {k: v.copy() for k, v in self.params_.items()}
        else:
            params = self._init_params(frozen, meta[1].shape[0], rng)
        fixed = {} if self.train_state else {k: params.pop(k) for k in ("Z", "k")}
        batch_size = self._auto_batch_size(n)
        per_epoch = self._chunk_steps(scan, batch_size)
        loop = dict(
            data=self._chunk_stream(make, lambda k, off, size: Y[off : off + size], d),
            batch_size=batch_size,
            random_state=rng,
            tol=self.tol,
            n_iter_no_change=self.n_iter_no_change,
            validation=None,
            verbose=self.verbose,
            callback=self.callback,
        )
        result = self._run(
            params, frozen, meta, d, fixed, loop, type(self).__name__,
            max_iter=self.max_iter, total_steps=self.max_iter * per_epoch,
        )
        self.n_iter_ = result.n_iter
        self.loss_curve_ = result.loss_curve
        self.validation_scores_ = None
        self.__dict__.pop("_partial_state", None)
        return self

    def partial_fit(self, X, y):
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

        Returns
        -------
        self
        """
        self._check_params()
        first = not hasattr(self, "params_")
        samples = check_ragged(X) if first else self._validate_X(X, reset=False)
        d = samples[0].shape[1]
        Y, meta = self._encode_targets(y, samples, warm=not first)
        state = self.__dict__.get("_partial_state")
        if state is None:
            state = {"rng": check_random_state(self.random_state), "opt_state": None,
                     "state_unit": self._state_unit()}
        rng = state["rng"]
        if first:
            frozen = self._projections(d, rng)
            params = self._init_params(frozen, meta[1].shape[0], rng)
        else:
            frozen = self.attention_weights_
            params = {k: v.copy() for k, v in self.params_.items()}
        fixed = {} if self.train_state else {k: params.pop(k) for k in ("Z", "k")}
        loop = dict(
            data=training_data(samples, Y, self._pack, self._bucket_growth),
            batch_size=self._auto_batch_size(len(samples)),
            random_state=rng,
            verbose=self.verbose,
            callback=self.callback,
        )
        result = self._run(
            params, frozen, meta, d, fixed, loop, f"{type(self).__name__} partial_fit",
            max_iter=1, schedule="constant", opt_state=state["opt_state"],
            state_unit=state.get("state_unit", 1.0),
        )
        self.n_iter_ = (0 if first else self.n_iter_) + result.n_iter
        self.loss_curve_ = ([] if first else list(self.loss_curve_)) + result.loss_curve
        self.validation_scores_ = None
        self._partial_state = {"rng": rng, "opt_state": result.opt_state, "state_unit": state.get("state_unit", 1.0)}
        return self

    def _init_params(self, frozen, t, rng):
        H, d, dh = frozen["W_K"].shape
        dv = frozen["W_V"].shape[-1]
        r = feature_dim(self.feature_map, dh, self.degree)
        if self.init == "prefix":
            Z, k = random_prefix_state(self.prefix_length, frozen["W_K"], frozen["W_V"],
                                       self.feature_map, int(self.degree), rng)
        else:
            Z, k = np.zeros((H, r, dv), np.float32), np.zeros((H, r), np.float32)
        return {"Z": Z, "k": k, "W_out": np.zeros((H * dv, t), np.float32), "b": np.zeros(t, np.float32)}

    # ------------------------------------------------------------ inference
    def _frozen_fitted(self):
        return {**self.attention_weights_, "alpha": np.float32(self.alpha)}

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
        """R^2 of the predictions (pooled over all rows when ``pooling=None``)."""
        if self.pooling is None:
            from sklearn.metrics import r2_score

            return r2_score(np.concatenate([np.ravel(v) for v in y]),
                            np.concatenate([np.ravel(v) for v in self.predict(X)]))
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
