"""The one door for matrix-valued samples: validate, pad to buckets, unpad.

A data set is a sequence of n 2-D arrays ``X[i]`` of shape ``(p_i, d)`` sharing
``d`` (or a 3-D array ``(n, p, d)``).  Kernels need rectangular arrays, so
samples are grouped by *bucket length* -- the smallest value of a fixed
geometric grid that holds them -- and padded with zeros to it, with a boolean
mask marking the real rows.  The grid does not depend on the data, so a later
call with samples of the same buckets reuses the compiled kernels, and the
padding wasted per sample stays below about 20% (plus rounding to 8 rows).
A coarser grid (:data:`COARSE`, about 50% apart) trades padding for fewer
bucket lengths, hence fewer compiled programs: the attention estimators use
it, whose programs take seconds to compile and little time to run on a
minibatch of padding.  Data sets so small that all their samples padded to
the longest one's bucket hold at most :data:`ONE_BUCKET_ROWS` rows go to that
one bucket: there, every extra bucket costs a compiled program (about a
second) and saves a few microseconds of padded arithmetic.

Training may instead pack the samples (:func:`make_blocks`): each sample's rows
are stored one after the other in blocks of a few rows, so that minibatches
mix samples of any length without padding them to a common one.
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "FINE", "COARSE", "ONE_BUCKET_ROWS", "check_ragged", "take", "bucket_length", "padded_lengths", "Buckets",
    "make_buckets", "Blocks", "make_blocks", "unpad",
]

_ALIGN = 8
# Growth of the bucket grid from one length to the next: FINE pads less,
# COARSE has fewer bucket lengths, hence fewer programs to compile.
FINE = 1.2
COARSE = 1.5
#: Padded rows (samples x longest bucket length) up to which a data set is one bucket.
ONE_BUCKET_ROWS = 1 << 15


def _grid(max_len, growth):
    grid = [1, 2, 4, 8]
    x = float(_ALIGN)
    while grid[-1] < max_len:
        x *= growth
        v = _ALIGN * math.ceil(x / _ALIGN)
        if v > grid[-1]:
            grid.append(v)
    return grid


def bucket_length(p, growth=FINE):
    """Padded length of a sample with ``p`` rows (a value of the fixed grid of this ``growth``).

    >>> [bucket_length(p) for p in (1, 3, 8, 9, 33, 100)]
    [1, 4, 8, 16, 40, 104]
    >>> from skdiagatt._shared.ragged import COARSE
    >>> [bucket_length(p, COARSE) for p in (1, 3, 8, 9, 33, 100)]
    [1, 4, 8, 16, 48, 144]
    """
    return next(g for g in _grid(p, growth) if g >= p)


def padded_lengths(lengths, growth=FINE, one_bucket_rows=None):
    """The bucket length of each of the samples of ``lengths`` rows, as :func:`make_buckets` pads them.

    Each its own :func:`bucket_length`, or all the longest one's when the
    data set padded to it holds at most ``one_bucket_rows`` rows (None:
    :data:`ONE_BUCKET_ROWS`).

    >>> padded_lengths([3, 9, 4]).tolist()
    [16, 16, 16]
    >>> padded_lengths([3, 9] * 2000).tolist()[:2]
    [4, 16]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    one_bucket_rows = ONE_BUCKET_ROWS if one_bucket_rows is None else one_bucket_rows
    # One grid lookup per distinct length, not per sample.
    distinct, inverse = np.unique(lengths, return_inverse=True)
    padded = np.array([bucket_length(int(p), growth) for p in distinct], dtype=np.int64)[inverse.ravel()]
    if padded.size and padded.size * padded.max() <= one_bucket_rows:
        padded[:] = padded.max()
    return padded


#: For one table where samples were expected: scikit-learn's transformers take
#: tables, so a step before ours may have stacked or flattened the samples.
ROW_WISE_HINT = (
    "if a scikit-learn transformer made one table of the samples, transform each sample's rows instead: "
    "skdiagatt.RowStandardScaler, skdiagatt.RowPCA, or skdiagatt.RowWise(transformer) for any other"
)


def check_ragged(X, *, n_features=None, name="X", dtype=np.float32):
    """Validate matrix-valued samples and return them as a list of arrays.

    Parameters
    ----------
    X : sequence of array-like of shape (p_i, d), or array-like of shape (n, p, d)
    n_features : int, optional
        The ``d`` every sample must have (the one seen in ``fit``).
    name : str
        Name used in error messages.
    dtype : numpy dtype
        dtype of the returned arrays.

    Returns
    -------
    list of ndarray of shape (p_i, d)

    Raises
    ------
    TypeError
        If ``X`` or one of its samples is not numeric, or ``X`` is a string,
        a mapping or a scalar.
    ValueError
        Naming the sample: wrong number of dimensions, no rows, a feature
        count different from the others (or from ``fit``), NaN or infinity.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt._shared.ragged import check_ragged
    >>> X = check_ragged([np.ones((2, 3)), np.zeros((5, 3), dtype=int)])
    >>> [x.shape for x in X], X[1].dtype
    ([(2, 3), (5, 3)], dtype('float32'))
    >>> len(check_ragged(np.zeros((4, 6, 3))))     # a 3-D array: 4 samples
    4
    >>> check_ragged([np.ones((2, 3)), np.ones((2, 4))])
    Traceback (most recent call last):
    ...
    ValueError: X[1] has 4 features, expected 3 (like X[0])
    >>> check_ragged([np.ones((2, 3)), np.full((1, 3), 1e39)])
    Traceback (most recent call last):
    ...
    ValueError: X[1] contains infinity at row 0, column 0 after conversion to float32 (value too large)
    """
    if isinstance(X, (str, bytes, dict)) or np.isscalar(X) or X is None:
        raise TypeError(
            f"{name} must be a list of 2-D arrays or a 3-D array, got {type(X).__name__}"
        )
    if isinstance(X, np.ndarray) and X.dtype != object:
        if X.ndim != 3:
            hint = f"; for a single sample x, wrap one sample as [x]; {ROW_WISE_HINT}" if X.ndim == 2 else ""
            raise ValueError(
                f"{name} must be a list of 2-D arrays or a 3-D array (n, p, d); "
                f"got an array of shape {X.shape}{hint}"
            )
        if len(X):
            # Every sample of a 3-D array has the layout of the first: check it
            # once, then convert and scan all values in one pass instead of a
            # pass per sample.  A NaN or an infinity falls through to the
            # per-sample pass, which names it.
            _checked_layout(X[0], f"{name}[0]", n_features, n_features, name)
            with np.errstate(over="ignore", invalid="ignore"):
                converted = X.astype(dtype, copy=False)
            if _all_finite(converted):
                return list(converted)
        samples = list(X)
    else:
        try:
            samples = list(X)
        except TypeError:
            raise TypeError(
                f"{name} must be a list of 2-D arrays or a 3-D array, got {type(X).__name__}"
            ) from None
    if len(samples) == 0:
        raise ValueError(f"{name} has no samples")
    out = []
    expected = n_features
    for i, xi in enumerate(samples):
        try:
            arr, expected = _checked_layout(xi, f"{name}[{i}]", expected, n_features, name)
        except ValueError as exc:
            if all(np.ndim(v) == 1 for v in samples):
                # A list of rows: one sample passed where a list of samples is expected.
                raise ValueError(f"{exc}; {name} looks like one sample x: wrap one sample as [x]") from None
            raise
        with np.errstate(over="ignore", invalid="ignore"):
            arr = arr.astype(dtype, copy=False)
        if not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))[0]
            what = "NaN" if np.isnan(arr[tuple(bad)]) else "infinity"
            big = np.issubdtype(np.asarray(xi).dtype, np.floating) and np.all(
                np.isfinite(np.asarray(xi))
            )
            extra = f" after conversion to {np.dtype(dtype).name} (value too large)" if big else ""
            raise ValueError(
                f"{name}[{i}] contains {what} at row {bad[0]}, column {bad[1]}{extra}"
            )
        out.append(arr)
    return out


def take(values, keep):
    """The entries ``keep`` of ``values`` (a list stays a list); all of them when ``keep`` is None."""
    if keep is None or values is None:
        return values
    return [values[i] for i in keep] if isinstance(values, (list, tuple)) else np.asarray(values)[keep]


def _all_finite(X, block=2**24):
    """``np.isfinite(X).all()`` over slices of the first axis, without a temporary the size of ``X``."""
    step = max(1, block // max(1, X[0].size))
    return all(np.isfinite(X[i : i + step]).all() for i in range(0, len(X), step))


def _checked_layout(xi, label, expected, n_features, name):
    """``xi`` as an array, and the feature count the next samples must have.

    Raises, naming ``label``, if ``xi`` is sparse, not real-valued, not 2-D,
    empty, or has another feature count than ``expected`` (None: any).
    """
    if hasattr(xi, "toarray"):
        raise TypeError(f"{label} is sparse; pass dense arrays")
    arr = np.asarray(xi)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_
    ):
        raise TypeError(f"{label} has non-numeric dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{label} is complex; only real values are supported")
    if arr.ndim != 2:
        raise ValueError(
            f"{label} must be a 2-D array (rows, features), got {arr.ndim}-D "
            f"with shape {arr.shape}"
        )
    p, d = arr.shape
    if p == 0:
        raise ValueError(f"{label} is empty: it has no rows")
    if d == 0:
        raise ValueError(f"{label} has 0 features")
    if expected is not None and d != expected:
        where = "as seen in fit" if n_features is not None else f"like {name}[0]"
        raise ValueError(f"{label} has {d} features, expected {expected} ({where})")
    return arr, d


@dataclass(frozen=True)
class Bucket:
    """Samples of one bucket length, padded.

    Attributes
    ----------
    index : ndarray of int, shape (m,)
        Positions of these samples in the original sequence.
    X : ndarray, shape (m, L, d)
        Samples padded with zeros to length L.
    where : ndarray of bool, shape (m, L)
        True at real rows.
    """

    index: np.ndarray
    X: np.ndarray
    where: np.ndarray

    @property
    def length(self):
        return self.X.shape[1]


@dataclass(frozen=True)
class Buckets:
    """A validated ragged data set grouped into padded buckets.

    Attributes
    ----------
    buckets : tuple of Bucket
        One per distinct bucket length, shortest first.
    lengths : ndarray of int, shape (n,)
        ``p_i`` of every sample.
    n_features : int
    """

    buckets: tuple
    lengths: np.ndarray
    n_features: int

    @property
    def n_samples(self):
        return self.lengths.shape[0]

    @property
    def padded_rows(self):
        """Total rows after padding (real rows plus padding)."""
        return int(sum(b.X.shape[0] * b.X.shape[1] for b in self.buckets))


def make_buckets(samples, growth=FINE, rows=None, one_bucket_rows=None):
    """Group validated samples by bucket length and pad each group.

    Parameters
    ----------
    samples : list of ndarray of shape (p_i, d)
        As returned by :func:`check_ragged`.
    growth : float, default=FINE
        The bucket grid (:func:`bucket_length`).
    rows : callable or None
        ``rows(m)``: the samples a bucket of ``m`` stores, at least ``m``;
        the last ones are empty (no rows).  None: ``m``.
    one_bucket_rows : int or None
        Samples that padded to the longest one's bucket hold at most this
        many rows form that one bucket (0: every sample in its own; None:
        :data:`ONE_BUCKET_ROWS`).

    Returns
    -------
    Buckets

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt._shared.ragged import make_buckets
    >>> b = make_buckets([np.ones((3, 2)), np.ones((9, 2)), np.ones((4, 2))], one_bucket_rows=0)
    >>> [(bk.length, bk.index.tolist()) for bk in b.buckets]
    [(4, [0, 2]), (16, [1])]
    >>> b.buckets[0].X.shape, b.buckets[0].where.sum(axis=1).tolist()
    ((2, 4, 2), [3, 4])
    >>> b.padded_rows
    24
    >>> [bk.length for bk in make_buckets([np.ones((3, 2)), np.ones((9, 2))]).buckets]  # small: one bucket
    [16]
    """
    lengths = np.array([s.shape[0] for s in samples], dtype=np.int64)
    d = samples[0].shape[1]
    padded = padded_lengths(lengths, growth, one_bucket_rows)
    out = []
    for L in np.unique(padded):
        index = np.flatnonzero(padded == L)
        stored = index.size if rows is None else rows(index.size)
        Xb = np.zeros((stored, int(L), d), dtype=samples[0].dtype)
        where = np.arange(int(L))[None, :] < np.pad(lengths[index], (0, stored - index.size))[:, None]
        if np.all(lengths[index] == L):
            np.stack([samples[i] for i in index], out=Xb[: index.size])
        else:
            for k, i in enumerate(index):
                Xb[k, : lengths[i]] = samples[i]
        out.append(Bucket(index=index, X=Xb, where=where))
    return Buckets(buckets=tuple(out), lengths=lengths, n_features=d)


@dataclass(frozen=True)
class Blocks:
    """Validated samples, their rows in blocks of C rows, one sample after another.

    Attributes
    ----------
    X : ndarray, shape (K, C, d)
        Sample i's rows fill blocks ``first[i]`` to ``first[i + 1] - 1``; its
        last block is completed with zeros.  Block ``K - 1`` is all padding
        (filler of the minibatches points there).
    valid : ndarray of bool, shape (K, C)
        True at real rows.
    first : ndarray of int, shape (n + 1,)
        The first block of every sample, and the end of the last one.
    """

    X: np.ndarray
    valid: np.ndarray
    first: np.ndarray

    @property
    def n_samples(self):
        return self.first.shape[0] - 1


def make_blocks(samples, rows_per_block):
    """Store validated samples in blocks of ``rows_per_block`` rows, plus one block of padding.

    Parameters
    ----------
    samples : list of ndarray of shape (p_i, d)
        As returned by :func:`check_ragged`.
    rows_per_block : int

    Returns
    -------
    Blocks

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt._shared.ragged import make_blocks
    >>> b = make_blocks([np.ones((3, 2)), np.ones((1, 2)), np.ones((4, 2))], 2)
    >>> b.X.shape, b.first.tolist()
    ((6, 2, 2), [0, 2, 3, 5])
    >>> b.valid.sum(axis=1).tolist()                  # the last block is padding
    [2, 1, 1, 2, 2, 0]
    """
    C = rows_per_block
    lengths = np.array([s.shape[0] for s in samples], dtype=np.int64)
    counts = -(-lengths // C)
    first = np.concatenate([[0], np.cumsum(counts)])
    K = int(first[-1]) + 1
    flat = np.zeros((K * C, samples[0].shape[1]), dtype=samples[0].dtype)
    valid = np.zeros(K * C, dtype=bool)
    for i, s in enumerate(samples):
        flat[first[i] * C : first[i] * C + s.shape[0]] = s
        valid[first[i] * C : first[i] * C + s.shape[0]] = True
    return Blocks(X=flat.reshape(K, C, -1), valid=valid.reshape(K, C), first=first)


def unpad(buckets, per_bucket, *, rows=True):
    """Scatter per-bucket results back to one entry per original sample.

    Parameters
    ----------
    buckets : Buckets
    per_bucket : sequence of ndarray
        ``per_bucket[b]`` has shape (m_b, ..., L_b) for row-level results (cut
        to each sample's ``p_i`` along the last axis), or (m_b, ...) for
        sample-level results (``rows=False``).
    rows : bool

    Returns
    -------
    list of n ndarray of shape (..., p_i) if ``rows``, else ndarray of shape (n, ...)

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt._shared.ragged import make_buckets, unpad
    >>> b = make_buckets([np.ones((3, 2)), np.ones((9, 2)), np.ones((4, 2))])
    >>> rows = unpad(b, [bk.where.astype(float) for bk in b.buckets])   # row-level
    >>> [r.shape for r in rows]
    [(3,), (9,), (4,)]
    >>> unpad(b, [bk.where.sum(axis=1) for bk in b.buckets], rows=False).tolist()
    [3, 9, 4]
    """
    if not rows:
        first = np.asarray(per_bucket[0])
        out = np.empty((buckets.n_samples,) + first.shape[1:], dtype=first.dtype)
        for b, res in zip(buckets.buckets, per_bucket):
            out[b.index] = np.asarray(res)
        return out
    out = [None] * buckets.n_samples
    for b, res in zip(buckets.buckets, per_bucket):
        res = np.asarray(res)
        for k, i in enumerate(b.index):
            out[i] = res[k][..., : buckets.lengths[i]]
    return out
