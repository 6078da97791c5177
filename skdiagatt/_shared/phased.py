"""The one fit path of the estimators trained by the optax loop (DiagAtt, StdAtt, NTK-Attention).

``fit``, ``partial_fit`` and ``fit_chunks`` all call
:meth:`PhasedEstimator._fit` with a data source (:mod:`skdiagatt._shared.sources`)
and ``incremental`` (``partial_fit``: one epoch, constant step size, the
optimizer state kept for the next call).  The path validates the
parameters, reads the source, encodes the targets, draws or reuses the
model's constants and parameters (a warm start checks them against the
current settings), trains the estimator's phases (:class:`Phase`) and sets
every fitted attribute at once, so a failed fit leaves the previous model.
"""

import abc
import dataclasses
import math
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from .._training import fit_loop, steps_per_epoch
from .._training.devices import processes_active
from .base import MatrixSampleEstimator
from .feature_names import set_feature_names
from .params import TRAINING_INERT, TRAINING_RULES
from .sources import Chunks, Samples, Shard, chunk_factory

#: ``max_iter="auto"``: at least this many epochs, and at least this many optimizer steps.
_AUTO_EPOCHS = 20
_AUTO_STEPS = 300
#: ``max_iter="auto"``: further cosine cycles, each at half the step size of the last,
#: while the loss still falls by more than ``tol`` at the end of one.
_AUTO_RESTARTS = 6

__all__ = ["Phase", "PhasedEstimator"]


def _cycle_end(result):
    """The monitored loss at the end of a run of the loop."""
    return (result.validation_curve or result.loss_curve)[-1]


def _joined(first, then):
    """One :class:`~skdiagatt._training.loop.TrainResult` for two runs of the loop, one after the other."""
    return dataclasses.replace(
        then, loss_curve=first.loss_curve + then.loss_curve,
        validation_curve=first.validation_curve + then.validation_curve,
        n_iter=first.n_iter + then.n_iter, steps=first.steps + then.steps,
    )


class Phase(NamedTuple):
    """One run of :func:`~skdiagatt._training.fit_loop` in a fit.

    Attributes
    ----------
    name : str
        Recorded in ``loss_curve_phase_`` (``"main"`` or ``"calibration"``), given to
        the callback as ``EpochInfo.phase`` and, after the estimator's name, the
        prefix of progress lines and warnings.
    config : hashable
        The loss's static settings.
    max_iter : int
        Epochs.
    trained : tuple of str or None
        The parameters this phase trains; None: all but ``held``.
    held : tuple of str
        Parameters kept fixed in this phase (when ``trained`` is None).
    """

    name: str
    config: object
    max_iter: int
    trained: tuple = None
    held: tuple = ()


class _Run(NamedTuple):
    """How one phase runs :func:`~skdiagatt._training.fit_loop` over the training set.

    Attributes
    ----------
    cycles : tuple of int
        Epochs of each cosine cycle: the first, then the restarts run while
        they still gain (:meth:`PhasedEstimator._cycles`).
    rng : numpy RandomState
        Shuffles the minibatches: the fit's, which ``partial_fit`` keeps between calls.
    opt_state : pytree or None
        The optimizer state to continue from (``partial_fit``); None: a fresh one.
    incremental : bool
        A ``partial_fit`` epoch: the step size stays at ``learning_rate``.
    """

    cycles: tuple
    rng: object
    opt_state: object
    incremental: bool


class PhasedEstimator(MatrixSampleEstimator, abc.ABC):
    """Base of the estimators trained in phases of the optax loop; see the module docstring.

    A subclass declares ``_parameter_rules`` and ``_loss_fn`` and supplies
    the abstract methods; the hooks with defaults (``_draw_constants``,
    ``_data_constants``, ``_shrinkage_target``, ``_accumulate_chunk``,
    ``_training_form``, ``_fitted_form``, ``_refit_readout``) are optional.
    """

    _parameter_rules = TRAINING_RULES
    _inert_when = TRAINING_INERT
    #: The parameters that set the trained parameters' shapes (named when a warm start does not fit).
    _shape_parameters = ()
    #: Samples the start of the parameters is estimated from at most (a fit across processes gathers them).
    _start_samples = 0

    # ----------------------------------------------------- what a model supplies
    @abc.abstractmethod
    def _encode_targets(self, y, lengths, *, warm, incremental=False, classes=None, sample_weight=None):
        """``(Y, meta, family)``: encoded targets (n, t), or a list of (p_i, t) row targets.

        ``warm``: keep the previous fit's encoding; ``incremental``: a
        ``partial_fit`` chunk, which may hold a subset of the classes;
        ``sample_weight``: the weights of the target scale.
        """

    @abc.abstractmethod
    def _set_target_meta(self, meta):
        """Store what :meth:`_encode_targets` learnt (target scale, classes)."""

    @abc.abstractmethod
    def _phases(self, family, incremental):
        """The list of :class:`Phase` a fit runs (``incremental``: one epoch of the main objective)."""

    @abc.abstractmethod
    def _param_shapes(self, d, t):
        """``{name: shape}`` of the trained parameters under the current settings."""

    @abc.abstractmethod
    def _initial_params(self, d, t, constants, train, rng):
        """The parameters a fresh fit starts from (``train``: the :class:`~._sources.TrainingSet`)."""

    @abc.abstractmethod
    def _frozen(self, constants, d):
        """The fixed inputs of the loss and the forward pass, from the model's constants."""

    @abc.abstractmethod
    def _fitted_constants(self):
        """The constants of the fitted model (row scale and whitener, or frozen projections)."""

    @abc.abstractmethod
    def _store_constants(self, constants):
        """Set the fitted attributes that hold ``constants``."""

    # ------------------------------------------------------------------ hooks
    def _draw_constants(self, d, rng):
        """Constants drawn before the data are split (frozen random projections)."""
        return {}

    def _data_constants(self, train):
        """Constants estimated from the training data (row scale, whitener)."""
        return {}

    def _shrinkage_target(self, params, n):
        """Fixed inputs that shrink the training of ``n`` samples towards its start ``params``."""
        return {}

    def _accumulate_chunk(self, samples, statistics, weights=None):
        """Hook of the first pass of ``fit_chunks``: statistics gathered from every chunk, weighted by ``weights``."""

    def _training_form(self, loss_fn, params, frozen, state):
        """The loss and inputs ``fit_loop`` trains (a rescaled form of ``params``, say)."""
        return loss_fn, params, frozen

    def _fitted_form(self, params, frozen):
        """``params`` back from the form of :meth:`_training_form`."""
        return params

    def _map_source(self, source, Y, rng, continued):
        """Hook: map the source's rows into the model's coordinates; returns their dimension (here as given)."""
        return source.n_features

    def _after_main_phase(self, params):
        """The parameters a full fit's main phase hands to the next (here as trained)."""
        return params

    def _refit_readout(self, params, frozen, data, family):
        """The trained parameters after any exact refit of the read-out (none here)."""
        return params

    # ------------------------------------------------------------ public fits
    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets)
        sample_weight : array-like of shape (n,) or None, default=None
            Each sample's weight in the loss (a weighted mean over each
            minibatch), the targets' scale and the rows' statistics: weight
            2 counts a sample as if it were given twice.  Samples of weight
            0 are left out.

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, sample_weight=sample_weight))

    def partial_fit(self, X, y, sample_weight=None):
        """One epoch of the main objective over one chunk, continuing the previous state.

        The first call (on an unfitted model) fixes the model's constants (row
        scale and whitener, or frozen projections) and the target encoding
        from its chunk; every call runs one epoch of Adam at the constant
        ``learning_rate`` and keeps the optimizer state and the random state
        for the next call.  Calling it on a model fitted by :meth:`fit`
        continues from that model with a fresh optimizer.  Only the main
        objective is trained: a calibration phase of :meth:`fit`
        (``objective="latent"``) needs passes of its own, so use
        :meth:`fit_chunks` for the full procedure on data larger than memory,
        or ``objective="attention"``, whose single objective partial_fit
        trains completely.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : array-like of shape (n,) or (n, n_targets)
        sample_weight : array-like of shape (n,) or None, default=None
            As in :meth:`fit`.

        Returns
        -------
        self
        """
        return self._fit(Samples(X, y, sample_weight=sample_weight), incremental=True)

    def fit_chunks(self, chunks, y=None, *, sample_weight=None, chunk_size=None):
        """Fit on data read one chunk at a time (larger than memory).

        The same phases as :meth:`fit`.  The data are read once for the
        targets (and the row statistics the model needs), then once per
        epoch, one chunk on the device at a time.  An epoch visits the chunks
        in order and, within a chunk, the minibatches that :meth:`fit` forms
        on that chunk; with a single chunk the result is exactly that of
        :meth:`fit`.  The targets (and weights) of all chunks are held in
        memory (they are small).

        Parameters
        ----------
        chunks : list of (X_k, y_k) pairs or (X_k, y_k, w_k) triples, callable, or array-like
            A list/tuple of ``(X_k, y_k)`` pairs (``X_k`` a list of 2-D arrays,
            a 3-D array or a ``np.memmap``), or of ``(X_k, y_k, w_k)``
            triples whose ``w_k`` weighs the chunk's samples (a chunk
            without weights weighs its samples 1); or a callable returning a
            fresh iterator of such chunks (called once per pass); or a
            ``dask.bag.Bag`` of them or a list of ``dask.delayed`` ones
            (:mod:`skdiagatt.cluster`); or, with ``y``, the samples
            themselves (a 3-D array or memmap, or a list) to be read
            ``chunk_size`` samples at a time.
        y : array-like, optional
            Targets of ``chunks`` when it is the samples themselves.
        sample_weight : array-like of shape (n,) or None, default=None
            Weights of the samples when ``chunks`` is the samples themselves,
            read with them ``chunk_size`` at a time; they count as in
            :meth:`fit` (weight 2: the sample given twice; weight 0: left
            out), in the loss, the targets' scale and the rows' statistics.
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
        return self._fit(Chunks(chunk_factory(chunks, y, chunk_size, sample_weight)))

    # ---------------------------------------------------------- the one path
    def _fit(self, source, *, incremental=False):
        """Fit from ``source``; ``incremental``: one ``partial_fit`` epoch continuing the last."""
        self._validate_parameters()
        if processes_active():
            if incremental or not isinstance(source, Samples):
                raise ValueError(
                    "inside use_processes only fit trains across processes; call partial_fit "
                    "and fit_chunks outside the block"
                )
            if source.sample_weight is not None:
                raise ValueError("sample_weight is not available in a fit across processes (use_processes)")
            source = Shard(source.X, source.y)
        continued = self.__sklearn_is_fitted__() and (incremental or self.warm_start)
        source.read(self, self.n_features_in_ if continued else None,
                    validate=self.early_stopping and not incremental)
        Y, meta, family = self._encode_targets(source.y, source.lengths, warm=continued, incremental=incremental,
                                               classes=source.classes, sample_weight=source.weights)
        t = (Y[0] if isinstance(Y, list) else Y).shape[1]
        state = self.__dict__.get("_partial_state") if incremental else None
        state = dict(state) if state is not None else {"rng": check_random_state(self.random_state)}
        rng = state["rng"]
        n_input = source.n_features
        d = self._map_source(source, Y, rng, continued)
        constants = self._fitted_constants() if continued else self._draw_constants(d, rng)
        train = source.training_set(self, Y, rng)
        if continued:
            params = self._previous_params(d, t)
        else:
            constants = {**constants, **self._data_constants(train)}
            params = self._initial_params(d, t, constants, train, rng)
        # partial_fit shrinks towards where its first call (or fit) started.
        state["shrinkage"] = state.get("shrinkage") or self._shrinkage_target(params, train.total_weight)
        frozen = {**self._frozen(constants, d), **state["shrinkage"]}
        phases = self._phases(family, incremental)
        params, results = self._train(phases, params, frozen, train, state, incremental)
        if not incremental:
            params = self._refit_readout(params, frozen, train.data, family)
        self._set_fitted(params, constants, n_input, phases, results, meta, continued, incremental)
        set_feature_names(self, source.feature_names)
        if incremental:
            self._partial_state = {**state, "opt_state": results[-1].opt_state}
        else:
            self.__dict__.pop("_partial_state", None)  # a later partial_fit starts a fresh optimizer
        return self

    def _train(self, phases, params, frozen, train, state, incremental):
        """Run ``phases`` from ``params``; returns the trained parameters and the phases' results."""
        results = []
        for k, phase in enumerate(phases):
            keys = phase.trained or tuple(p for p in params if p not in phase.held)
            trained = {p: params[p] for p in keys}
            fixed = {**frozen, **{p: v for p, v in params.items() if p not in keys}}
            loss_fn, trained, fixed = self._training_form(self._loss_fn, trained, fixed, state)
            per_epoch = train.steps_per_epoch or steps_per_epoch(
                [len(x) for x in train.samples], train.batch_size, self._pack, self._bucket_growth)
            cycles = self._cycle_epochs(phase.max_iter, per_epoch, incremental)
            run = _Run(cycles, state["rng"], state.get("opt_state") if incremental else None, incremental)
            trained, result = self._cycles(loss_fn, phase, trained, fixed, train, run)
            params = {**params, **self._fitted_form(trained, fixed)}
            results.append(result)
            if k == 0 and not incremental:
                self._warn_unconverged(result)
                params = self._after_main_phase(params)
        return params, results

    def _cycles(self, loss_fn, phase, trained, fixed, train, run):
        """The cosine cycles of ``run.cycles`` over ``train``: the first, and restarts while they gain.

        Each restart continues from where the last cycle ended at half its
        step size (cosine annealing with warm restarts, Loshchilov and
        Hutter, ICLR 2017): a phase whose loss still falls by more than
        ``tol`` at the end of its schedule was cut short, not converged.
        A restart that lowered the loss at the end of its cycle by less than
        the loss's standard error (``TrainResult.loss_se``) is the last: the
        training data cannot tell its gain from none, so more cycles would
        optimise below the precision the data give the objective (Bottou and
        Bousquet, NIPS 2007).
        """
        # A stream's steps are counted on its first pass, not by fit_loop from the data.
        result = None
        for cycle, epochs in enumerate(run.cycles):
            total_steps = None if train.steps_per_epoch is None else epochs * train.steps_per_epoch
            trained, more = fit_loop(
                loss_fn, phase.config, trained, fixed, train.data, max_iter=epochs,
                learning_rate=self._step_size() * 0.5**cycle, batch_size=train.batch_size,
                random_state=run.rng, tol=self.tol, n_iter_no_change=self.n_iter_no_change,
                validation=train.validation, verbose=self.verbose, callback=self.callback,
                label=f"{type(self).__name__} {phase.name}", phase=phase.name,
                schedule="constant" if run.incremental else "cosine", opt_state=run.opt_state,
                total_steps=total_steps,
            )
            if result is not None and _cycle_end(result) - _cycle_end(more) < more.loss_se:
                more.stopped = "resolution"
            result = more if result is None else _joined(result, more)
            if not self._still_falling(more):
                break
        return trained, result

    def _cycle_epochs(self, max_iter, per_epoch, incremental):
        """The epochs of a phase's cycles: ``(max_iter,)``, or under ``"auto"`` a first cycle and restarts.

        A fixed count of epochs is a handful of optimizer steps on a small
        data set (90 samples: 3 minibatches an epoch) and more than needed on
        a large one; ``"auto"``'s first cycle runs at least ``_AUTO_EPOCHS``
        epochs and at least ``_AUTO_STEPS`` steps.  A restart refines where
        the last cycle ended, so it is counted in steps alone, half those of
        the last, from half of ``_AUTO_STEPS``: all the restarts together
        cost at most ``_AUTO_STEPS`` steps and an epoch each.
        """
        if max_iter != "auto":
            return (max_iter,)
        per_epoch = max(per_epoch, 1)
        first = max(_AUTO_EPOCHS, math.ceil(_AUTO_STEPS / per_epoch))
        if incremental:
            return (first,)
        return (first, *(math.ceil(_AUTO_STEPS / 2**c / per_epoch) for c in range(1, _AUTO_RESTARTS + 1)))

    def _step_size(self):
        """Adam's step size: ``learning_rate`` (a subclass resolves ``"auto"``)."""
        return self.learning_rate

    def _still_falling(self, result):
        # The step size decays to 0 over max_iter epochs, so reaching it is the
        # rule; a loss still falling by more than tol in the last, smallest
        # steps is the sign of a fit cut short.
        curve = result.validation_curve or result.loss_curve
        return result.stopped == "max_iter" and len(curve) > 1 and curve[-2] - curve[-1] > self.tol

    def _warn_unconverged(self, result):
        if self._still_falling(result):
            warnings.warn(
                f"{type(self).__name__}: the main phase ran its {len(result.loss_curve)} epochs "
                f"(max_iter={self.max_iter!r}) with its loss still falling by more than tol={self.tol} in the "
                "last epoch; increase max_iter for a converged fit",
                ConvergenceWarning,
                stacklevel=5,
            )

    def _previous_params(self, d, t):
        """A copy of ``params_`` to continue from, checked against the current settings."""
        expected = {k: tuple(s) for k, s in self._param_shapes(d, t).items()}
        got = {k: np.shape(v) for k, v in self.params_.items()}
        if got != expected:
            differ = [
                f"{k} {got.get(k, 'absent')} -> {expected.get(k, 'absent')}"
                for k in sorted(set(got) | set(expected)) if got.get(k) != expected.get(k)
            ]
            raise ValueError(
                "warm_start and partial_fit continue the previous fit, but its parameters do "
                f"not fit the current settings (shape fitted -> now: {', '.join(differ)}; see "
                f"{', '.join(self._shape_parameters)}); restore them, or fit from scratch "
                "(warm_start=False)"
            )
        return {k: np.array(v, copy=True) for k, v in self.params_.items()}

    def _set_fitted(self, params, constants, n_features, phases, results, meta, continued, incremental):
        """The fitted attributes, all at once (a failed fit leaves the old ones).

        When ``continued`` the history (``n_iter_``, ``loss_curve_``,
        ``loss_curve_phase_``, ``validation_scores_``) extends the previous fit's.
        """
        curve = [v for r in results for v in r.loss_curve]
        phase = [p.name for p, r in zip(phases, results) for _ in r.loss_curve]
        scores = None
        if self.early_stopping and not incremental:
            scores = [v for r in results for v in r.validation_curve]
        # epochs of the main optimisation, as scikit-learn counts a solver's
        # iterations; the calibration epochs show in loss_curve_ only
        n_iter = sum(r.n_iter for p, r in zip(phases, results) if p.name == "main")
        if continued:
            n_iter += self.n_iter_
            curve = list(self.loss_curve_) + curve
            phase = list(self.loss_curve_phase_) + phase
            if scores is not None and self.validation_scores_ is not None:
                scores = list(self.validation_scores_) + scores
        self.params_ = params
        self._store_constants(constants)
        self.n_features_in_ = n_features  # of the input, before any map of the rows
        self.n_iter_ = n_iter
        self.loss_curve_ = curve
        self.loss_curve_phase_ = phase
        self.validation_scores_ = scores
        self._set_target_meta(meta)
        return self

    def _frozen_fitted(self):
        return self._frozen(self._fitted_constants(), self.n_features_in_)
