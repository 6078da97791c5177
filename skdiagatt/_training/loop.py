"""The one optax training loop shared by every estimator, with its early stopping."""

import warnings
from dataclasses import dataclass, field

import jax
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import step as _step
from .batches import plan_minibatches, runs, stacked
from .data import ChunkStream, epoch_chunks
from .devices import placement
from .layout import current_layout
from .processes import ShardData, shard_minibatches
from .programs import release_programs_near_map_limit
from .progress import Progress

__all__ = ["TrainResult", "EarlyStopping", "fit_loop"]


@dataclass
class TrainResult:
    """What a call of :func:`fit_loop` did.

    Attributes
    ----------
    loss_curve : list of float
        Mean training objective per epoch.
    validation_curve : list of float
        Mean validation objective per epoch (empty without validation data).
    n_iter : int
        Epochs run.
    stopped : str
        ``"max_iter"``, ``"tol"`` (no improvement), ``"callback"`` (the
        callback asked to stop) or ``"non-finite"``; ``"resolution"`` is set
        by a caller whose warm restart gained less than ``loss_se``.
    loss_se : float
        Standard error of the last epoch's mean training objective, from the
        spread of its minibatch means (0 with one minibatch).
    opt_state : pytree of numpy arrays
        The optimizer state after the last step (to continue, as
        ``partial_fit`` does).
    steps : int
        Optimizer steps taken.
    """

    loss_curve: list = field(default_factory=list)
    validation_curve: list = field(default_factory=list)
    n_iter: int = 0
    stopped: str = "max_iter"
    opt_state: object = None
    steps: int = 0
    loss_se: float = 0.0


class EarlyStopping:
    """Stop when the monitored loss has not improved by ``tol`` for ``patience`` epochs.

    Parameters
    ----------
    tol : float
    patience : int
    keep_best : bool
        Remember the parameters of the best epoch (with validation data).
    """

    def __init__(self, tol, patience, keep_best):
        self.tol = tol
        self.patience = patience
        self.keep_best = keep_best
        self.best = np.inf
        self.best_params = None
        self.stale = 0

    def update(self, monitored, params):
        """Record an epoch's monitored loss and parameters; True when training should stop."""
        if monitored < self.best - self.tol:
            self.best, self.stale = monitored, 0
            if self.keep_best:
                self.best_params = params
        else:
            self.stale += 1
        return self.stale >= self.patience


class _Optimization:
    """The state of a fit between steps: parameters, optimizer state and steps taken, on the devices."""

    def __init__(self, loss_fn, config, params, frozen, opt_state, schedule, learning_rate, total_steps):
        self.place = placement()
        self.layout = current_layout()
        self.loss_fn, self.config = loss_fn, config
        # jax.device_put gives the arrays jnp.asarray gives (dtypes, weak
        # types), without compiling a program for every shape and dtype.
        self.params = self.place.put(jax.device_put(params))
        self.frozen = self.place.put(jax.device_put(frozen))
        fresh = opt_state is None
        self.opt_state = self.place.put(_step.init_opt_state(self.params) if fresh else opt_state)
        self.schedule, self.learning_rate, self.total_steps = schedule, learning_rate, total_steps
        self.step = 0

    def snapshot(self):
        """Host copies of the parameters and the optimizer state (the step donates the device ones)."""
        return self.place.host(self.params), self.place.host(self.opt_state)

    def plan(self, data, batch_size, rng):
        """The minibatches of one epoch of ``data``."""
        return _plan(self.place, data, batch_size, rng, self.layout)

    def run(self, batches, losses, weights):
        """Dispatch the steps of ``batches``, a run per call; the losses stay on the device."""
        G = self.layout.run_steps
        for run in runs(batches, G):
            lr = np.zeros(G, dtype=np.float32)
            for k in range(len(run)):
                lr[k] = _step.step_size(self.learning_rate, self.schedule, self.step + k, self.total_steps)
            idx, w = stacked(run, G)
            put = self.place.put_batch
            self.params, self.opt_state, loss = self.place.train_steps(
                self.params, self.opt_state, self.frozen, run[0].arrays, put(idx, True), put(w, True),
                lr, np.int32(len(run)), self.loss_fn, self.config, run[0].n_slices,
            )
            losses.append((loss, len(run)))
            weights.extend(b.w.sum() for b in run)
            self.step += len(run)

    def mean_loss(self, data, batch_size):
        """The mean objective over ``data`` (validation), at the current parameters."""
        total, count = 0.0, 0.0
        put = self.place.put_batch
        for b in plan_minibatches(data, batch_size, None, self.place.n, self.layout):
            total += float(
                _step.eval_step(self.params, self.frozen, b.arrays, put(b.idx), put(b.w), self.loss_fn, self.config)
            )
            count += float(b.w.sum())
        return total / count


def _epoch_loss(losses, weights, place):
    """The epoch's weighted mean objective and its standard error.

    Minibatches are drawn without regard to the loss, so their means are
    independent draws around the epoch's: the standard error of a ratio
    estimator over clusters, ``sqrt(sum w_b^2 (l_b - mean)^2) / sum w_b``.
    """
    # Host copies, not jnp.stack: stacking compiles one program per number of
    # steps, i.e. per data size of a grid search.
    per_step = np.concatenate([vals[:k] for vals, (_, k) in zip(place.host([v for v, _ in losses]), losses)])
    weights = place.total(weights)  # across processes, every process's samples in each step
    total = np.sum(weights)
    mean = float(np.dot(per_step, weights) / total)
    return mean, float(np.sqrt(np.sum((weights * (per_step - mean)) ** 2)) / total)


def _plan(place, data, batch_size, rng, layout):
    if isinstance(data, ShardData):
        return shard_minibatches(data, batch_size, rng, place)
    return plan_minibatches(data, batch_size, rng, place.n, layout)


def _total_steps(place, data, batch_size, max_iter, total_steps):
    if total_steps is None:
        if isinstance(data, ChunkStream):
            raise TypeError("pass total_steps with a ChunkStream")
        total_steps = max_iter * len(_plan(place, data, batch_size, None, current_layout()))
    return max(1, total_steps)


def fit_loop(
    loss_fn,
    config,
    params,
    frozen,
    data,
    *,
    max_iter,
    learning_rate,
    batch_size,
    random_state,
    tol=1e-4,
    n_iter_no_change=5,
    validation=None,
    verbose=0,
    callback=None,
    label="fit",
    phase="main",
    schedule="cosine",
    opt_state=None,
    total_steps=None,
):
    """Minimise ``loss_fn`` with Adam on minibatches, cosine-decayed step size.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(params, frozen, batch, config) -> scalar``; ``batch`` holds
        the bucket arrays gathered at the batch indices and ``w`` (B,), the
        sample weights (0 for filler).  Must be a module-level function, so
        that compiled steps are cached across fits.
    config : hashable
        Static settings passed to ``loss_fn``.
    params, frozen : dict of arrays
        Trained and fixed inputs.
    data : list, PackedData or ChunkStream
        From :func:`~skdiagatt._training.data.training_data`, or a
        :class:`~skdiagatt._training.data.ChunkStream` of chunks uploaded one
        at a time (then ``total_steps`` is required).
    max_iter : int
        Epochs; the step size decays from ``learning_rate`` to 0 over them.
    learning_rate : float
    batch_size : int
    random_state : numpy RandomState
        Shuffles the minibatches.
    tol, n_iter_no_change : float, int
        Stop when the monitored loss (validation if given, else training) has
        not improved by ``tol`` for ``n_iter_no_change`` epochs.
    validation : list or None
        Held-out data in the layout of ``data``; the best epoch's parameters
        are returned.
    verbose : int
        > 0: say when programs compile, and print one line per epoch with
        its time and an estimate of the time left
        (:class:`~skdiagatt._training.progress.Progress`).
    callback : callable or None
        ``callback(info)`` after every epoch, ``info`` an
        :class:`~skdiagatt._training.progress.EpochInfo`; a true return value
        stops the loop after that epoch, as early stopping would.
    label : str
        The prefix of the progress lines and warnings: the estimator and the phase.
    phase : str
        ``EpochInfo.phase``: the phase's name in ``loss_curve_phase_``.
    schedule : {"cosine", "constant"}
        ``"constant"`` keeps ``learning_rate`` (``partial_fit``: the total
        number of steps is unknown).
    opt_state : pytree or None
        Optimizer state to continue from (None: a fresh Adam state).
    total_steps : int or None
        Steps of the whole cosine schedule (default: ``max_iter`` epochs of
        ``data``).

    Returns
    -------
    params : dict of numpy arrays
    result : TrainResult
    """
    progress = Progress(label, max_iter, verbose, callback, phase)  # checks the callback before any work
    release_programs_near_map_limit()
    place = placement()
    total_steps = _total_steps(place, data, batch_size, max_iter, total_steps)
    opt = _Optimization(loss_fn, config, params, frozen, opt_state, schedule, learning_rate, total_steps)
    stopper = EarlyStopping(tol, n_iter_no_change, keep_best=validation is not None)
    with progress:
        result = _epochs(opt, data, batch_size, random_state, max_iter, validation, stopper, progress)
    params = stopper.best_params if stopper.best_params is not None else opt.params
    result.steps = opt.step
    return opt.place.host(params), result


def _finite(tree):
    """True if every value of the host arrays of ``tree`` is finite."""
    return all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(tree))


def _epochs(opt, data, batch_size, random_state, max_iter, validation, stopper, progress):
    """The epochs of :func:`fit_loop`: train, monitor, report, stop; returns the :class:`TrainResult`."""
    result = TrainResult()
    last_good, last_state = opt.snapshot()
    planned, drawn_from = None, None
    for epoch in range(max_iter):
        losses, weights = [], []
        for chunk in epoch_chunks(data):
            opt.run(planned or opt.plan(chunk, batch_size, random_state), losses, weights)
            planned = None
            if isinstance(data, ChunkStream) and len(losses) > 1:
                # Steps are dispatched asynchronously: without this wait the
                # host would upload every chunk of the epoch ahead of the
                # device.  It waits for the run before last, so the next
                # chunk is uploaded while this chunk's last run trains.
                jax.block_until_ready(losses[-2][0])
        if epoch + 1 < max_iter and not isinstance(data, ChunkStream):
            # Plan the next epoch while the device runs this one, not after
            # the wait below, which would leave the device idle.  A fit that
            # stops early gives the draw back (below).
            drawn_from = random_state.get_state()
            planned = opt.plan(data, batch_size, random_state)
        epoch_loss, epoch_se = _epoch_loss(losses, weights, opt.place)
        params, state = opt.snapshot()
        # A step's loss is that of the parameters before its update: the
        # last update of an epoch is only seen in the parameters themselves.
        if not (np.isfinite(epoch_loss) and _finite(params)):
            warnings.warn(
                f"{progress.label}: the objective became non-finite at epoch {epoch + 1}; "
                "training stopped and the last finite parameters were kept. "
                "Try a smaller learning_rate or a larger temperature.",
                ConvergenceWarning,
                stacklevel=4,
            )
            result.stopped = "non-finite"
            opt.params, opt.opt_state = last_good, last_state
            break
        last_good, last_state = params, state
        result.loss_curve.append(epoch_loss)
        result.loss_se = epoch_se
        result.n_iter = epoch + 1
        monitored = epoch_loss
        if validation is not None:
            monitored = opt.mean_loss(validation, batch_size)
            result.validation_curve.append(monitored)
        asked = progress.end_epoch(epoch_loss, monitored if validation is not None else None)
        if stopper.update(monitored, last_good) or asked:
            result.stopped = "callback" if asked else "tol"
            break
    if planned is not None:
        random_state.set_state(drawn_from)  # as if the unused epoch was never drawn
    result.opt_state = last_state
    return result
