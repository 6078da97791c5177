"""Training data on the device: padded buckets, packed blocks, or a stream of chunks.

Each bucket (or the packed blocks) is copied to the device once per fit and
minibatches are gathered there.  Sample and block counts are rounded
(:func:`~skdiagatt._training.layout.round_count`) so that data sets of
similar sizes share their compiled programs.  Samples in memory too large
for that (:func:`memory_data`) are uploaded one chunk at a time instead,
as data read from disk are.
"""

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import sklearn

from .._shared.ragged import FINE, bucket_length, make_blocks, make_buckets, padded_lengths, take
from .devices import placement
from .layout import current_layout, round_count

__all__ = [
    "ChunkStream",
    "DeviceBucket",
    "chunk_bytes",
    "memory_data",
    "PackedData",
    "device_buckets",
    "device_packed",
    "training_data",
    "spans_buckets",
    "grown",
    "bucket_targets",
    "epoch_chunks",
    "steps_per_epoch",
]


class DeviceBucket(NamedTuple):
    """One bucket on the device (:func:`device_buckets`).

    Attributes
    ----------
    arrays : dict of jax arrays
        ``X``, ``where`` (and ``y``), sample counts rounded up with filler.
    m : int
        The count of real samples (the leading ones; the filler is never drawn).
    weights : ndarray of shape (m,), float32, or None
        The real samples' weights in the loss (None: all 1).
    """

    arrays: dict
    m: int
    weights: np.ndarray = None


def device_buckets(buckets, targets, weights=None):
    """Copy bucketed data to the device once, sample counts rounded up.

    Parameters
    ----------
    buckets : Buckets
        From :func:`skdiagatt._shared.ragged.make_buckets` (best with
        ``rows=round_count``: then no padded copy is made here).
    targets : ndarray of shape (n, ...) or list of n arrays (row-level targets,
        padded here to each bucket's length), or None
    weights : ndarray of shape (n,) or None
        The samples' weights in the loss.

    Returns
    -------
    list of DeviceBucket
        With several training devices the arrays are replicated on all of them.
    """
    place = placement()
    out = []
    for b in buckets.buckets:
        m = b.index.size
        cap = round_count(m)
        data = {"X": b.X, "where": b.where}
        if targets is not None:
            data["y"] = bucket_targets(targets, b)
        padded = {key: grown(arr, cap) if cap > arr.shape[0] else np.ascontiguousarray(arr)
                  for key, arr in data.items()}
        w = None if weights is None else np.asarray(weights, np.float32)[b.index]
        out.append(DeviceBucket(place.put(padded), m, w))
    return out


def bucket_targets(targets, bucket):
    """The targets of a bucket's samples; row-level targets padded to its length."""
    if not isinstance(targets, list):
        return targets[bucket.index]
    t = targets[0].shape[1:]
    y = np.zeros((bucket.index.size, bucket.length) + t, dtype=np.float32)
    for k, i in enumerate(bucket.index):
        y[k, : targets[i].shape[0]] = targets[i]
    return y


@dataclass
class PackedData:
    """Training samples of many lengths on the device, rows in blocks (:func:`device_packed`).

    Attributes
    ----------
    arrays : dict of jax arrays
        ``X`` (K, C, d) and ``valid`` (K, C), the blocks of
        :func:`skdiagatt._shared.ragged.make_blocks` (block counts rounded up with
        empty blocks); ``y`` (n', t), the targets (counts rounded up).
    first : ndarray of int, shape (n + 1,)
        The first block of every sample (on the host: minibatches are planned
        there).
    weights : ndarray of shape (n,), float32, or None
        The samples' weights in the loss (None: all 1).
    """

    arrays: dict
    first: np.ndarray
    weights: np.ndarray = None

    @property
    def n(self):
        return self.first.shape[0] - 1


def device_packed(samples, targets, layout=None, weights=None):
    """Copy samples and their targets to the device once, rows in blocks of ``layout.block_rows``.

    Parameters
    ----------
    samples : list of ndarray (p_i, d)
    targets : ndarray of shape (n, ...)
    layout : Layout or None
        The layout in force if None.
    weights : ndarray of shape (n,) or None
        The samples' weights in the loss.

    Returns
    -------
    PackedData
    """
    layout = current_layout() if layout is None else layout
    blocks = make_blocks(samples, layout.block_rows)
    K, n = blocks.X.shape[0], len(samples)
    arrays = {
        "X": grown(blocks.X, round_count(K)),
        "valid": grown(blocks.valid, round_count(K)),
        "y": grown(np.asarray(targets, dtype=np.float32), round_count(n)),
    }
    w = None if weights is None else np.asarray(weights, np.float32)
    return PackedData(arrays=placement().put(arrays), first=blocks.first, weights=w)


def grown(arr, size):
    """``arr`` completed with zeros to ``size`` entries along its first axis."""
    fill = np.zeros((size - arr.shape[0],) + arr.shape[1:], dtype=arr.dtype)
    return np.ascontiguousarray(np.concatenate([arr, fill]))


def training_data(samples, targets, pack=False, growth=FINE, weights=None):
    """Upload training samples: packed if ``pack`` and their lengths span several buckets.

    Parameters
    ----------
    samples : list of ndarray (p_i, d)
    targets : ndarray (n, ...) or list of n row-level arrays (never packed), or None
    pack : bool
        The loss accepts packed minibatches (:mod:`skdiagatt.kernels.rows`).
    growth : float
        The bucket grid of data left in buckets
        (:func:`~skdiagatt._shared.ragged.bucket_length`).
    weights : ndarray of shape (n,) or None
        The samples' weights in the loss (None: all 1); a minibatch's
        weighted mean loss weighs each sample by it.

    Returns
    -------
    PackedData or list
        What :func:`~skdiagatt._training.fit_loop` takes.  Samples of one
        bucket length stay in their bucket: a padded minibatch of
        equal-length samples has nothing to gain from packing.
    """
    row_level = targets is None or isinstance(targets, list)
    if pack and not row_level and spans_buckets([s.shape[0] for s in samples]):
        return device_packed(samples, targets, weights=weights)
    return device_buckets(make_buckets(samples, growth, rows=round_count), targets, weights)


def spans_buckets(lengths):
    """True if samples of these lengths fall in more than one bucket (then they are packed)."""
    return len({bucket_length(int(p)) for p in np.unique(lengths)}) > 1


class ChunkStream:
    """Training data that arrive one chunk at a time (larger than memory).

    Parameters
    ----------
    make_iter : callable
        ``make_iter()`` returns a fresh iterator of ``(samples, targets,
        weights)`` triples, one per chunk, as :func:`training_data` takes
        them (``weights`` None: all 1); it is called once per epoch, so the
        source is read again every epoch.
    pack, growth
        Passed to :func:`training_data` for every chunk.

    Notes
    -----
    Each chunk is copied to the device once per epoch and dropped before the
    next one is uploaded, so at most one chunk is on the device at a time.
    """

    def __init__(self, make_iter, pack=False, growth=FINE):
        self.make_iter = make_iter
        self.pack = pack
        self.growth = growth

    def __iter__(self):
        for samples, targets, weights in self.make_iter():
            yield training_data(samples, targets, self.pack, self.growth, weights)


def chunk_bytes():
    """The padded bytes of the largest chunk of samples in memory uploaded at once (:func:`memory_data`).

    An eighth of scikit-learn's ``working_memory`` (1024 MiB unless set with
    :func:`sklearn.set_config` or :func:`sklearn.config_context`): uploading
    a chunk holds it up to three times (padded, rounded up, on the device),
    and the next chunk is uploaded while the device still trains on the
    last, so a fit holds at most about six chunks beside the data.
    """
    return int(sklearn.get_config()["working_memory"] * 2**20 / 8)


def whole_upload_bytes():
    """The padded bytes of the largest set of samples in memory uploaded whole (:func:`memory_data`).

    A third of scikit-learn's ``working_memory``: an upload holds the samples
    up to three times (padded, rounded up, on the device).  Beyond it they
    are streamed in chunks of :func:`chunk_bytes`, which costs a pass over
    the host data every epoch.
    """
    return int(sklearn.get_config()["working_memory"] * 2**20 / 3)


def memory_data(samples, targets, pack=False, growth=FINE, weights=None, rng=None):
    """Upload training samples held in memory whole, or as a stream of chunks when they are large.

    Samples whose padded float32 rows exceed :func:`whole_upload_bytes` are
    split once, at random (``rng``), into chunks of about :func:`chunk_bytes`, each
    uploaded once per epoch while the previous one is dropped, as
    :class:`ChunkStream` does for data read from disk: the fit then holds
    the samples once (the caller's arrays) and a few chunks, not padded
    copies of all of them.  An epoch's minibatches are drawn within each
    chunk, every chunk a random part of the samples.

    Parameters
    ----------
    samples, targets, pack, growth, weights
        As for :func:`training_data`.
    rng : numpy RandomState or None
        Draws the chunks (None: the samples are uploaded whole).

    Returns
    -------
    data : list, PackedData or ChunkStream
    chunk_lengths : list of ndarray or None
        The sample lengths of each chunk of a stream (None: uploaded whole).
    """
    lengths = np.array([s.shape[0] for s in samples])
    # The bytes of the samples padded as make_buckets pads them.
    padded = int(padded_lengths(lengths, growth).sum()) * samples[0].shape[1] * samples[0].itemsize
    n_chunks = math.ceil(padded / chunk_bytes())
    if rng is None or padded <= whole_upload_bytes():
        return training_data(samples, targets, pack, growth, weights), None
    parts = [np.sort(part) for part in np.array_split(rng.permutation(len(samples)), n_chunks)]

    def chunks():
        for idx in parts:
            yield take(samples, idx), take(targets, idx), take(weights, idx)

    return ChunkStream(chunks, pack, growth), [lengths[idx] for idx in parts]


def epoch_chunks(data):
    """The chunks of one epoch: in-memory data is a single chunk."""
    if isinstance(data, ChunkStream):
        return iter(data)
    return iter([data])


def steps_per_epoch(lengths, batch_size, pack=False, growth=FINE):
    """Minibatches per epoch for samples of ``lengths`` rows (as ``fit_loop`` forms them).

    Parameters
    ----------
    lengths : array of int
        ``p_i`` of the samples of one chunk (of the whole data set in memory).
    batch_size : int
    pack, growth
        As for :func:`training_data` (with targets of shape (n, ...)).
    """
    if pack and spans_buckets(lengths):
        return math.ceil(len(lengths) / batch_size)
    _, counts = np.unique(padded_lengths(lengths, growth), return_counts=True)
    return sum(math.ceil(int(m) / batch_size) for m in counts)
