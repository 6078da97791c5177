"""DiagAtt against the Bayes localizer on the structured simulator's family.

Writes ``docs/results/structures_family.md``: for each signal structure of
:func:`skdiagatt.datasets.make_structured_regression` (subspace, location,
sparse) and each setting (the default, ``snr="low"``, ``background="t"``,
``background="clusters"``), ``DiagAttRegressor(random_state=0)`` with its
defaults is fitted on n training samples, and the correct-row localization
rate (CRLR) of ``est.localize`` on a test set is set against the Bayes
localizer's, which knows the simulator's laws.  For the t and clustered
backgrounds the page also gives the localizer that models the background as
the Gaussian of the same mean and covariance
(:func:`skdiagatt.bayes.gaussian_background_truth`): what ignoring the true
law costs.

    python benchmarks/structures_family.py                        # 3 data seeds (about 8 min on 2 cores)
    python benchmarks/structures_family.py --seeds 0 --out /tmp/structures_family.md
    python benchmarks/structures_family.py --structures location --settings default t --n-train 300
    python benchmarks/structures_family.py --settings low-snr --ranks auto full 4 --out docs/results/structures_family_rank.md

``--ranks`` sets DiagAtt's ``rank`` (``auto``, the default; ``full``: None; or an integer), one row per rank.
"""

import argparse
import os
import platform
import sys
import time
import warnings

import jax
import numpy as np
from sklearn.exceptions import ConvergenceWarning

import skdiagatt
from skdiagatt import DiagAttRegressor
from skdiagatt.bayes import bayes_localize, bayes_predict, gaussian_background_truth
from skdiagatt.datasets import SIGNAL_STRUCTURES, make_structured_regression
from skdiagatt.metrics import crlr, rmse

RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "results")

#: Setting name -> options of make_structured_regression beyond the structure.
SETTINGS = {
    "default": {},
    "low-snr": {"snr": "low"},
    "t": {"background": "t"},
    "clusters": {"background": "clusters"},
}


def _machine():
    return (f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"jax {jax.__version__} ({jax.default_backend()}), skdiagatt {skdiagatt.__version__}")


def _rank(name):
    """``--ranks`` word -> DiagAtt's ``rank``."""
    return name if name == "auto" else None if name == "full" else int(name)


def run(structure, setting, seed, n_train, n_test, rank="auto"):
    """One data set, one fit of the defaults (but ``rank``): its scores and those of the Bayes references."""
    X, y, rows, truth = make_structured_regression(n_train + n_test, structure, random_state=seed,
                                                   **SETTINGS[setting])
    Xt, yt, rows = X[n_train:], y[n_train:], rows[n_train:]
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est = DiagAttRegressor(rank=rank, random_state=0).fit(X[:n_train], y[:n_train])
    out = {
        "crlr": crlr(rows, est.localize(Xt)),
        "rmse": rmse(yt, est.predict(Xt)),
        "fit_s": time.perf_counter() - start,
        "converged": not any(issubclass(w.category, ConvergenceWarning) for w in caught),
        "bayes_crlr": crlr(rows, bayes_localize(Xt, truth)),
        "bayes_rmse": rmse(yt, bayes_predict(Xt, truth)),
    }
    if truth.background != "gaussian":
        out["gaussian_crlr"] = crlr(rows, bayes_localize(Xt, gaussian_background_truth(truth)))
    return out


def _cell(runs, key, fmt="{:.3f}"):
    """Mean over seeds, with the range when there are several."""
    values = [r[key] for r in runs if key in r]
    if not values:
        return "—"
    text = fmt.format(np.mean(values))
    if len(values) > 1:
        text += f" ({fmt.format(min(values))} – {fmt.format(max(values))})"
    return text


def table(results):
    lines = [
        "| structure | setting | DiagAtt CRLR | Bayes CRLR | gap (points) | Gaussian-background Bayes CRLR | "
        "DiagAtt RMSE | Bayes RMSE | fit (s) | fits converged |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (structure, setting), runs in results.items():
        gap = 100 * np.mean([r["bayes_crlr"] - r["crlr"] for r in runs])
        lines.append(
            f"| {structure} | {setting} | {_cell(runs, 'crlr')} | {_cell(runs, 'bayes_crlr')} | {gap:.1f} | "
            f"{_cell(runs, 'gaussian_crlr')} | {_cell(runs, 'rmse')} | {_cell(runs, 'bayes_rmse')} | "
            f"{_cell(runs, 'fit_s', '{:.1f}')} | {sum(r['converged'] for r in runs)} of {len(runs)} |"
        )
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--structures", nargs="+", default=list(SIGNAL_STRUCTURES), choices=SIGNAL_STRUCTURES)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="data seeds (random_state)")
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-test", type=int, default=2000)
    parser.add_argument("--ranks", nargs="+", default=["auto"],
                        help="DiagAtt's rank: auto (the default), full (None) or an integer")
    parser.add_argument("--out", default=os.path.join(RESULTS, "structures_family.md"))
    args = parser.parse_args(argv)
    command = ("python benchmarks/structures_family.py "
               + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    start = time.perf_counter()
    results = {}
    for structure in args.structures:
        for setting in args.settings:
            for rank in args.ranks:
                label = setting if rank == "auto" else f"{setting}, rank {rank}"
                runs = results[structure, label] = []
                for seed in args.seeds:
                    runs.append(run(structure, setting, seed, args.n_train, args.n_test,
                                    _rank(rank)))
                    print(f"{structure} {label} seed {seed}: {runs[-1]}", flush=True)
    lines = [
        "# DiagAtt on the structured simulator's family: low signal-to-noise, t and clustered backgrounds",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {_machine()}; wall time {time.perf_counter() - start:.0f} s",
        "",
        "Written by `benchmarks/structures_family.py`; do not edit by hand.",
        "",
        f"`make_structured_regression(structure, ...)` at its default sizes (100 rows of 70 features, one "
        f"signal row per sample); {args.n_train:,} training and {args.n_test:,} test samples per data seed, "
        f"data seeds {', '.join(map(str, args.seeds))}.  Settings: `default` (Gaussian background, "
        "`snr=\"high\"`), `low-snr` (`snr=\"low\"`), `t` (`background=\"t\"`, `df=3`), `clusters` "
        "(`background=\"clusters\"`, 4 clusters, `cluster_separation=4`).  DiagAtt is "
        "`DiagAttRegressor(random_state=0)` with every other parameter at its default (but `rank` where a "
        "row names it); its CRLR is that of "
        "`est.localize(X_test)`.  The Bayes columns know the simulator's laws; the Gaussian-background "
        "column replaces a t or clustered background by the Gaussian of its mean and covariance "
        "(`gaussian_background_truth`).  Cells: mean over the data seeds (min – max).",
        "",
        *table(results),
    ]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
