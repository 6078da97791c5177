"""Two-phase training of the attention estimators on whitened rows (DiagAtt, StdAtt).

Phase one trains the main objective (``objective``: the latent-row likelihood
or the attention prediction's own loss); after the latent-row objective a
calibration phase fits a few parameters (value read-out, intercept, for
DiagAtt the inverse temperature) to the attention prediction's loss with the
rest fixed: the latent objective localizes, the calibration makes the averaged
prediction itself accurate.  The model's constants are the rows' scale ``c``
and whitener ``S`` (:mod:`skdiagatt._shared.whitening`).
"""

import abc

import numpy as np

from .params import TRAINING_RULES, Boolean, Integer, Options
from .phased import Phase, PhasedEstimator
from .whitening import preconditioner, preconditioner_from_moment, second_moment

__all__ = ["TwoPhaseEstimator"]


class TwoPhaseEstimator(PhasedEstimator):
    """Base of an attention estimator trained in two phases on whitened rows.

    Subclasses set the class attributes ``_loss_fn``, ``_calibrated``
    (parameters the calibration phase trains) and ``_held`` (parameters kept
    fixed in the main phase), and supply ``_init_params(d, t, rng)`` and
    ``_frozen(constants, d)``.
    """

    _held = ()
    _parameter_rules = {
        **TRAINING_RULES,
        "objective": Options("latent", "attention"),
        "whiten": Boolean(),
        "calibration_iter": Integer(0),
    }
    _inert_when = {
        **PhasedEstimator._inert_when,
        # Calibration follows the latent-row objective only.
        "calibration_iter": lambda est: "objective='attention'" if est.objective == "attention" else None,
    }

    @abc.abstractmethod
    def _init_params(self, d, t, rng):
        """Initial parameters for d features and t outputs, drawn from ``rng``."""

    def _start(self, params, train, c, S, rng):
        """The parameters a fresh fit starts from, given its :class:`~._sources.TrainingSet` (here ``params``)."""
        return params

    def _phases(self, family, incremental):
        if incremental:
            return [Phase("main", (self.objective, family), 1, held=self._held)]
        phases = [Phase("main", (self.objective, family), self.max_iter, held=self._held)]
        if self.objective == "latent" and self.calibration_iter > 0:
            phases.append(Phase("calibration", ("attention", family), self.calibration_iter,
                                trained=self._calibrated))
        return phases

    def _param_shapes(self, d, t):
        return {k: np.shape(v) for k, v in self._init_params(d, t, np.random.RandomState(0)).items()}

    def _data_constants(self, train):
        if "M" in train.statistics:  # a chunk stream: the second moment of its first pass
            c, S = preconditioner_from_moment(train.statistics["M"], train.statistics["rows"], self.whiten)
        else:
            c, S = preconditioner(train.samples, self.whiten, train.weights)
        return {"c": c, "S": S}

    def _initial_params(self, d, t, constants, train, rng):
        return self._start(self._init_params(d, t, rng), train, constants["c"], constants["S"], rng)

    def _accumulate_chunk(self, samples, statistics, weights=None):
        M, rows = second_moment(samples, weights)
        statistics["M"] = statistics.get("M", 0.0) + M
        statistics["rows"] = statistics.get("rows", 0) + rows

    def _fitted_constants(self):
        return {"c": self.input_scale_, "S": self.preconditioner_}

    def _store_constants(self, constants):
        self.input_scale_ = constants["c"]
        self.preconditioner_ = constants["S"]
