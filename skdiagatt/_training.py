"""The one optax training loop shared by every estimator, and chunked inference.

Estimators hand over a loss ``loss_fn(params, frozen, batch, config) -> scalar``
(a module-level function, so jitted steps are cached across fits), the
trainable ``params``, the fixed inputs ``frozen`` and data grouped in padded
buckets.  Each bucket is copied to the device once per fit; minibatches are
gathered on the device.  Array shapes are rounded (bucket lengths by the ragged
layer, sample counts and batch sizes here) so that the number of compiled
shapes stays small and a second fit on similar data compiles nothing new.

Beyond one device: when JAX sees more than one device (several GPUs, or CPU
devices forced with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``),
training is data-parallel over all of them with :mod:`jax.sharding`: the
bucket data and the parameters are replicated, every minibatch is gathered
with its sample axis sharded over the devices, and XLA reduces the loss and
the gradients across them.  The minibatches, the step sizes and the update
are those of one device, so the loss curve is the same up to float rounding
(summation order).  :func:`use_devices` chooses the devices (default: all).

Ragged data: samples whose lengths fall in more than one bucket may be
uploaded *packed* (:func:`training_data`, :class:`PackedData`) for losses
that accept the packed layout of :mod:`skdiagatt.kernels.rows`.  A minibatch
is then ``batch_size`` samples drawn from the whole data set, whatever their
lengths, that compute their own rows; with buckets each minibatch holds
samples of one bucket length, and data with many lengths take one step per
bucket or more.

Beyond memory: ``data`` may also be a :class:`ChunkStream`, which uploads one
chunk of samples at a time; an epoch visits the chunks in order and, within a
chunk, the same minibatches as an in-memory fit of that chunk.
"""

import contextlib
import heapq
import math
import time
import warnings
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from sklearn.exceptions import ConvergenceWarning

from ._ragged import FINE, bucket_length, make_blocks, make_buckets, unpad
from .kernels.rows import PackedRows

__all__ = [
    "TrainResult",
    "ChunkStream",
    "PackedData",
    "device_buckets",
    "device_packed",
    "training_data",
    "fit_loop",
    "map_samples",
    "round_count",
    "use_devices",
    "training_devices",
    "steps_per_epoch",
]

# Clipping keeps one bad minibatch (huge features, tiny temperature) from
# throwing the parameters to a region where the softmax saturates for good.
_CLIP = 10.0
# Flattened: Adam runs as a few ops on one vector instead of a dozen per
# parameter array; the per-op cost of the compiled step dominates small batches.
_TX = optax.flatten(optax.chain(optax.clip_by_global_norm(_CLIP), optax.scale_by_adam()))
# Rows per prediction chunk.  A chunk's arrays then stay under glibc's
# threshold for mapping memory afresh (32 MiB): 2**17 rows (37 MB for the
# rows alone at d = 70) were mapped again at every call and their pages
# faulted in; DiagAtt predicting 10,000 samples of 100 x 70 took 0.56 s with
# 73k minor faults, and 0.38 s with 576 in chunks of 2**14 rows, the same
# predictions bit for bit (one process, 2 cores).
_PREDICT_ROWS = 1 << 14
# Prediction chunks hold at least this many rows (filler included): the small
# buckets of ragged data then share a few chunk sizes instead of compiling one
# per power of two of their sample count.  NTK-Attention predicting three new
# sets of 1,000 ragged samples compiled 33 and 9 times and took 4.7 and 2.0 s
# from the second set on; with the floor 3 and 0 times, 0.5 and 0.09 s.
_PREDICT_MIN_ROWS = 1 << 12
# Share of the process's memory-mapping limit past which compiled programs are
# released (:func:`release_programs_near_map_limit`).
_MAP_FRACTION = 0.5
# Rows per slice of a training minibatch (:func:`_train_step`).  Whole, a
# minibatch of 256 samples of 448 x 70 rows (32 MB, and its intermediates)
# does not stay in the 32 MB cache; sliced its epochs run about twice as fast
# (``docs/performance.md``, section 5).  104 x 70 (26,624 rows) was no faster
# in slices.
_CHUNK_ROWS = 1 << 15
# The same for packed minibatches (:func:`_packed_batches`), whose steps keep
# more per-row intermediates: on ragged data of mean length 78 and 155, a step
# of 21,504 rows ran 13% faster in two slices, one of 40,960 rows 14% faster in
# four than whole (about 10,000 rows a slice; slices of 5,000 were no faster).
# Whole epochs of the same data (``docs/performance.md``, section 5) gained
# 1-4% and 15-19%.
_PACKED_CHUNK_ROWS = 1 << 14
# Rows per block of packed data: a sample pads at most BLOCK_ROWS - 1 rows,
# and a block is the unit of the minibatch gather and of the first stage of
# the per-sample reductions.  On the ragged sets of ``docs/performance.md``
# (section 5) 4 was as fast as 2 on the shortest set and 10% faster on the
# longest; 1 and 8 were slower.
BLOCK_ROWS = 4
# Consecutive minibatches of one bucket that fit runs in one call
# (:func:`_train_steps`): the per-call cost is paid once per run, and the
# stacked index arrays of a run stay small.
_RUN_STEPS = 8


def round_count(m, bits=4):
    """Round a count up to ``bits`` significant bits (4: at most 12.5% more).

    >>> [round_count(m) for m in (1, 5, 17, 100, 9000)]
    [1, 5, 18, 104, 9216]
    >>> round_count(5142), round_count(5142, bits=5)
    (5632, 5376)
    """
    if m <= 1 << bits:
        return m
    unit = 1 << (m.bit_length() - bits)
    return unit * math.ceil(m / unit)


def _pow2_at_least(m):
    return 1 << max(0, (m - 1).bit_length())


def _pow2_at_most(m, cap):
    return min(_pow2_at_least(m), cap)


_DEVICES = None  # None: all of jax.devices()


@contextlib.contextmanager
def use_devices(devices):
    """Train on ``devices`` (a list of JAX devices, or None for all) inside the block.

    >>> import jax
    >>> with use_devices(jax.devices()[:1]):   # doctest: +SKIP
    ...     est.fit(X, y)                        # one device even if there are more
    """
    global _DEVICES
    previous, _DEVICES = _DEVICES, (None if devices is None else list(devices))
    try:
        yield
    finally:
        _DEVICES = previous


def training_devices():
    """The devices training runs on: those of :func:`use_devices`, else all of ``jax.devices()``."""
    return list(_DEVICES) if _DEVICES is not None else jax.devices()


class _Placement:
    """Where training arrays live: one device, or a 1-D mesh for data parallelism."""

    def __init__(self, devices):
        self.devices = devices
        self.n = len(devices)
        if self.n > 1:
            mesh = Mesh(np.array(devices), ("batch",))
            self.replicated = NamedSharding(mesh, PartitionSpec())
            self.batch = NamedSharding(mesh, PartitionSpec("batch"))
            self.steps = NamedSharding(mesh, PartitionSpec(None, "batch"))
        else:
            self.replicated = self.batch = self.steps = None

    def put(self, tree):
        """Upload (replicated over the mesh when there are several devices)."""
        if self.n > 1:
            return jax.device_put(tree, self.replicated)
        return jax.device_put(tree, self.devices[0])

    def put_batch(self, arr, stacked=False):
        """Upload per-sample index or weight arrays, sharded along the samples.

        ``stacked``: the arrays are (steps, samples), the samples on axis 1.
        """
        if self.n > 1:
            return jax.device_put(arr, self.steps if stacked else self.batch)
        return arr


def _placement():
    return _Placement(training_devices())


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
        ``"max_iter"``, ``"tol"`` (no improvement) or ``"non-finite"``.
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


_COMPILES = [0]  # XLA compilations since the mapping count was last read
_CHECK_EVERY = 50


def _count_compilation(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compilation)


def release_programs_near_map_limit():
    """Clear JAX's compiled programs when the process nears its limit of memory mappings.

    Every compiled XLA:CPU program holds about a hundred memory mappings and
    Linux allows a process 65,530 (``vm.max_map_count``).  A grid search over
    ragged data compiles a training step per bucket shape and data size; one
    sentiment study reached the limit after about 600 programs and crashed
    inside LLVM ("Cannot allocate memory").  Called before each fit and
    prediction: past half the limit, ``jax.clear_caches()`` drops every
    compiled program (shapes seen again compile again, which costs seconds,
    not a crash).  Does nothing where ``/proc`` is absent.

    Reading ``/proc/self/maps`` takes milliseconds, so it is read only after
    every ``_CHECK_EVERY`` compilations (counted through
    ``jax.monitoring``).

    Returns
    -------
    bool
        True if the caches were cleared.
    """
    if _COMPILES[0] < _CHECK_EVERY:
        return False
    _COMPILES[0] = 0
    try:
        with open("/proc/self/maps") as f:
            used = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return False
    if used < _MAP_FRACTION * limit:
        return False
    jax.clear_caches()
    return True


def device_buckets(buckets, targets):
    """Copy bucketed data to the device once, sample counts rounded up.

    Parameters
    ----------
    buckets : Buckets
        From :func:`skdiagatt._ragged.make_buckets`.
    targets : ndarray of shape (n, ...) or list of n arrays (row-level targets,
        padded here to each bucket's length), or None

    Returns
    -------
    list of (dict of jax arrays, int)
        Per bucket the arrays ``X``, ``where`` (and ``y``) and the count of
        real samples (the leading rows; the rest is filler never drawn).
        With several training devices (:func:`training_devices`) the arrays
        are replicated on all of them.
    """
    place = _placement()
    out = []
    for b in buckets.buckets:
        m = b.index.size
        cap = round_count(m)
        data = {"X": b.X, "where": b.where}
        if targets is not None:
            if isinstance(targets, list):
                t = targets[0].shape[1:]
                y = np.zeros((m, b.length) + t, dtype=np.float32)
                for k, i in enumerate(b.index):
                    y[k, : targets[i].shape[0]] = targets[i]
            else:
                y = targets[b.index]
            data["y"] = y
        padded = {}
        for key, arr in data.items():
            if cap > m:
                fill = np.zeros((cap - m,) + arr.shape[1:], dtype=arr.dtype)
                arr = np.concatenate([arr, fill])
            padded[key] = np.ascontiguousarray(arr)
        out.append((place.put(padded), m))
    return out


@dataclass
class PackedData:
    """Training samples of many lengths on the device, rows in blocks (:func:`device_packed`).

    Attributes
    ----------
    arrays : dict of jax arrays
        ``X`` (K, C, d) and ``valid`` (K, C), the blocks of
        :func:`skdiagatt._ragged.make_blocks` (block counts rounded up with
        empty blocks); ``y`` (n', t), the targets (counts rounded up).
    first : ndarray of int, shape (n + 1,)
        The first block of every sample (on the host: minibatches are planned
        there).
    """

    arrays: dict
    first: np.ndarray

    @property
    def n(self):
        return self.first.shape[0] - 1


def device_packed(samples, targets):
    """Copy samples and their targets to the device once, rows in blocks of ``BLOCK_ROWS``.

    Parameters
    ----------
    samples : list of ndarray (p_i, d)
    targets : ndarray of shape (n, ...)

    Returns
    -------
    PackedData
    """
    blocks = make_blocks(samples, BLOCK_ROWS)
    K, n = blocks.X.shape[0], len(samples)

    def grown(arr, size):
        fill = np.zeros((size - arr.shape[0],) + arr.shape[1:], dtype=arr.dtype)
        return np.ascontiguousarray(np.concatenate([arr, fill]))

    arrays = {
        "X": grown(blocks.X, round_count(K)),
        "valid": grown(blocks.valid, round_count(K)),
        "y": grown(np.asarray(targets, dtype=np.float32), round_count(n)),
    }
    return PackedData(arrays=_placement().put(arrays), first=blocks.first)


def training_data(samples, targets, pack=False, growth=FINE):
    """Upload training samples: packed if ``pack`` and their lengths span several buckets.

    Parameters
    ----------
    samples : list of ndarray (p_i, d)
    targets : ndarray (n, ...) or list of n row-level arrays (never packed), or None
    pack : bool
        The loss accepts packed minibatches (:mod:`skdiagatt.kernels.rows`).
    growth : float
        The bucket grid of data left in buckets
        (:func:`~skdiagatt._ragged.bucket_length`).

    Returns
    -------
    PackedData or list
        What :func:`fit_loop` takes.  Samples of one bucket length stay in
        their bucket: a padded minibatch of equal-length samples has nothing
        to gain from packing.
    """
    row_level = targets is None or isinstance(targets, list)
    if pack and not row_level and _spans_buckets([s.shape[0] for s in samples]):
        return device_packed(samples, targets)
    return device_buckets(make_buckets(samples, growth), targets)


def _spans_buckets(lengths):
    """True if samples of these lengths fall in more than one bucket (then they are packed)."""
    return len({bucket_length(int(p)) for p in np.unique(lengths)}) > 1


class ChunkStream:
    """Training data that arrive one chunk at a time (larger than memory).

    Parameters
    ----------
    make_iter : callable
        ``make_iter()`` returns a fresh iterator of ``(samples, targets)``
        pairs, one per chunk, as :func:`training_data` takes them; it is
        called once per epoch, so the source is read again every epoch.
    n_chunks : int
        For progress lines only.
    pack, growth
        Passed to :func:`training_data` for every chunk.

    Notes
    -----
    Each chunk is copied to the device once per epoch and dropped before the
    next one is uploaded, so at most one chunk is on the device at a time.
    """

    def __init__(self, make_iter, n_chunks=None, pack=False, growth=FINE):
        self.make_iter = make_iter
        self.n_chunks = n_chunks
        self.pack = pack
        self.growth = growth

    def __iter__(self):
        for samples, targets in self.make_iter():
            yield training_data(samples, targets, self.pack, self.growth)


def _gather(data, idx):
    """The samples ``idx`` (B,) of every bucket array, each gathered as whole rows of a 2-D view.

    Taking ``(L * d)``-long rows of ``X`` instead of ``(L, d)`` blocks gives
    XLA a gather with one contiguous slice per sample; on CPU that cut a
    step on samples of 24 rows by about 4% (the same values).

    Packed data (``idx`` a dict, see :func:`_packed_batches`): the blocks
    ``idx["blocks"]`` (K,) of the samples ``idx["idx"]`` (B,), with their
    :class:`~skdiagatt.kernels.rows.PackedRows` as ``where``.
    """
    if isinstance(idx, dict):
        X, blocks = data["X"], idx["blocks"]
        return {
            "X": X.reshape(X.shape[0], -1)[blocks].reshape(blocks.shape + X.shape[1:]),
            "where": PackedRows(valid=data["valid"][blocks], seg=idx["seg"], n=idx["idx"].shape[0]),
            "y": data["y"][idx["idx"]],
        }
    out = {}
    for key, v in data.items():
        flat = v.reshape(v.shape[0], -1)[idx] if v.ndim > 2 else v[idx]
        out[key] = flat.reshape(idx.shape + v.shape[1:])
    return out


_init_opt_state = jax.jit(_TX.init)  # one dispatch instead of an eager op per leaf


def _train_step(params, opt_state, frozen, data, idx, w, lr, loss_fn, config, n_chunks=1):
    """One Adam step on the minibatch ``idx`` (B,) of the bucket ``data``, weights ``w`` (B,).

    Traced, not jitted by itself: :func:`_train_steps` runs it.

    With ``n_chunks > 1`` the minibatch is differentiated in ``n_chunks``
    interleaved slices ``idx[c::n_chunks]`` one after the other (a
    ``lax.scan``) and their gradients summed, each with its share of the
    weight: the gradient of the whole minibatch's weighted mean up to float
    rounding, with a working set that stays in cache (see ``_CHUNK_ROWS``).
    Every slice must hold a sample of non-zero weight (:func:`_batches`).
    """

    def value_and_grad(i, wc):
        batch = _gather(data, i)
        batch["w"] = wc
        return jax.value_and_grad(loss_fn)(params, frozen, batch, config)

    if n_chunks == 1:
        loss, grads = value_and_grad(idx, w)
    else:
        # Interleaved slices: with several devices each one is split over all of them.
        idx_c, w_c = jax.tree.map(lambda a: a.reshape(-1, n_chunks).T, (idx, w))
        zeros = jax.tree.map(jnp.zeros_like, (jnp.zeros((), jnp.float32), params))

        def add_chunk(acc, chunk):
            i, wc = chunk
            share = jnp.sum(wc) / jnp.sum(w)
            value = value_and_grad(i, wc)
            return jax.tree.map(lambda a, v: a + share.astype(v.dtype) * v, acc, value), None

        (loss, grads), _ = jax.lax.scan(add_chunk, zeros, (idx_c, w_c))
    updates, opt_state = _TX.update(grads, opt_state, params)
    params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
    return params, opt_state, loss


@partial(jax.jit, static_argnames=("loss_fn", "config", "n_chunks"), donate_argnums=(0, 1))
def _train_steps(params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config, n_chunks=1):
    """The first ``count`` of ``G`` stacked minibatches of one bucket, one Adam step each, in one call.

    Parameters
    ----------
    params, opt_state, frozen : pytrees
    data : dict of arrays
        The bucket (or the packed data) every minibatch is drawn from.
    idx, w : pytrees of arrays with leading axis G
        Minibatch ``s`` is ``idx[s]``, ``w[s]`` (as :func:`_train_step` takes
        them); those from ``count`` on are never read (any valid indices).
    lr : array, shape (G,)
        Step sizes.
    count : int32 scalar
        Steps to run (dynamic: one program for every ``count <= G``).

    Returns
    -------
    params, opt_state
    losses : array, shape (G,)
        The loss of each step (0 past ``count``).

    Notes
    -----
    One call for a run of steps instead of one per step.  On 2 CPU cores, an
    epoch of 8 packed steps (the ragged sets of ``docs/performance.md``,
    section 5, interleaved A/B of whole epochs) took 10% less time at a
    mean length of 19 rows, 8% less at 38 and 6% less at 155, with the same
    parameters bit for bit.  The count is an argument, not a shape, so that
    runs of any length share the program and no single-step program is
    compiled besides it.
    """

    def body(s, carry):
        p, o, losses = carry
        p, o, loss = _train_step(
            p, o, frozen, data, jax.tree.map(lambda a: a[s], idx), w[s], lr[s], loss_fn, config, n_chunks
        )
        return p, o, losses.at[s].set(loss)

    return jax.lax.fori_loop(0, count, body, (params, opt_state, jnp.zeros(lr.shape, jnp.float32)))


def _runs(batches, length):
    """``batches`` cut into runs of at most ``length`` consecutive minibatches that one call can take.

    A run's minibatches share their data arrays and slice count, and so
    their shapes (:func:`_batches` gives the minibatches of a bucket, or of
    an epoch of packed data, one width); the order of the steps is kept.
    """
    runs, key = [], None
    for batch in batches:
        arrays, _, _, n_chunks = batch
        k = (id(arrays), n_chunks)
        if k != key or len(runs[-1]) == length:
            runs.append([])
            key = k
        runs[-1].append(batch)
    return runs


def _step_size(learning_rate, schedule, step, total_steps):
    """The step size of step ``step`` (from 0) of ``total_steps``: constant, or cosine-decayed to 0."""
    if schedule == "constant":
        return learning_rate
    return 0.5 * learning_rate * (1.0 + math.cos(math.pi * step / total_steps))


def _stacked(run, length):
    """Index and weight arrays of a run stacked on a new leading axis, completed to ``length``."""
    run = run + [run[-1]] * (length - len(run))
    idx = jax.tree.map(lambda *a: np.stack(a), *[b[1] for b in run])
    return idx, np.stack([b[2] for b in run])


@partial(jax.jit, static_argnames=("loss_fn", "config"))
def _eval_step(params, frozen, data, idx, w, loss_fn, config):
    batch = _gather(data, idx)
    batch["w"] = w
    return loss_fn(params, frozen, batch, config) * jnp.sum(w)


def _n_chunks(count, length):
    """Slices of a minibatch of ``count`` samples of ``length`` rows (:func:`_train_step`).

    >>> [_n_chunks(256, L) for L in (104, 216, 448)], _n_chunks(3, 20000)
    ([1, 2, 4], 2)
    """
    return _n_slices(count * length, count, _CHUNK_ROWS)


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


def _filled(idx, width):
    """``idx`` completed with filler (sample 0) to ``width``, and the weights (0 for filler)."""
    w = np.ones(width, dtype=np.float32)
    if idx.size < width:
        w[idx.size :] = 0.0
        idx = np.concatenate([idx, np.zeros(width - idx.size, dtype=idx.dtype)])
    return idx, w


def _packed_batches(data, batch_size, rng, n_devices=1):
    """The minibatches of packed data: at most ``batch_size`` samples of any lengths each.

    With ``rng`` (training), an epoch's ``ceil(n / batch_size)`` minibatches
    are stratified by length: the samples, sorted by block count (ties in
    random order), are dealt out in strata of one sample per minibatch, each
    stratum in a random order.  Every sample is drawn once, every minibatch
    holds samples from across the length distribution, the minibatch sizes
    differ by at most one, and their block counts are nearly equal.  (Cut
    from one random permutation, the largest of 8 minibatches of 256
    long-tailed samples held about 10% more blocks than the average, and
    every step computes as many.)  Without ``rng`` (evaluation), consecutive
    samples, each minibatch whole.

    A training minibatch of more than ``_PACKED_CHUNK_ROWS`` rows is
    differentiated in slices, as in :func:`_train_step`: slice ``c`` holds the samples
    ``idx[c::n_chunks]`` (:func:`_balanced_slices`) and only their blocks,
    with ``seg`` counting its own slots; the slices' blocks are interleaved,
    block ``k`` of slice ``c`` at ``k * n_chunks + c``, so that the step
    takes them apart like the indices.  Filler slots close each slice.

    Each slice's blocks, sample after sample, are padded with the empty
    block to one count per epoch, the largest slice's rounded up to 5
    significant bits (:func:`round_count`, at most 6.25% more): the step has
    one shape for a data set, and similar data sets (the folds of a grid
    search) mostly share it.
    Filler slots (weight 0) own no block.

    Returns
    -------
    list of (arrays, dict, ndarray, int)
        As :func:`_batches`; the dict holds ``idx`` (B,), ``blocks`` (K,)
        and ``seg`` (K,), the slot within its slice of each block's sample.
    """
    n, first = data.n, data.first
    counts = np.diff(first)
    empty = data.arrays["X"].shape[0] - 1
    if rng is None:
        cuts = [np.arange(s, min(s + batch_size, n), dtype=np.int32) for s in range(0, n, batch_size)]
        n_chunks = 1
    else:
        n_batches = math.ceil(n / batch_size)
        by_length = np.lexsort((rng.random_sample(n), counts)).astype(np.int32)
        strata = math.ceil(n / n_batches)
        # Row j of `deal` sends the j-th sample of each stratum to a minibatch.
        deal = np.argsort(rng.random_sample((strata, n_batches)), axis=1).ravel()[:n]
        cuts = [by_length[deal == b] for b in range(n_batches)]
        rows = max(int(counts[idx].sum()) for idx in cuts) * data.arrays["X"].shape[1]
        n_chunks = _n_slices(rows, min(idx.size for idx in cuts), _PACKED_CHUNK_ROWS)
    width = _batch_width(n, batch_size, n_devices * n_chunks)
    slots = width // n_chunks
    slices = [_balanced_slices(idx, counts[idx], n_chunks, slots) for idx in cuts]
    largest = max(int(counts[part].sum()) for parts in slices for part in parts)
    K = n_devices * math.ceil(round_count(largest, bits=5) / n_devices)
    out = []
    for parts in slices:
        blocks = np.full((K, n_chunks), empty, dtype=np.int32)
        seg = np.full((K, n_chunks), slots - 1, dtype=np.int32)
        idx = np.zeros((slots, n_chunks), dtype=np.int32)
        w = np.zeros((slots, n_chunks), dtype=np.float32)
        for c, part in enumerate(parts):
            cnt = counts[part]
            total = int(cnt.sum())
            blocks[:total, c] = np.repeat(first[part] - (np.cumsum(cnt) - cnt), cnt) + np.arange(total)
            seg[:total, c] = np.repeat(np.arange(part.size, dtype=np.int32), cnt)
            idx[: part.size, c], w[: part.size, c] = part, 1.0
        out.append((data.arrays, {"idx": idx.ravel(), "blocks": blocks.ravel(), "seg": seg.ravel()},
                    w.ravel(), n_chunks))
    return out


def _balanced_slices(idx, counts, n, slots):
    """The samples ``idx`` split into ``n`` slices of at most ``slots`` with nearly equal block counts.

    Greedy, longest first, each to the slice with the fewest blocks that has
    a free slot.  Dealt out round-robin instead, the minibatches of a
    long-tailed data set (mean length 300, 4 slices) had one slice with 30%
    more blocks than the average, and every slice computes as many as the
    largest.

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


def _batches(data, batch_size, rng, n_devices=1):
    """Index and weight arrays of the minibatches of every bucket.

    A bucket's samples, shuffled, are cut into minibatches of ``batch_size``
    (the last one has fewer), padded with filler (weight 0) to ``batch_size``.
    A bucket of at most ``batch_size`` samples is one minibatch, padded only
    to its count rounded up to 4 significant bits (:func:`round_count`): the
    bucket's own stored size, so no shape is compiled for it that the
    bucket's data do not already need.  (Padding a large bucket's last
    minibatch to its own rounded size instead would add one compiled step per
    bucket and data size; a grid search over ragged data then compiles
    hundreds of programs, and every XLA program keeps about a hundred
    memory mappings, against a limit of 65,530 per process.)  Widths are
    multiples of the device count, so that a minibatch splits evenly.

    Returns
    -------
    list of (arrays, idx, w, n_chunks)
        The bucket's device arrays, the indices (B,) and weights (B,) of a
        minibatch, and its slices (:func:`_train_step`).  Packed data:
        :func:`_packed_batches`.
    """
    if isinstance(data, PackedData):
        return _packed_batches(data, batch_size, rng, n_devices)
    out = []
    for arrays, m in data:
        perm = rng.permutation(m) if rng is not None else np.arange(m)
        perm = perm.astype(np.int32)  # the dtype the device uses: no conversion per step
        n_full = _n_chunks(_batch_width(m, batch_size, 1), arrays["X"].shape[1])
        width = _batch_width(m, batch_size, n_full * n_devices)
        for start in range(0, m, batch_size):
            idx = perm[start : start + batch_size]
            # Fewer slices for a last minibatch too small to put a real sample in each.
            n_chunks = min(n_full, 1 << (idx.size.bit_length() - 1))
            idx, w = _filled(idx, width)
            out.append((arrays, idx, w, n_chunks))
    if rng is not None:
        order = rng.permutation(len(out))
        out = [out[k] for k in order]
    return out


def _mean_loss(params, frozen, data, loss_fn, config, batch_size, place):
    total, count = 0.0, 0.0
    for arrays, idx, w, _ in _batches(data, batch_size, None, place.n):
        total += float(
            _eval_step(
                params, frozen, arrays, place.put_batch(idx), place.put_batch(w),
                loss_fn, config,
            )
        )
        count += float(w.sum())
    return total / count


def _chunks(data):
    """The chunks of one epoch: in-memory data is a single chunk."""
    if isinstance(data, ChunkStream):
        return iter(data)
    return iter([data])


def steps_per_epoch(lengths, batch_size, pack=False, growth=FINE):
    """Minibatches per epoch for samples of ``lengths`` rows (as :func:`fit_loop` forms them).

    Parameters
    ----------
    lengths : array of int
        ``p_i`` of the samples of one chunk (of the whole data set in memory).
    batch_size : int
    pack, growth
        As for :func:`training_data` (with targets of shape (n, ...)).
    """
    if pack and _spans_buckets(lengths):
        return math.ceil(len(lengths) / batch_size)
    counts = {}
    for p in np.asarray(lengths):
        L = bucket_length(int(p), growth)
        counts[L] = counts.get(L, 0) + 1
    return sum(math.ceil(m / batch_size) for m in counts.values())


def _steps_per_epoch(data, batch_size):
    if isinstance(data, ChunkStream):
        raise TypeError("pass total_steps with a ChunkStream")
    return len(_batches(data, batch_size, None))


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
    label="fit",
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
        sample weights (0 for filler).  Must be a module-level function.
    config : hashable
        Static settings passed to ``loss_fn``.
    params, frozen : dict of arrays
        Trained and fixed inputs.
    data : list or ChunkStream
        From :func:`device_buckets`, or a :class:`ChunkStream` of chunks
        uploaded one at a time (then ``total_steps`` is required).
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
        Print one line per epoch when > 0.
    label : str
        Prefix of the progress lines.
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
    release_programs_near_map_limit()
    place = _placement()
    params = place.put(jax.tree.map(jnp.asarray, params))
    frozen = place.put(jax.tree.map(jnp.asarray, frozen))
    opt_state = place.put(_init_opt_state(params) if opt_state is None else opt_state)
    if total_steps is None:
        total_steps = max_iter * _steps_per_epoch(data, batch_size)
    total_steps = max(1, total_steps)
    result = TrainResult()
    best, best_params, stale = np.inf, None, 0
    # Host copies: the step donates (and so frees) the device buffers.
    last_good = jax.tree.map(np.array, params)
    last_state = jax.tree.map(np.array, opt_state)
    step = 0
    start = time.perf_counter()
    planned, drawn_from = None, None
    for epoch in range(max_iter):
        losses, weights = [], []
        for chunk in _chunks(data):
            batches = planned or _batches(chunk, batch_size, random_state, place.n)
            planned = None
            for run in _runs(batches, _RUN_STEPS):
                lr = np.zeros(_RUN_STEPS, dtype=np.float32)
                for k in range(len(run)):
                    lr[k] = _step_size(learning_rate, schedule, step + k, total_steps)
                idx, w = _stacked(run, _RUN_STEPS)
                arrays, _, _, n_chunks = run[0]
                params, opt_state, loss = _train_steps(
                    params, opt_state, frozen, arrays, place.put_batch(idx, True), place.put_batch(w, True),
                    lr, np.int32(len(run)), loss_fn, config, n_chunks,
                )
                losses.append((loss, len(run)))
                weights.extend(b[2].sum() for b in run)
                step += len(run)
        if epoch + 1 < max_iter and not isinstance(data, ChunkStream):
            # Plan the next epoch while the device runs this one: planned after
            # the wait below, it left the device idle (short ragged epochs of 8
            # steps took 2.5 ms longer, 15.6 instead of 13.0 ms).  A fit that
            # stops early gives the draw back (below).
            drawn_from = random_state.get_state()
            planned = _batches(data, batch_size, random_state, place.n)
        # device_get, not jnp.stack: stacking compiles one program per number
        # of steps (24 ms here), i.e. per data size of a grid search.
        per_step = np.concatenate([vals[:k] for vals, k in jax.device_get(losses)])
        epoch_loss = float(np.dot(per_step, weights) / np.sum(weights))
        if not np.isfinite(epoch_loss):
            warnings.warn(
                f"{label}: the objective became non-finite at epoch {epoch + 1}; "
                "training stopped and the last finite parameters were kept. "
                "Try a smaller learning_rate or a larger temperature.",
                ConvergenceWarning,
                stacklevel=3,
            )
            result.stopped = "non-finite"
            params, opt_state = last_good, last_state
            break
        last_good = jax.tree.map(np.array, params)
        last_state = jax.tree.map(np.array, opt_state)
        result.loss_curve.append(epoch_loss)
        result.n_iter = epoch + 1
        monitored = epoch_loss
        if validation is not None:
            monitored = _mean_loss(params, frozen, validation, loss_fn, config, batch_size, place)
            result.validation_curve.append(monitored)
        if verbose:
            val = f", validation {monitored:.5f}" if validation is not None else ""
            print(
                f"[{label}] epoch {epoch + 1}/{max_iter}: loss {epoch_loss:.5f}{val}, "
                f"{time.perf_counter() - start:.1f}s",
                flush=True,
            )
        if monitored < best - tol:
            best, stale = monitored, 0
            if validation is not None:
                best_params = last_good
        else:
            stale += 1
        if stale >= n_iter_no_change:
            result.stopped = "tol"
            break
    if planned is not None:
        random_state.set_state(drawn_from)  # as if the unused epoch was never drawn
    if validation is not None and best_params is not None:
        params = best_params
    result.opt_state = last_state
    result.steps = step
    return jax.tree.map(np.asarray, params), result


def map_device_data(fn, data, *args):
    """Apply a jitted ``fn(*args, X, where)`` to the real samples of uploaded data.

    ``data`` is what :func:`fit_loop` trains on (from :func:`training_data`,
    or a :class:`ChunkStream`, read once more).  Each bucket is cut into slices
    of one fixed power-of-two size (about ``2**14`` rows); the last slice is
    shifted back to end at the bucket's capacity, so every bucket compiles one
    shape, and the samples it repeats are dropped.  Packed data is cut into
    groups of a power-of-two number of samples, packed as in training (``fn``
    must accept the packed layout).

    Returns
    -------
    out : ndarray
        ``fn``'s outputs for all real samples, concatenated (bucket order).
    y : ndarray
        The targets of the same samples.
    """
    release_programs_near_map_limit()
    outs, ys = [], []
    for chunk in _chunks(data):
        if isinstance(chunk, PackedData):
            rows = chunk.first[-1] * chunk.arrays["X"].shape[1]
            size = _pow2_at_most(chunk.n, max(1, _PREDICT_ROWS * chunk.n // max(1, rows)))
            for arrays, idx, w, _ in _packed_batches(chunk, size, None):
                res = _packed_map(fn, args, arrays, idx)
                outs.append(np.asarray(res)[: int(w.sum())])
            ys.append(np.asarray(chunk.arrays["y"])[: chunk.n])
            continue
        for arrays, m in chunk:
            cap, L = arrays["X"].shape[:2]
            size = min(cap, _pow2_at_most(m, max(1, _PREDICT_ROWS // L)))
            for start in range(0, m, size):
                s0 = min(start, cap - size)
                res = fn(*args, arrays["X"][s0 : s0 + size], arrays["where"][s0 : s0 + size])
                keep = slice(start - s0, start - s0 + min(size, m - start))
                outs.append(np.asarray(res)[keep])
            ys.append(np.asarray(arrays["y"])[:m])  # slicing on the device would compile per m
    return np.concatenate(outs), np.concatenate(ys)


@partial(jax.jit, static_argnames=("fn",))
def _packed_map(fn, args, data, idx):
    batch = _gather(data, idx)
    return fn(*args, batch["X"], batch["where"])


def _map_buckets(fn, buckets, *args):
    """Apply a jitted ``fn(*args, X, where)`` to every bucket in fixed-size chunks.

    Chunks hold a power-of-two number of samples (about ``2**14`` rows at
    most, ``2**12`` at least); the last one is completed with copies of its
    first sample, whose results are dropped.

    Returns
    -------
    list (one per bucket) of pytrees of numpy arrays with leading axis m_b
    """
    release_programs_near_map_limit()
    out = []
    for b in buckets.buckets:
        m, L = b.X.shape[0], b.X.shape[1]
        size = _pow2_at_most(max(m, _PREDICT_MIN_ROWS // L), max(1, _PREDICT_ROWS // L))
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

    Samples whose lengths span several buckets are packed if ``pack`` (``fn``
    accepts :class:`~skdiagatt.kernels.rows.PackedRows`): groups of
    consecutive samples of at most ``2**14`` rows (or one longer sample),
    rows in blocks of ``BLOCK_ROWS``, each group's block count rounded up to
    a power of two (``2**12`` rows at least) and as many sample slots.  A
    data set then compiles one or two shapes, and data sets of a similar
    size share them; in buckets (:func:`_map_buckets`, the other case) every
    bucket compiles a shape of its own, and new data mostly new ones, as
    the sample counts of its buckets differ.

    Parameters
    ----------
    fn : callable
        Returns one array: per sample, (B, ...); or per row (``rows``),
        (B, H, L, ...) padded and (K, H, C, ...) packed.
    samples : list of ndarray of shape (p_i, d)
        From :func:`~skdiagatt._ragged.check_ragged`.
    *args
        Passed before ``X`` and ``where``.
    pack, rows : bool
    growth : float
        The bucket grid when not packed (:func:`~skdiagatt._ragged.bucket_length`).

    Returns
    -------
    ndarray of shape (n, ...), or (``rows``) list of n ndarray of shape (H, p_i, ...)
    """
    lengths = [s.shape[0] for s in samples]
    if pack and _spans_buckets(lengths):
        return _map_packed(fn, make_blocks(samples, BLOCK_ROWS), lengths, args, rows)
    buckets = make_buckets(samples, growth)
    out = _map_buckets(fn, buckets, *args)
    if not rows:
        return unpad(buckets, out, rows=False)
    # unpad cuts the last axis: rows there, then back after the heads.
    return [np.moveaxis(r, -1, 1) for r in unpad(buckets, [np.moveaxis(o, 2, -1) for o in out])]


def _map_packed(fn, blocks, lengths, args, rows):
    """:func:`map_samples` on packed samples (``blocks`` from :func:`~skdiagatt._ragged.make_blocks`)."""
    release_programs_near_map_limit()
    first, n = blocks.first, blocks.n_samples
    cap = _PREDICT_ROWS // BLOCK_ROWS
    empty = blocks.X.shape[0] - 1
    out = []
    start = 0
    while start < n:
        # As many consecutive samples as fit in `cap` blocks, at least one.
        stop = max(start + 1, int(np.searchsorted(first, first[start] + cap, side="right")) - 1)
        b0, b1 = int(first[start]), int(first[stop])
        K = _pow2_at_least(max(b1 - b0, _PREDICT_MIN_ROWS // BLOCK_ROWS))
        # Every sample owns a block, so K slots hold them all; the empty
        # blocks that complete the group go to the last slot, a filler
        # unless the group fills every slot (then there are none).
        idx = np.concatenate([np.arange(b0, b1), np.full(K - (b1 - b0), empty)])
        seg = np.concatenate([np.repeat(np.arange(stop - start), np.diff(first[start : stop + 1])),
                              np.full(K - (b1 - b0), K - 1)])
        where = PackedRows(valid=blocks.valid[idx], seg=seg.astype(np.int32), n=K)
        res = np.asarray(fn(*args, blocks.X[idx], where))
        if not rows:
            out.append(res[: stop - start])
        else:
            for i in range(start, stop):
                r = np.moveaxis(res[first[i] - b0 : first[i + 1] - b0], 0, 1)  # (H, k, C, ...)
                out.append(r.reshape((r.shape[0], -1) + r.shape[3:])[:, : lengths[i]])
        start = stop
    return out if rows else np.concatenate(out)
