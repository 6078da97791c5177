"""
Streaming fit from a folder of .npy shards with Dask
====================================================

The training data are a folder of shards, ``X_0000.npy`` / ``y_0000.npy``,
``X_0001.npy`` / ... (each a 3-D array of samples and their targets), read
lazily through a Dask bag: ``fit_chunks`` computes one shard at a time, in
the folder's order, on every pass over the data (first for the row
statistics and the targets, then once per epoch), so the process holds
one shard in memory however large the folder is.  The same shards as an
in-memory list of ``(X, y)`` pairs give the same model, bit for bit.

A progress line shows the pass and the shard being read.  At the end the
script prints the folder's size, one shard's size and how much the fit
raised the process's peak resident memory, then the fitted model's R^2 on a
held-out shard.

Run (one command)::

    python examples/fit_npy_shards.py [--folder DIR] [--shards 24] [--per-shard 4000]

Without ``--folder`` the shards are simulated into a temporary folder, which
is removed at the end; with it, the shards already there are used as they
are (an empty folder is filled with simulated shards first).

The documentation's gallery shows this script but does not run it: it
simulates the shards in a child process and reports the peak memory of the
process that fits, which means nothing inside a documentation build that
runs every example in one process.
"""

# %%
# Imports and command line
# ------------------------
import argparse
import glob
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import dask.bag as db
import numpy as np

from skdiagatt import DiagAttRegressor
from skdiagatt.datasets import make_individualized_regression


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", help="folder of shards (default: a temporary folder)")
    p.add_argument("--shards", type=int, default=24, help="shards to simulate")
    p.add_argument("--per-shard", type=int, default=4000, help="samples per simulated shard")
    p.add_argument("--epochs", type=int, default=5)
    return p.parse_args(argv)


# %%
# Shards on disk
# --------------
# All shards come from one simulation (one true model), split into files.  It
# runs in a child process, so that this process's memory is the fit's alone;
# the last shard is held out for scoring.
def write_shards(folder, n_shards, per_shard):
    X, y, _, _ = make_individualized_regression(n_shards * per_shard, n_rows=16, n_features=8,
                                                random_state=0)
    X = np.stack(X).astype(np.float32)
    for k in range(n_shards):
        part = slice(k * per_shard, (k + 1) * per_shard)
        np.save(os.path.join(folder, f"X_{k:04d}.npy"), X[part])
        np.save(os.path.join(folder, f"y_{k:04d}.npy"), y[part])


class Progress:
    """Loads a shard, printing which pass over the folder and which shard."""

    def __init__(self, n_shards):
        self.n_shards, self.reads, self.start = n_shards, 0, time.perf_counter()

    def __call__(self, path):
        done, k = divmod(self.reads, self.n_shards)
        self.reads += 1
        print(f"\rpass {done + 1}, shard {k + 1}/{self.n_shards}, "
              f"{time.perf_counter() - self.start:.0f} s", end="", file=sys.stderr, flush=True)
        return np.load(path), np.load(path.replace("X_", "y_"))


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# %%
# The fit
# -------
def fit(folder, epochs):
    paths = sorted(glob.glob(os.path.join(folder, "X_*.npy")))
    train, held_out = paths[:-1], paths[-1]
    # One shard a partition: a partition is what one read holds in memory.
    bag = db.from_sequence(train, npartitions=len(train)).map(Progress(len(train)))
    est = DiagAttRegressor(max_iter=epochs, calibration_iter=2, random_state=0)
    est.fit_chunks(bag)
    print(file=sys.stderr)
    X_test, y_test = np.load(held_out), np.load(held_out.replace("X_", "y_"))
    return est, paths, est.score(X_test, y_test)


def main(argv=None):
    args = parse(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or tmp
        os.makedirs(folder, exist_ok=True)
        if not glob.glob(os.path.join(folder, "X_*.npy")):
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                pool.submit(write_shards, folder, args.shards, args.per_shard).result()
        before = _peak_mib()
        est, paths, r2 = fit(folder, args.epochs)
        sizes = [os.path.getsize(p) + os.path.getsize(p.replace("X_", "y_")) for p in paths]
    print(f"folder: {len(paths)} shards, {sum(sizes) / 2**20:.0f} MiB, one shard "
          f"{max(sizes) / 2**20:.1f} MiB; the fit raised the peak resident memory by "
          f"{_peak_mib() - before:.0f} MiB (to {_peak_mib():.0f} MiB, JAX and Dask included)")
    print(f"{est.n_iter_} epochs; R^2 on the held-out shard: {r2:.3f}")


if __name__ == "__main__":
    main()
