"""A new user's path: a 3-D array of images to a picture of the patch that decided."""

import warnings

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _bars(n, seed=0):
    """12 x 12 noisy images, a 4 x 4 patch holding a bar: horizontal (label 1) or vertical (0)."""
    rng = np.random.RandomState(seed)
    images = 0.4 * rng.random_sample((n, 12, 12))
    labels, where = rng.randint(2, size=n), rng.randint(9, size=n)
    for image, label, j in zip(images, labels, where):
        r, c = 4 * (j // 3), 4 * (j % 3)
        (image[r + 1 : r + 3, c : c + 4] if label else image[r : r + 4, c + 1 : c + 3])[:] = 1.0
    return images, labels, where


def test_images_to_a_localization_picture():
    images, y, where = _bars(200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short fit: ConvergenceWarning
        # --- the user's lines (10): images -> patches -> pipeline -> localize -> plot ---
        from sklearn.pipeline import make_pipeline

        import skdiagatt
        from skdiagatt.images import image_to_patches
        from skdiagatt.plotting import plot_patches

        X, grid = image_to_patches(images, 4)  # 200 samples of 9 patch rows
        pipe = make_pipeline(skdiagatt.RowStandardScaler(),
                             skdiagatt.DiagAttClassifier(max_iter=10, random_state=0)).fit(X, y)
        found = skdiagatt.localize(pipe, X)
        ax = plot_patches(images[0], grid, 0, values=skdiagatt.attention(pipe, X[:1])[0],
                          true_rows=[where[0]], chosen_rows=found[0])
        # ------------------------------------------------------------------------------
    assert np.mean([f[0] == w for f, w in zip(found, where)]) > 0.9
    assert pipe.score(X, y) > 0.9
    assert len(ax.patches) == 2 and len(ax.images) == 1  # outlines; the image under frames
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["true patch", "localized patch"]
    plt.close(ax.figure)
