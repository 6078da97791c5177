"""Predicting one sample at a time after ``fit``: time and compilations per new length.

Interactive and serving use predict one sample per request.  A sample alone
is packed into a prediction group of a fixed minimal size, so that every
length up to that size shares one compiled program; this script measures,
in one run, the first prediction of samples of lengths never predicted
before against repeated predictions of a length already predicted, and
counts the compilations.  For comparison it does the same with the
estimator's samples left in buckets (one program per bucket length).

Writes ``docs/results/single_sample.md``::

    python benchmarks/single_sample.py
    python benchmarks/single_sample.py --out /tmp/single_sample.md
"""

import argparse
import gc
import os
import platform
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import skdiagatt  # noqa: E402
from skdiagatt import DiagAttRegressor, _testing  # noqa: E402
from skdiagatt.datasets import make_individualized_regression  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "results")
NEW_LENGTHS = (7, 13, 22, 29)
LONG_LENGTHS = (100, 1000, 4000, 5000, 8000, 9000)
SEEN_LENGTH = 10


def _first_and_repeated(est, x, repeats):
    """Seconds of the first ``predict([x])``, the compilations it ran, and the median of ``repeats`` more."""
    before = _testing.compile_count()
    start = time.perf_counter()
    est.predict([x])
    first = time.perf_counter() - start
    compiled = _testing.compile_count() - before
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        est.predict([x])
        times.append(time.perf_counter() - start)
    return first, compiled, float(np.median(times)) if times else float("nan")


def measure(est, d, rng, repeats):
    """The first prediction of a seen length and of each new length, in the estimator's layout."""
    first, compiled, seen = _first_and_repeated(est, rng.randn(SEEN_LENGTH, d), repeats)
    rows = [(SEEN_LENGTH, first, compiled)]
    for p in NEW_LENGTHS:
        t, c, _ = _first_and_repeated(est, rng.randn(p, d), 0)
        rows.append((p, t, c))
    return seen, rows


def _table(seen, rows):
    lines = [
        "| length | first prediction (ms) | compilations | ratio to a seen length |",
        "|---:|---:|---:|---:|",
    ]
    for p, t, c in rows:
        lines.append(f"| {p} | {1e3 * t:.2f} | {c} | {t / seen:.1f} |")
    return lines


def run(args):
    X, y, _, _ = make_individualized_regression(
        args.n, n_rows=(5, 30), n_features=args.d, random_state=args.seed
    )
    est = DiagAttRegressor(max_iter=args.max_iter, random_state=args.seed).fit(X, y)
    rng = np.random.RandomState(args.seed + 1)
    gc.disable()  # a collection inside one timed call would dwarf it
    try:
        seen, rows = measure(est, args.d, rng, args.repeats)
        long_rows = [(p,) + _first_and_repeated(est, rng.randn(p, args.d), 0)[:2] for p in LONG_LENGTHS]
        with _testing.data_layout(est, pack=False):
            b_seen, b_rows = measure(est, args.d, rng, args.repeats)
    finally:
        gc.enable()
    slowest = max(t for p, t, _ in rows[1:])
    lines = [
        f"DiagAttRegressor fitted on {args.n} samples of 5 to 30 rows, d = {args.d}.  Each row of the",
        "tables is the first `predict([x])` of a sample of that length; a seen length is length",
        f"{SEEN_LENGTH} once predicted, whose time is the median of {args.repeats} more predictions:",
        f"{1e3 * seen:.2f} ms.",
        "",
        "## A sample alone (the default)",
        "",
        *_table(seen, rows),
        "",
        f"Slowest new length: {slowest / seen:.1f} times a seen length; compilations after the first",
        f"prediction: {sum(c for _, _, c in rows[1:])}.",
        "",
        "## Longer samples alone",
        "",
        f"Past {_testing.current_layout().predict_min_rows} rows a sample fills a group of its own,",
        "rounded up to a power of two of blocks: at most one program per power of two.",
        "",
        "| length | first prediction (ms) | compilations |",
        "|---:|---:|---:|",
        *[f"| {p} | {1e3 * t:.2f} | {c} |" for p, t, c in long_rows],
        "",
        "## For comparison: samples in buckets",
        "",
        f"The same predictions with the samples padded to their bucket length (a seen length: {1e3 * b_seen:.2f} ms).",
        "",
        *_table(b_seen, b_rows),
    ]
    return lines, slowest / seen


def _machine():
    return (
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"jax {jax.__version__} ({jax.default_backend()}), skdiagatt {skdiagatt.__version__}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="training samples")
    parser.add_argument("--d", type=int, default=16, help="features per row")
    parser.add_argument("--max-iter", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(RESULTS, "single_sample.md"))
    args = parser.parse_args(argv)
    command = "python benchmarks/single_sample.py " + " ".join(argv if argv is not None else sys.argv[1:])
    start = time.perf_counter()
    lines, ratio = run(args)
    text = "\n".join(
        ["# Predicting one sample at a time", "", f"Command: `{command.strip()}`", "",
         f"Machine: {_machine()}", "", f"Wall time: {time.perf_counter() - start:.0f} s", ""] + lines
    ) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        fh.write(text)
    print(f"wrote {args.out}: slowest new length {ratio:.1f} times a seen length")


if __name__ == "__main__":
    main()
