"""
Fit one model across processes
==============================

One DiagAttRegressor fitted data-parallel, each process on its shard of the samples.
On one machine, two processes on loopback (CPU collectives by gloo)::

    python examples/fit_across_processes.py 0 2 & python examples/fit_across_processes.py 1 2; wait

Under Slurm (one task per node, or per GPU), ``jax.distributed.initialize()``
finds the coordinator, the process count and this process's number itself::

    srun --ntasks=4 python examples/fit_across_processes.py

Every process reads its own part of the data (here, its part of one
synthetic data set); every process ends with the same fitted model.

The documentation's gallery shows this script but does not run it: it needs
its processes started together, which a documentation build does not do.
"""

import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes; GPUs use NCCL
if len(sys.argv) > 1:  # by hand: this process's number and the number of processes
    address = "127.0.0.1:12355"  # the coordinator, on loopback only
    jax.distributed.initialize(coordinator_address=address, coordinator_bind_address=address,
                               process_id=int(sys.argv[1]), num_processes=int(sys.argv[2]))
else:  # a cluster that jax.distributed recognizes: Slurm, Open MPI, Kubernetes, Cloud TPU
    jax.distributed.initialize()

from skdiagatt import DiagAttRegressor  # noqa: E402
from skdiagatt.cluster import use_processes  # noqa: E402
from skdiagatt.datasets import make_individualized_regression  # noqa: E402

rank, size = jax.process_index(), jax.process_count()
X, y, _, _ = make_individualized_regression(2000, n_rows=(5, 30), n_features=10, random_state=0)
mine = slice(rank * len(X) // size, (rank + 1) * len(X) // size)
with use_processes():
    est = DiagAttRegressor(max_iter=10, random_state=0).fit(X[mine], y[mine])
print(f"process {rank} of {size}: {len(X[mine])} samples, final loss {est.loss_curve_[-1]:.4f}, "
      f"R^2 on its samples {est.score(X[mine], y[mine]):.3f}")
jax.distributed.shutdown()
