"""Inference in prediction groups: a jitted function over many samples in a few fixed shapes.

Samples are cut into *prediction groups* of about ``Layout.predict_rows``
rows, their sizes powers of two, so that new data of a similar size compile
nothing new.
"""

from functools import partial

import jax
import numpy as np

from .._shared.ragged import FINE, make_blocks, make_buckets, unpad
from ..kernels.rows import PackedRows
from .batches import plan_minibatches
from .data import PackedData, epoch_chunks, spans_buckets
from .devices import placement
from .layout import current_layout, pow2_at_least, pow2_at_most
from .processes import ShardData
from .programs import release_programs_near_map_limit
from .step import gather

__all__ = ["map_device_data", "map_samples"]


def map_device_data(fn, data, *args):
    """Apply a jitted ``fn(*args, X, where)`` to the real samples of uploaded data.

    ``data`` is what ``fit_loop`` trains on (from ``training_data``, or a
    ``ChunkStream``, read once more).  Each bucket is cut into groups of one
    fixed power-of-two size; the last group is shifted back to end at the
    bucket's capacity, so every bucket compiles one shape, and the samples
    it repeats are dropped.  Packed data is cut into groups of a power-of-two
    number of samples, packed as in training (``fn`` must accept the packed
    layout).

    A process's shard of a fit across processes (:class:`ShardData`) gives
    the outputs of every process's samples, in the order of the processes.

    Returns
    -------
    out : ndarray
        ``fn``'s outputs for all real samples, concatenated (bucket order).
    y : ndarray
        The targets of the same samples.
    w : ndarray
        Their weights (1 where the data carry none).
    """
    if isinstance(data, ShardData):
        parts = placement().gather(map_device_data(fn, data.local(), *args))
        return tuple(np.concatenate(p) for p in zip(*parts))
    layout = current_layout()
    release_programs_near_map_limit(layout)
    outs, ys, ws = [], [], []
    for chunk in epoch_chunks(data):
        if isinstance(chunk, PackedData):
            rows = chunk.first[-1] * chunk.arrays["X"].shape[1]
            size = pow2_at_most(chunk.n, max(1, layout.predict_rows * chunk.n // max(1, rows)))
            for b in plan_minibatches(chunk, size, None, layout=layout):
                res = _packed_map(fn, args, b.arrays, b.idx)
                outs.append(np.asarray(res)[: np.count_nonzero(b.w)])
            ys.append(np.asarray(chunk.arrays["y"])[: chunk.n])
            ws.append(_weights(chunk.weights, chunk.n))
            continue
        for arrays, m, weights in chunk:
            cap, L = arrays["X"].shape[:2]
            size = min(cap, pow2_at_most(m, max(1, layout.predict_rows // L)))
            for start in range(0, m, size):
                s0 = min(start, cap - size)
                res = fn(*args, arrays["X"][s0 : s0 + size], arrays["where"][s0 : s0 + size])
                keep = slice(start - s0, start - s0 + min(size, m - start))
                outs.append(np.asarray(res)[keep])
            ys.append(np.asarray(arrays["y"])[:m])  # slicing on the device would compile per m
            ws.append(_weights(weights, m))
    return np.concatenate(outs), np.concatenate(ys), np.concatenate(ws)


def _weights(weights, n):
    return np.ones(n, np.float32) if weights is None else weights


@partial(jax.jit, static_argnames=("fn",))
def _packed_map(fn, args, data, idx):
    batch = gather(data, idx)
    return fn(*args, batch["X"], batch["where"])


def _map_buckets(fn, buckets, args, layout):
    """Apply a jitted ``fn(*args, X, where)`` to every bucket in prediction groups of a fixed size.

    Groups hold a power-of-two number of samples (``layout.predict_rows``
    rows at most, ``layout.predict_min_rows`` at least); the last one is
    completed with copies of its first sample, whose results are dropped.

    Returns
    -------
    list (one per bucket) of pytrees of numpy arrays with leading axis m_b
    """
    out = []
    for b in buckets.buckets:
        m, L = b.X.shape[0], b.X.shape[1]
        size = pow2_at_most(max(m, layout.predict_min_rows // L), max(1, layout.predict_rows // L))
        parts = []
        for start in range(0, m, size):
            X, where = b.X[start : start + size], b.where[start : start + size]
            k = X.shape[0]
            if k < size:
                X = np.concatenate([X, np.repeat(X[:1], size - k, axis=0)])
                where = np.concatenate([where, np.repeat(where[:1], size - k, axis=0)])
            res = fn(*args, X, where)  # numpy in: jnp.asarray would compile a program per shape
            parts.append(jax.tree.map(lambda a: np.asarray(a)[:k], res))
        out.append(jax.tree.map(lambda *a: np.concatenate(a), *parts))
    return out


def map_samples(fn, samples, *args, pack=False, rows=False, growth=FINE):
    """Apply a jitted ``fn(*args, X, where)`` to validated samples, in a few fixed shapes.

    If ``pack`` (``fn`` accepts :class:`~skdiagatt.kernels.rows.PackedRows`),
    samples are packed when their lengths span several buckets, when there
    is one sample, or when they fit in one group of the minimal size
    (``Layout.predict_min_rows`` rows in blocks): prediction groups of
    consecutive samples of at most ``Layout.predict_rows`` rows (or one
    longer sample), rows in blocks, each group's block count rounded up to a
    power of two (``Layout.predict_min_rows`` rows at least) and as many
    sample slots.  A data set then compiles one or two shapes, and data sets
    of a similar size share them; every small request (a sample alone, of
    any length up to ``predict_min_rows`` rows) shares the smallest one, and
    a longer sample alone compiles one shape per power of two of its blocks.
    A packed sample's result does not depend on the group it lands in (its
    blocks are reduced in their order, the filler goes to another slot), so
    a sample predicted alone gets the bits it gets in a ragged batch.  In
    buckets (the other case: many samples of one bucket) every bucket
    compiles a shape of its own, and new data mostly new ones, as the
    sample counts of its buckets differ.

    Parameters
    ----------
    fn : callable
        Returns one array: per sample, (B, ...); or per row (``rows``),
        (B, H, L, ...) padded and (K, H, C, ...) packed.
    samples : list of ndarray of shape (p_i, d)
        From :func:`~skdiagatt._shared.ragged.check_ragged`.
    *args
        Passed before ``X`` and ``where``.
    pack, rows : bool
    growth : float
        The bucket grid when not packed (:func:`~skdiagatt._shared.ragged.bucket_length`).

    Returns
    -------
    ndarray of shape (n, ...), or (``rows``) list of n ndarray of shape (H, p_i, ...)
    """
    layout = current_layout()
    release_programs_near_map_limit(layout)
    lengths = [s.shape[0] for s in samples]
    if pack and (len(samples) == 1 or spans_buckets(lengths) or _fits_one_group(lengths, layout)):
        blocks = make_blocks(samples, layout.block_rows)
        return _map_packed(fn, blocks, lengths, args, rows, layout)
    buckets = make_buckets(samples, growth)
    out = _map_buckets(fn, buckets, args, layout)
    if not rows:
        return unpad(buckets, out, rows=False)
    # unpad cuts the last axis: rows there, then back after the heads.
    return [np.moveaxis(r, -1, 1) for r in unpad(buckets, [np.moveaxis(o, 2, -1) for o in out])]


def _fits_one_group(lengths, layout):
    """True if the samples' blocks fill at most one prediction group of the minimal size."""
    C = layout.block_rows
    return sum(-(-p // C) for p in lengths) <= layout.predict_min_rows // C


def _packed_group(blocks, start, cap, layout):
    """The prediction group from sample ``start``: its end, first block, block indices and ``where``.

    As many consecutive samples as fit in ``cap`` blocks, at least one.
    Every sample owns a block, so the group's K slots hold them all; the
    empty blocks that complete it go to the last slot, a filler unless the
    group fills every slot (then there are none).
    """
    first = blocks.first
    empty = blocks.X.shape[0] - 1
    stop = max(start + 1, int(np.searchsorted(first, first[start] + cap, side="right")) - 1)
    b0, b1 = int(first[start]), int(first[stop])
    K = pow2_at_least(max(b1 - b0, layout.predict_min_rows // layout.block_rows))
    idx = np.concatenate([np.arange(b0, b1), np.full(K - (b1 - b0), empty)])
    seg = np.concatenate([np.repeat(np.arange(stop - start), np.diff(first[start : stop + 1])),
                          np.full(K - (b1 - b0), K - 1)])
    return stop, b0, idx, PackedRows(valid=blocks.valid[idx], seg=seg.astype(np.int32), n=K)


def _map_packed(fn, blocks, lengths, args, rows, layout):
    """:func:`map_samples` on packed samples (``blocks`` from :func:`~skdiagatt._shared.ragged.make_blocks`)."""
    first, n = blocks.first, blocks.n_samples
    cap = layout.predict_rows // layout.block_rows
    out = []
    start = 0
    while start < n:
        stop, b0, idx, where = _packed_group(blocks, start, cap, layout)
        res = np.asarray(fn(*args, blocks.X[idx], where))
        if not rows:
            out.append(res[: stop - start])
        else:
            for i in range(start, stop):
                r = np.moveaxis(res[first[i] - b0 : first[i + 1] - b0], 0, 1)  # (H, k, C, ...)
                out.append(r.reshape((r.shape[0], -1) + r.shape[3:])[:, : lengths[i]])
        start = stop
    return out if rows else np.concatenate(out)
