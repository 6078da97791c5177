"""A 16-candidate grid search, one job against a 2-worker Dask LocalCluster; writes docs/scaling.md.

    python benchmarks/bench_dask.py            # the page (a few minutes on 2 cores)
    python benchmarks/bench_dask.py --quick    # smaller data, fewer epochs (smoke test)

In one run, on the same data and grid (``n_heads`` x ``alpha`` x
``temperature``, 2 x 4 x 2 = 16 candidates, 3-fold, ``DiagAttRegressor``):

1. ``GridSearchCV(..., n_jobs=1)`` in this process, whose JAX uses every core;
2. the same search under ``joblib.parallel_config(backend="dask")`` on a
   ``LocalCluster`` of 2 worker processes of 1 thread each on loopback, each
   worker's JAX on its own core (:class:`skdiagatt.cluster.JaxWorker`);
3. the same on a fresh cluster whose workers share JAX's persistent
   compilation cache in an empty temporary folder
   (``JaxWorker(cache_dir=...)``).

Both searches compile their programs (the workers each their own).  The
page gives both wall times and their ratio, the cluster's start-up apart,
whether the two ``cv_results_`` hold the same scores bit for bit, and the
pickled sizes of what ships to the workers and back.
"""

import argparse
import os
import pickle
import platform
import sys
import tempfile
import time

import joblib
import numpy as np
from dask.distributed import Client, LocalCluster
from sklearn.model_selection import GridSearchCV

import skdiagatt
from skdiagatt import DiagAttRegressor
from skdiagatt.cluster import JaxWorker
from skdiagatt.datasets import make_individualized_regression

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")
GRID = {"n_heads": [1, 2], "alpha": [1e-4, 1e-3, 1e-2, 1e-1], "temperature": [None, 1.0]}


def search(X, y, quick, **kw):
    est = DiagAttRegressor(max_iter=4 if quick else 15, calibration_iter=1 if quick else 3,
                           random_state=0)
    t = time.perf_counter()
    fitted = GridSearchCV(est, GRID, cv=3, **kw).fit(X, y)
    return fitted, time.perf_counter() - t


def on_cluster(X, y, quick, cache_dir=None):
    """The search on a fresh 2-worker LocalCluster: (search, seconds, start-up seconds)."""
    t = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.register_plugin(JaxWorker(cache_dir=cache_dir))
        startup = time.perf_counter() - t
        with joblib.parallel_config(backend="dask"):
            fitted, seconds = search(X, y, quick)
    return fitted, seconds, startup


def same_scores(a, b):
    keys = [k for k in a if "test_score" in k]
    return all(np.array_equal(a[k], b[k]) for k in keys) and a["params"] == b["params"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller data, fewer epochs (smoke test)")
    parser.add_argument("--out", default=os.path.join(DOCS, "scaling.md"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    n = 150 if args.quick else 600
    X, y, _, _ = make_individualized_regression(n, n_rows=(5, 30), n_features=10, random_state=0)
    local, t_local = search(X, y, args.quick, n_jobs=1)
    remote, t_remote, startup = on_cluster(X, y, args.quick)
    with tempfile.TemporaryDirectory() as cache_dir:  # empty: the workers compile, then share
        cached, t_cached, startup_cached = on_cluster(X, y, args.quick, cache_dir)
    sizes = {
        "unfitted": len(pickle.dumps(local.estimator)),
        "fitted": len(pickle.dumps(local.best_estimator_)),
    }
    write(args, dict(n=n, local=t_local, remote=t_remote, cached=t_cached, sizes=sizes,
                     startup=startup, startup_cached=startup_cached,
                     same=same_scores(local.cv_results_, remote.cv_results_),
                     same_cached=same_scores(local.cv_results_, cached.cv_results_),
                     best=local.best_params_, wall=time.perf_counter() - start))


def _yes(flag):
    return "yes" if flag else "NO"


def write(args, r):
    command = "python benchmarks/bench_dask.py" + (" --quick" if args.quick else "")
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    fits = 16 * 3
    text = f"""# Model selection on a Dask cluster

Written by `{command}` in {r['wall']:.0f} s; skdiagatt {skdiagatt.__version__}, Python
{platform.python_version()}, {os.cpu_count()} CPU cores (load average {load} at the end of the run).
Every figure was measured in this one run.

A grid search of 16 candidates (`n_heads` x `alpha` x `temperature`), 3-fold ({fits} fits and a
refit), of `DiagAttRegressor` on {r['n']} samples of 5 to 30 rows and 10 features: once with
`n_jobs=1` in one process whose JAX uses every core, once under
`joblib.parallel_config(backend="dask")` on a `LocalCluster` of 2 worker processes of 1 thread
each on loopback, each worker's JAX on its own core (`skdiagatt.cluster.JaxWorker`).  Each
search compiles its programs (each worker its own); the refit on the whole data runs in the
calling process in both.

| | one job | 2-worker LocalCluster | the same, workers sharing compiled programs |
|---|---|---|---|
| grid search, wall | {r['local']:.1f} s | {r['remote']:.1f} s | {r['cached']:.1f} s |
| cluster start-up (not in the search's time) | | {r['startup']:.1f} s | {r['startup_cached']:.1f} s |
| speed-up over one job | | {r['local'] / r['remote']:.2f}x | {r['local'] / r['cached']:.2f}x |
| `cv_results_` scores bit-identical to one job | | {_yes(r['same'])} | {_yes(r['same_cached'])} |

The third column registers `JaxWorker(cache_dir=...)` with a fresh, empty folder: the workers
keep their compiled programs in JAX's persistent compilation cache there, and a worker loads
what the other compiled instead of compiling it again (the one-job search reuses its own
programs in memory throughout).

Best candidate: `{r['best']}`.  What ships to a worker with each fit, besides its data, is the unfitted
estimator, {r['sizes']['unfitted']:,} bytes pickled; a fitted model pickles to NumPy arrays,
{r['sizes']['fitted']:,} bytes for the best one.  The recipes are in
`docs/scaling_out.md`.
"""
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
