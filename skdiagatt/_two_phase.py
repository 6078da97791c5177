"""Two-phase training shared by the attention estimators (DiagAtt, StdAtt).

Phase one trains the main objective (``objective``: the latent-row likelihood
or the attention prediction's own loss); after the latent-row objective a
calibration phase fits a few parameters (value read-out, intercept, for
DiagAtt the inverse temperature) to the attention prediction's loss with the
rest fixed: the latent objective localizes, the calibration makes the averaged
prediction itself accurate.
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ._ragged import check_ragged
from ._training import fit_loop
from ._whitening import preconditioner

__all__ = ["TwoPhaseTraining"]


class TwoPhaseTraining:
    """Mixin: ``_fit`` of an attention estimator trained in two phases.

    Expects the estimator parameters ``objective``, ``calibration_iter``,
    ``max_iter``, ``learning_rate``, ``whiten``, ``warm_start``,
    ``early_stopping``, ``random_state``; the methods ``_check_params()``,
    ``_init_params(d, t, rng)``, ``_frozen(c, S, d)``,
    ``_encode_targets(y, n, warm)``, ``_training_data`` and
    ``_set_target_meta(meta)``; and the class attributes ``_loss_fn``,
    ``_calibrated`` (parameters the calibration phase trains) and ``_held``
    (parameters kept fixed in the main phase).
    """

    _held = ()

    def _fit(self, X, y):
        """Validate, train both phases, then set the fitted attributes at once."""
        self._check_params()
        samples = check_ragged(X)
        n, d = len(samples), samples[0].shape[1]
        warm = self._check_warm(d)
        Y, meta, family = self._encode_targets(y, n, warm)  # Y: (n, t) float32
        rng = check_random_state(self.random_state)
        train_samples, train_Y, loop = self._training_data(samples, Y, rng)
        if warm:
            c, S = self.input_scale_, self.preconditioner_
            params = self._previous_params(d, Y.shape[1])
        else:
            c, S = preconditioner(train_samples, self.whiten)
            params = self._start(self._init_params(d, Y.shape[1], rng), train_samples, train_Y, c, S, rng)
        return self._train(params, c, S, d, family, meta, loop, n_train=len(train_samples), warm=warm)

    def _start(self, params, samples, Y, c, S, rng):
        """The parameters a fresh fit starts from, given its training samples and targets (here ``params``)."""
        return params

    def _shrinkage_target(self, params, n):
        """Fixed inputs that shrink the training of ``n`` samples towards its start ``params``."""
        return {}

    def _train(self, params, c, S, d, family, meta, loop, total_steps=None, *, n_train, warm=False):
        """Both phases from ``params``, then the fitted attributes at once.

        ``loop`` holds the keyword arguments of ``fit_loop`` shared by the
        phases; ``total_steps(epochs)`` gives a phase's schedule length when the
        data are a chunk stream; ``warm``: the history continues the previous fit's.
        """
        frozen = {**self._frozen(c, S, d), **self._shrinkage_target(params, n_train)}
        params, results = self._train_two_phases(
            self._loss_fn, family, params, frozen, loop,
            calibrated=self._calibrated, held=self._held, total_steps=total_steps,
        )
        params = self._refit_readout(params, frozen, loop["data"], family)
        self._set_fitted(params, c, S, d, results, meta, warm)
        # A full fit starts any later partial_fit with a fresh optimizer.
        self.__dict__.pop("_partial_state", None)
        return self

    def _refit_readout(self, params, frozen, data, family):
        """The trained parameters, after any exact refit of the read-out (none here)."""
        return params

    def _check_warm(self, d):
        """Whether this fit continues the previous one (``warm_start`` and fitted)."""
        warm = self.warm_start and hasattr(self, "params_")
        if warm and d != self.n_features_in_:
            raise ValueError(
                f"X has {d} features but the warm-started model was fitted with "
                f"{self.n_features_in_}"
            )
        return warm

    def _previous_params(self, d, t):
        """A copy of ``params_`` to continue from, checked against the current settings."""
        expected = self._init_params(d, t, np.random.RandomState(0))
        got = {k: np.shape(v) for k, v in self.params_.items()}
        if got != {k: v.shape for k, v in expected.items()}:
            raise ValueError(
                "warm_start / partial_fit continue the previous fit, whose parameters "
                f"{sorted(got)} do not fit the current settings ({sorted(expected)}; "
                "see n_heads, rank, symmetric, score_form, key_dim); refit with "
                "warm_start=False"
            )
        return {k: np.array(v, copy=True) for k, v in self.params_.items()}

    def _train_two_phases(self, loss_fn, family, params, frozen, loop, calibrated, held=(),
                          total_steps=None):
        """Both phases; returns the trained parameters and the phases' results.

        Parameters
        ----------
        loss_fn : callable
            ``loss_fn(params, frozen, batch, (objective, family))``.
        family : str
        params, frozen : dict
            Trainable and fixed inputs of ``loss_fn``.
        loop : dict
            Keyword arguments of :func:`~skdiagatt._training.fit_loop` shared by
            the phases (data, batch size, validation, ...).
        calibrated : tuple of str
            Parameters the calibration phase trains (the others fixed).
        held : tuple of str
            Parameters kept out of phase one (fixed there, calibrated after).
        total_steps : callable or None
            ``total_steps(epochs)``: a phase's schedule length for chunk streams.
        """
        def steps(epochs):
            return {} if total_steps is None else {"total_steps": total_steps(epochs)}

        frozen = {**frozen, **{k: params.pop(k) for k in held}}
        params, first = fit_loop(
            loss_fn, (self.objective, family), params, frozen,
            max_iter=self.max_iter, learning_rate=self.learning_rate,
            label=f"{type(self).__name__} {self.objective}", **steps(self.max_iter), **loop,
        )
        params.update({k: frozen.pop(k) for k in held})
        # The step size decays to 0 over max_iter epochs, so reaching it is the
        # rule; a loss still falling by more than tol in the last, smallest
        # steps is the sign of a fit cut short.
        curve = first.validation_curve or first.loss_curve
        if first.stopped == "max_iter" and len(curve) > 1 and curve[-2] - curve[-1] > self.tol:
            warnings.warn(
                f"{type(self).__name__}: the main phase reached max_iter={self.max_iter} "
                f"epochs with its loss still falling by more than tol={self.tol} in the "
                "last epoch; increase max_iter for a converged fit",
                ConvergenceWarning,
                stacklevel=5,
            )
        results = [first]
        if self.objective == "latent" and self.calibration_iter > 0:
            fixed = {k: v for k, v in params.items() if k not in calibrated}
            calibrated_params, second = fit_loop(
                loss_fn, ("attention", family), {k: params[k] for k in calibrated},
                {**frozen, **fixed},
                max_iter=self.calibration_iter, learning_rate=self.learning_rate,
                label=f"{type(self).__name__} calibration", **steps(self.calibration_iter),
                **loop,
            )
            params = {**params, **calibrated_params}
            results.append(second)
        return params, results

    def _set_fitted(self, params, c, S, d, results, meta, warm=False):
        """The fitted attributes, all at once (a failed fit leaves the old ones).

        Under ``warm`` the history (``n_iter_``, ``loss_curve_``,
        ``loss_curve_phase_``, ``validation_scores_``) continues the previous fit's.
        """
        phases = ["main", "calibration"]
        curve = [v for r in results for v in r.loss_curve]
        phase = [phases[k] for k, r in enumerate(results) for _ in r.loss_curve]
        scores = [v for r in results for v in r.validation_curve] if self.early_stopping else None
        n_iter = sum(r.n_iter for r in results)
        if warm:
            n_iter += self.n_iter_
            curve = list(self.loss_curve_) + curve
            phase = list(self.loss_curve_phase_) + phase
            if scores is not None and self.validation_scores_ is not None:
                scores = list(self.validation_scores_) + scores
        self.params_ = params
        self.input_scale_ = c
        self.preconditioner_ = S
        self.n_features_in_ = d
        self.n_iter_ = n_iter
        self.loss_curve_ = curve
        self.loss_curve_phase_ = phase
        self.validation_scores_ = scores
        self._set_target_meta(meta)
        return self
