"""The data a fit reads: samples in memory (``fit``, ``partial_fit``) or a stream of chunks (``fit_chunks``).

A source validates its samples, hands over their targets for encoding, and
uploads the training part (:class:`TrainingSet`).  The estimator's one fit
path (:meth:`skdiagatt._shared.phased.PhasedEstimator._fit`) does the rest the same
way whatever the source.
"""

import numbers
from dataclasses import dataclass, field

import numpy as np

from .._training import ChunkStream, memory_data, steps_per_epoch, training_data
from .._training.data import spans_buckets
from .._training.devices import placement
from .._training.processes import shard_data
from ..cluster import _dask_reader
from .base import check_sample_weight, drop_zero_weight
from .feature_names import check_feature_names, sample_feature_names
from .ragged import bucket_length, check_ragged, take

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
    data : list, PackedData, ShardData or ChunkStream
        The training samples as :func:`~skdiagatt._training.fit_loop` reads
        them: uploaded buckets or packed blocks, this process's shard, or a
        stream of chunks.
    batch_size : int
        Samples per minibatch (``batch_size="auto"`` resolved for ``n``).
    validation : list, PackedData or None
        The held-out samples of ``early_stopping``, uploaded as ``data``.
    steps_per_epoch : int or None
        Optimizer steps of one epoch of a chunk stream (None in memory: the
        loop counts them itself).
    statistics : dict
        What the estimator's ``_accumulate_chunk`` gathered over a stream.
    weights : ndarray or None
        The weights of ``samples`` (None: all 1).
    weight_total : float or None
        The sum of every training sample's weight, where ``samples`` holds
        only some of them (a stream); None: the sum of ``weights``.
    """

    samples: list
    Y: object
    n: int
    data: object
    batch_size: int
    validation: object = None
    steps_per_epoch: int = None
    statistics: dict = field(default_factory=dict)
    weights: np.ndarray = None
    weight_total: float = None

    @property
    def total_weight(self):
        """How many samples the training set counts as: ``n``, or the sum of the weights."""
        if self.weight_total is not None:
            return self.weight_total
        return self.n if self.weights is None else float(self.weights.sum())


def _batch_size(est, n):
    # Small data sets get smaller batches, hence enough optimizer steps.
    if est.batch_size == "auto":
        return min(256, max(32, n // 16))
    return est.batch_size


def _stream_steps(est, chunk_lengths, batch_size):
    """Optimizer steps of one epoch of a stream of chunks of these sample lengths (None: not a stream)."""
    if chunk_lengths is None:
        return None
    return sum(steps_per_epoch(lengths, batch_size, est._pack, est._bucket_growth) for lengths in chunk_lengths)


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
        # the names to record: the samples' at a first fit, checked against the fitted ones when continuing
        self.feature_names = sample_feature_names(self.X) if n_features is None else check_feature_names(est, self.X)
        self.samples = check_ragged(self.X, n_features=n_features)
        self.n_features = self.samples[0].shape[1]
        self.samples, self.y, self.weights = drop_zero_weight(self.samples, self.y, self.sample_weight)
        self.lengths = np.array([s.shape[0] for s in self.samples])

    def training_set(self, est, Y, rng):
        """Split off the validation samples (``validate`` of :meth:`read`) and upload both parts."""
        samples, n, weights = self.samples, len(self.samples), self.weights
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
            validation = training_data(take(samples, idx_val), take(Y, idx_val), est._pack, est._bucket_growth,
                                       take(weights, idx_val))
        train, Y_train, w_train = take(samples, idx_train), take(Y, idx_train), take(weights, idx_train)
        data, chunk_lengths = memory_data(train, Y_train, est._pack, est._bucket_growth, w_train,
                                          rng if est._chunk_large_data else None)
        batch_size = _batch_size(est, len(train))
        return TrainingSet(train, Y_train, len(train), data, batch_size, validation,
                           _stream_steps(est, chunk_lengths, batch_size), weights=w_train)


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
        limit = est._start_samples
        pick = np.arange(n) if n <= limit else np.sort(np.random.RandomState(0).choice(n, limit, replace=False))
        mine = pick[(pick >= self.mine.start) & (pick < self.mine.stop)] - self.mine.start
        start = [s for part in self.place.gather([self.samples[i] for i in mine]) for s in part]
        data = shard_data(self.samples, take(Y, np.arange(self.mine.start, self.mine.stop)), packed, n, self.place,
                          est._bucket_growth)
        return TrainingSet(start, take(Y, pick), n, data, _batch_size(est, n), statistics=statistics)


def _unpack(k, chunk):
    """``(X_k, y_k, w_k)`` of chunk ``k``, an ``(X, y)`` pair (``w_k`` None) or an ``(X, y, w)`` triple."""
    try:
        parts = tuple(chunk)
    except TypeError:
        parts = ()
    if len(parts) not in (2, 3):
        raise TypeError(f"chunk {k} is not an (X, y) pair or an (X, y, w) triple")
    return parts if len(parts) == 3 else (*parts, None)


class Chunks:
    """``(X_k, y_k)`` or ``(X_k, y_k, w_k)`` chunks read one at a time from ``make()`` (see :func:`chunk_factory`).

    ``w_k`` weighs the samples of the chunk as ``sample_weight`` weighs those
    of :class:`Samples`: samples of weight 0 are left out, every other
    sample's weight enters the loss, the target scale and the row
    statistics.  A chunk without weights weighs its samples 1.
    """

    classes = None
    feature_names = None  # chunks are arrays: a fit from them keeps no column names

    def __init__(self, make):
        self.make = make

    def read(self, est, n_features, *, validate):
        """First pass over the chunks: validate, count rows, gather targets, weights and ``est``'s statistics."""
        if validate:
            raise ValueError(
                "early_stopping is not available with fit_chunks: hold out a validation "
                "set yourself and compare est.score on it"
            )
        self.statistics, self.sizes, self.keep, lengths, parts, weights = {}, [], [], [], [], []
        for k, chunk in enumerate(self.make()):
            Xk, yk, wk = _unpack(k, chunk)
            samples = check_ragged(Xk, n_features=n_features, name=f"chunk {k}: X")
            n_features = samples[0].shape[1]
            if yk is None or len(yk) != len(samples):
                got = "no y" if yk is None else f"{len(yk)} targets"
                raise ValueError(f"chunk {k} has {len(samples)} samples but {got}")
            wk = check_sample_weight(wk, len(samples), name=f"chunk {k}: sample_weight", nonzero=False)
            keep = None if wk is None or np.all(wk > 0) else np.flatnonzero(wk > 0)
            self.sizes.append(len(samples))
            self.keep.append(keep)
            samples, yk, wk = take(samples, keep), take(yk, keep), take(wk, keep)
            lengths.append(np.array([s.shape[0] for s in samples], dtype=np.int64))
            parts.append(yk)
            weights.append(wk)
            if samples:
                est._accumulate_chunk(samples, self.statistics, wk)
        if not self.sizes:
            raise ValueError("chunks is empty: no samples to fit")
        if not any(map(len, lengths)):
            raise ValueError("sample_weight is 0 for every sample: there is nothing to fit")
        self.n_features, self.chunk_lengths = n_features, lengths
        self.lengths = np.concatenate(lengths)
        if all(isinstance(p, (list, tuple)) for p in parts):
            self.y = [v for p in parts for v in p]  # row-level targets stay a list
        else:
            self.y = np.concatenate([np.asarray(p) for p in parts])
        self.weights = None if all(w is None for w in weights) else np.concatenate(
            [np.ones(len(lk)) if w is None else w for lk, w in zip(lengths, weights)])

    def training_set(self, est, Y, rng):
        """A :class:`~skdiagatt._training.ChunkStream` over the chunks, with their encoded targets and weights.

        Chunks are validated again as they are read (the source may change,
        but not its number of samples per chunk).
        """
        make, d, W = self.make, self.n_features, self.weights

        def batches():
            offset = 0
            for k, chunk in enumerate(make()):
                samples = check_ragged(_unpack(k, chunk)[0], n_features=d, name=f"chunk {k}: X")
                if len(samples) != self.sizes[k]:
                    raise ValueError(f"chunk {k} has {len(samples)} samples, {self.sizes[k]} on the first pass")
                samples = take(samples, self.keep[k])
                end = offset + len(samples)
                if samples:  # a chunk of weight 0 only has nothing to train
                    yield samples, Y[offset:end], None if W is None else W[offset:end]
                offset = end

        n = len(self.lengths)
        stream = ChunkStream(batches, pack=est._pack, growth=est._bucket_growth)
        batch_size = _batch_size(est, n)
        per_epoch = _stream_steps(est, self.chunk_lengths, batch_size)
        start = self.statistics.get("start_samples", [])
        return TrainingSet(start, Y[: len(start)], n, stream, batch_size, None, per_epoch, self.statistics,
                           None if W is None else W[: len(start)], None if W is None else float(W.sum()))


def chunk_factory(chunks, y=None, chunk_size=None, sample_weight=None):
    """Normalise the chunk sources that ``fit_chunks`` accepts to a re-callable reader.

    Parameters
    ----------
    chunks : list or tuple of chunks, or a callable, or array-like
        A chunk is an ``(X_k, y_k)`` pair or an ``(X_k, y_k, w_k)`` triple:
        ``X_k`` a list of 2-D arrays or a 3-D array (``np.memmap``
        included), ``y_k`` its targets and ``w_k`` its samples' weights.

        * a list/tuple of chunks;
        * a callable ``chunks()`` returning a fresh iterator of chunks
          (called once per pass over the data, so generators work);
        * a ``dask.bag.Bag`` whose elements are chunks, or a list of
          ``dask.delayed`` chunks: each pass computes them one at a time, in
          order (:func:`skdiagatt.cluster.iter_dask_chunks`);
        * with ``y`` given: the samples ``X`` themselves (a 3-D array or
          memory-mapped array, or a list), read ``chunk_size`` samples at a
          time -- slicing a memmap reads only that slice from disk.
    y : array-like or list, optional
    chunk_size : int, optional
        Samples per chunk when ``y`` is given (default: all).
    sample_weight : array-like of shape (n,), optional
        The samples' weights when ``y`` is given, read with them.

    Returns
    -------
    callable
        ``make()`` -> iterator of ``(X_k, y_k)`` pairs or ``(X_k, y_k, w_k)`` triples.
    """
    if y is not None:
        X = chunks
        n = len(X)
        if len(y) != n:
            raise ValueError(f"y has {len(y)} entries but X has {n} samples")
        w = check_sample_weight(sample_weight, n)
        if chunk_size is not None and (
            not isinstance(chunk_size, numbers.Integral) or isinstance(chunk_size, bool) or chunk_size < 1
        ):
            raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
        size = n if chunk_size is None else int(chunk_size)

        def make():
            for start in range(0, n, size):
                part = slice(start, start + size)
                yield (X[part], y[part]) if w is None else (X[part], y[part], w[part])

        return make
    if chunk_size is not None:
        raise ValueError("chunk_size is used only with fit_chunks(X, y, chunk_size=...)")
    if sample_weight is not None:
        raise ValueError(
            "sample_weight is used only with fit_chunks(X, y, sample_weight=...); chunks carry "
            "their own weights as (X, y, w) triples"
        )

    # Before the callable case: a dask.delayed object is callable too.
    lazy = _dask_reader(chunks)
    if lazy is not None:
        return lazy
    if callable(chunks):
        return chunks
    if isinstance(chunks, (list, tuple)):
        for k, chunk in enumerate(chunks):
            if not (isinstance(chunk, (list, tuple)) and len(chunk) in (2, 3)):
                raise TypeError(f"chunks[{k}] must be an (X, y) pair or an (X, y, w) triple")
        return lambda: iter(chunks)
    raise TypeError(
        "chunks must be a list of (X, y) pairs or (X, y, w) triples, a callable returning an "
        "iterator of them, a Dask bag or list of delayed ones, or the samples X with y=... "
        "(and chunk_size=..., sample_weight=...)"
    )
