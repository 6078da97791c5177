"""image_to_patches and PatchGrid: rows to pixel boxes and back."""

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skdiagatt.datasets import make_cluttered_digits
from skdiagatt.images import PatchGrid, image_to_patches


def _tiles(image, s):
    """The former patch cutting of make_cluttered_digits: a 2-D image tiled by s x s."""
    h, w = image.shape[0] // s, image.shape[1] // s
    return image.reshape(h, s, w, s).transpose(0, 2, 1, 3).reshape(h * w, s * s)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 4), st.integers(1, 4), st.integers(1, 3),
    st.integers(1, 3), st.integers(0, 2**31 - 1),
)
def test_tiles_match_the_reshape_and_assemble_inverts(h, w, s, channels, seed):
    rng = np.random.RandomState(seed)
    image = rng.random_sample((h * s, w * s)).astype(np.float32)
    X, grid = image_to_patches([image], s)
    np.testing.assert_array_equal(X[0], _tiles(image, s))
    assert X[0].dtype == np.float32 and X[0].flags.c_contiguous
    np.testing.assert_array_equal(grid.assemble(0, X[0]), image)
    # Channels last: every channel's patches are those of that channel alone.
    colour = rng.random_sample((h * s, w * s, channels))
    Xc, gc = image_to_patches(colour[None], s)
    for c in range(channels):
        np.testing.assert_array_equal(Xc[0].reshape(h * w, s * s, channels)[..., c],
                                      _tiles(colour[..., c], s))
    np.testing.assert_array_equal(gc.assemble(0, Xc[0]), colour)


@pytest.mark.parametrize(
    "kwargs, digest",
    [
        (dict(random_state=0), "532df6771534df3f1b9ad4c977191a6b5e05f147393f75d0b9702e4fc6ecec78"),
        (dict(grid=(2, 4), patch_size=4, random_state=1),
         "4d8e9342b158a4edc08411a85ce21ab359ff95b798b469cd73d7c96b44aab4a9"),
    ],
)
def test_cluttered_digits_unchanged(kwargs, digest):
    """Digests of X, y and rows recorded from the former private patch cutting."""
    X, y, rows, info = make_cluttered_digits(6, **kwargs)
    got = hashlib.sha256(b"".join(x.tobytes() for x in X) + y.tobytes() + rows.tobytes())
    assert got.hexdigest() == digest
    for i, (x, canvas) in enumerate(zip(X, info.canvases)):
        np.testing.assert_array_equal(x, _tiles(canvas, info.patch_size))
        (top, left, bottom, right), = info.patch_grid.boxes(i, rows[i])
        np.testing.assert_array_equal(canvas[top:bottom, left:right].ravel(), x[rows[i, 0]])


def test_boxes_paint_and_overlapping_strides():
    image = np.arange(5 * 7, dtype=float).reshape(5, 7)
    X, grid = image_to_patches([image], (2, 3), stride=(1, 2))
    assert (grid.n_rows[0], grid.n_cols[0]) == (4, 3) and X[0].shape == (12, 6)
    assert grid.boxes(0, [0, 5, -1]).tolist() == [[0, 0, 2, 3], [1, 4, 3, 7], [3, 4, 5, 7]]
    np.testing.assert_allclose(grid.assemble(0, X[0]), image)
    painted = grid.paint(0, np.stack([np.ones(12), np.arange(12.0)]))
    assert painted.shape == (2, 5, 7)
    np.testing.assert_array_equal(painted[0], 1.0)
    assert painted[1, 0, 0] == 0.0 and painted[1, 4, 6] == 11.0
    assert painted[1, 1, 2] == np.mean([0, 1, 3, 4])  # four overlapping patches
    # Pixels past the last whole patch: none here with width 7 = 3 + 2 + 2; a 6-wide image leaves one.
    _, g6 = image_to_patches([image[:, :6]], (2, 3), stride=(1, 2))
    assert np.isnan(g6.paint(0, np.ones(8))[:, 5]).all()
    with pytest.raises(IndexError, match="12 patches"):
        grid.boxes(0, [12])
    with pytest.raises(ValueError, match="12 entries"):
        grid.paint(0, np.ones(11))


def test_ragged_images_and_features():
    images = [np.ones((4, 6)), np.zeros((6, 2)), np.full((2, 2), 3.0)]
    X, grid = image_to_patches(images, 2, features=lambda p: p.mean(axis=(1, 2))[:, None])
    assert [x.shape for x in X] == [(6, 1), (3, 1), (1, 1)] and len(grid) == 3
    assert X[2][0, 0] == 3.0 and isinstance(grid, PatchGrid)
    assert "3 images" in repr(grid)


@pytest.mark.parametrize(
    "images, kwargs, err, match",
    [
        (np.ones((4, 4)), {}, ValueError, r"wrap it as \[x\]"),
        ([np.ones((4, 4)), np.ones(4)], {}, ValueError, r"images\[1\] must be 2-D"),
        ([np.ones((4, 4)), np.full((4, 4), np.nan)], {}, ValueError, r"images\[1\] contains NaN"),
        ([np.ones((4, 4)), np.ones((1, 4))], {}, ValueError, r"images\[1\] .* smaller"),
        ([np.ones((4, 4, 3)), np.ones((4, 4, 2))], {}, ValueError, r"images\[1\] .* channels"),
        ([np.array([["a"]])], {}, TypeError, r"images\[0\] has non-numeric"),
        ([], {}, ValueError, "no images"),
        ("abc", {}, TypeError, "images must be"),
        ([np.ones((4, 4))], dict(stride=0), ValueError, "stride must be"),
        ([np.ones((4, 4))], dict(features=lambda p: p[:1, 0]), ValueError, r"one row per patch"),
        ([np.ones((4, 4))], dict(features="mean"), TypeError, "callable"),
    ],
)
def test_bad_input_is_named(images, kwargs, err, match):
    with pytest.raises(err, match=match):
        image_to_patches(images, 2, **kwargs)
