"""skdiagatt.plotting, drawn headless (Agg)."""

import sys
import warnings

import matplotlib
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from skdiagatt import DiagAttRegressor, RowStandardScaler  # noqa: E402
from skdiagatt.images import image_to_patches  # noqa: E402
from skdiagatt.plotting import (  # noqa: E402
    plot_history,
    plot_learning_curve,
    plot_patches,
    plot_tokens,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _boxed(ax):
    return [t.get_text() for t in ax.texts
            if t.get_bbox_patch() is not None and t.get_bbox_patch().get_edgecolor() == (0, 0, 0, 1)]


def _luminance(colour):
    r, g, b = matplotlib.colors.to_rgb(colour)
    return 0.299 * r + 0.587 * g + 0.114 * b


def test_tokens_shaded_and_selected():
    fig, ax = plt.subplots()
    tokens = [["a", "good", "un", "##usual", "film"], ["dull"]]
    weights = [np.array([[0.1, 0.5, 0.1, 0.1, 0.2]]), np.array([1.0])]
    assert plot_tokens(tokens, weights, selected=[[1], [0]], labels=["fresh", "rotten"], ax=ax) is ax
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["fresh", "a", "good", "un", "usual", "film", "rotten", "dull"]
    assert _boxed(ax) == ["good", "dull"]
    colours = {t.get_text(): t.get_bbox_patch().get_facecolor() for t in ax.texts[1:6]}
    assert colours["good"] != colours["a"]  # the largest weight is the darkest shade
    # Contributions of both signs: a diverging map whose centre is white, zero stays white.
    signed = plot_tokens(["up", "zero", "down"], [1.0, 0.0, -1.0])
    centre = [t.get_bbox_patch().get_facecolor() for t in signed.texts][1]
    assert np.allclose(centre[:3], plt.get_cmap("RdBu_r")(0.5)[:3])
    with pytest.raises(ValueError, match="3 tokens but values of shape"):
        plot_tokens(["a", "b", "c"], [0.5, 0.5])


@pytest.mark.parametrize("cmap", [None, "viridis"])
def test_token_text_stays_readable_on_its_shade(cmap):
    ax = plot_tokens(["low", "mid", "high"], [0.0, 0.5, 1.0], cmap=cmap)
    for t in ax.texts:
        face = t.get_bbox_patch().get_facecolor()
        assert abs(_luminance(t.get_color()) - _luminance(face)) > 0.4, t.get_text()
    # the default map is used only up to a light shade: black text on every token
    if cmap is None:
        assert {t.get_color() for t in ax.texts} == {"black"}


def test_tokens_key_names_the_shade_and_the_box():
    ax = plot_tokens([["a", "fine", "film"], ["dull"]], [[0.1, 0.7, 0.2], [1.0]],
                     selected=[[1], [0]])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["selected token"]
    (bar,) = ax.child_axes
    assert "attention weight" in bar.get_ylabel()
    assert [t.get_text() for t in bar.get_xticklabels()] == ["lowest", "highest"]
    # the key sits under the texts, inside the figure
    assert 0 <= bar.get_window_extent().y0
    assert bar.get_window_extent().y1 < min(t.get_window_extent().y0 for t in ax.texts)
    signed = plot_tokens(["up", "down"], [1.0, -1.0], values_label="contribution to the logit")
    (bar,) = signed.child_axes
    assert "contribution to the logit" in bar.get_ylabel()
    assert [t.get_text() for t in bar.get_xticklabels()] == ["most negative", "0", "most positive"]
    assert signed.get_legend() is None  # nothing selected, nothing to explain
    bare = plot_tokens(["a", "b"], [0.2, 0.8], selected=[1], key=False)
    assert bare.child_axes == [] and bare.get_legend() is None


def test_tokens_wrap_within_the_axes():
    ax = plot_tokens(["word"] * 200, np.ones(200))
    lines = {round(t.get_position()[1], 3) for t in ax.texts}
    assert len(lines) > 3
    right = max(t.get_window_extent().x1 for t in ax.texts)
    assert right <= ax.figure.bbox.width + 1


def test_patches_marks_true_and_chosen_and_shades():
    image = np.random.RandomState(0).random_sample((8, 12))
    _, grid = image_to_patches([image, image[:4]], 4)
    fig, ax = plt.subplots()
    out = plot_patches(image, grid, 0, values=np.eye(2, 6), true_rows=[5], chosen_rows=[4], ax=ax,
                       overlay="fill")
    assert out is ax and len(ax.images) == 2 and ax.images[1].get_alpha() == 0.5
    (true, chosen) = ax.patches
    assert true.get_linestyle() == "--" and chosen.get_linestyle() == "-"
    assert (chosen.get_x(), chosen.get_y(), chosen.get_width()) == (3.5, 3.5, 4.0)
    assert (true.get_x(), true.get_y(), true.get_width()) == (6.5, 2.5, 6.0)
    shaded = ax.images[1].get_array()
    assert shaded[0, 0] == 1.0 and shaded[0, 4] == 1.0 and shaded[0, 8] == 0.0  # heads summed
    alone = plot_patches(None, grid, 1, values=[1.0, 2.0, 3.0], grid_lines=False)
    assert len(alone.images) == 1 and alone.get_lines() == []
    assert alone.images[0].get_alpha() == 1.0 and alone.get_legend() is None
    with pytest.raises(ValueError, match=r"image has shape \(8, 12\) but image 1"):
        plot_patches(image, grid, 1)
    with pytest.raises(ValueError, match="overlay must be"):
        plot_patches(image, grid, 0, values=np.ones(6), overlay="shade")


def test_patch_frames_leave_the_image_visible():
    image = np.random.RandomState(0).random_sample((8, 12))
    _, grid = image_to_patches([image], 4)
    values = np.array([0.0, 0.1, 0.2, 0.3, 0.9, 0.5])
    ax = plot_patches(image, grid, 0, values=values, true_rows=[5], chosen_rows=[4])
    # the image is the only picture, drawn opaque and below the overlay
    (drawn,) = ax.images
    assert drawn.get_alpha() is None
    np.testing.assert_array_equal(drawn.get_array(), image)
    (frames,) = ax.collections
    assert frames.get_zorder() > drawn.get_zorder()
    colours = frames.get_facecolors()
    assert len(colours) == 6 and np.all(colours[:, 3] == 1.0)
    assert int(np.argmin([_luminance(c) for c in colours])) == 4  # the largest value, darkest
    # each frame inside its patch, clear of the outlines on the patch border
    for path, (top, left, bottom, right) in zip(frames.get_paths(), grid.boxes(0)):
        (x0, y0), (x1, y1) = path.get_extents().get_points()
        assert left - 0.5 < x0 < x1 < right - 0.5 and top - 0.5 < y0 < y1 < bottom - 0.5
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["true patch", "localized patch"]
    (bar,) = [a for a in ax.figure.axes if a is not ax]
    assert bar.get_ylabel() == "attention weight"
    np.testing.assert_allclose(bar.get_ylim(), [0.0, 0.9])


def test_patch_frames_leave_the_pixels_inside_drawn():
    # Rendered: a white image, every patch of the largest value (the darkest
    # frame).  The middle of a patch shows the image; only its ring is dark.
    image = np.zeros((8, 12))
    _, grid = image_to_patches([image], 4)
    fig, ax = plt.subplots(figsize=(4, 3))
    plot_patches(image, grid, 0, values=np.ones(6), vmin=0, vmax=1, ax=ax, colorbar=False,
                 grid_lines=False)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())

    def colour_at(x, y):
        u, v = ax.transData.transform((x, y))
        return pixels[int(pixels.shape[0] - v), int(u), :3]

    for top, left, bottom, right in grid.boxes(0):
        middle = ((left + right - 1) / 2, (top + bottom - 1) / 2)
        assert colour_at(*middle).tolist() == [255, 255, 255]
        assert colour_at(left - 0.1, middle[1]).max() < 128  # the ring, dark
    fill = plot_patches(image, grid, 0, values=np.ones(6), vmin=0, vmax=1, overlay="fill", ax=ax)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())
    assert fill is ax and colour_at(1.5, 1.5).max() < 255  # "fill" does cover the middle


def test_patches_share_one_colour_bar():
    image = np.zeros((4, 8))
    _, grid = image_to_patches([image, image], 4)
    fig, axes = plt.subplots(1, 2)
    for k, ax in enumerate(axes):
        plot_patches(image, grid, k, values=[0.2, 0.8], vmin=0, vmax=1, ax=ax,
                     colorbar=list(axes) if k == 1 else False, values_label="weight")
    (bar,) = [a for a in fig.axes if a not in list(axes)]
    assert bar.get_ylabel() == "weight" and bar.get_ylim() == (0.0, 1.0)
    assert axes[0].get_legend() is None  # no outline: no legend
    plain = plot_patches(image, grid, 0, values=[0.2, 0.8], colorbar=False)
    assert plain.figure.axes == [plain]


@pytest.fixture(scope="module")
def fitted():
    X = np.random.RandomState(0).normal(size=(40, 5, 3))
    pipe = make_pipeline(RowStandardScaler(),
                         DiagAttRegressor(max_iter=3, calibration_iter=2, early_stopping=True,
                                          random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return pipe.fit(X, X[:, 0, 0])


def test_history_marks_the_phase_switch(fitted):
    ax = plot_history(fitted)  # through the pipeline
    est = fitted[-1]
    lines = ax.get_lines()
    labels = [line.get_label() for line in lines]
    assert labels[:2] == ["main phase", "main phase (validation)"]
    assert "calibration" in labels
    switch = [line for line in lines if line.get_linestyle() == "--"]
    assert len(switch) == 1 and switch[0].get_xdata()[0] == est.loss_curve_phase_.count("main") + 0.5
    y = np.concatenate([line.get_ydata() for line in lines if line.get_marker() == "o"])
    np.testing.assert_array_equal(y, est.loss_curve_)
    with pytest.raises(TypeError, match="RowStandardScaler has no loss_curve_"):
        plot_history(fitted[0])


def test_learning_curve_mean_and_band():
    fig, ax = plt.subplots()
    assert plot_learning_curve([10, 100], [[0.2, 0.4], [0.8, 0.8]], label="a", ax=ax,
                               references={"chance": 0.1}) is ax
    plot_learning_curve([10, 100], [0.1, 0.3], label="b", ax=ax)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [0.3, 0.8])
    assert len(ax.collections) == 1  # one band: the single-repetition curve has none
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    with pytest.raises(ValueError, match="one row per size"):
        plot_learning_curve([10, 100, 1000], [0.1, 0.3])


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    # the package is installed from a source checkout (README): name the extra as such
    with pytest.raises(ImportError, match=r'the "plot" extra\): pip install -e "\.\[plot\]".*pip install matplotlib'):
        plot_learning_curve([1], [1.0])
