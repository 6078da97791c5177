"""``feature_names_in_`` for samples given as pandas DataFrames, checked as scikit-learn checks tables."""

import warnings

import numpy as np
import pandas as pd  # the test extra: these tests must run in CI
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor, RowPCA, RowStandardScaler, RowWise
from skdiagatt.baselines import GroupLassoRegressor, OracleRegressor, StdAttRegressor, TwoStepRegressor
from skdiagatt.datasets import make_individualized_regression

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a few epochs

COLUMNS = ["a", "b", "c"]
FAST = dict(max_iter=2, random_state=0)

ESTIMATORS = {
    "DiagAttRegressor": lambda: DiagAttRegressor(calibration_iter=1, **FAST),
    "DiagAttClassifier": lambda: DiagAttClassifier(calibration_iter=1, **FAST),
    "NTKPrefixRegressor": lambda: NTKPrefixRegressor(prefix_length=8, solver="adam", **FAST),
    "StdAttRegressor": lambda: StdAttRegressor(**FAST),
    "TwoStepRegressor": lambda: TwoStepRegressor(random_state=0),
    "GroupLassoRegressor": lambda: GroupLassoRegressor(),
    "RowStandardScaler": RowStandardScaler,
    "RowPCA": lambda: RowPCA(n_components=2),
    "RowWise": lambda: RowWise(StandardScaler()),
}


@pytest.fixture(scope="module")
def data():
    X, y, _, _ = make_individualized_regression(40, n_rows=(4, 7), n_features=3, random_state=0)
    return X, y, [pd.DataFrame(x, columns=COLUMNS) for x in X]


def _target(name, y):
    return (y > np.median(y)).astype(int) if name == "DiagAttClassifier" else y


def _apply(est, X):
    """predict, or transform for the row transformers."""
    return est.transform(X) if hasattr(est, "transform") else est.predict(X)


@pytest.fixture(scope="module")
def fitted(data):
    """Each estimator fitted once on DataFrames and once on arrays."""
    X, y, frames = data
    out = {}
    for name, make in ESTIMATORS.items():
        target = _target(name, y)
        out[name] = (make().fit(frames, target), make().fit(X, target))
    return out


@pytest.mark.parametrize("name", ESTIMATORS)
def test_names_recorded_and_same_result_as_arrays(name, fitted, data):
    X, _, frames = data
    with_names, without = fitted[name]
    assert with_names.feature_names_in_.dtype == object
    assert list(with_names.feature_names_in_) == COLUMNS
    assert not hasattr(without, "feature_names_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # names as at fit: no warning
        got = _apply(with_names, frames[:5])
    for a, b in zip(got, _apply(without, X[:5])):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_reordered_or_renamed_columns_are_refused_naming_the_sample(name, fitted, data):
    _, _, frames = data
    est = fitted[name][0]
    reordered = [frames[0], frames[1][["b", "a", "c"]]]
    with pytest.raises(ValueError, match=r"should match those that were passed during fit: X\[1\] has the same "
                                         r"names in another order: \['b', 'a', 'c'\] instead of \['a', 'b', 'c'\]"):
        _apply(est, reordered)
    renamed = [frames[0], frames[1], frames[2].rename(columns={"c": "z"})]
    with pytest.raises(ValueError, match=r"X\[2\] has unseen: \['z'\]; missing: \['c'\]"):
        _apply(est, renamed)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_names_on_one_side_only_warn_as_scikit_learn_does(name, fitted, data):
    X, _, frames = data
    with_names, without = fitted[name]
    cls = type(with_names).__name__
    with pytest.warns(UserWarning, match=f"X does not have valid feature names, but {cls} was fitted with feature"):
        _apply(with_names, X[:3])
    with pytest.warns(UserWarning, match=f"X has feature names, but {cls} was fitted without feature names"):
        _apply(without, frames[:3])


def test_localize_attention_and_score_check_the_names(fitted, data):
    X, y, frames = data
    est = fitted["DiagAttRegressor"][0]
    swapped = [f[["c", "b", "a"]] for f in frames[:3]]
    for method in (est.localize, est.attention, lambda Z: est.score(Z, y[:3])):
        with pytest.raises(ValueError, match=r"X\[0\] has the same names in another order"):
            method(swapped)
        with pytest.warns(UserWarning, match="X does not have valid feature names"):
            method(X[:3])


def test_oracle_checks_the_names(data):
    X, y, frames = data
    rows = np.zeros((len(X), 1), dtype=int)
    est = OracleRegressor().fit(frames, y, rows)
    assert list(est.feature_names_in_) == COLUMNS
    with pytest.raises(ValueError, match=r"X\[0\] has unseen"):
        est.predict([f.rename(columns={"a": "q"}) for f in frames], rows)


def test_samples_must_share_their_columns(data):
    X, y, frames = data
    est = RowStandardScaler()
    with pytest.raises(ValueError, match=r"X\[2\] has other columns than X\[0\] \(the same names in another order"):
        est.fit([frames[0], frames[1], frames[2][["c", "b", "a"]]])
    with pytest.raises(ValueError, match=r"X\[0\] has string column names and X\[1\] has none"):
        est.fit([frames[0], X[1]])
    with pytest.raises(ValueError, match=r"X\[1\] has string column names and X\[0\] has none"):
        est.fit([X[0], frames[1]])
    with pytest.raises(ValueError, match=r"X is one table of shape \(\d+, 3\); samples are matrices.*RowWise\(transformer\)"):
        est.fit(frames[0])
    fitted = RowStandardScaler().fit(frames)
    with pytest.raises(ValueError, match=r"X\[0\] has string column names and X\[1\] has none"):
        fitted.transform([frames[0], X[1]])  # at transform too
    with pytest.raises(TypeError, match=r"X\[1\]: Feature names are only supported if all input features have string"):
        est.fit([frames[0], pd.DataFrame(X[1], columns=["a", "b", 3])])


def test_integer_columns_are_no_names(data):
    X, _, _ = data
    est = RowStandardScaler().fit([pd.DataFrame(x) for x in X])
    assert not hasattr(est, "feature_names_in_")


def test_a_refit_on_arrays_forgets_the_names(data):
    X, y, frames = data
    est = RowStandardScaler().fit(frames)
    assert hasattr(est.fit(X), "feature_names_in_") is False
    reg = DiagAttRegressor(calibration_iter=1, **FAST).fit(frames, y)
    assert not hasattr(reg.fit(X, y), "feature_names_in_")


def test_partial_fit_continues_with_the_names_of_the_first_call(data):
    X, y, frames = data
    est = DiagAttRegressor(calibration_iter=1, **FAST).partial_fit(frames, y)
    est.partial_fit(frames, y)
    assert list(est.feature_names_in_) == COLUMNS
    with pytest.raises(ValueError, match=r"X\[0\] has the same names in another order"):
        est.partial_fit([f[["b", "a", "c"]] for f in frames], y)
    assert list(est.feature_names_in_) == COLUMNS


def test_feature_names_out(fitted):
    assert list(fitted["RowStandardScaler"][0].get_feature_names_out()) == COLUMNS
    assert list(fitted["RowPCA"][0].get_feature_names_out()) == ["rowpca0", "rowpca1"]
    assert list(fitted["RowWise"][0].get_feature_names_out()) == COLUMNS
    assert list(fitted["RowWise"][1].get_feature_names_out()) == ["x0", "x1", "x2"]
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        fitted["RowWise"][0].get_feature_names_out(["x", "y", "z"])


def test_in_a_pipeline_the_names_stop_at_the_first_row_transformer(data):
    X, y, frames = data
    pipe = make_pipeline(RowStandardScaler(), DiagAttRegressor(calibration_iter=1, **FAST)).fit(frames, y)
    assert list(pipe[0].feature_names_in_) == COLUMNS
    assert not hasattr(pipe[-1], "feature_names_in_")  # the scaler hands on arrays
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe.predict(frames[:3])
    with pytest.raises(ValueError, match="should match those that were passed during fit"):
        pipe.predict([f[["b", "a", "c"]] for f in frames[:3]])
