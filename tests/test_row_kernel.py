"""``kernel``: DiagAtt on the rows as given, with their squares or as Gaussian-kernel rows, and the choice."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import Pipeline

from skdiagatt import DiagAttClassifier, DiagAttRegressor
from skdiagatt.diagatt._row_kernel import MAX_SQUARES_WIDTH, N_COMPONENTS, _row_map

FAST = dict(max_iter=3, random_state=0)


@pytest.fixture(scope="module")
def spread_bags():
    """Bags labelled by the spread of their rows: the mean row carries nothing, a kernel mean embedding does."""
    rng = np.random.RandomState(0)
    y = rng.randint(2, size=160)
    X = [rng.randn(rng.randint(8, 16), 4) * (1.6 if label else 0.6) for label in y]
    return X, y


def test_rbf_rows_fit_predict_and_pickle(spread_bags):
    X, y = spread_bags
    clf = DiagAttClassifier(kernel="rbf", **FAST).fit(X, y)
    assert clf.kernel_ == "rbf" and isinstance(clf.row_map_, Pipeline)
    assert clf.n_features_in_ == 4 and clf.params_["W"].shape == (1, N_COMPONENTS, N_COMPONENTS)
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), 2) and np.all(np.isfinite(proba))
    assert [a.shape for a in clf.attention(X[:3])] == [(1, len(x)) for x in X[:3]]
    assert clf.query_key_.shape == (1, N_COMPONENTS, N_COMPONENTS)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(X), proba)
    np.testing.assert_array_equal(clone(clf).fit(X, y).predict_proba(X), proba)
    with pytest.raises(ValueError, match=r"X\[0\] has 3 features, expected 4"):
        clf.predict([np.ones((2, 3))])


def test_rows_beyond_the_training_range_are_mapped_as_the_range_s_edge(spread_bags):
    X, y = spread_bags
    clf = DiagAttClassifier(kernel="squares+rbf", **FAST).fit(X, y)
    rows = np.concatenate(X)
    far = rows[:3] + np.array([100.0, -100.0, 0.0, 0.0])  # two features far out, two within
    edge = np.clip(far, rows.min(0), rows.max(0))
    assert not np.array_equal(edge, far)
    np.testing.assert_array_equal(clf.row_map_.transform(far), clf.row_map_.transform(edge))
    out, inside = clf.decision_function([far]), clf.decision_function([edge])
    np.testing.assert_array_equal(out, inside)


def test_squares_rows_are_the_standardized_rows_and_their_squares(spread_bags):
    X, y = spread_bags
    clf = DiagAttClassifier(kernel="squares", **FAST).fit(X, y)
    assert clf.kernel_ == "squares" and clf.params_["W"].shape == (1, 8, 8)
    rows = np.concatenate(X)
    Z = (rows - rows.mean(0)) / rows.std(0)
    np.testing.assert_allclose(clf.row_map_.transform(rows), np.hstack([Z, Z**2]), rtol=1e-5, atol=1e-5)
    # The spread of the rows is the label: mean-pooled squares separate the bags.
    assert clf.score(X, y) > 0.9
    assert [a.shape for a in clf.attention(X[:3])] == [(1, len(x)) for x in X[:3]]
    proba = clf.predict_proba(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(X), proba)
    np.testing.assert_array_equal(clone(clf).fit(X, y).predict_proba(X), proba)
    with pytest.raises(ValueError, match="kernel='squares' needs the samples in memory"):
        DiagAttClassifier(kernel="squares", **FAST).fit_chunks([(X[:80], y[:80]), (X[80:], y[80:])])


def test_squares_and_kernel_rows_are_the_squares_rows_then_the_kernel_rows(spread_bags):
    X, y = spread_bags
    both = DiagAttClassifier(kernel="squares+rbf", **FAST).fit(X, y)
    assert both.kernel_ == "squares+rbf" and both.params_["W"].shape == (1, 8 + N_COMPONENTS, 8 + N_COMPONENTS)
    rows = np.concatenate(X)
    mapped = both.row_map_.transform(rows)
    squares = DiagAttClassifier(kernel="squares", **FAST).fit(X, y).row_map_.transform(rows)
    rbf = DiagAttClassifier(kernel="rbf", **FAST).fit(X, y).row_map_.transform(rows)
    np.testing.assert_array_equal(mapped, np.hstack([squares, rbf]))
    assert np.all(np.isfinite(both.predict_proba(X)))


def test_squares_leave_out_constant_features_and_keep_wide_blocks_to_their_principal_components():
    rng = np.random.RandomState(0)
    narrow = [np.hstack([rng.randn(6, 3), np.full((6, 1), 2.5)]) for _ in range(20)]
    mapped = _row_map(narrow, "squares", np.random.RandomState(0)).transform(np.concatenate(narrow))
    assert mapped.shape[1] == 6 and np.all(mapped.std(axis=0) > 0)
    wide = [rng.randn(50, MAX_SQUARES_WIDTH // 2 + 10) for _ in range(12)]
    rows = np.concatenate(wide)
    one, two = (_row_map(wide, "squares+rbf", np.random.RandomState(3)).transform(rows) for _ in range(2))
    assert one.shape == (len(rows), MAX_SQUARES_WIDTH + N_COMPONENTS)
    np.testing.assert_array_equal(one, two)  # the sketch of the components is drawn by the estimator's seed


def test_auto_takes_kernel_rows_only_where_they_predict_better(spread_bags, reg_data):
    X, y = spread_bags
    clf = DiagAttClassifier(**FAST).fit(X, y)
    # Judged by its Gaussian rows, the map then carries the rows and their squares in front of them.
    assert clf.kernel_ == "squares+rbf" and clf.score(X, y) > 0.9
    np.testing.assert_array_equal(clf.params_["W"].shape, (1, 8 + N_COMPONENTS, 8 + N_COMPONENTS))
    assert DiagAttClassifier(kernel="linear", **FAST).fit(X, y).row_map_ is None
    # A signal row that attention can single out: the rows as given stay.
    Xr, yr, _, _ = reg_data
    assert DiagAttRegressor(**FAST).fit(Xr, yr).kernel_ == "linear"
    # Targets unrelated to the samples: no reason to map the rows.
    noise = np.random.RandomState(1).randn(len(Xr))
    assert DiagAttRegressor(**FAST).fit(Xr, noise).kernel_ == "linear"


def test_auto_leaves_the_linear_fit_bit_identical(reg_data):
    X, y, _, _ = reg_data
    auto = DiagAttRegressor(**FAST).fit(X, y)
    linear = DiagAttRegressor(kernel="linear", **FAST).fit(X, y)
    for key, value in linear.params_.items():
        np.testing.assert_array_equal(auto.params_[key], value)


def test_continued_fits_keep_the_rows_and_streams_see_them_as_given(spread_bags):
    X, y = spread_bags
    clf = DiagAttClassifier(kernel="rbf", warm_start=True, **FAST).fit(X, y)
    row_map = clf.row_map_
    clf.fit(X, y)
    assert clf.row_map_ is row_map and clf.params_["W"].shape[1] == N_COMPONENTS
    clf.partial_fit(X, y)
    assert clf.row_map_ is row_map
    with pytest.raises(ValueError, match="kernel='rbf' needs the samples in memory"):
        DiagAttClassifier(kernel="rbf", **FAST).fit_chunks([(X[:80], y[:80]), (X[80:], y[80:])])
    streamed = DiagAttClassifier(**FAST).fit_chunks([(X[:80], y[:80]), (X[80:], y[80:])])
    assert streamed.kernel_ == "linear" and streamed.row_map_ is None
    with pytest.raises(ValueError, match="kernel must be"):
        DiagAttClassifier(kernel="poly").fit(X, y)
