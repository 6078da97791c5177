"""What compiling costs a fresh process, without and with ``skdiagatt.set_compilation_cache``.

    python benchmarks/compile_cost.py [--processes N] [--repeats N] [--blas-threads N] [--out FILE]

Every measurement runs in a new Python process, as a script or a restarted
notebook does.  Each estimator (``DiagAttRegressor``, ``NTKPrefixRegressor``
at its defaults) fits the data of the README's quick start (400 samples of 5
to 24 rows, d = 8), fits it again (the warm fit, the best of ``--repeats``),
then predicts 100 new samples twice (first and warm).  Processes:

- *cache off*: no cache; every program is compiled;
- *cache on, empty*: ``SKDIAGATT_COMPILATION_CACHE`` set to an empty
  temporary folder, which this process fills;
- *cache on, filled*: ``--processes`` more processes on the folder the
  previous one filled: they load the programs instead of compiling them.

Then ``GridSearchCV(DiagAttRegressor(), n_jobs=1)`` and ``n_jobs=2`` (joblib's
loky worker processes), each in a fresh process, without the cache and with
a cache that a first search filled.  Writes ``docs/results/compile_cost.md``.

The measured processes run NumPy's BLAS on ``--blas-threads`` threads (1 by
default): on a small shared machine its threads and XLA's contend for the
cores, and the small SVDs of a DiagAtt fit then take from a fraction of a
second to several seconds from one identical fit to the next, which would
swamp what compiling costs.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

ESTIMATORS = ("DiagAttRegressor", "NTKPrefixRegressor")
GRID = {"n_heads": [1, 2], "alpha": [1e-3, 1e-2]}
_EVENTS = {"/jax/core/compile/backend_compile_duration": "programs",
           "/jax/compilation_cache/cache_retrieval_time_sec": "loaded"}


def readme_data(n, seed):
    """The README's quick-start data: ``n`` samples of 5 to 24 rows, d = 8, driven by one row each."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(rng.integers(5, 25), 8)) for _ in range(n)]
    return X, np.array([x[:, 0].max() for x in X])


def _timed(call, counts):
    counts.clear()
    start = time.perf_counter()
    call()
    return time.perf_counter() - start, dict(counts)


def child_estimator(name, repeats):
    """In a fresh process: first fit, warm fits, first predict, warm predicts; one JSON line."""
    from jax import monitoring

    counts = Counter()
    monitoring.register_event_duration_secs_listener(
        lambda event, duration, **kw: counts.update([_EVENTS[event]]) if event in _EVENTS else None)
    import skdiagatt

    cls = getattr(skdiagatt, name)
    X, y = readme_data(400, 0)
    X_new, _ = readme_data(100, 1)
    out = {}
    est = cls(random_state=0)
    out["first_fit"], out["fit_counts"] = _timed(lambda: est.fit(X, y), counts)
    out["warm_fit"] = min(_timed(lambda: cls(random_state=0).fit(X, y), counts)[0] for _ in range(repeats))
    out["first_predict"], out["predict_counts"] = _timed(lambda: est.predict(X_new), counts)
    out["warm_predict"] = min(_timed(lambda: est.predict(X_new), counts)[0] for _ in range(repeats))
    out["predictions"] = est.predict(X_new).astype(np.float64).tobytes().hex()
    print(json.dumps(out))


def child_search(n_jobs):
    """In a fresh process: a grid search of ``DiagAttRegressor``; its wall time and scores."""
    from sklearn.model_selection import GridSearchCV

    from skdiagatt import DiagAttRegressor

    X, y = readme_data(400, 0)
    start = time.perf_counter()
    search = GridSearchCV(DiagAttRegressor(random_state=0), GRID, cv=3, n_jobs=n_jobs).fit(X, y)
    wall = time.perf_counter() - start
    scores = np.asarray(search.cv_results_["mean_test_score"], np.float64).tobytes().hex()
    print(json.dumps({"wall": wall, "scores": scores}))


def fresh(argv, cache, blas_threads):
    """Run this script with ``argv`` in a new process, with the cache in ``cache`` (None: off)."""
    env = {k: v for k, v in os.environ.items() if k != "SKDIAGATT_COMPILATION_CACHE" and not k.startswith("JAX_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    if blas_threads:
        env.update({k: str(blas_threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    if cache is not None:
        env["SKDIAGATT_COMPILATION_CACHE"] = cache
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *map(str, argv)], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args, cache_root):
    runs = {}
    for name in ESTIMATORS:
        cache = os.path.join(cache_root, name)
        labels = ["cache off", "cache on, empty"] + [f"cache on, filled ({k + 1})" for k in range(args.processes)]
        runs[name] = {}
        for label in labels:
            got = fresh(["--child", name, args.repeats], None if label == "cache off" else cache, args.blas_threads)
            runs[name][label] = got
            print(f"{name} {label}: first fit {got['first_fit']:.2f} s, warm {got['warm_fit']:.2f} s; "
                  f"first predict {got['first_predict']:.3f} s, warm {got['warm_predict']:.3f} s", flush=True)
    searches = {}
    cache = os.path.join(cache_root, "search")
    for label, n_jobs, where in (("n_jobs=1, cache off", 1, None), ("n_jobs=2, cache off", 2, None),
                                 ("n_jobs=1, cache on, empty", 1, cache),
                                 ("n_jobs=1, cache on, filled", 1, cache), ("n_jobs=2, cache on, filled", 2, cache)):
        searches[label] = fresh(["--search", n_jobs], where, args.blas_threads)
        print(f"GridSearchCV {label}: {searches[label]['wall']:.1f} s", flush=True)
    return runs, searches


def _same(rows, key):
    return "yes" if len({r[key] for r in rows}) == 1 else "no"


def render(args, runs, searches, wall):
    import jax

    import skdiagatt

    command = "python benchmarks/compile_cost.py" + "".join(f" {a}" for a in args.argv)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    lines = [
        "# Compilation in a fresh process, without and with the compilation cache", "",
        f"Command: `{command}`", "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, jax {jax.__version__} ({jax.default_backend()}), "
        f"skdiagatt {skdiagatt.__version__}; load average {load} at the end (the machine is shared); "
        f"wall time {wall:.0f} s (this invocation)", "",
        "Written by `benchmarks/compile_cost.py`; do not edit by hand.", "",
        "Each row is a new Python process, as a script run again or a restarted notebook is.  The data are "
        "those of the README's quick start: 400 samples of 5 to 24 rows, d = 8; each estimator at its defaults "
        "(`random_state=0`).  *First fit*: the process's first `fit`, compilation included; *warm fit*: the "
        f"same fit again in the same process, nothing left to compile (the best of {args.repeats}); *first* and "
        f"*warm predict*: 100 new samples, the same way.  *Programs*: XLA programs the first fit and the first "
        "predict built, and how many of them were loaded from the cache instead of compiled.  *Cache on*: "
        "`SKDIAGATT_COMPILATION_CACHE` set to a temporary folder (`skdiagatt.set_compilation_cache`); the "
        "first such process fills it, the next ones load what it wrote.  "
        + (f"NumPy's BLAS runs on {args.blas_threads} thread(s) in every measured process (`--blas-threads`): "
           "its threads contending with XLA's for the cores of a small shared machine make the small SVDs of "
           "a DiagAtt fit vary by seconds between identical fits." if args.blas_threads else ""), "",
        "| estimator | process | first fit | warm fit | first / warm | first predict | warm predict "
        "| first / warm | programs (loaded) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in runs.items():
        for label, r in rows.items():
            built = r["fit_counts"].get("programs", 0) + r["predict_counts"].get("programs", 0)
            loaded = r["fit_counts"].get("loaded", 0) + r["predict_counts"].get("loaded", 0)
            lines.append(
                f"| {name} | {label} | {r['first_fit']:.2f} s | {r['warm_fit']:.2f} s "
                f"| {r['first_fit'] / r['warm_fit']:.1f}x | {r['first_predict']:.3f} s | {r['warm_predict']:.3f} s "
                f"| {r['first_predict'] / r['warm_predict']:.0f}x | {built} ({loaded}) |")
    lines.append("")
    for name, rows in runs.items():
        filled = [r for label, r in rows.items() if "filled" in label]
        fit = statistics.median(r["first_fit"] / r["warm_fit"] for r in filled)
        pred = statistics.median(r["first_predict"] / r["warm_predict"] for r in filled)
        off = rows["cache off"]
        lines.append(
            f"- **{name}**: first fit / warm fit {off['first_fit'] / off['warm_fit']:.1f}x without the cache, "
            f"{fit:.1f}x with a filled one (median of {len(filled)} processes); first predict / warm predict "
            f"{off['first_predict'] / off['warm_predict']:.0f}x and {pred:.0f}x.  Predictions bit-identical in "
            f"every process: {_same(rows.values(), 'predictions')}.")
    base = searches["n_jobs=1, cache off"]["wall"]
    lines += [
        "",
        "## Grid search", "",
        f"`GridSearchCV(DiagAttRegressor(random_state=0), {GRID}, cv=3)` on the same data (12 fits and a "
        "refit), in a fresh process each; `n_jobs=2` runs the fits in two joblib (loky) worker processes, "
        "which inherit `SKDIAGATT_COMPILATION_CACHE` from the process that starts them.  *Cache on, filled*: "
        "the folder the *empty* search filled.", "",
        "| search | wall | over n_jobs=1, cache off |", "|---|---:|---:|",
        *(f"| {label} | {r['wall']:.1f} s | {base / r['wall']:.2f}x |" for label, r in searches.items()),
        "",
        f"`cv_results_` scores bit-identical in every search: {_same(searches.values(), 'scores')}.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_estimator(argv[1], int(argv[2]))
    if argv[:1] == ["--search"]:
        return child_search(int(argv[1]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="processes on the filled cache per estimator")
    parser.add_argument("--repeats", type=int, default=3, help="warm fits and predicts per process (the best)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="NumPy's BLAS threads in the measured processes (0: as the environment says)")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "compile_cost.md"))
    args = parser.parse_args(argv)
    args.argv = argv
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache_root:
        runs, searches = measure(args, cache_root)
    page = render(args, runs, searches, time.perf_counter() - start)
    with open(args.out, "w") as f:
        f.write(page)
    print(page)


if __name__ == "__main__":
    sys.exit(main())
