"""DiagAtt at the sample sizes users have: localization and error against the Bayes references.

Writes ``docs/results/sample_efficiency.md`` and ``docs/results/sample_efficiency.png`` (the learning curve).

    python benchmarks/sample_efficiency.py            # one seed, fewer sizes, into /tmp
    python benchmarks/sample_efficiency.py --sections paper-500 paper-1000   # measured into the page

The page is measured section by section, each under 15 minutes on 2 cores
(``--sections`` merges what it measures into the page's JSON and re-renders
it): paper-500, paper-1000, paper-3000, paper-9000, structures, floor,
classification, heads and timing.

Every figure is the mean over data seeds of a test set of 2,000 samples; the
Bayes references know the simulator's truth but not the rows.  Library
defaults throughout; "previous defaults" is ``init="zeros", alpha=3e-3,
alpha_value=0``: uniform attention at the start, a fixed penalty towards it
and no penalty on the read-out.

    python benchmarks/sample_efficiency.py --ablation # the alternatives, n = 500 and 1,000
"""

import argparse
import json
import os
import platform
import sys
import time

import jax
import numpy as np
from sklearn.linear_model import LogisticRegressionCV, RidgeCV

import skdiagatt
from skdiagatt import DiagAttClassifier, DiagAttRegressor
from skdiagatt.baselines import TwoStepRegressor
from skdiagatt.bayes import bayes_localize, bayes_predict, bayes_predict_proba
from skdiagatt.datasets import (
    SIGNAL_STRUCTURES,
    make_individualized_classification,
    make_individualized_regression,
    make_structured_regression,
)
from skdiagatt.metrics import crlr, rmse

RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "results")
UNIFORM = dict(init="zeros", alpha=3e-3, alpha_value=0.0)
#: The defaults with W as trained, not shrunk (``rank="auto"`` is the default).
FULL_W = dict(rank=None)
ABLATIONS = [
    ("previous defaults: uniform start, fixed penalty towards it, no read-out penalty "
     "(`init=\"zeros\", alpha=3e-3, alpha_value=0`)", UNIFORM),
    ("uniform start, penalty 30 / n (`init=\"zeros\"`)", dict(init="zeros")),
    ("mixture start, no penalty (`alpha=0`)", dict(alpha=0.0)),
    ("mixture start, fixed penalty towards it (`alpha=3e-3`)", dict(alpha=3e-3)),
    ("mixture start always, not chosen by cross-validation (`init=\"mixture\"`)", dict(init="mixture")),
    ("the defaults without the evidence read-out (`alpha_value=0`)", dict(alpha_value=0.0)),
    ("the defaults: start chosen by cross-validation, penalty 30 / n, evidence read-out", dict()),
    ("the defaults with `learning_rate=0.002`", dict(learning_rate=0.002)),
]
N_TEST = 2000


def _machine():
    return (
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"jax {jax.__version__} ({jax.default_backend()}), skdiagatt {skdiagatt.__version__}"
    )


def _draw(structure, n, seed, n_signal=1):
    """Training and test parts of one data set: (X_tr, y_tr, X_te, y_te, rows_te, truth)."""
    if structure == "paper":
        X, y, rows, truth = make_individualized_regression(n + N_TEST, n_signal=n_signal,
                                                           random_state=seed)
    else:
        X, y, rows, truth = make_structured_regression(n + N_TEST, structure, random_state=seed)
    return X[:n], y[:n], X[n:], y[n:], rows[n:], truth


def _pooled(X):
    return np.stack([x.mean(axis=0) for x in X])


def _fit(est, X, y):
    start = time.perf_counter()
    est.fit(X, y)
    return est, time.perf_counter() - start


def regression(structure, n, seed, n_signal=1, random_state=0, baselines=False, **params):
    """One fit of the defaults (and ``params``) on one data set, with its references."""
    X, y, Xt, yt, rows, truth = _draw(structure, n, seed, n_signal)
    est, seconds = _fit(DiagAttRegressor(n_heads=n_signal, random_state=random_state, **params), X, y)
    out = {
        "crlr": crlr(rows, est.localize(Xt)),
        "rmse": rmse(yt, est.predict(Xt)),
        "fit_s": seconds,
        "bayes_crlr": crlr(rows, bayes_localize(Xt, truth)),
        "bayes_rmse": rmse(yt, bayes_predict(Xt, truth)),
        "mean_rmse": rmse(yt, np.full(len(yt), np.mean(y))),
        "start": est.start_,
    }
    if baselines:
        ridge = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(_pooled(X), y)
        out["ridge_rmse"] = rmse(yt, ridge.predict(_pooled(Xt)))
        two = TwoStepRegressor(n_signal=n_signal, random_state=0).fit(X, y)
        out["two_step_crlr"] = crlr(rows, two.localize(Xt))
        out["two_step_rmse"] = rmse(yt, two.predict(Xt))
    return out


def classification(n, seed, random_state):
    X, y, rows, truth = make_individualized_classification(n + N_TEST, random_state=seed)
    Xt, yt, rows = X[n:], y[n:], rows[n:]
    est, seconds = _fit(DiagAttClassifier(random_state=random_state), X[:n], y[:n])
    logistic = LogisticRegressionCV(max_iter=2000).fit(_pooled(X[:n]), y[:n])
    return {
        "accuracy": float(np.mean(est.predict(Xt) == yt)),
        "crlr": crlr(rows, est.localize(Xt)),
        "fit_s": seconds,
        "bayes_accuracy": float(np.mean((bayes_predict_proba(Xt, truth) > 0.5) == yt)),
        "bayes_crlr": crlr(rows, bayes_localize(Xt, truth)),
        "logistic_accuracy": float(np.mean(logistic.predict(_pooled(Xt)) == yt)),
        "start": est.start_,
    }


def _mean(runs, key):
    return float(np.mean([r[key] for r in runs]))


def _check(ok):
    return "PASS" if ok else "FAIL"


def timing(n=9000, repeats=3):
    """Fit seconds of the defaults, the previous defaults and the defaults with W as trained, fitted alternately."""
    X, y, *_ = _draw("paper", n, 0)
    runs = []
    for _ in range(repeats):
        runs.append({name: _fit(DiagAttRegressor(random_state=0, **params), X, y)[1]
                     for name, params in (("defaults", {}), ("previous", UNIFORM), ("full", FULL_W))})
        print(f"timing: {json.dumps(runs[-1])}", flush=True)
    return runs


def floor(structures, sizes, states):
    out = {}
    for structure in structures:
        for n in sizes:
            out[f"{structure} {n}"] = [regression(structure, n, 0, random_state=r, baselines=True) for r in states]
        print(f"floor {structure}: done", flush=True)
    return out


def sections(quick):
    """Section name -> a function measuring that part of the page (a dict to merge into its data)."""
    sizes = (500, 1000) if quick else (500, 1000, 3000, 9000)
    seeds = (0,) if quick else (0, 1, 2)
    states = (0, 1) if quick else (0, 1, 2, 3, 4)

    def paper(n):
        runs = [regression("paper", n, s, baselines=True) for s in seeds]
        print(f"paper n={n}: {json.dumps(runs[0])}", flush=True)
        return {"paper": {n: runs}, "zeros": {n: [regression("paper", n, s, **UNIFORM) for s in seeds]}}

    def structures():
        return {"structures": {s: [regression(s, 1000, seed) for seed in seeds] for s in SIGNAL_STRUCTURES}}

    def classifications():
        return {"classification": {n: [classification(n, 0, r) for r in states] for n in (100, 300, 500, 1000)}}

    def heads():
        return {"heads": {s: [regression("paper", 3000, seed, n_signal=s) for seed in seeds[:1 if quick else 3]]
                          for s in (2, 3)}}

    out = {f"paper-{n}": (lambda n=n: paper(n)) for n in sizes}
    out.update({
        "structures": structures,
        "floor": lambda: {"floor": floor(("paper",) + SIGNAL_STRUCTURES, (100,) if quick else (100, 300), states)},
        "classification": classifications,
        "heads": heads,
    })
    if not quick:
        out["timing"] = lambda: {"timing": timing()}
    return out


def _merge(data, part):
    """``part`` into ``data``: a section's sizes replace those sizes, a whole section replaces the section."""
    for key, value in part.items():
        if isinstance(value, dict) and key in ("paper", "zeros"):
            data.setdefault(key, {}).update(value)
            data[key] = dict(sorted(data[key].items()))
        else:
            data[key] = value


def _paper_table(data):
    bars = {500: (0.04, 1.6), 1000: (0.02, 1.4)}
    lines = [
        "| n | CRLR | Bayes CRLR | gap (points) | RMSE | Bayes RMSE | ratio | fit (s) | "
        "previous defaults CRLR | previous defaults RMSE | two-step CRLR | two-step RMSE | bar |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, runs in data["paper"].items():
        zeros = data["zeros"][n]
        gap = 100 * (_mean(runs, "bayes_crlr") - _mean(runs, "crlr"))
        ratio = _mean(runs, "rmse") / _mean(runs, "bayes_rmse")
        points, most = bars.get(n, (0.015, 1.2))
        ok = gap <= 100 * points and ratio <= most
        lines.append(
            f"| {n:,} | {_mean(runs, 'crlr'):.4f} | {_mean(runs, 'bayes_crlr'):.4f} | {gap:.2f} | "
            f"{_mean(runs, 'rmse'):.3f} | {_mean(runs, 'bayes_rmse'):.3f} | {ratio:.2f} | "
            f"{_mean(runs, 'fit_s'):.1f} | {_mean(zeros, 'crlr'):.4f} | {_mean(zeros, 'rmse'):.3f} | "
            f"{_mean(runs, 'two_step_crlr'):.4f} | {_mean(runs, 'two_step_rmse'):.3f} | "
            f"gap <= {100 * points:g}, ratio <= {most:g}: {_check(ok)} |"
        )
    n = max(data["paper"])
    if "timing" in data:
        runs = data["timing"]
        slower = float(np.median([r["defaults"] / r["previous"] for r in runs]))
        lines += ["", f"Fit time at n = {n:,}, defaults against the previous defaults, fitted alternately "
                  f"{len(runs)} times on data seed 0: {np.median([r['defaults'] for r in runs]):.1f} s against "
                  f"{np.median([r['previous'] for r in runs]):.1f} s, median ratio {slower:.2f}x "
                  f"(bar <= 1.5x: {_check(slower <= 1.5)})."]
        if all("full" in r for r in runs):
            over = float(np.median([r["defaults"] / r["full"] for r in runs]))
            lines += ["", f"Against the defaults with `W` as trained (`rank=None`), in the same alternation: "
                      f"{np.median([r['full'] for r in runs]):.1f} s, median ratio {over:.2f}x "
                      f"(bar <= 1.3x: {_check(over <= 1.3)})."]
    else:
        slower = _mean(data["paper"][n], "fit_s") / _mean(data["zeros"][n], "fit_s")
        lines += ["", f"Fit time at n = {n:,}, defaults against the previous defaults, measured in this run: "
                  f"{slower:.2f}x (bar <= 1.5x: {_check(slower <= 1.5)})."]
    every = [r for runs in data["paper"].values() for r in runs]
    lines += ["", f"Starts chosen by the defaults (`start_`), all sizes and seeds: {_starts(every)}."]
    return lines


def _starts(runs):
    """The starts chosen in ``runs``, with their counts."""
    names = [r.get("start", "?") for r in runs]
    return ", ".join(f"{k} x{names.count(k)}" for k in sorted(set(names)))


def _structure_table(data):
    lines = ["| structure | CRLR | Bayes CRLR | gap (points) | RMSE | Bayes RMSE | start chosen | bar: gap <= 5 |",
             "|---|---|---|---|---|---|---|---|"]
    for structure, runs in data["structures"].items():
        gap = 100 * (_mean(runs, "bayes_crlr") - _mean(runs, "crlr"))
        lines.append(
            f"| {structure} | {_mean(runs, 'crlr'):.4f} | {_mean(runs, 'bayes_crlr'):.4f} | {gap:.2f} | "
            f"{_mean(runs, 'rmse'):.3f} | {_mean(runs, 'bayes_rmse'):.3f} | {_starts(runs)} | {_check(gap <= 5)} |"
        )
    return lines


def _floor_table(data):
    lines = ["| structure, n | RMSE (mean) | min - max over `random_state` | CRLR min - max | "
             "mean of y | mean-pooled ridge | bar: never worse |", "|---|---|---|---|---|---|---|"]
    for key, runs in data["floor"].items():
        worst = max(r["rmse"] for r in runs)
        floor = min(runs[0]["mean_rmse"], runs[0]["ridge_rmse"])
        lines.append(
            f"| {key} | {_mean(runs, 'rmse'):.3f} | {min(r['rmse'] for r in runs):.3f} - {worst:.3f} | "
            f"{min(r['crlr'] for r in runs):.3f} - {max(r['crlr'] for r in runs):.3f} | "
            f"{runs[0]['mean_rmse']:.3f} | {runs[0]['ridge_rmse']:.3f} | {_check(worst <= floor)} |"
        )
    return lines


def _classification_table(data):
    lines = ["| n | accuracy min - max | CRLR min - max | Bayes accuracy | Bayes CRLR | "
             "mean-pooled logistic | bar |", "|---|---|---|---|---|---|---|"]
    for n, runs in data["classification"].items():
        acc = [r["accuracy"] for r in runs]
        loc = [r["crlr"] for r in runs]
        if n >= 500:
            least = 0.98 if n >= 1000 else 0.95
            bar = f"both >= {least}: {_check(min(acc + loc) >= least)}"
        else:
            bar = f"accuracy never below mean-pooled logistic: {_check(min(acc) >= runs[0]['logistic_accuracy'])}"
        lines.append(
            f"| {n:,} | {min(acc):.4f} - {max(acc):.4f} | {min(loc):.4f} - {max(loc):.4f} | "
            f"{runs[0]['bayes_accuracy']:.4f} | {runs[0]['bayes_crlr']:.4f} | "
            f"{runs[0]['logistic_accuracy']:.4f} | {bar} |"
        )
    return lines


def _heads_table(data):
    lines = ["| s = R | CRLR | Bayes CRLR | RMSE | Bayes RMSE | start chosen | bar: CRLR >= 0.97 |",
             "|---|---|---|---|---|---|---|"]
    for s, runs in data["heads"].items():
        lines.append(
            f"| {s} | {_mean(runs, 'crlr'):.4f} | {_mean(runs, 'bayes_crlr'):.4f} | {_mean(runs, 'rmse'):.3f} | "
            f"{_mean(runs, 'bayes_rmse'):.3f} | {_starts(runs)} | {_check(_mean(runs, 'crlr') >= 0.97)} |"
        )
    return lines


def figure(data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(data["paper"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in ((axes[0], "crlr", "CRLR"), (axes[1], "rmse", "test RMSE")):
        for runs, name, style in ((data["paper"], "DiagAtt defaults", "o-"),
                                  (data["zeros"], "DiagAtt, previous defaults", "s--")):
            ax.plot(sizes, [_mean(runs[n], key) for n in sizes], style, label=name)
        ax.plot(sizes, [_mean(data["paper"][n], "two_step_" + key) for n in sizes], "^:", label="two-step")
        ax.plot(sizes, [_mean(data["paper"][n], "bayes_" + key) for n in sizes], "k-", lw=1, label="Bayes")
        ax.set_xscale("log")
        ax.set_xlabel("training samples n")
        ax.set_ylabel(label)
    axes[1].set_yscale("log")
    axes[0].legend()
    fig.suptitle("Paper structure, s = 1, p = 100, d = 70 (mean of the data seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def render(data, machine, png):
    runs = "; then ".join(f"`{r['command']}` ({r['wall']:.0f} s)" for r in data["runs"])
    lines = [
        "# DiagAtt at the sample sizes users have",
        "",
        f"Commands (wall time): {runs}",
        "",
        f"Machine: {machine}",
        "",
        "Test sets of 2,000 samples; means over the data seeds; `random_state=0` unless stated.",
    ]
    parts = [
        ("paper", "Paper structure, s = 1, p = 100, d = 70",
         lambda: _paper_table(data) + ["", f"![learning curve]({os.path.basename(png)})"]),
        ("structures", "Other signal structures, n = 1,000 (`skdiagatt.datasets.make_structured_regression`)",
         lambda: _structure_table(data)),
        ("floor", "The floor: small n, every structure, 5 values of `random_state` (data seed 0)",
         lambda: _floor_table(data)),
        ("classification", "Classification (`make_individualized_classification`, p = 100, d = 70), 5 values of "
         "`random_state` (data seed 0)", lambda: _classification_table(data)),
        ("heads", "Several signal rows (Table 2 settings), n = 3,000, `n_heads` = s", lambda: _heads_table(data)),
    ]
    for key, title, table in parts:
        if key in data:  # a page built section by section shows what it has measured
            lines += ["", f"## {title}", ""] + table()
    return "\n".join(lines) + "\n"


def ablation(seeds):
    lines = ["| training | n | CRLR | gap to Bayes (points) | RMSE / Bayes RMSE |", "|---|---|---|---|---|"]
    for label, params in ABLATIONS:
        for n in (500, 1000):
            runs = [regression("paper", n, s, **params) for s in seeds]
            gap = 100 * (_mean(runs, "bayes_crlr") - _mean(runs, "crlr"))
            ratio = _mean(runs, "rmse") / _mean(runs, "bayes_rmse")
            lines.append(f"| {label} | {n:,} | {_mean(runs, 'crlr'):.4f} | {gap:.2f} | {ratio:.2f} |")
            print(lines[-1], flush=True)
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", default=None,
                        help="measure these sections of the page at full size and merge them into it "
                             "(paper-500 paper-1000 paper-3000 paper-9000 structures floor classification heads "
                             "timing); without, every section at quick size into /tmp")
    parser.add_argument("--out", default=None, help="markdown file to write")
    parser.add_argument("--ablation", action="store_true", help="the alternatives to the defaults")
    args = parser.parse_args(argv)
    command = "python benchmarks/sample_efficiency.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.ablation:
        start = time.perf_counter()
        lines = ablation((0, 1, 2))
        out = args.out or os.path.join(RESULTS, "sample_efficiency_ablation.md")
        head = ["# What decided the start and the penalty of DiagAtt", "", f"Command: `{command.strip()}`",
                "", f"Machine: {_machine()}", "", f"Wall time: {time.perf_counter() - start:.0f} s", "",
                "Paper structure, s = 1, p = 100, d = 70; means over the data seeds; test sets of 2,000.", ""]
        with open(out, "w") as fh:
            fh.write("\n".join(head + lines) + "\n")
        print(f"wrote {out}")
        return
    quick = not args.sections
    out = args.out or (os.path.join("/tmp", "sample_efficiency.md") if quick
                       else os.path.join(RESULTS, "sample_efficiency.md"))
    parts = sections(quick)
    unknown = set(args.sections or ()) - set(parts)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {list(parts)}")
    data, previous = {"runs": []}, os.path.splitext(out)[0] + ".json"
    if not quick and os.path.exists(previous):
        with open(previous) as fh:
            data = {k: ({int(n) if n.isdigit() else n: v for n, v in d.items()} if isinstance(d, dict) else d)
                    for k, d in json.load(fh).items()}
    start = time.perf_counter()
    for name in args.sections or parts:
        _merge(data, parts[name]())
    data["runs"] = data.get("runs", []) + [{"command": command.strip(), "wall": time.perf_counter() - start}]
    png = os.path.splitext(out)[0] + ".png"
    if "paper" in data:
        figure(data, png)
    with open(os.path.splitext(out)[0] + ".json", "w") as fh:
        json.dump(data, fh, indent=1)
    with open(out, "w") as fh:
        fh.write(render(data, _machine(), png))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
