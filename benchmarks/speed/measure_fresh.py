"""Section 7 of docs/results/performance.md: the first fit and predict of each estimator in a fresh process.

    python benchmarks/speed/measure_fresh.py [--quick] [--out FILE]

Each estimator fits, predicts on new data and fits again on ragged data in a
new Python process, so that nothing is compiled yet; then once more with
JAX's persistent compilation cache filled by the first process (and, for an
estimator on the coarse bucket grid, once on the fine grid).

Writes JSON (``benchmarks/speed/data/fresh.json``); ``render.py`` turns it
into the page.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from common import measurement_main, ragged_samples
from jax import monitoring

from skdiagatt import DiagAttRegressor, NTKPrefixRegressor
from skdiagatt._testing import FINE, check_ragged, data_layout, make_buckets
from skdiagatt.baselines import StdAttRegressor

FRESH = dict(n=1000, median=30, d=16, max_iter=10)
FRESH_ESTIMATORS = {"DiagAttRegressor": DiagAttRegressor, "NTKPrefixRegressor": NTKPrefixRegressor,
                    "StdAttRegressor": StdAttRegressor}
# JAX's cache keeps only programs that took at least a second to compile by
# default; most of ours take less.
CACHE_ENV = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
_JAX_EVENTS = {"/jax/core/compile/backend_compile_duration": "compile",
               "/jax/core/compile/jaxpr_trace_duration": "trace",
               "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
               "/jax/compilation_cache/cache_retrieval_time_sec": "retrieve"}


def fresh_process_child(name, n, growth=None):
    """Run in a child process: fit, predict on new data, fit again; print one JSON line.

    ``growth`` replaces the estimator's bucket grid.

    Each phase gives its wall seconds and, per JAX event of ``_JAX_EVENTS``,
    its (count, seconds): backend compilations (cache hits included), traces,
    lowerings and reads of the persistent cache.
    """
    events = []
    monitoring.register_event_duration_secs_listener(
        lambda event, duration, **kw: events.append((_JAX_EVENTS[event], duration)) if event in _JAX_EVENTS else None)
    cfg = FRESH
    rng = np.random.RandomState(0)

    X, X_new = (ragged_samples(n, cfg["median"], cfg["d"], rng, cap=10) for _ in range(2))
    y = np.array([x[:, 0].max() for x in X])
    est = FRESH_ESTIMATORS[name](max_iter=cfg["max_iter"], random_state=0)
    with data_layout(est, growth=growth) as (_, grid):
        out = dict(buckets=len(make_buckets(check_ragged(X), grid).buckets))
        for phase, call in (("fit", lambda: est.fit(X, y)), ("predict", lambda: est.predict(X_new)),
                            ("refit", lambda: est.fit(X, y))):
            events.clear()
            t = time.perf_counter()
            call()
            row = dict(wall=time.perf_counter() - t)
            for kind in _JAX_EVENTS.values():
                got = [d for k, d in events if k == kind]
                row[kind] = (len(got), float(sum(got)))
            out[phase] = row
    print(json.dumps(out))


def section_fresh_processes(report, quick):
    """Section 7: each estimator in fresh processes, without and then with a filled persistent cache."""
    n = 300 if quick else FRESH["n"]
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        for name, cls in FRESH_ESTIMATORS.items():
            runs = {}
            # The first process fills the cache; the second reads it.  An
            # estimator on the coarse grid runs once more, without the cache,
            # on the fine one.
            with data_layout(cls()) as (_, grid):
                labels = ("first", "cached") + (("fine",) if grid != FINE else ())
            for label in labels:
                env = dict(os.environ)
                if label != "fine":
                    env.update(JAX_COMPILATION_CACHE_DIR=os.path.join(cache, name), **CACHE_ENV)
                argv = [sys.executable, os.path.abspath(__file__), "--fresh-child", name, str(n)]
                child = subprocess.run(argv + ([str(FINE)] if label == "fine" else []),
                                       env=env, capture_output=True, text=True, check=True)
                runs[label] = json.loads(child.stdout.strip().splitlines()[-1])
                print(f"  {name} {label}: fit {runs[label]['fit']['wall']:.1f} s, "
                      f"predict {runs[label]['predict']['wall']:.1f} s", flush=True)
            out[name] = runs
    report["fresh"] = dict(n=n, runs=out)


def main():
    if len(sys.argv) in (4, 5) and sys.argv[1] == "--fresh-child":
        return fresh_process_child(sys.argv[2], int(sys.argv[3]), *map(float, sys.argv[4:]))
    measurement_main(__doc__.splitlines()[0], "fresh", lambda r, pk, a: section_fresh_processes(r, a.quick))


if __name__ == "__main__":
    sys.exit(main())
