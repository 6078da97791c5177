"""``python -m skdiagatt``: the demo on simulated data (prints its own figures)."""

import argparse
import sys
import time

import numpy as np

from . import DiagAttClassifier, DiagAttRegressor
from .bayes import bayes_localize, bayes_predict
from .datasets import make_individualized_classification, make_individualized_regression
from .metrics import crlr, rmse


def _split(n_train, *arrays):
    return [(a[:n_train], a[n_train:]) for a in arrays]


DESCRIPTION = """\
The skdiagatt demo on simulated data.

It draws matrix-valued samples (p = 100 rows of d = 70 features each, one
row per sample carrying the signal), fits DiagAttRegressor and
DiagAttClassifier with their defaults, and prints on held-out samples the
RMSE or accuracy and the CRLR (the share of true signal rows found) next to
the Bayes references computed from the simulator's truth, then the rows
found for a few samples next to the true rows.
"""


def _count(minimum):
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _seed(text):
    value = _count(0)(text)
    if value >= 2**32:
        raise argparse.ArgumentTypeError(f"must be below 2**32, got {value}")
    return value


def parser():
    """The command line of ``python -m skdiagatt``."""
    p = argparse.ArgumentParser(
        prog="python -m skdiagatt", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--n-train", type=_count(10), default=3000, metavar="N",
                   help="training samples for each estimator, at least 10 (default: %(default)s)")
    p.add_argument("--n-test", type=_count(1), default=1000, metavar="N",
                   help="held-out samples the figures are computed on, at least 1 "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=_seed, default=0,
                   help="random seed of the simulation and of the fits, 0 to 2**32 - 1; the same "
                        "seed prints the same figures (default: %(default)s)")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    n = args.n_train + args.n_test
    print(f"skdiagatt demo: n_train={args.n_train}, n_test={args.n_test}, p=100, d=70, seed={args.seed}")

    X, y, rows, truth = make_individualized_regression(n, random_state=args.seed)
    (X_tr, X_te), (y_tr, y_te), (_, rows_te) = _split(args.n_train, X, y, rows)
    start = time.perf_counter()
    reg = DiagAttRegressor(random_state=args.seed).fit(X_tr, y_tr)
    fit_s = time.perf_counter() - start
    found = reg.localize(X_te)
    print("\nRegression, one signal row per sample (the DiagAtt paper, Section 5.1):")
    print(f"  {'':28s}{'RMSE':>8s}{'CRLR':>8s}")
    print(f"  {'DiagAttRegressor (defaults)':28s}{rmse(y_te, reg.predict(X_te)):8.3f}"
          f"{crlr(rows_te, found):8.3f}   fit {fit_s:.1f} s")
    print(f"  {'Bayes reference (knows mu,':28s}{rmse(y_te, bayes_predict(X_te, truth)):8.3f}"
          f"{crlr(rows_te, bayes_localize(X_te, truth)):8.3f}")
    print(f"  {' Sigma, beta; not the rows)':28s}")
    print(f"  {'Oracle told the rows':28s}{truth.noise:8.3f}{1.0:8.3f}")
    print(f"  standard deviation of y: {y_te.std():.3f}")
    print("  first test samples, rows found vs true rows:")
    for i in range(min(5, args.n_test)):
        print(f"    X_test[{i}]: found {found[i].tolist()}  true {rows_te[i].tolist()}")

    X, y, rows, truth = make_individualized_classification(n, random_state=args.seed)
    (X_tr, X_te), (y_tr, y_te), (_, rows_te) = _split(args.n_train, X, y, rows)
    start = time.perf_counter()
    clf = DiagAttClassifier(random_state=args.seed).fit(X_tr, y_tr)
    fit_s = time.perf_counter() - start
    print("\nClassification, Gaussian-mixture signal row (the DiagAtt paper, Section 5.2):")
    print(f"  DiagAttClassifier: accuracy {np.mean(clf.predict(X_te) == y_te):.4f}, "
          f"CRLR {crlr(rows_te, clf.localize(X_te)):.4f}, fit {fit_s:.1f} s")
    print(f"  Bayes localizer CRLR {crlr(rows_te, bayes_localize(X_te, truth)):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
