"""Peak resident memory of a fit against the size of its data.

    python benchmarks/memory.py [--n 20000 50000] [--estimator DiagAttRegressor] [--max-iter 5] [--out FILE]

Each measurement runs in a new Python process: it imports the library,
simulates ``n`` samples of p = 100 rows and d = 70 features in float32 (a 3-D
array, as a user holding equal-length samples passes them), and fits the
estimator at its defaults but ``max_iter`` (the epochs repeat the same work
and leave the peak where it is).  A thread samples the process's resident
memory every 20 ms; the peak is the kernel's own high-water mark
(``ru_maxrss``).  *Ratio* = peak resident memory / bytes of the float32 data:
the data themselves count once in it, the Python and XLA runtime too.
Samples larger than a third of scikit-learn's ``working_memory`` are
uploaded in chunks (``docs/performance_guide.rst``, "Memory of a fit").
Writes ``docs/results/memory.md``.
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

P, D = 100, 70
BAR_N, BAR_RATIO = 50000, 2.0


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(n, estimator, max_iter, seed=0):
    """Run in the measured process: the resident memory at each stage of one fit, in bytes."""
    import threading

    import numpy as np

    import skdiagatt

    stages = {"runtime": _rss()}
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, P, D), dtype=np.float32)
    signal = rng.integers(0, P, size=n)
    y = X[np.arange(n), signal, 0] + 0.1 * rng.standard_normal(n)
    stages["data"] = _rss()
    trace, done = [], threading.Event()

    def sample():
        t0 = time.perf_counter()
        while not done.wait(0.02):
            trace.append((time.perf_counter() - t0, _rss()))

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    est = getattr(skdiagatt, estimator)(max_iter=max_iter, random_state=0)
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
    done.set()
    watcher.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    when = max(trace, key=lambda tr: tr[1])[0] if trace else float("nan")
    return {"n": n, "estimator": estimator, "max_iter": max_iter, "data_bytes": int(X.nbytes),
            "runtime_rss": stages["runtime"], "data_rss": stages["data"], "peak_rss": int(peak),
            "peak_at_s": when, "fit_s": seconds, "n_iter": int(est.n_iter_)}


def run_child(n, estimator, max_iter):
    out = subprocess.run([sys.executable, __file__, "--child", str(n), estimator, str(max_iter)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _gib(b):
    return f"{b / 2 ** 30:.2f} GiB"


def render(rows, wall):
    import jax

    import skdiagatt

    lines = [
        "# Peak memory of a fit",
        "",
        "Written by `python benchmarks/memory.py`; do not edit.",
        "",
        f"- machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"jax {jax.__version__}, skdiagatt {skdiagatt.__version__}; wall time {wall:.0f} s",
        f"- data: n samples of p = {P} rows, d = {D} features, float32, as one 3-D array; "
        "the estimator at its defaults but `max_iter`, in a fresh process per row",
        "- *runtime*: resident memory after importing the library; *peak*: the process's high-water mark "
        "(`ru_maxrss`) over the whole run; *ratio*: peak / data bytes (the data count once in it, the runtime too)",
        "",
        f"- bar: ratio <= {BAR_RATIO} at n = {BAR_N:,}",
        "",
        "| estimator | n | data | runtime | peak | peak - data - runtime | ratio | fit | bar |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ratio = r["peak_rss"] / r["data_bytes"]
        extra = r["peak_rss"] - r["data_bytes"] - r["runtime_rss"]
        lines.append(
            f"| {r['estimator']} | {r['n']:,} | {_gib(r['data_bytes'])} | {_gib(r['runtime_rss'])} | "
            f"{_gib(r['peak_rss'])} | {_gib(extra)} | {ratio:.2f} | {r['fit_s']:.0f} s ({r['n_iter']} epochs) | "
            f"{('PASS' if ratio <= BAR_RATIO else 'FAIL') if r['n'] == BAR_N else ''} |"
        )
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        n, estimator, max_iter = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
        print(json.dumps(measure(n, estimator, max_iter)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[20000, 50000])
    ap.add_argument("--estimator", nargs="+", default=["DiagAttRegressor"])
    ap.add_argument("--max-iter", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results", "memory.md"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for estimator in args.estimator:
        for n in args.n:
            r = run_child(n, estimator, args.max_iter)
            print(json.dumps(r), flush=True)
            rows.append(r)
    with open(args.out, "w") as f:
        f.write(render(rows, time.perf_counter() - t0))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
