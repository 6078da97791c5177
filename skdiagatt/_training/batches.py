"""Minibatch planning on the host: which samples each step draws, in how many slices.

A minibatch too long to stay in cache is differentiated in *slices*
(interleaved subsets of its samples, one after the other, gradients summed:
:func:`~skdiagatt._training.step.train_step`).  Shapes are rounded so that
a data set compiles few step programs and similar data sets share them.
"""

import heapq
import math
from typing import NamedTuple

import jax
import numpy as np

from .data import PackedData
from .layout import current_layout, round_count

__all__ = ["Minibatch", "plan_minibatches", "bucket_slices", "packed_cuts", "packed_steps", "runs", "stacked", "filled"]


class Minibatch(NamedTuple):
    """One planned optimizer step.

    Attributes
    ----------
    arrays : dict of jax arrays
        The bucket (or the packed data) the samples are gathered from.
    idx : ndarray (B,) or dict
        Sample indices; packed data: a dict of ``idx`` (B,), ``blocks`` (K,)
        and ``seg`` (K,), the slot within its slice of each block's sample.
    w : ndarray (B,)
        Sample weights (:func:`~skdiagatt._training.data.training_data`),
        0 for filler slots.
    n_slices : int
        Slices the step differentiates the minibatch in; slice ``c`` holds
        ``idx[c::n_slices]``.
    """

    arrays: dict
    idx: object
    w: np.ndarray
    n_slices: int


def plan_minibatches(data, batch_size, rng, n_devices=1, layout=None):
    """The minibatches of one epoch of ``data`` (evaluation order without ``rng``).

    In buckets, a bucket's samples, shuffled, are cut into minibatches of
    ``batch_size`` (the last one has fewer), padded with filler (weight 0) to
    ``batch_size``.  A bucket of at most ``batch_size`` samples is one
    minibatch, padded only to its count rounded up to 4 significant bits:
    the bucket's own stored size, so no shape is compiled for it that the
    bucket's data do not already need (padding a large bucket's last
    minibatch to its own rounded size would add one compiled step per bucket
    and data size, and every XLA:CPU program holds memory mappings, of which
    a process has a limited number).  Widths are multiples of the device
    count, so that a minibatch splits evenly.  Packed data:
    :func:`_packed_minibatches`.

    Returns
    -------
    list of Minibatch
    """
    layout = current_layout() if layout is None else layout
    if isinstance(data, PackedData):
        return _packed_minibatches(data, batch_size, rng, n_devices, layout)
    out = []
    for arrays, m, weights in data:
        perm = rng.permutation(m) if rng is not None else np.arange(m)
        perm = perm.astype(np.int32)  # the dtype the device uses: no conversion per step
        n_full = bucket_slices(_batch_width(m, batch_size, 1), arrays["X"].shape[1], layout)
        width = _batch_width(m, batch_size, n_full * n_devices)
        for start in range(0, m, batch_size):
            idx = perm[start : start + batch_size]
            # Fewer slices for a last minibatch too small to put a real sample in each.
            n_real = idx.size
            n_slices = min(n_full, 1 << (n_real.bit_length() - 1))
            idx, w = filled(idx, width)
            if weights is not None:
                w[: n_real] *= weights[idx[: n_real]]
            out.append(Minibatch(arrays, idx, w, n_slices))
    if rng is not None:
        order = rng.permutation(len(out))
        out = [out[k] for k in order]
    return out


def bucket_slices(count, length, layout=None):
    """Slices of a bucketed minibatch of ``count`` samples of ``length`` rows.

    >>> [bucket_slices(256, L) for L in (104, 216, 448)], bucket_slices(3, 20000)
    ([1, 2, 4], 2)
    """
    layout = current_layout() if layout is None else layout
    return _n_slices(count * length, count, layout.slice_rows)


def _n_slices(rows, count, limit):
    """Slices of a minibatch of ``rows`` rows in ``count`` real samples.

    A power of two, so that a slice has at most ``limit`` rows, and at most
    ``count``, so that every slice holds a real sample.
    """
    n = 1
    while rows > n * limit and 2 * n <= count:
        n *= 2
    return n


def _batch_width(m, batch_size, unit):
    """Slots of a minibatch: ``batch_size``, or the rounded count of a data set that small."""
    size = round_count(m) if m <= batch_size else batch_size
    return unit * math.ceil(size / unit)


def filled(idx, width):
    """``idx`` completed with filler (sample 0) to ``width``, and the weights (0 for filler)."""
    w = np.ones(width, dtype=np.float32)
    if idx.size < width:
        w[idx.size :] = 0.0
        idx = np.concatenate([idx, np.zeros(width - idx.size, dtype=idx.dtype)])
    return idx, w


def packed_cuts(counts, batch_size, rng, n_batches=None):
    """The samples of each packed minibatch: consecutive without ``rng``, else stratified by length.

    With ``rng``, an epoch's ``ceil(n / batch_size)`` minibatches are
    stratified by length: the samples, sorted by block count (ties in random
    order), are dealt out in strata of one sample per minibatch, each
    stratum in a random order.  Every sample is drawn once, the minibatch
    sizes differ by at most one, and their block counts are nearly equal
    (every step computes as many blocks as the largest minibatch of a random
    cut would hold).

    ``n_batches`` (a fit across processes: the count of every process) deals
    the samples into that many minibatches instead, some empty when there
    are fewer samples; without ``rng``, cuts them in consecutive runs as even
    as can be.
    """
    n = counts.size
    if rng is None:
        if n_batches is not None:
            return np.array_split(np.arange(n, dtype=np.int32), n_batches)
        return [np.arange(s, min(s + batch_size, n), dtype=np.int32) for s in range(0, n, batch_size)]
    n_batches = math.ceil(n / batch_size) if n_batches is None else n_batches
    by_length = np.lexsort((rng.random_sample(n), counts)).astype(np.int32)
    strata = math.ceil(n / n_batches)
    # Row j of `deal` sends the j-th sample of each stratum to a minibatch.
    deal = np.argsort(rng.random_sample((strata, n_batches)), axis=1).ravel()[:n]
    return [by_length[deal == b] for b in range(n_batches)]


def _packed_minibatches(data, batch_size, rng, n_devices, layout):
    """The minibatches of packed data: at most ``batch_size`` samples of any lengths each.

    A training minibatch of more than ``layout.packed_slice_rows`` rows is
    differentiated in slices: slice ``c`` holds the samples
    ``idx[c::n_slices]`` (:func:`_balanced_slices`) and only their blocks,
    with ``seg`` counting its own slots; the slices' blocks are interleaved,
    block ``k`` of slice ``c`` at ``k * n_slices + c``, so that the step
    takes them apart like the indices.  Filler slots close each slice and
    own no block.

    Each slice's blocks, sample after sample, are padded with the empty
    block to one count per fit, :func:`_block_bound` rounded up to 4
    significant bits: the step has one shape for a data set whatever the
    epoch's cut, and similar data sets (the folds of a search) mostly share
    it.
    """
    n, first = data.n, data.first
    counts = np.diff(first)
    cuts = packed_cuts(counts, batch_size, rng)
    n_slices = 1
    if rng is not None:
        rows = max(int(counts[idx].sum()) for idx in cuts) * data.arrays["X"].shape[1]
        n_slices = _n_slices(rows, min(idx.size for idx in cuts), layout.packed_slice_rows)
    width = _batch_width(n, batch_size, n_devices * n_slices)
    slots = width // n_slices
    slices = [_balanced_slices(idx, counts[idx], n_slices, slots) for idx in cuts]
    largest = max(int(counts[part].sum()) for parts in slices for part in parts)
    K = n_devices * math.ceil(round_count(max(largest, _block_bound(counts, len(cuts) * n_slices)), bits=4) / n_devices)
    return packed_steps(data.arrays, first, slices, slots, K, data.arrays["X"].shape[0] - 1, data.weights)


def _block_bound(counts, n_parts):
    """Blocks that any of ``n_parts`` length-stratified parts of the samples holds, at most.

    Dealt one sample per stratum of the length-sorted samples, a part holds
    at most the mean plus the spread of the lengths, and one sample more for
    the last stratum: a bound that does not depend on the epoch's random
    cut, so that every epoch of a fit (and most folds of a search) runs
    one compiled step.
    """
    return math.ceil(int(counts.sum()) / n_parts) + 2 * int(counts.max())


def packed_steps(arrays, first, slices, slots, K, empty, weights=None):
    """The :class:`Minibatch` of each entry of ``slices``, a list of its slices' samples.

    Each slice has ``slots`` sample slots and ``K`` blocks, completed with
    the block ``empty``; ``first`` holds every sample's first block;
    ``weights`` (n,) the samples' weights (None: 1).
    """
    counts = np.diff(first)
    n_slices = len(slices[0])
    out = []
    for parts in slices:
        blocks = np.full((K, n_slices), empty, dtype=np.int32)
        seg = np.full((K, n_slices), slots - 1, dtype=np.int32)
        idx = np.zeros((slots, n_slices), dtype=np.int32)
        w = np.zeros((slots, n_slices), dtype=np.float32)
        for c, part in enumerate(parts):
            cnt = counts[part]
            total = int(cnt.sum())
            blocks[:total, c] = np.repeat(first[part] - (np.cumsum(cnt) - cnt), cnt) + np.arange(total)
            seg[:total, c] = np.repeat(np.arange(part.size, dtype=np.int32), cnt)
            idx[: part.size, c], w[: part.size, c] = part, 1.0 if weights is None else weights[part]
        index = {"idx": idx.ravel(), "blocks": blocks.ravel(), "seg": seg.ravel()}
        out.append(Minibatch(arrays, index, w.ravel(), n_slices))
    return out


def _balanced_slices(idx, counts, n, slots):
    """The samples ``idx`` split into ``n`` slices of at most ``slots`` with nearly equal block counts.

    Greedy, longest first, each to the slice with the fewest blocks that has
    a free slot: every slice computes as many blocks as the largest, and a
    round-robin deal leaves long-tailed data with one slice much larger than
    the others.

    >>> [p.tolist() for p in _balanced_slices(np.arange(6), np.array([9, 1, 1, 1, 4, 4]), 2, 4)]
    [[0, 2], [4, 5, 1, 3]]
    """
    if n == 1:
        return [idx]
    order = np.argsort(-counts, kind="stable")
    heap = [(0, c) for c in range(n)]
    parts = [[] for _ in range(n)]
    for i, count in zip(idx[order].tolist(), counts[order].tolist()):
        total, c = heapq.heappop(heap)
        parts[c].append(i)
        if len(parts[c]) < slots:
            heapq.heappush(heap, (total + count, c))
    return [np.array(p, dtype=np.int32) for p in parts]


def runs(batches, length):
    """``batches`` cut into runs of at most ``length`` consecutive minibatches that one call can take.

    A run's minibatches share their data arrays and slice count, and so
    their shapes; the order of the steps is kept.
    """
    out, key = [], None
    for batch in batches:
        k = (id(batch.arrays), batch.n_slices)
        if k != key or len(out[-1]) == length:
            out.append([])
            key = k
        out[-1].append(batch)
    return out


def stacked(run, length):
    """Index and weight arrays of a run stacked on a new leading axis, completed to ``length``."""
    run = list(run) + [run[-1]] * (length - len(run))
    idx = jax.tree.map(lambda *a: np.stack(a), *[b.idx for b in run])
    return idx, np.stack([b.w for b in run])
