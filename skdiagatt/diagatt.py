"""Diagonalized attention estimators (the DiagAtt paper): ``DiagAttRegressor``, ``DiagAttClassifier``."""

import jax
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ._base import (
    MatrixSampleEstimator,
    _check_positive_float,
    _check_positive_int,
    check_finite_output,
    check_labels,
    chunk_factory,
)
from ._evidence import evidence_ridge
from ._mil import AssumptionMixin
from ._mixture import MAX_SAMPLES, signal_mixture
from ._ragged import check_ragged
from ._starts import choose_start
from ._targets import LabelTargetsMixin, StandardizedTargetsMixin
from ._training import fit_loop, map_device_data, round_count, training_data
from ._two_phase import TwoPhaseTraining
from ._whitening import preconditioner, preconditioner_from_moment, second_moment
from .kernels.diagatt import (
    diagatt_forward,
    diagatt_loss,
    head_weights,
    pooled_rows,
    query_key,
    row_contributions,
)
from .kernels.glm import fit_readout

__all__ = ["DiagAttRegressor", "DiagAttClassifier"]

# alpha="auto": the prior on the score parameters weighs as much as this many samples.
_PRIOR_SAMPLES = 30.0


@jax.jit
def _linear_predictor(params, frozen, X, where):
    return diagatt_forward(params, frozen, X, where)[0]


_weights = jax.jit(head_weights)
_pooled = jax.jit(pooled_rows)
_contributions = jax.jit(row_contributions)


def _concatenate_targets(parts):
    """The targets of all chunks as one array (or one list, for row-level targets)."""
    if all(isinstance(p, (list, tuple)) for p in parts):
        return [v for p in parts for v in p]
    return np.concatenate([np.asarray(p) for p in parts])


class _DiagAttBase(TwoPhaseTraining, MatrixSampleEstimator):
    """Fitting logic shared by the regressor and the classifier."""

    _loss_fn = staticmethod(diagatt_loss)
    _linear_predictor = staticmethod(_linear_predictor)
    _assumptions = ("individualized",)
    _pack = True
    # The inverse temperature stays out of the main phase: trained alongside W
    # it would undo the penalty (W shrinks, the scale grows).  Calibration then
    # fits it with v and b, W (and U) fixed.
    _held = ("log_scale",)
    _calibrated = ("log_scale", "V", "b")

    def __init__(
        self,
        n_heads=1,
        *,
        temperature=None,
        rank=None,
        symmetric=True,
        score_form="affine",
        exclusive_heads=True,
        alpha="auto",
        alpha_value="auto",
        value_refit=False,
        objective="latent",
        whiten=True,
        init="auto",
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
        assumption="individualized",
    ):
        self.n_heads = n_heads
        self.temperature = temperature
        self.rank = rank
        self.symmetric = symmetric
        self.score_form = score_form
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
        self.assumption = assumption

    # ----------------------------------------------------------------- checks
    def _check_params(self):
        _check_positive_int(self.n_heads, "n_heads")
        if self.temperature is not None:
            _check_positive_float(self.temperature, "temperature")
        if self.rank is not None:
            _check_positive_int(self.rank, "rank")
        if self.score_form not in ("quadratic", "affine"):
            raise ValueError(
                f"score_form must be 'quadratic' or 'affine', got {self.score_form!r}"
            )
        if not isinstance(self.exclusive_heads, (bool, np.bool_)):
            raise ValueError(f"exclusive_heads must be True or False, got {self.exclusive_heads!r}")
        if isinstance(self.alpha, str) and self.alpha != "auto":
            raise ValueError(f'alpha must be "auto" or a finite number >= 0, got {self.alpha!r}')
        if not isinstance(self.alpha, str):
            _check_positive_float(self.alpha, "alpha", allow_zero=True)
        if isinstance(self.alpha_value, str) and self.alpha_value != "auto":
            raise ValueError(f'alpha_value must be "auto" or a finite number >= 0, got {self.alpha_value!r}')
        if not isinstance(self.alpha_value, str):
            _check_positive_float(self.alpha_value, "alpha_value", allow_zero=True)
        if not isinstance(self.value_refit, (bool, np.bool_)):
            raise ValueError(f"value_refit must be True or False, got {self.value_refit!r}")
        if self.objective not in ("latent", "attention"):
            raise ValueError(f"objective must be 'latent' or 'attention', got {self.objective!r}")
        if self.init not in ("auto", "mixture", "zeros"):
            raise ValueError(f"init must be 'auto', 'mixture' or 'zeros', got {self.init!r}")
        _check_positive_int(self.calibration_iter, "calibration_iter", minimum=0)
        if self.assumption not in self._assumptions:
            raise ValueError(f"assumption must be one of {self._assumptions}, got {self.assumption!r}")
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
        if self.score_form == "affine":
            params["U"] = np.zeros((R, d), np.float32)
        return params

    def _start(self, params, samples, Y, c, S, rng):
        """``init="mixture"`` / ``"auto"``: the start of the row scores from the data.

        ``"mixture"``: the scores of the rows' Gaussian mixture
        (:mod:`skdiagatt._mixture`), one signal component per head.
        ``"auto"``: the uniform, mixture or response start of least
        cross-validated error of its read-out (:mod:`skdiagatt._starts`).  The
        scores are affine in the whitened coordinates; they enter at the
        temperature of ``log_scale = 0``.  A low-rank ``W`` starts from the
        positive part of the quadratic coefficients.
        """
        self._chosen_start = "zeros"
        if self.init == "zeros" or (self.init == "auto" and getattr(self, "_mil", False)):
            return params
        if len(samples) > MAX_SAMPLES:
            pick = np.sort(rng.choice(len(samples), MAX_SAMPLES, replace=False))
            samples, Y = [samples[i] for i in pick], Y[pick]
        affine = self.score_form == "affine"
        A, a = signal_mixture(samples, c, S, self.n_heads, affine=affine, random_state=rng)
        self._chosen_start = "mixture"
        if self.init == "auto":
            A, a, self._chosen_start = choose_start(samples, Y, c, S, (A, a), affine=affine, random_state=rng)
        tau = self._temperature(S.shape[0])
        return self._start_at(params, A * tau, a * tau if affine else None)

    def _start_at(self, params, A, a):
        """``params`` with the scores' coefficients ``A`` (R, d, d) and ``a`` (R, d) or None."""
        params = dict(params)
        if "W" in params:
            params["W"] = A.astype(np.float32)
        else:
            ev, Q = np.linalg.eigh(A)  # ascending: the last q are the largest
            q = params["L"].shape[2]
            L = Q[:, :, -q:] * np.sqrt(np.maximum(ev[:, None, -q:], 0.0))
            params["L"] = L.astype(np.float32)
            if "M" in params:
                params["M"] = params["L"].copy()
        if a is not None:
            params["U"] = a.astype(np.float32)
        return params

    def _temperature(self, d):
        return np.sqrt(d) if self.temperature is None else float(self.temperature)

    def _shrinkage_target(self, params, n):
        # The penalty shrinks the score parameters towards where training
        # started: the mixture's scores, or W = 0 (uniform attention).  As a
        # Gaussian prior its weight against the mean loss of n samples falls
        # as 1 / n: the data decide more as there are more of them.
        alpha = _PRIOR_SAMPLES / n if isinstance(self.alpha, str) else self.alpha
        return {
            "prior": {k: np.array(params[k]) for k in ("W", "L", "M", "U") if k in params},
            "alpha": np.float32(alpha),
        }

    def _frozen(self, c, S, d):
        tau = self._temperature(d)
        frozen = {
            "x_scale": np.float32(c),
            "S": S,
            "inv_tau": np.float32(1.0 / tau),
            "alpha_value": np.float32(self._value_penalty()),
        }
        # Under standard-mil each head scores instances on its own (any may be positive).
        if self.exclusive_heads and self.n_heads > 1 and not getattr(self, "_mil", False):
            frozen["exclusion"] = np.float32(1.0)
        return frozen

    def _value_penalty(self):
        """The L2 penalty on ``V`` during training: ``alpha_value``, 0 under "auto"."""
        return 0.0 if isinstance(self.alpha_value, str) else self.alpha_value

    def _refit_readout(self, params, frozen, data, family):
        """V and b refit with the trained weights fixed (``value_refit``, or ``alpha_value="auto"``).

        Under ``"auto"`` a Gaussian read-out is the ridge regression on the
        attention-pooled rows whose penalty maximizes the evidence
        (:mod:`skdiagatt._evidence`); other families keep their trained read-out
        unless ``value_refit``.
        """
        evidence = isinstance(self.alpha_value, str) and family == "gaussian"
        if not (self.value_refit or evidence):
            return params
        H, Y = map_device_data(_pooled, data, params, frozen)
        if evidence:
            R, d, t = params["V"].shape
            coef, intercept, _ = evidence_ridge(H.reshape(len(H), R * d), Y)
            return {**params, "V": coef.reshape(R, d, t).astype(np.float32),
                    "b": intercept.astype(np.float32)}
        # Padded like the training buckets (weight-0 filler up to a rounded
        # count), so that fits of similar size reuse the compiled solver.
        n = len(H)
        fill = round_count(n) - n
        w = np.concatenate([np.ones(n, np.float32), np.zeros(fill, np.float32)])
        pad = lambda a: np.pad(a, [(0, fill)] + [(0, 0)] * (a.ndim - 1))  # noqa: E731
        V, b, _ = fit_readout(
            params["V"], params["b"], pad(H), pad(Y), params["log_sigma"],
            np.float32(self._value_penalty()), family, w=w,
        )
        return {**params, "V": np.asarray(V), "b": np.asarray(b)}

    def _set_fitted(self, params, c, S, d, results, meta, warm=False):
        super()._set_fitted(params, c, S, d, results, meta, warm)
        # A warm start continues from the previous fit's start.
        if not warm:
            self.start_ = self.__dict__.pop("_chosen_start")
        return self

    # ------------------------------------------------------ beyond memory
    def _accumulate_chunk(self, samples, scan):
        M, rows = second_moment(samples)
        scan["M"] = scan.get("M", 0.0) + M
        scan["rows"] = scan.get("rows", 0) + rows
        # Whole chunks until the mixture of the start has its samples: with
        # one chunk, the same samples (and draws) as fit.
        held = scan.setdefault("start_samples", [])
        if len(held) < MAX_SAMPLES:
            held.extend(samples)

    def fit_chunks(self, chunks, y=None, *, chunk_size=None):
        """Fit on data read one chunk at a time (larger than memory).

        The same two training phases as :meth:`fit`.  The data are read
        ``2 + max_iter + calibration_iter`` times: one pass for the row
        statistics (whitener) and the targets, then once per epoch, one chunk
        on the device at a time.  An epoch visits the chunks in order and,
        within a chunk, the minibatches that :meth:`fit` forms on that chunk;
        with a single chunk the result is exactly that of :meth:`fit`.  The
        targets of all chunks are held in memory (they are small).

        Parameters
        ----------
        chunks : list of (X_k, y_k) pairs, callable, or array-like
            A list/tuple of ``(X_k, y_k)`` pairs (``X_k`` a list of 2-D arrays,
            a 3-D array or a ``np.memmap``); or a callable returning a fresh
            iterator of such pairs (called once per pass); or, with ``y``, the
            samples themselves (a 3-D array or memmap, or a list) to be read
            ``chunk_size`` samples at a time.
        y : array-like, optional
            Targets of ``chunks`` when it is the samples themselves.
        chunk_size : int, optional
            Samples per chunk when ``y`` is given.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np, tempfile, os
        >>> from skdiagatt import DiagAttRegressor
        >>> from skdiagatt.datasets import make_individualized_regression
        >>> X, y, _, _ = make_individualized_regression(64, n_rows=6, n_features=3, random_state=0)
        >>> path = os.path.join(tempfile.mkdtemp(), "X.npy")
        >>> np.save(path, np.stack(X).astype(np.float32))
        >>> Xm = np.load(path, mmap_mode="r")           # stays on disk
        >>> est = DiagAttRegressor(max_iter=2, random_state=0).fit_chunks(Xm, y, chunk_size=16)
        >>> est.predict(Xm[:2]).shape
        (2,)
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
        warm = self._check_warm(d)
        y_all = _concatenate_targets(scan["y"])
        Y, meta, family = self._encode_targets(y_all, n, warm)
        rng = check_random_state(self.random_state)
        if warm:
            c, S = self.input_scale_, self.preconditioner_
            params = self._previous_params(d, Y.shape[1])
        else:
            c, S = preconditioner_from_moment(scan["M"], scan["rows"], self.whiten)
            start = scan["start_samples"]
            params = self._start(self._init_params(d, Y.shape[1], rng), start, Y[: len(start)], c, S, rng)
        batch_size = self._auto_batch_size(n)
        per_epoch = self._chunk_steps(scan, batch_size)
        stream = self._chunk_stream(make, lambda k, off, size: Y[off : off + size], d)
        loop = dict(
            data=stream,
            batch_size=batch_size,
            random_state=rng,
            tol=self.tol,
            n_iter_no_change=self.n_iter_no_change,
            validation=None,
            verbose=self.verbose,
            callback=self.callback,
        )
        return self._train(params, c, S, d, family, meta, loop, lambda e: e * per_epoch, n_train=n,
                           warm=warm)

    def _encode_partial_targets(self, y, n, first, classes):
        """Targets of one ``partial_fit`` chunk: the first call fixes their encoding.

        Regression: the standardisation of the first chunk is kept.
        Classification: ``classes`` (or the first chunk's labels) fixes the
        label set; later chunks may hold any subset of it.
        """
        if not is_classifier(self):
            return self._encode_targets(y, n, warm=not first)
        y = check_labels(y, n)
        if first:
            known = np.unique(np.asarray(y if classes is None else classes))
            if known.size < 2:
                raise ValueError(
                    "the first partial_fit call needs at least two classes: pass "
                    "classes=[...] listing every label"
                )
        else:
            known = self.classes_
            if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), known):
                raise ValueError(
                    f"classes={np.unique(np.asarray(classes)).tolist()} differs from the "
                    f"classes of the first call {known.tolist()}"
                )
        unknown = ~np.isin(y, known)
        if np.any(unknown):
            raise ValueError(
                f"y has labels {np.unique(y[unknown]).tolist()} that are not in "
                f"classes {known.tolist()}; pass classes=[...] to the first partial_fit"
            )
        codes = np.searchsorted(known, y)
        if known.size == 2:
            return codes[:, None].astype(np.float32), known, "bernoulli"
        return np.eye(known.size, dtype=np.float32)[codes], known, "categorical"

    def _partial_fit(self, X, y, classes=None):
        """One epoch of the main objective over ``(X, y)``, continuing the previous state."""
        self._check_params()
        first = not hasattr(self, "params_")
        samples = check_ragged(X) if first else self._validate_X(X, reset=False)
        n, d = len(samples), samples[0].shape[1]
        Y, meta, family = self._encode_partial_targets(y, n, first, classes)
        state = self.__dict__.get("_partial_state")
        if state is None:
            state = {"rng": check_random_state(self.random_state), "opt_state": None}
        rng = state["rng"]
        if first:
            c, S = preconditioner(samples, self.whiten)
            params = self._start(self._init_params(d, Y.shape[1], rng), samples, Y, c, S, rng)
        else:
            c, S = self.input_scale_, self.preconditioner_
            params = self._previous_params(d, Y.shape[1])
        # Every call shrinks towards where the first call (or fit) started.
        target = state.get("target") or self._shrinkage_target(params, n)
        frozen = {**self._frozen(c, S, d), **target}
        frozen["log_scale"] = params.pop("log_scale")
        params, result = fit_loop(
            self._loss_fn,
            (self.objective, family),
            params,
            frozen,
            data=training_data(samples, Y, self._pack),
            max_iter=1,
            learning_rate=self.learning_rate,
            batch_size=self._auto_batch_size(n),
            random_state=rng,
            verbose=self.verbose,
            callback=self.callback,
            label=f"{type(self).__name__} partial_fit",
            schedule="constant",
            opt_state=state["opt_state"],
        )
        params["log_scale"] = frozen.pop("log_scale")
        self.params_ = params
        self.input_scale_ = c
        self.preconditioner_ = S
        self.n_features_in_ = d
        self.n_iter_ = (0 if first else self.n_iter_) + result.n_iter
        self.loss_curve_ = ([] if first else list(self.loss_curve_)) + result.loss_curve
        phases = [] if first else list(self.loss_curve_phase_)
        self.loss_curve_phase_ = phases + ["main"] * len(result.loss_curve)
        self.validation_scores_ = None
        if first:
            self.start_ = self.__dict__.pop("_chosen_start")
        self._set_target_meta(meta)
        self._partial_state = {"rng": rng, "opt_state": result.opt_state, "target": target}
        return self

    # ------------------------------------------------------------- inference
    def _frozen_fitted(self):
        return self._frozen(self.input_scale_, self.preconditioner_, self.n_features_in_)

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
            return np.zeros((self.params_["log_scale"].shape[0], self.n_features_in_), np.float32)
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
    rank : int or None, default=None
        None: full ``W_r`` (d x d).  An int q: ``W_r = L_r L_r^T`` (or
        ``L_r M_r^T`` with ``symmetric=False``), rank q.
    symmetric : bool, default=True
        Low-rank form, used when ``rank`` is set.
    score_form : {"affine", "quadratic"}, default="affine"
        "affine": ``x^T W_r x + u_r^T x``; "quadratic": the paper's score
        ``x^T W_r x``.  The log-likelihood ratio of two Gaussian row
        distributions has the affine form, and a quadratic form alone cannot
        tell ``x`` from ``-x`` (rows drawn around ``+m`` and ``-m`` score
        alike); where the linear term is not needed it costs d parameters per
        head and measured nothing (``docs/diagatt_training.md``).
    exclusive_heads : bool, default=True
        Heads compete for rows: head r's softmax also weighs each row by the
        other heads' ``1 - kappa_l`` (see
        :func:`skdiagatt.kernels.diagatt.competing_scores`), the model of
        samples whose rows of interest are distinct, one per head.  Without
        it two heads may settle on the same kind of row.  No effect with one
        head or under ``assumption="standard-mil"``.
    alpha : float or "auto", default="auto"
        L2 penalty on the query-key parameters (``W`` and ``u``), in whitened
        coordinates, towards where training starts (see ``init``), added to
        the mean loss over the training samples.  "auto": ``30 / n`` for n
        training samples, a Gaussian prior that weighs as much as 30
        samples (``partial_fit``: n of its first call).
    alpha_value : float or "auto", default="auto"
        L2 penalty on the value vectors.  "auto": none during training; after
        it, the regressor's ``V`` and ``b`` are refit as the ridge regression of
        the targets on the attention-pooled rows whose penalty maximizes the
        marginal likelihood (empirical Bayes, :mod:`skdiagatt._evidence`): a
        large penalty, towards predicting the mean, when samples are few for
        the rows' dimension or the signal is weak, a vanishing one with many
        samples.  The classifier's read-out is not penalized under "auto".
    value_refit : bool, default=False
        After training, replace the value vectors ``V`` and the intercept
        ``b`` by the exact minimiser of the attention objective with the
        attention weights fixed: a convex ridge / L2-logistic / L2-softmax
        regression on each sample's attention-pooled rows (penalty
        ``alpha_value``), solved by L-BFGS.  Adam's few epochs leave the
        read-out short of that minimum; on text, where the response depends on
        many tokens, the exact read-out generalises better (see
        ``docs/real_data.md``).  With uniform attention it is exactly
        ridge / logistic regression on mean-pooled rows.  ``partial_fit``
        does not refit.
    objective : {"latent", "attention"}, default="latent"
        Training objective: the latent-row likelihood followed by calibration,
        or the paper's squared loss of the attention prediction alone.
    whiten : bool, default=True
        Train ``W`` in coordinates whitened by the rows' second moment (the
        matrix in use is ``S W S``, ``S = E[x x^T]^{-1/2}``).  Either way rows
        are first divided by their root-mean-square over the training rows
        (``input_scale_``), which the temperature then refers to.
    init : {"auto", "mixture", "zeros"}, default="auto"
        Where the query-key parameters start, and what ``alpha`` shrinks
        them towards.  "mixture": the log-likelihood ratio of a Gaussian
        mixture fitted to the rows by EM, without the targets: the rows of a
        sample are background draws but for one signal row per head, whose
        Gaussian has its own mean and (shrunk) covariance (see
        ``docs/sample_efficiency.md``).  The background rows, which
        outnumber the targets by the rows per sample, place the scores near
        the Bayes localizer from a few hundred samples whenever the signal
        rows differ in distribution from the others; training then refines
        them with the targets.  Several heads start on as many kinds of signal
        row, each head's score fitted to tell its rows from the others' too.
        "zeros": ``W = 0``, uniform attention.  "auto": the candidate of
        least cross-validated error of a ridge read-out on the rows it pools,
        among uniform attention, the mixture (at full and half strength) and
        the rows whose projection on the response's direction is large (see
        :mod:`skdiagatt._starts`): unusual rows that do not move the response
        do not capture the start.  Under ``assumption="standard-mil"``
        "auto" is "zeros" (unusual negative instances would start the scores
        less well than uniform attention does).  ``start_`` names the start
        chosen.
    calibration_iter : int, default=5
        Epochs of the calibration phase (0 skips it).
    max_iter : int, default=20
        Epochs of the main phase; the step size decays to 0 over them (cosine).
    learning_rate : float, default=0.01
        Adam step size.
    batch_size : int or "auto", default="auto"
        "auto": ``min(256, max(32, n // 16))``, so small data sets still get
        enough optimizer steps per epoch.  Samples whose lengths span several
        bucket lengths are trained packed: an epoch has ``ceil(n /
        batch_size)`` minibatches of equal size (up to one sample), each
        holding samples from across the length distribution (see
        ``docs/training.md``, section 5).
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
        :class:`~skdiagatt.EpochInfo` (``phase``, ``epoch``, ``max_iter``,
        ``train_loss``, ``valid_loss``, ``seconds``, ``remaining``, ...), e.g.
        to draw the loss curve live in a notebook.  A true return value ends
        the phase after that epoch, as early stopping would (the calibration
        phase still runs, and is reported too).  Not called while predicting.
    warm_start : bool, default=False
        Start from the previous fit's parameters; the history (``n_iter_``,
        ``loss_curve_``) continues too.
    assumption : {"individualized"}, default="individualized"
        What the response may depend on: any row, through the attention
        weights (the only choice for a continuous response; see
        :class:`DiagAttClassifier` for the multiple-instance assumption).

    Attributes
    ----------
    params_ : dict of ndarray
        Fitted parameters (``W`` (R, d, d) or ``L``/``M`` (R, d, q) in whitened
        coordinates, ``U`` (R, d) with ``score_form=
        "affine"``, ``V`` (R, d, t), ``b`` (t,),
        ``log_scale`` (R,),
        ``log_sigma`` (t,)), in standardized target units.
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
    n_iter_ : int
        Epochs run, both phases; ``warm_start`` and ``partial_fit`` add to it.
    loss_curve_ : list of float
        Objective per epoch, both phases (continued under ``warm_start``).
        The two phases minimise different objectives, so the curve jumps where
        one ends and the other starts: see ``loss_curve_phase_``.
    loss_curve_phase_ : list of str
        The phase of each ``loss_curve_`` entry: ``"main"`` or ``"calibration"``
        (:func:`skdiagatt.plotting.plot_history` marks the switch).
    validation_scores_ : list of float or None
        Validation objective per epoch when ``early_stopping``.
    start_ : str
        Where training started (see ``init``): ``"zeros"``, ``"mixture"``,
        or under "auto" the candidate chosen, with its strength (for example
        ``"mixture x1"``, ``"response x3"``, ``"uniform"``).
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

    def partial_fit(self, X, y):
        """One epoch of the main objective over one chunk, continuing the previous state.

        The first call (on an unfitted model) fixes the row scale, the
        whitener and the target standardisation from its chunk; every call
        runs one epoch of Adam at the constant ``learning_rate`` and keeps the
        optimizer state and the random state for the next call.  Calling it
        on a model fitted by :meth:`fit` continues from that model with a
        fresh optimizer.  Only the main objective is trained: the calibration
        phase of :meth:`fit` (``objective="latent"``) needs passes of its own,
        so use :meth:`fit_chunks` for the full procedure on data larger than
        memory, or ``objective="attention"``, whose single objective
        partial_fit trains completely.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets)

        Returns
        -------
        self
        """
        return self._partial_fit(X, y)



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
        log sum_l exp(psi_rl)`` and ``P(y = classes_[1]) = prod_r
        sigmoid(g_r)`` (:mod:`skdiagatt.kernels.mil`): adding an instance
        never lowers it.  One head: the standard multiple-instance
        assumption; R heads: a positive bag needs an instance of each of R
        concepts (presence-based).  ``localize`` returns each head's
        highest-scoring instance, the one its evidence comes from.
        ``params_`` has no ``V``; ``b`` and ``intercept_`` hold the heads'
        offsets ``b_r``.  Both training phases minimize the bags' log-loss
        (the calibration phase fits the inverse temperatures and ``b``);
        the scores must grow to several units, so a larger
        ``learning_rate`` (0.1) suits this mode.  ``value_refit``,
        ``exclusive_heads`` and ``row_contributions`` do not apply.  See
        ``docs/mil_assumptions.md``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    intercept_ : float or ndarray of shape (n_classes,)
        The logit(s) when every row's term (:meth:`row_contributions`) is 0:
        a float for two classes.
    params_, query_key_, linear_score_, preconditioner_, n_features_in_, n_iter_, loss_curve_, \
loss_curve_phase_, validation_scores_, start_
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

    def partial_fit(self, X, y, classes=None):
        """One epoch of the main objective over one chunk, continuing the previous state.

        As :meth:`DiagAttRegressor.partial_fit`.  ``classes`` lists every
        label; it is needed on the first call when that chunk does not hold
        them all (default: the labels of the first chunk).

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,)
        classes : array-like or None, default=None

        Returns
        -------
        self
        """
        return self._partial_fit(X, y, classes)
