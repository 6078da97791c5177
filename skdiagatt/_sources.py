"""The data a fit reads: samples in memory (``fit``, ``partial_fit``) or a stream of chunks (``fit_chunks``).

A source validates its samples, hands over their targets for encoding, and
uploads the training part (:class:`TrainingSet`).  The estimator's one fit
path (:meth:`skdiagatt._phased.PhasedEstimator._fit`) does the rest the same
way whatever the source.
"""

import numbers
from dataclasses import dataclass, field

import numpy as np

from ._base import check_sample_weight
from ._ragged import check_ragged
from ._training import ChunkStream, steps_per_epoch, training_data

__all__ = ["Samples", "Chunks", "TrainingSet", "chunk_factory"]


@dataclass
class TrainingSet:
    """The uploaded training data of one fit.

    Attributes
    ----------
    samples : list of ndarray
        The training samples in memory (the first chunks' for a stream: those
        the start of the parameters is estimated from).
    Y : ndarray or list
        The encoded targets of ``samples``.
    n : int
        Training samples (all chunks' for a stream).
    loop : dict
        Keyword arguments of :func:`~skdiagatt._training.fit_loop` shared by
        every phase: ``data``, ``batch_size``, ``random_state``, ``tol``,
        ``n_iter_no_change``, ``validation``, ``verbose``, ``callback``.
    steps_per_epoch : int or None
        Optimizer steps of one epoch of a chunk stream (None in memory: the
        loop counts them itself).
    statistics : dict
        What the estimator's ``_accumulate_chunk`` gathered over a stream.
    weights : ndarray of shape (n,) or None
        The training samples' weights (None: all 1).
    """

    samples: list
    Y: object
    n: int
    loop: dict
    steps_per_epoch: int = None
    statistics: dict = field(default_factory=dict)
    weights: np.ndarray = None

    @property
    def total_weight(self):
        """How many samples the training set counts as: ``n``, or the sum of the weights."""
        return self.n if self.weights is None else float(self.weights.sum())


def _batch_size(est, n):
    # Small data sets get smaller batches, hence enough optimizer steps.
    if est.batch_size == "auto":
        return min(256, max(32, n // 16))
    return est.batch_size


def _loop(est, data, n, rng, validation):
    return dict(
        data=data,
        batch_size=_batch_size(est, n),
        random_state=rng,
        tol=est.tol,
        n_iter_no_change=est.n_iter_no_change,
        validation=validation,
        verbose=est.verbose,
        callback=est.callback,
    )


class Samples:
    """Samples ``X`` and their targets ``y`` in memory; ``classes`` for a first ``partial_fit``.

    ``sample_weight`` weighs each sample in the loss, the target scale and the
    row statistics; samples of weight 0 are left out.
    """

    def __init__(self, X, y, classes=None, sample_weight=None):
        self.X, self.y, self.classes, self.sample_weight = X, y, classes, sample_weight

    def read(self, est, n_features, *, validate):
        """Validate the samples (against ``n_features`` when continuing a fit).

        ``validate``: split off validation samples in :meth:`training_set`.
        """
        self.validate = validate
        self.samples = check_ragged(self.X, n_features=n_features)
        self.n_features = self.samples[0].shape[1]
        n = len(self.samples)
        self.weights = check_sample_weight(self.sample_weight, n)
        if self.weights is not None and not np.all(self.weights > 0):
            if self.y is None or len(self.y) != n:
                raise ValueError(f"y has {0 if self.y is None else len(self.y)} entries but X has {n} samples")
            keep = np.flatnonzero(self.weights > 0)
            self.samples = [self.samples[i] for i in keep]
            y = self.y
            self.y = [y[i] for i in keep] if isinstance(y, (list, tuple)) else np.asarray(y)[keep]
            self.weights = self.weights[keep]
        self.lengths = np.array([s.shape[0] for s in self.samples])

    def training_set(self, est, Y, rng):
        """Split off the validation samples (``validate`` of :meth:`read`) and upload both parts."""
        samples, n, weights = self.samples, len(self.samples), self.weights
        take = (lambda idx: [Y[i] for i in idx]) if isinstance(Y, list) else (lambda idx: Y[idx])
        w = (lambda idx: None) if weights is None else (lambda idx: weights[idx])
        idx_train, validation = np.arange(n), None
        if self.validate:
            n_val = int(round(est.validation_fraction * n))
            if n_val < 1 or n - n_val < 1:
                raise ValueError(
                    "early_stopping needs at least one training and one validation sample; "
                    f"n={n}, validation_fraction={est.validation_fraction}"
                )
            perm = rng.permutation(n)
            idx_train, idx_val = np.sort(perm[n_val:]), np.sort(perm[:n_val])
            validation = training_data([samples[i] for i in idx_val], take(idx_val), est._pack, est._bucket_growth,
                                       w(idx_val))
        train = [samples[i] for i in idx_train]
        data = training_data(train, take(idx_train), est._pack, est._bucket_growth, w(idx_train))
        return TrainingSet(train, take(idx_train), len(train), _loop(est, data, len(train), rng, validation),
                           weights=w(idx_train))


class Chunks:
    """``(X_k, y_k)`` chunks read one at a time from ``make()`` (see :func:`chunk_factory`)."""

    classes = None
    weights = None

    def __init__(self, make):
        self.make = make

    def read(self, est, n_features, *, validate):
        """First pass over the chunks: validate, count rows, gather targets and ``est``'s statistics."""
        if validate:
            raise ValueError(
                "early_stopping is not available with fit_chunks: hold out a validation "
                "set yourself and compare est.score on it"
            )
        self.statistics, sizes, lengths, parts = {}, [], [], []
        for k, pair in enumerate(self.make()):
            try:
                Xk, yk = pair
            except (TypeError, ValueError):
                raise TypeError(f"chunk {k} is not an (X, y) pair") from None
            samples = check_ragged(Xk, n_features=n_features, name=f"chunk {k}: X")
            n_features = samples[0].shape[1]
            if yk is None or len(yk) != len(samples):
                got = "no y" if yk is None else f"{len(yk)} targets"
                raise ValueError(f"chunk {k} has {len(samples)} samples but {got}")
            lengths.append(np.array([s.shape[0] for s in samples]))
            sizes.append(len(samples))
            parts.append(yk)
            est._accumulate_chunk(samples, self.statistics)
        if not sizes:
            raise ValueError("chunks is empty: no samples to fit")
        self.n_features, self.chunk_lengths = n_features, lengths
        self.lengths = np.concatenate(lengths)
        if all(isinstance(p, (list, tuple)) for p in parts):
            self.y = [v for p in parts for v in p]  # row-level targets stay a list
        else:
            self.y = np.concatenate([np.asarray(p) for p in parts])

    def training_set(self, est, Y, rng):
        """A :class:`~skdiagatt._training.ChunkStream` over the chunks, with their encoded targets.

        Chunks are validated again as they are read (the source may change).
        """
        make, d = self.make, self.n_features

        def batches():
            offset = 0
            for k, (Xk, _) in enumerate(make()):
                samples = check_ragged(Xk, n_features=d, name=f"chunk {k}: X")
                yield samples, Y[offset : offset + len(samples)]
                offset += len(samples)

        n = len(self.lengths)
        stream = ChunkStream(batches, pack=est._pack, growth=est._bucket_growth)
        loop = _loop(est, stream, n, rng, None)
        per_epoch = sum(steps_per_epoch(lengths, loop["batch_size"], est._pack, est._bucket_growth)
                        for lengths in self.chunk_lengths)
        start = self.statistics.get("start_samples", [])
        return TrainingSet(start, Y[: len(start)], n, loop, per_epoch, self.statistics)


def chunk_factory(chunks, y=None, chunk_size=None):
    """Normalise the chunk sources that ``fit_chunks`` accepts to a re-callable reader.

    Parameters
    ----------
    chunks : list or tuple of (X_k, y_k) pairs, or a callable, or array-like
        * a list/tuple of pairs, each ``X_k`` a list of 2-D arrays or a 3-D
          array (``np.memmap`` included) and ``y_k`` its targets;
        * a callable ``chunks()`` returning a fresh iterator of such pairs
          (called once per pass over the data, so generators work);
        * a ``dask.bag.Bag`` whose elements are such pairs, or a list of
          ``dask.delayed`` pairs: each pass computes them one at a time, in
          order (:func:`skdiagatt.cluster.iter_dask_chunks`);
        * with ``y`` given: the samples ``X`` themselves (a 3-D array or
          memory-mapped array, or a list), read ``chunk_size`` samples at a
          time -- slicing a memmap reads only that slice from disk.
    y : array-like or list, optional
    chunk_size : int, optional
        Samples per chunk when ``y`` is given (default: all).

    Returns
    -------
    callable
        ``make()`` -> iterator of ``(X_k, y_k)``.
    """
    if y is not None:
        X = chunks
        n = len(X)
        if len(y) != n:
            raise ValueError(f"y has {len(y)} entries but X has {n} samples")
        if chunk_size is not None and (
            not isinstance(chunk_size, numbers.Integral) or isinstance(chunk_size, bool) or chunk_size < 1
        ):
            raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
        size = n if chunk_size is None else int(chunk_size)

        def make():
            for start in range(0, n, size):
                yield X[start : start + size], y[start : start + size]

        return make
    if chunk_size is not None:
        raise ValueError("chunk_size is used only with fit_chunks(X, y, chunk_size=...)")
    from .cluster import _dask_reader  # here: cluster imports the estimators

    # Before the callable case: a dask.delayed object is callable too.
    lazy = _dask_reader(chunks)
    if lazy is not None:
        return lazy
    if callable(chunks):
        return chunks
    if isinstance(chunks, (list, tuple)):
        for k, pair in enumerate(chunks):
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
                raise TypeError(f"chunks[{k}] must be an (X, y) pair")
        return lambda: iter(chunks)
    raise TypeError(
        "chunks must be a list of (X, y) pairs, a callable returning an iterator of "
        "(X, y) pairs, a Dask bag or list of delayed (X, y) pairs, or the samples X "
        "with y=... (and chunk_size=...)"
    )
