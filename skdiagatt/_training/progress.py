"""Progress of a training phase: the lines ``verbose`` prints and the user's ``callback``."""

import time
from dataclasses import dataclass

from .programs import compile_seconds, on_compiling

__all__ = ["EpochInfo", "Progress", "check_callback"]


@dataclass(frozen=True)
class EpochInfo:
    """What an estimator's ``callback`` receives after every epoch of a training phase.

    Attributes
    ----------
    phase : str
        The training phase, named as in the estimator's ``loss_curve_phase_``:
        ``"main"`` or ``"calibration"``.
    epoch : int
        The epoch just finished, from 1 (an L-BFGS iteration for
        ``solver="varpro"``).
    max_iter : int
        The phase's epochs at most.
    train_loss : float
        The epoch's mean training objective.
    valid_loss : float or None
        The mean objective on the held-out samples (``early_stopping``), else None.
    seconds : float
        Wall time of the epoch, compilation included.
    compile_seconds : float
        The part of ``seconds`` spent compiling programs.
    elapsed : float
        Wall time since the phase started.
    remaining : float
        Estimated seconds to ``max_iter``: the epochs left at the mean time
        of the epochs after the first (which also traces the programs), or
        of the first, compilation excluded.  Early stopping may end the
        phase sooner.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt import DiagAttRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(40, 5, 3)
    >>> seen = []
    >>> def watch(info):
    ...     seen.append((info.phase, info.epoch, info.valid_loss))
    ...     return info.epoch == 2          # stop each phase after its second epoch
    >>> est = DiagAttRegressor(max_iter=5, calibration_iter=3, random_state=0, callback=watch)
    >>> est = est.fit(X, X[:, 0, 0])
    >>> seen
    [('main', 1, None), ('main', 2, None), ('calibration', 1, None), ('calibration', 2, None)]
    """

    phase: str
    epoch: int
    max_iter: int
    train_loss: float
    valid_loss: object
    seconds: float
    compile_seconds: float
    elapsed: float
    remaining: float


def check_callback(callback):
    """Raise unless ``callback`` is None or callable."""
    if callback is not None and not callable(callback):
        raise TypeError(
            f"callback must be None or a callable taking one EpochInfo, got {type(callback).__name__}"
        )


class Progress:
    """Reports the epochs of one training phase; use as a context manager around it.

    Parameters
    ----------
    label : str
        The prefix of the lines: the estimator and the phase.
    max_iter : int
    verbose : int
        > 0: a line when programs compile, and one per epoch with its time
        and an estimate of the time left.
    callback : callable or None
        ``callback(info)`` with an :class:`EpochInfo` after every epoch; a
        true return value asks to stop the phase.
    phase : str, default="main"
        :attr:`EpochInfo.phase`: the name ``loss_curve_phase_`` records.
    """

    def __init__(self, label, max_iter, verbose=0, callback=None, phase="main"):
        check_callback(callback)
        self.label, self.max_iter, self.verbose, self.callback = label, max_iter, verbose, callback
        self.phase = phase
        self.epoch = 0
        self._announced = False
        self._watch = None

    def __enter__(self):
        self.start = self._last = time.perf_counter()
        self._compiled = compile_seconds()
        self._first = self._later = 0.0
        if self.verbose:
            self._watch = on_compiling(self._announce)
            self._watch.__enter__()
        return self

    def __exit__(self, *exc):
        if self._watch is not None:
            self._watch.__exit__(*exc)
        return False

    def _announce(self):
        # Once per epoch: a minibatch shape first seen compiles several programs.
        if not self._announced:
            self._announced = True
            print(f"[{self.label}] epoch {self.epoch + 1}/{self.max_iter}: compiling "
                  "(once per minibatch shape, seconds each)", flush=True)

    def end_epoch(self, train_loss, valid_loss=None):
        """Report an epoch just finished; True if the callback asks to stop."""
        now, compiled = time.perf_counter(), compile_seconds()
        self.epoch += 1
        seconds, compiling = now - self._last, compiled - self._compiled
        running = max(0.0, seconds - compiling)
        if self.epoch == 1:
            self._first = running
        else:
            self._later += running
        typical = self._later / (self.epoch - 1) if self.epoch > 1 else self._first
        info = EpochInfo(
            phase=self.phase, epoch=self.epoch, max_iter=self.max_iter,
            train_loss=float(train_loss), valid_loss=None if valid_loss is None else float(valid_loss),
            seconds=seconds, compile_seconds=compiling, elapsed=now - self.start,
            remaining=typical * (self.max_iter - self.epoch),
        )
        self._last, self._compiled, self._announced = now, compiled, False
        if self.verbose:
            print(_line(self.label, info), flush=True)
        return bool(self.callback(info)) if self.callback is not None else False


def _duration(seconds):
    return f"{1e3 * seconds:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _line(label, info):
    val = "" if info.valid_loss is None else f", validation {info.valid_loss:.5f}"
    compiling = f" ({_duration(info.compile_seconds)} compiling)" if info.compile_seconds >= 1e-3 else ""
    left = f"; about {_duration(info.remaining)} left" if info.epoch < info.max_iter else ""
    return (f"[{label}] epoch {info.epoch}/{info.max_iter}: loss {info.train_loss:.5f}{val}; "
            f"{_duration(info.seconds)}{compiling}{left}")
