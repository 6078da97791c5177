"""Where training arrays live: the chosen devices, and one device or a data-parallel mesh."""

import contextlib

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["use_devices", "training_devices", "Placement", "placement"]

_DEVICES = [None]  # None: all of jax.devices()


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


def placement():
    """The :class:`Placement` of :func:`training_devices`."""
    return Placement(training_devices())
