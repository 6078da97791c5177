"""Images as matrix-valued samples: cut each image into patches, one row per patch.

:func:`image_to_patches` turns images into the ragged samples the estimators
take and returns a :class:`PatchGrid` that maps row indices back to pixel
boxes; :meth:`PatchGrid.paint` puts per-row values (attention weights, row
contributions) back onto the image plane and :meth:`PatchGrid.assemble`
rebuilds an image from its patch rows.
"""

import numbers

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["PatchGrid", "image_to_patches"]


def _pair(value, name):
    """An int or a pair of ints, each >= 1, as a tuple (rows, columns)."""
    pair = (value, value) if isinstance(value, numbers.Integral) else tuple(value)
    if len(pair) != 2 or not all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1 for v in pair
    ):
        raise ValueError(f"{name} must be an int >= 1 or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


class PatchGrid:
    """Where each row of each sample made by :func:`image_to_patches` lies in its image.

    Row ``j`` of sample ``i`` is the patch at grid position ``divmod(j,
    n_cols[i])`` (row-major), whose top-left pixel is ``(r * stride[0], c *
    stride[1])``.

    Parameters
    ----------
    shapes : list of tuple
        Each image's shape, (H, W) or (H, W, C).
    patch_size, stride : (int, int)

    Attributes
    ----------
    n_rows, n_cols : ndarray of int, shape (n_images,)
        Patches down and across each image.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.images import image_to_patches
    >>> X, grid = image_to_patches([np.ones((6, 9)), np.ones((3, 3))], 3)
    >>> grid, grid.n_patches(0), grid.boxes(0, [4]).tolist()
    (PatchGrid(2 images, patch_size=(3, 3), stride=(3, 3)), 6, [[3, 3, 6, 6]])
    >>> grid.paint(1, [0.5])
    array([[0.5, 0.5, 0.5],
           [0.5, 0.5, 0.5],
           [0.5, 0.5, 0.5]])
    """

    def __init__(self, shapes, patch_size, stride):
        self.shapes = [tuple(int(v) for v in s) for s in shapes]
        self.patch_size = tuple(patch_size)
        self.stride = tuple(stride)
        dims = np.array([s[:2] for s in self.shapes], dtype=np.int64).reshape(-1, 2)
        counts = (dims - np.array(self.patch_size)) // np.array(self.stride) + 1
        self.n_rows, self.n_cols = counts[:, 0], counts[:, 1]

    def __len__(self):
        return len(self.shapes)

    def __repr__(self):
        return f"PatchGrid({len(self)} images, patch_size={self.patch_size}, stride={self.stride})"

    def n_patches(self, i):
        """Rows of sample ``i``."""
        return int(self.n_rows[i] * self.n_cols[i])

    def _rows(self, i, rows):
        p = self.n_patches(i)
        rows = np.arange(p) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < -p or rows.max() >= p):
            raise IndexError(f"image {i} has {p} patches; got rows {rows.tolist()}")
        return rows % p if rows.size else rows

    def boxes(self, i, rows=None):
        """Pixel boxes of rows of sample ``i``.

        Parameters
        ----------
        i : int
            Sample (image) index.
        rows : array-like of int or None
            Row indices (e.g. from ``localize``); None: every row.

        Returns
        -------
        ndarray of shape (len(rows), 4)
            ``(top, left, bottom, right)`` in pixels, bottom and right exclusive.
        """
        r, c = np.divmod(self._rows(i, rows), self.n_cols[i])
        top, left = r * self.stride[0], c * self.stride[1]
        return np.stack([top, left, top + self.patch_size[0], left + self.patch_size[1]], axis=1)

    def paint(self, i, values):
        """Per-row values of sample ``i`` on its image plane.

        Each pixel gets the mean of the values of the patches that cover it
        (a single patch unless the stride is smaller than the patch); pixels
        that no patch covers are NaN.

        Parameters
        ----------
        i : int
        values : array-like of shape (..., p_i)
            One value per row, e.g. ``attention(X)[i]`` of shape (n_heads, p_i).

        Returns
        -------
        ndarray of shape (..., H, W), float64
        """
        values = np.asarray(values, dtype=np.float64)
        p = self.n_patches(i)
        if values.ndim == 0 or values.shape[-1] != p:
            raise ValueError(f"values for image {i} must have {p} entries on the last axis, "
                             f"got shape {values.shape}")
        H, W = self.shapes[i][:2]
        total = np.zeros(values.shape[:-1] + (H, W))
        count = np.zeros((H, W))
        for j, (top, left, bottom, right) in enumerate(self.boxes(i)):
            total[..., top:bottom, left:right] += values[..., j, None, None]
            count[top:bottom, left:right] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / count, np.nan)

    def assemble(self, i, patches):
        """The image of sample ``i`` rebuilt from its patch rows (the default features).

        Parameters
        ----------
        i : int
        patches : array-like of shape (p_i, ph * pw) or (p_i, ph * pw * C)
            Flattened patches, as :func:`image_to_patches` makes without ``features``.

        Returns
        -------
        ndarray of the image's shape; pixels no patch covers are NaN, pixels
        several patches cover get their mean.
        """
        shape = self.shapes[i]
        ph, pw = self.patch_size
        patches = np.asarray(patches, dtype=np.float64)
        expected = (self.n_patches(i), ph * pw * int(np.prod(shape[2:], dtype=int)))
        if patches.shape != expected:
            raise ValueError(f"patches of image {i} must have shape {expected}, got {patches.shape}")
        patches = patches.reshape((-1, ph, pw) + shape[2:])
        total = np.zeros(shape)
        count = np.zeros(shape[:2])
        for (top, left, bottom, right), patch in zip(self.boxes(i), patches):
            total[top:bottom, left:right] += patch
            count[top:bottom, left:right] += 1
        count = count.reshape(count.shape + (1,) * (len(shape) - 2))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / count, np.nan)


def _check_images(images):
    """The images as a list of 2-D or 3-D numeric arrays, each finite and non-empty."""
    if isinstance(images, np.ndarray) and images.dtype != object:
        if images.ndim not in (3, 4):
            raise ValueError(
                "images must be a list of 2-D (H, W) or 3-D (H, W, C) arrays, or an array "
                f"of shape (n, H, W) or (n, H, W, C); got an array of shape {images.shape}"
                + ("; for a single image x, wrap it as [x]" if images.ndim == 2 else "")
            )
    elif isinstance(images, (str, bytes, dict)) or np.isscalar(images) or images is None:
        raise TypeError(f"images must be a list of arrays or an array, got {type(images).__name__}")
    out = []
    for i, image in enumerate(images):
        arr = np.asarray(image)
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise TypeError(f"images[{i}] has non-numeric dtype {arr.dtype}")
        if arr.ndim not in (2, 3):
            raise ValueError(f"images[{i}] must be 2-D (H, W) or 3-D (H, W, C), got shape {arr.shape}")
        if arr.size == 0:
            raise ValueError(f"images[{i}] is empty: shape {arr.shape}")
        if np.issubdtype(arr.dtype, np.inexact) and not np.all(np.isfinite(arr)):
            raise ValueError(f"images[{i}] contains NaN or infinity")
        if out and arr.ndim != out[0].ndim or out and arr.shape[2:] != out[0].shape[2:]:
            raise ValueError(
                f"images[{i}] has shape {arr.shape}, but images[0] has {out[0].shape}: "
                "every image needs the same number of channels"
            )
        out.append(arr)
    if not out:
        raise ValueError("images has no images")
    return out


def image_to_patches(images, patch_size, stride=None, features=None):
    """Cut images into patches: one sample per image, one row per patch.

    Patches are taken row-major over each image (left to right, then down);
    pixels past the last whole patch are left out.  Images may differ in size,
    so samples have different numbers of rows.

    Parameters
    ----------
    images : list of array-like of shape (H_i, W_i) or (H_i, W_i, C), or array of shape (n, H, W) or (n, H, W, C)
    patch_size : int or (int, int)
        Patch height and width in pixels.
    stride : int or (int, int) or None, default=None
        Step between patches; None: ``patch_size`` (patches tile the image).
        A smaller stride gives overlapping patches.
    features : callable or None, default=None
        ``features(patches) -> (k, f)`` maps the ``k`` patches of one image,
        an array (k, ph, pw) or (k, ph, pw, C), to one row each (an embedding,
        colour histograms, ...).  None: the flattened pixels, ``ph * pw * C``
        columns.

    Returns
    -------
    X : list of ndarray of shape (n_patches_i, f)
        The samples, in the estimators' input format.
    grid : PatchGrid
        Maps row ``j`` of ``X[i]`` to its pixel box (:meth:`PatchGrid.boxes`),
        and per-row values back to pixels (:meth:`PatchGrid.paint`).

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.images import image_to_patches
    >>> images = np.arange(2 * 4 * 6).reshape(2, 4, 6)
    >>> X, grid = image_to_patches(images, 2)
    >>> X[0].shape, grid.boxes(0, [4]).tolist()
    ((6, 4), [[2, 2, 4, 4]])
    >>> grid.paint(0, np.arange(6.0))[:, :3]
    array([[0., 0., 1.],
           [0., 0., 1.],
           [3., 3., 4.],
           [3., 3., 4.]])
    """
    patch = _pair(patch_size, "patch_size")
    step = patch if stride is None else _pair(stride, "stride")
    if features is not None and not callable(features):
        raise TypeError(f"features must be callable or None, got {type(features).__name__}")
    checked = _check_images(images)
    X = []
    for i, image in enumerate(checked):
        if image.shape[0] < patch[0] or image.shape[1] < patch[1]:
            raise ValueError(f"images[{i}] of shape {image.shape} is smaller than a {patch} patch")
        # Windows come back as (rows, cols, [C,] ph, pw): move the channels last.
        windows = sliding_window_view(image, patch, axis=(0, 1))[:: step[0], :: step[1]]
        if image.ndim == 3:
            windows = np.moveaxis(windows, 2, -1)
        windows = windows.reshape((-1,) + windows.shape[2:])
        if features is None:
            X.append(np.ascontiguousarray(windows.reshape(len(windows), -1)))
            continue
        rows = np.asarray(features(windows))
        if rows.ndim != 2 or rows.shape[0] != len(windows):
            raise ValueError(
                f"features must return one row per patch, shape ({len(windows)}, f), for "
                f"images[{i}]; got shape {rows.shape}"
            )
        X.append(rows)
    return X, PatchGrid([a.shape for a in checked], patch, step)
