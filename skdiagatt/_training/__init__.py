"""Training and inference shared by every estimator, by responsibility.

Estimators hand over a loss ``loss_fn(params, frozen, batch, config) -> scalar``
(a module-level function, so compiled steps are cached across fits), the
trainable ``params``, the fixed inputs ``frozen`` and their data:

- :mod:`.layout` -- :class:`Layout`, the sizes that change speed and never
  results, and the rounding of counts that keeps compiled shapes few;
- :mod:`.devices` -- which devices train (:func:`use_devices`) and how arrays
  are placed on them (one device, or a data-parallel mesh);
- :mod:`.processes` -- a fit across the processes of ``jax.distributed``
  (:func:`use_processes`): each process's shard of the training data on its
  device, minibatches of agreed shapes;
- :mod:`.programs` -- a compile counter, and releasing compiled programs
  before the process runs out of memory mappings;
- :mod:`.data` -- uploading training data once per fit: padded buckets,
  packed blocks of rows for ragged data (:class:`PackedData`), or a
  :class:`ChunkStream` of out-of-core chunks, one on the device at a time;
- :mod:`.batches` -- planning each epoch's minibatches on the host
  (:class:`~.batches.Minibatch`), and the slices a long minibatch is
  differentiated in;
- :mod:`.step` -- the compiled Adam step, runs of steps in one call;
- :mod:`.loop` -- :func:`fit_loop`, the epochs, early stopping, roll-back on a
  non-finite objective;
- :mod:`.progress` -- what ``verbose`` prints and the ``callback`` receives
  (:class:`EpochInfo`) after every epoch;
- :mod:`.inference` -- :func:`map_samples`, a jitted function over many
  samples in prediction groups of a few fixed shapes.

With more than one device (several GPUs, or CPU devices forced with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``) training is
data-parallel: the minibatches, step sizes and updates are those of one
device, so the loss curve is the same up to float summation order.
"""

from .data import (
    ChunkStream,
    PackedData,
    device_buckets,
    device_packed,
    memory_data,
    steps_per_epoch,
    training_data,
)
from .devices import processes_active, training_devices, use_devices, use_processes
from .inference import map_device_data, map_samples
from .layout import Layout, current_layout, round_count, use_layout
from .loop import EarlyStopping, TrainResult, fit_loop
from .programs import release_programs_near_map_limit
from .progress import EpochInfo, Progress

__all__ = [
    "TrainResult",
    "EarlyStopping",
    "EpochInfo",
    "Progress",
    "ChunkStream",
    "PackedData",
    "Layout",
    "current_layout",
    "use_layout",
    "device_buckets",
    "device_packed",
    "training_data",
    "memory_data",
    "fit_loop",
    "map_samples",
    "map_device_data",
    "release_programs_near_map_limit",
    "round_count",
    "use_devices",
    "use_processes",
    "processes_active",
    "training_devices",
    "steps_per_epoch",
]
