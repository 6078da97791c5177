"""Fit seconds of this checkout against an earlier one, fitted alternately in fresh processes.

    git worktree add /tmp/baseline <commit>
    python benchmarks/fit_time.py --baseline /tmp/baseline [--n 9000] [--repeats 3] [--out FILE]

The data are drawn once, by this checkout (the paper's structure, s = 1,
p = 100, d = 70, data seed 0), and saved to a temporary file; every fit runs
in a new Python process that imports the library from one of the two source
trees, so both pay their own compilation, as a user's first fit does.  The
two checkouts alternate ``--repeats`` times; the ratio is the median of the
per-round ratios.  Writes ``docs/results/fit_time.md``.
"""

import argparse
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results")
BAR = 1.3

# Run in the measured process: import skdiagatt from the tree given first on
# the command line, fit the defaults on the saved data, print the seconds.
_CHILD = """
import sys, time, warnings
# An editable install answers imports before sys.path is read: drop its finder.
sys.meta_path = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")
                 and not getattr(f, "__module__", "").startswith("__editable__")]
sys.path.insert(0, sys.argv[1])
import numpy as np
import skdiagatt
from skdiagatt import DiagAttRegressor
assert skdiagatt.__file__.startswith(sys.argv[1]), skdiagatt.__file__
data = np.load(sys.argv[2])
X, y = data["X"], data["y"]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    start = time.perf_counter()
    est = DiagAttRegressor(random_state=0).fit(X, y)
    seconds = time.perf_counter() - start
print(seconds, est.n_iter_, sum("Convergence" in type(w.message).__name__ for w in caught))
"""


def _commit(tree):
    out = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def _fit_seconds(tree, data):
    out = subprocess.run([sys.executable, "-c", _CHILD, os.path.abspath(tree), data],
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    seconds, epochs, warned = out.stdout.split()[-3:]
    return {"seconds": float(seconds), "epochs": int(epochs), "warnings": int(warned)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="source tree of the earlier checkout")
    parser.add_argument("--n", type=int, default=9000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(RESULTS, "fit_time.md"))
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    from skdiagatt.datasets import make_individualized_regression

    X, y, _, _ = make_individualized_regression(args.n, random_state=0)
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data.npz")
        np.savez(data, X=np.stack(X), y=y)
        for _ in range(args.repeats):
            rounds.append({"baseline": _fit_seconds(args.baseline, data), "current": _fit_seconds(ROOT, data)})
            print(rounds[-1], flush=True)
    ratio = float(np.median([r["current"]["seconds"] / r["baseline"]["seconds"] for r in rounds]))
    rows = [f"| {i + 1} | {r['baseline']['seconds']:.1f} | {r['baseline']['epochs']} | "
            f"{r['current']['seconds']:.1f} | {r['current']['epochs']} | "
            f"{r['current']['seconds'] / r['baseline']['seconds']:.2f} |" for i, r in enumerate(rounds)]
    command = " ".join(["python benchmarks/fit_time.py"] + sys.argv[1:])
    lines = [
        "# Fit time of the defaults against an earlier checkout",
        "",
        f"Command: `{command}` (baseline `{_commit(args.baseline)}`, this checkout `{_commit(ROOT)}`)",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "",
        "Written by `benchmarks/fit_time.py`; do not edit by hand.",
        "",
        f"`DiagAttRegressor(random_state=0).fit` on the paper's structure, n = {args.n:,} samples of 100 rows "
        "and 70 features (data seed 0), each fit in a new process (compilation included), the two "
        "checkouts alternating.  *Epochs*: `n_iter_` as each checkout reports it.",
        "",
        "| round | baseline (s) | baseline epochs | this checkout (s) | this checkout epochs | ratio |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"Median ratio {ratio:.2f}x (bar <= {BAR}x: {'PASS' if ratio <= BAR else 'FAIL'}); ConvergenceWarnings: "
        f"baseline {sum(r['baseline']['warnings'] for r in rounds)}, this checkout "
        f"{sum(r['current']['warnings'] for r in rounds)}, of {len(rounds)} fits each.",
    ]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
