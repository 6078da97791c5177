"""Training data of a fit across processes: each process's shard on its device, minibatches planned alike.

Inside :func:`~skdiagatt._training.devices.use_processes` every process
uploads its own samples (:func:`shard_data`) as its shard of arrays sharded
over the mesh of :class:`~skdiagatt._training.devices.ProcessPlacement`, and
plans its own minibatches (:func:`shard_minibatches`).  The processes agree on
every shape first (the largest of theirs), so that they run the same compiled
programs, and on the number of steps per epoch: that of one process holding
every sample, ``ceil(n / batch_size)``.  Each process deals its samples into
those steps, so a step's minibatch is every process's share of it.
"""

import math
from dataclasses import dataclass

import numpy as np

from .._shared.ragged import make_blocks, make_buckets
from .batches import Minibatch, filled, packed_cuts, packed_steps
from .data import PackedData, bucket_targets, grown
from .layout import current_layout, round_count

__all__ = ["ShardData", "shard_data", "shard_minibatches"]


@dataclass
class ShardData:
    """This process's training samples in a fit across processes.

    Attributes
    ----------
    arrays : dict of jax arrays
        Sharded over the processes along the first axis; this process's
        shard holds its samples: one bucket's ``X``, ``where`` and ``y``, or
        packed blocks ``X``, ``valid`` and targets ``y``.
    m : int
        Samples of this process.
    n : int
        Samples of all processes.
    first : ndarray of int or None
        Packed: the first block of each of this process's samples.
    """

    arrays: dict
    m: int
    n: int
    first: np.ndarray = None

    def local(self):
        """This process's part as :func:`~skdiagatt._training.data.training_data` gives it (arrays on its device)."""
        arrays = {k: v.addressable_data(0) for k, v in self.arrays.items()}
        if self.first is not None:
            return PackedData(arrays=arrays, first=self.first)
        return [(arrays, self.m, None)]


def shard_data(samples, targets, packed, n, place, growth, layout=None):
    """Upload this process's samples as its shard, array sizes agreed with the other processes.

    Parameters
    ----------
    samples : list of ndarray (p_i, d)
    targets : ndarray (m, ...)
        Their encoded targets.
    packed : bool
        Rows in blocks (:func:`~skdiagatt._shared.ragged.make_blocks`); else the
        samples must fall in one bucket, the same in every process.
    n : int
        Samples of all processes.
    place : ProcessPlacement
    growth : float
        The bucket grid.
    layout : Layout or None

    Returns
    -------
    ShardData
    """
    layout = current_layout() if layout is None else layout
    m = len(samples)
    if packed:
        blocks = make_blocks(samples, layout.block_rows)
        K, cap = place.agree([round_count(blocks.X.shape[0]), round_count(m)])
        arrays = {"X": grown(blocks.X, K), "valid": grown(blocks.valid, K),
                  "y": grown(np.asarray(targets, dtype=np.float32), cap)}
        return ShardData(place.put_rows(arrays), m, n, blocks.first)
    (bucket,) = make_buckets(samples, growth).buckets
    (cap,) = place.agree([round_count(m)])
    arrays = {"X": bucket.X, "where": bucket.where, "y": bucket_targets(targets, bucket)}
    return ShardData(place.put_rows({k: grown(v, cap) for k, v in arrays.items()}), m, n)


def shard_minibatches(data, batch_size, rng, place):
    """The minibatches of one epoch of this process's shard (evaluation order without ``rng``).

    Every process plans ``ceil(n / batch_size)`` minibatches of its own
    samples, shuffled by ``rng``: in one bucket, a permutation cut as evenly
    as can be; packed, stratified by length
    (:func:`~skdiagatt._training.batches.packed_cuts`).  Their widths (and
    block counts) are the largest of any process's, rounded up.  Minibatches
    are not sliced.

    Returns
    -------
    list of Minibatch
    """
    n_batches = math.ceil(data.n / batch_size)
    if data.first is None:
        order = rng.permutation(data.m) if rng is not None else np.arange(data.m)
        cuts = np.array_split(order.astype(np.int32), n_batches)
        (width,) = place.agree([max(c.size for c in cuts)])
        width = round_count(int(width))
        return [Minibatch(data.arrays, *filled(c, width), 1) for c in cuts]
    counts = np.diff(data.first)
    cuts = packed_cuts(counts, batch_size, rng, n_batches)
    slots, blocks = place.agree([max(c.size for c in cuts), max(int(counts[c].sum()) for c in cuts)])
    K = round_count(int(blocks), bits=5)
    empty = data.arrays["X"].shape[0] // place.count - 1  # the shard's last block: padding
    return packed_steps(data.arrays, data.first, [[c] for c in cuts], round_count(int(slots)), K, empty)
