"""Where training arrays live: the chosen devices, one device or a data-parallel mesh, or a mesh across processes."""

import contextlib
import pickle

import jax
import numpy as np
from jax.experimental.multihost_utils import process_allgather
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import step as _step

__all__ = [
    "use_devices", "training_devices", "use_processes", "processes_active", "Placement", "ProcessPlacement",
    "placement",
]

_DEVICES = [None]  # None: all of jax.devices()
_PROCESSES = [False]


@contextlib.contextmanager
def use_devices(devices):
    """Train on ``devices`` (a list of JAX devices, or None for all) inside the block.

    >>> import jax
    >>> with use_devices(jax.devices()[:1]):   # doctest: +SKIP
    ...     est.fit(X, y)                        # one device even if there are more
    """
    previous, _DEVICES[0] = _DEVICES[0], (None if devices is None else list(devices))
    try:
        yield
    finally:
        _DEVICES[0] = previous


@contextlib.contextmanager
def use_processes():
    """Inside the block, ``fit`` trains data-parallel with the other processes of ``jax.distributed``.

    Every process calls ``fit`` with its own shard of the samples; the
    target standardization, row statistics and start are those of all
    processes' samples together, every step's gradient is the mean over
    every process's minibatch, and every process ends with the same model
    (:class:`ProcessPlacement`).  With a single process it is an ordinary fit
    by the same path.
    """
    previous, _PROCESSES[0] = _PROCESSES[0], True
    try:
        yield
    finally:
        _PROCESSES[0] = previous


def processes_active():
    """True inside :func:`use_processes`."""
    return _PROCESSES[0]


def training_devices():
    """The devices training runs on: those of :func:`use_devices`, else all of ``jax.devices()``."""
    return list(_DEVICES[0]) if _DEVICES[0] is not None else jax.devices()


class Placement:
    """Where training arrays live: one device, or a 1-D mesh for data parallelism.

    With several devices the data and the parameters are replicated and
    every minibatch's sample axis is sharded over the mesh; XLA then reduces
    the loss and the gradients across the devices.
    """

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

    @staticmethod
    def host(tree):
        """Host copies of arrays on the devices (all copies started before the first is awaited)."""
        return jax.tree.map(np.array, jax.device_get(tree))

    @staticmethod
    def total(values):
        """``values`` summed over the processes that train (here: one)."""
        return np.asarray(values)

    @staticmethod
    def train_steps(*args, **kwargs):
        """:func:`~skdiagatt._training.step.train_steps`."""
        return _step.train_steps(*args, **kwargs)


class ProcessPlacement:
    """Where arrays live in a fit across processes: a mesh of the first device of every process.

    Parameters, optimizer state and fixed inputs are replicated; each
    process's training data and minibatch indices are its shard of arrays
    sharded over the mesh, so no sample leaves its process.  Every method
    here that talks to the other processes must be called by all of them,
    in the same order.
    """

    n = 1  # devices a process's minibatch is split over

    def __init__(self):
        first = {}
        for dev in jax.devices():
            first.setdefault(dev.process_index, dev)
        self.devices = [first[k] for k in sorted(first)]
        self.count = len(self.devices)
        self.index = jax.process_index()
        self.mesh = Mesh(np.array(self.devices), ("batch",))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self._sharded = [NamedSharding(self.mesh, PartitionSpec(*([None] * axis), "batch")) for axis in (0, 1)]

    def _shard(self, arr, axis):
        arr = np.asarray(arr)
        shape = arr.shape[:axis] + (arr.shape[axis] * self.count,) + arr.shape[axis + 1:]
        return jax.make_array_from_process_local_data(self._sharded[axis], arr, shape)

    def put(self, tree):
        """Replicate (every process passes the same values)."""

        def one(a):
            if isinstance(a, jax.Array) and a.sharding == self.replicated:
                return a
            return jax.make_array_from_process_local_data(self.replicated, np.asarray(a))

        return jax.tree.map(one, tree)

    def put_rows(self, tree):
        """This process's arrays as its shard of arrays sharded along their first axis.

        The shapes must be the same in every process.
        """
        return jax.tree.map(lambda a: self._shard(a, 0), tree)

    def put_batch(self, arr, stacked=False):
        """This process's minibatch indices or weights, sharded along the samples (axis 1 if ``stacked``)."""
        return jax.tree.map(lambda a: self._shard(a, 1 if stacked else 0), arr)

    @staticmethod
    def host(tree):
        """This process's copies of replicated arrays."""
        return jax.tree.map(lambda a: np.array(a.addressable_data(0)) if isinstance(a, jax.Array) else np.array(a),
                            tree)

    def total(self, values):
        """``values`` (the same shape in every process) summed over the processes."""
        return process_allgather(np.asarray(values)).sum(axis=0)

    def agree(self, values):
        """The largest of every process's ``values`` (integers, the same count in every process)."""
        return process_allgather(np.asarray(values, dtype=np.int64)).max(axis=0)

    def gather(self, obj):
        """Every process's ``obj`` (anything picklable), in the order of the processes."""
        data = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
        sizes = process_allgather(np.array([data.size], np.int64))[:, 0]
        padded = np.zeros(int(sizes.max()), np.uint8)
        padded[: data.size] = data
        parts = process_allgather(padded)
        return [pickle.loads(parts[k, : sizes[k]].tobytes()) for k in range(len(sizes))]

    def train_steps(self, params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config, n_slices=1):
        """:func:`~skdiagatt._training.step.train_steps_across` on this mesh (minibatches not sliced)."""
        lr, count = self.put((np.asarray(lr, np.float32), np.asarray(count, np.int32)))
        return _step.train_steps_across(params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config,
                                        self.mesh)


def placement():
    """The :class:`ProcessPlacement` inside :func:`use_processes`, else the :class:`Placement` of :func:`training_devices`."""
    if _PROCESSES[0]:
        return ProcessPlacement()
    return Placement(training_devices())
