"""Scaling out: on Dask, and data-parallel fits across the processes of ``jax.distributed``.

Model selection runs on a Dask cluster through joblib's Dask backend
(``joblib.parallel_config(backend="dask")``); what it ships to the workers is
the estimators themselves, whose pickles hold NumPy arrays only.
:class:`JaxWorker` gives each worker process's JAX its share of the cores
and a compilation cache the workers share, and :func:`iter_dask_chunks`
reads the chunks of ``fit_chunks`` / ``partial_fit`` from a Dask bag or a
list of ``dask.delayed`` objects, one at a time and in order.  These need the ``distributed`` extra
(``pip install -e ".[distributed]"``).  :func:`use_processes` trains one
model data-parallel across processes, each holding its shard of the samples
(JAX alone).  ``docs/scaling_out.md`` has the recipes.
"""

import os
import re
import sys
import warnings
import zlib

from ._compilation import set_compilation_cache
from ._shared.base import _check_positive_int
from ._training import devices as _devices

try:  # The plugin base class of dask.distributed, when it is installed.
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # pragma: no cover - the extra is missing
    _WorkerPlugin = object

__all__ = ["JaxWorker", "iter_dask_chunks", "use_processes", "worker_cpus"]


def use_processes():
    """Inside the block, ``fit`` trains one model data-parallel with the other processes of ``jax.distributed``.

    Every process runs the same script: :func:`jax.distributed.initialize`,
    then ``fit(X, y)`` inside this block with its own shard of the samples
    (any number, at least one; the fit sees them in the order of the
    processes, as if concatenated).  What one process fitting all the
    samples would compute from all of them is computed from all of them:
    the target standardization, the row scale and whitener (their sums
    reduced across the processes), the start of the score parameters (on
    the same samples in every process, all of them up to 1,024), the
    read-out refit.  Each epoch has the steps of a single-process fit,
    ``ceil(n / batch_size)``; every process deals its samples into them,
    and each step's gradient is the mean over every process's share of the
    minibatch, summed across the processes by the mesh's collectives (gloo
    on CPUs, NCCL on GPUs).  Every process ends with the same fitted model.

    With ``batch_size >= n`` (one minibatch per epoch) the fit is the
    single-process fit of the concatenated samples up to the order of the
    float32 sums; with smaller minibatches it draws other minibatches than
    that fit.

    Each process trains on one device (its first): run one process per GPU.
    The samples must train packed (DiagAtt on ragged samples) or in one
    bucket (samples of one length: every estimator of the optax loop).  Every process must call ``fit``
    with the same estimator settings, and a ``callback`` must answer the
    same in every process; ``early_stopping``, ``partial_fit`` and
    ``fit_chunks`` are not available inside the block.  Outside it, and in
    a process that never called :func:`jax.distributed.initialize`, ``fit``
    is the ordinary one.  ``docs/scaling_out.md`` has the recipe, under
    Slurm and on GPUs too.

    Examples
    --------
    >>> from skdiagatt import DiagAttRegressor
    >>> from skdiagatt.cluster import use_processes
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, _, _ = make_individualized_regression(40, n_rows=6, n_features=3, random_state=0)
    >>> with use_processes():              # here a single process: every shard is this one
    ...     est = DiagAttRegressor(max_iter=2, random_state=0).fit(X, y)
    >>> est.predict(X[:2]).shape
    (2,)
    """
    return _devices.use_processes()


def worker_cpus(cpus, index, threads=1):
    """The cores a worker process is given: block ``index`` of ``threads`` cores.

    Parameters
    ----------
    cpus : sequence of int
        The cores the machine's workers share (the process's affinity).
    index : int
        The worker's position on its machine; blocks wrap around when there are
        more workers than blocks.
    threads : int, default=1

    Returns
    -------
    set of int

    Examples
    --------
    >>> sorted(worker_cpus([0, 1, 2, 3], index=1))
    [1]
    >>> sorted(worker_cpus([0, 1, 2, 3], index=1, threads=2))
    [2, 3]
    >>> sorted(worker_cpus([0, 1], index=3))
    [1]
    """
    _check_positive_int(threads, "threads")
    cpus = sorted(cpus)
    if threads >= len(cpus):
        return set(cpus)
    blocks = len(cpus) // threads
    start = (index % blocks) * threads
    return set(cpus[start : start + threads])


def _worker_index(name):
    """A worker's position from its name: LocalCluster names workers 0, 1, ...,
    ``dask worker --nworkers`` appends ``-0``, ``-1``, ...; any other name hashes."""
    m = re.fullmatch(r"(?:.*-)?(\d+)", str(name))
    return int(m.group(1)) if m else zlib.crc32(str(name).encode())


class JaxWorker(_WorkerPlugin):
    """Dask worker plugin: each worker process's JAX on its own cores, sharing compiled programs.

    XLA's CPU client sizes its thread pool from the cores the process may run
    on (its CPU affinity) when JAX starts, not from ``XLA_FLAGS`` or
    ``OMP_NUM_THREADS``: every worker process would otherwise start a pool as
    large as the machine, and two such workers on two cores fight over both.
    The plugin restricts each worker process (all its threads) to its own
    block of ``threads`` cores, the worker's position on its machine picking
    the block (:func:`worker_cpus`).

    Every process compiles its own programs, and a grid search of small fits
    spends most of its time compiling: with ``cache_dir`` the workers keep
    their compiled programs in JAX's persistent compilation cache there, and
    a worker loads what another one (or an earlier search) compiled instead
    of compiling it again.  The folder must be one all workers can reach (a
    local folder for a ``LocalCluster``, a shared file system otherwise).

    Register the plugin before any JAX work runs on the workers:
    ``client.register_plugin(JaxWorker())``; workers that join later get it
    when they start.

    Parameters
    ----------
    threads : int, default=1
        Cores per worker process.  With ``threads_per_worker=1`` (one task at a
        time per worker) one core each runs ``n_workers`` fits side by side
        without oversubscription.
    cache_dir : str or path-like, optional
        JAX's persistent compilation cache for the workers, set in each by
        :func:`skdiagatt.set_compilation_cache` (every program cached, however
        fast it compiled).  None leaves JAX's setting as it is.

    Notes
    -----
    Pinning is Linux only (``os.sched_setaffinity``); elsewhere the plugin
    warns and leaves the cores as they are.  A worker whose JAX has already
    started keeps its pool: the plugin warns, and ``client.restart()`` applies
    it.  Worker positions come from the worker names (:func:`worker_cpus`);
    workers with other names are spread by a hash of the name, so two may share
    a core.  Cached programs give the results of programs compiled afresh, bit
    for bit.

    Examples
    --------
    >>> JaxWorker(threads=2).threads
    2
    """

    name = "skdiagatt-jax-worker"

    def __init__(self, threads=1, cache_dir=None):
        _check_positive_int(threads, "threads")
        self.threads = threads
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)

    def setup(self, worker):
        if self.cache_dir is not None:
            set_compilation_cache(self.cache_dir)
        self._pin(worker)

    def _pin(self, worker):
        if not hasattr(os, "sched_setaffinity"):
            warnings.warn("JaxWorker needs os.sched_setaffinity (Linux): workers left as they are",
                          RuntimeWarning, stacklevel=2)
            return
        started = getattr(sys.modules.get("jax._src.xla_bridge"), "backends_are_initialized", None)
        if started is not None and started():
            warnings.warn(f"JAX already started on worker {worker.name}: its thread pool keeps "
                          "its size until the worker restarts (client.restart())",
                          RuntimeWarning, stacklevel=2)
        cpus = worker_cpus(os.sched_getaffinity(0), _worker_index(worker.name), self.threads)
        # The affinity of a thread, inherited by the threads it starts: set it
        # on every thread, the task threads that start JAX included.
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), cpus)
            except ProcessLookupError:  # the thread ended meanwhile
                pass


# ------------------------------------------------------------------ chunks
def _is_collection(obj):
    dask = sys.modules.get("dask")
    return dask is not None and dask.is_dask_collection(obj)


def _holds_dask(chunks):
    """Whether ``chunks`` is, or lists, Dask collections (without importing Dask:
    no collection exists unless Dask was imported)."""
    if "dask" not in sys.modules:
        return False
    if _is_collection(chunks):
        return True
    if not isinstance(chunks, (list, tuple)):
        return False
    return any(_is_collection(c) or (isinstance(c, (list, tuple)) and any(map(_is_collection, c)))
               for c in chunks)


def _dask_reader(chunks):
    """``make()`` over the chunks of a Dask source, or None when ``chunks`` holds none."""
    if not _holds_dask(chunks):
        return None
    import dask
    import dask.bag

    if isinstance(chunks, dask.bag.Bag):
        partitions = chunks.to_delayed()

        def make():
            # One partition in memory at a time; its elements are the chunks.
            for part in partitions:
                yield from part.compute()

        return make
    if _is_collection(chunks):
        raise TypeError(
            "a Dask source of chunks must be a dask.bag.Bag of (X, y) pairs or (X, y, w) triples, "
            f"or a list of dask.delayed ones, got a {type(chunks).__name__}"
        )

    def make():
        for chunk in chunks:
            # compute() walks tuples: a delayed chunk, or a chunk of delayed parts.
            yield dask.compute(chunk)[0]

    return make


def iter_dask_chunks(source):
    """Iterate over the chunks of a Dask source, in order, computing one at a time.

    ``fit_chunks`` reads such a source itself; this is the loop for
    ``partial_fit``.  Chunks are computed with Dask's current scheduler (on the
    cluster's workers when a ``distributed.Client`` is active) and only the
    chunk being read is held in memory (a bag's whole partition).

    Parameters
    ----------
    source : dask.bag.Bag or list
        A bag whose elements are ``(X_k, y_k)`` pairs or ``(X_k, y_k, w_k)``
        triples (``w_k`` the samples' weights), or a list of ``dask.delayed``
        ones (or of ones made of delayed parts).

    Yields
    ------
    X_k, y_k[, w_k]
        The computed chunk, as the source holds it: pass ``w_k`` to
        ``partial_fit(X_k, y_k, sample_weight=w_k)``.

    Examples
    --------
    >>> import dask
    >>> import numpy as np
    >>> from skdiagatt import DiagAttRegressor
    >>> shard = dask.delayed(lambda seed: (np.random.RandomState(seed).randn(16, 5, 3),
    ...                                    np.random.RandomState(seed).randn(16)))
    >>> chunks = [shard(k) for k in range(3)]
    >>> est = DiagAttRegressor(max_iter=2, random_state=0)
    >>> for X_k, y_k in iter_dask_chunks(chunks):
    ...     est = est.partial_fit(X_k, y_k)
    >>> est.n_iter_
    3
    """
    make = _dask_reader(source)
    if make is None:
        raise TypeError(
            "source must be a dask.bag.Bag of (X, y) pairs or (X, y, w) triples, or a list of "
            f"dask.delayed ones, got {type(source).__name__}"
        )
    return make()
