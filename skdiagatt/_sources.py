"""The data a fit reads: samples in memory (``fit``, ``partial_fit``) or a stream of chunks (``fit_chunks``).

A source validates its samples, hands over their targets for encoding, and
uploads the training part (:class:`TrainingSet`).  The estimator's one fit
path (:meth:`skdiagatt._phased.PhasedEstimator._fit`) does the rest the same
way whatever the source.
"""

import numbers
from dataclasses import dataclass, field

import numpy as np

from ._base import drop_zero_weight
from ._ragged import bucket_length, check_ragged
from ._training import ChunkStream, steps_per_epoch, training_data
from ._training.data import spans_buckets
from ._training.devices import placement
from ._training.processes import shard_data

__all__ = ["Samples", "Shard", "Chunks", "TrainingSet", "chunk_factory"]


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
        self.samples, self.y, self.weights = drop_zero_weight(self.samples, self.y, self.sample_weight)
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


class Shard(Samples):
    """This process's shard of the samples in a fit across processes (:func:`~skdiagatt._training.use_processes`).

    The targets are encoded and the row statistics estimated over every
    process's samples, in the order of the processes; the start of the
    parameters sees the same samples in every process (all of them, or at
    most ``est._start_samples`` drawn from all of them); each process
    uploads only its own samples for training.
    """

    weights = None

    def read(self, est, n_features, *, validate):
        """Validate this shard and learn every process's sample lengths and targets."""
        self.place = placement()
        error = None
        try:
            if validate:
                raise ValueError(
                    "early_stopping is not available in a fit across processes: hold out a "
                    "validation set yourself and compare est.score on it"
                )
            super().read(est, n_features, validate=False)
            if self.y is None or len(self.y) != len(self.samples):
                got = "no y" if self.y is None else f"{len(self.y)} targets"
                raise ValueError(f"X has {len(self.samples)} samples but {got}")
        except (TypeError, ValueError) as exc:  # told to every process, so that none waits for the others
            error = f"{type(exc).__name__}: {exc}"
        parts = self.place.gather(error or (self.n_features, self.lengths, self.y))
        failed = [f"process {k}: {p}" for k, p in enumerate(parts) if isinstance(p, str)]
        if failed:
            raise ValueError("fit across processes: " + "; ".join(failed))
        if len({p[0] for p in parts}) > 1:
            raise ValueError(f"the processes' samples have different numbers of features: {[p[0] for p in parts]}")
        sizes = [len(p[1]) for p in parts]
        self.mine = slice(sum(sizes[: self.place.index]), sum(sizes[: self.place.index + 1]))
        self.lengths = np.concatenate([p[1] for p in parts])
        ys = [p[2] for p in parts]
        self.y = [v for y in ys for v in y] if all(isinstance(y, list) for y in ys) else np.concatenate(
            [np.asarray(y) for y in ys])

    def training_set(self, est, Y, rng):
        """Upload this process's samples; the start's samples and the row statistics are every process's."""
        row_level = isinstance(Y, list)
        packed = est._pack and not row_level and spans_buckets(self.lengths)
        grid = {bucket_length(int(p), est._bucket_growth) for p in np.unique(self.lengths)}
        if not packed and len(grid) > 1:
            raise ValueError(
                f"a fit across processes trains samples of one bucket length, or ragged samples packed; "
                f"{type(est).__name__} would train these samples in {len(grid)} buckets of lengths "
                f"{sorted(grid)}; fit samples of one length, or a model that packs ragged samples (DiagAtt)"
            )
        n = len(self.lengths)
        statistics = {}
        est._accumulate_chunk(self.samples, statistics)
        sums = self.place.gather({k: v for k, v in statistics.items() if not isinstance(v, list)})
        statistics = {k: sum(p[k] for p in sums) for k in sums[0]}
        take = (lambda idx: [Y[i] for i in idx]) if row_level else (lambda idx: Y[idx])
        limit = est._start_samples
        pick = np.arange(n) if n <= limit else np.sort(np.random.RandomState(0).choice(n, limit, replace=False))
        mine = pick[(pick >= self.mine.start) & (pick < self.mine.stop)] - self.mine.start
        start = [s for part in self.place.gather([self.samples[i] for i in mine]) for s in part]
        data = shard_data(self.samples, take(np.arange(self.mine.start, self.mine.stop)), packed, n, self.place,
                          est._bucket_growth)
        return TrainingSet(start, take(pick), n, _loop(est, data, n, rng, None), None, statistics)


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
