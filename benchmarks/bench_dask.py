"""A 16-candidate grid search, one job against a 2-worker Dask LocalCluster; writes docs/results/scaling.md.

    python benchmarks/bench_dask.py            # the page (a few minutes on 2 cores)
    python benchmarks/bench_dask.py --quick    # smaller data, fewer epochs (smoke test)

In one run, on the same data and grid (``n_heads`` x ``alpha`` x
``temperature``, 2 x 4 x 2 = 16 candidates, 3-fold, ``DiagAttRegressor``):

``GridSearchCV(..., n_jobs=1)`` in this process (twice: compiling, then with
its programs compiled), then the same search under
``joblib.parallel_config(backend="dask")`` on a fresh ``LocalCluster`` of 2
worker processes of 1 thread each on loopback, three times: with
:class:`skdiagatt.cluster.JaxWorker` and an empty compilation cache, with
the cache that search left, and without the plugin.  The page gives the wall
times and their ratios to the first one-job search, the clusters' start-up
apart, whether each ``cv_results_`` holds the one-job scores bit for bit, and
the pickled sizes of what ships to the workers and back.
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

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results")
OTHER = "<!-- bench_distributed -->"
GRID = {"n_heads": [1, 2], "alpha": [1e-4, 1e-3, 1e-2, 1e-1], "temperature": [None, 1.0]}


def search(X, y, quick, **kw):
    est = DiagAttRegressor(max_iter=4 if quick else 15, calibration_iter=1 if quick else 3,
                           random_state=0)
    t = time.perf_counter()
    fitted = GridSearchCV(est, GRID, cv=3, **kw).fit(X, y)
    return fitted, time.perf_counter() - t


def on_cluster(X, y, quick, plugin):
    """The search on a fresh 2-worker LocalCluster: (search, seconds, start-up seconds)."""
    t = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        if plugin is not None:
            client.register_plugin(plugin)
        startup = time.perf_counter() - t
        with joblib.parallel_config(backend="dask"):
            fitted, seconds = search(X, y, quick)
    return fitted, seconds, startup


def same_scores(a, b):
    keys = [k for k in a if "test_score" in k]
    return all(np.array_equal(a[k], b[k]) for k in keys) and a["params"] == b["params"]


def runs(X, y, quick):
    """Every configuration in turn: {column: (search, seconds, start-up seconds or None)}."""
    out = {"one job": (*search(X, y, quick, n_jobs=1), None)}
    out["one job, again"] = (*search(X, y, quick, n_jobs=1), None)
    with tempfile.TemporaryDirectory() as cache_dir:  # empty at first: the workers compile
        out["cluster, fresh cache"] = on_cluster(X, y, quick, JaxWorker(cache_dir=cache_dir))
        out["cluster, warm cache"] = on_cluster(X, y, quick, JaxWorker(cache_dir=cache_dir))
    out["cluster, unpinned"] = on_cluster(X, y, quick, None)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller data, fewer epochs (smoke test)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "scaling.md"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    n = 150 if args.quick else 600
    X, y, _, _ = make_individualized_regression(n, n_rows=(5, 30), n_features=10, random_state=0)
    results = runs(X, y, args.quick)
    local = results["one job"][0]
    sizes = (len(pickle.dumps(local.estimator)), len(pickle.dumps(local.best_estimator_)))
    write(args, results, n, sizes, time.perf_counter() - start)


def _row(name, cells):
    return f"| {name} | " + " | ".join(cells) + " |"


def write(args, results, n, sizes, wall):
    command = "python benchmarks/bench_dask.py" + (" --quick" if args.quick else "")
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    local, t_local, _ = results["one job"]
    cols = list(results)
    table = "\n".join([
        _row("", cols),
        _row("---", ["---"] * len(cols)),
        _row("grid search, wall", [f"{t:.1f} s" for _, t, _ in results.values()]),
        _row("speed-up over one job", [f"{t_local / t:.2f}x" for _, t, _ in results.values()]),
        _row("cluster start-up (not in the search's time)",
             ["" if s is None else f"{s:.1f} s" for _, _, s in results.values()]),
        _row("`cv_results_` scores bit-identical to one job",
             ["yes" if same_scores(local.cv_results_, f.cv_results_) else "NO"
              for f, _, _ in results.values()]),
    ])
    text = f"""# Model selection on a Dask cluster

Written by `{command}` in {wall:.0f} s; skdiagatt {skdiagatt.__version__}, Python
{platform.python_version()}, {os.cpu_count()} CPU cores (load average {load} at the end of the
run: the machine is shared).  Every figure was measured in this one run.

A grid search of 16 candidates (`n_heads` x `alpha` x `temperature`), 3-fold (48 fits and a
refit), of `DiagAttRegressor` on {n} samples of 5 to 30 rows and 10 features, in turn:

- **one job**: `n_jobs=1` in this process, whose JAX uses every core; it compiles each program
  once and reuses it in memory for the other fits;
- **one job, again**: the same search once more in the same process, its programs compiled:
  the time of the fits alone;
- **cluster, fresh cache**: under `joblib.parallel_config(backend="dask")` on a fresh
  `LocalCluster` of 2 worker processes of 1 thread each on loopback, registered with
  `JaxWorker(cache_dir=...)` (each worker's JAX on its own core, compiled programs kept in JAX's
  persistent compilation cache in an empty temporary folder);
- **cluster, warm cache**: the same on another fresh cluster, the cache as the previous search
  left it: the workers load those programs instead of compiling them;
- **cluster, unpinned**: a fresh cluster without the plugin: each worker's JAX starts a thread
  pool as large as the machine, and no cache.

The refit on the whole data runs in the calling process in every case.

{table}

What ships to a worker with each fit, besides its data, is the unfitted estimator, {sizes[0]:,}
bytes pickled; a fitted model pickles to NumPy arrays, {sizes[1]:,} bytes for the best one
(`{local.best_params_}`).  The recipes are in `docs/scaling_out.md`.
"""
    old = open(args.out).read() if os.path.exists(args.out) else ""
    kept = old[old.index(OTHER):] if OTHER in old else ""  # the section of bench_distributed.py
    with open(args.out, "w") as f:
        f.write(text + ("\n" + kept if kept else ""))
    print(text)


if __name__ == "__main__":
    sys.exit(main())
