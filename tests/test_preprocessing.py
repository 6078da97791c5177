"""Row-wise transformers: the scikit-learn transformer on the pooled rows, ragged in and out."""

import pickle

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import estimator_checks

import skdiagatt
from skdiagatt import DiagAttRegressor
from skdiagatt.baselines import GroupLassoRegressor
from skdiagatt.datasets import make_individualized_regression
from skdiagatt.preprocessing import RowPCA, RowStandardScaler
from tests.conftest import DATA_FREE_CHECKS

ALL = [RowPCA, RowStandardScaler]


@pytest.fixture(scope="module")
def ragged():
    rng = np.random.RandomState(0)
    # correlated columns with an offset, so that centring and the axes matter
    mix = rng.randn(5, 5)
    return [rng.randn(p, 5) @ mix + 3.0 for p in (4, 1, 9, 6, 2, 7)]


@pytest.fixture(scope="module")
def sim():
    """Tiny ragged regression data (4 to 7 rows, d = 6)."""
    return make_individualized_regression(40, n_rows=(4, 7), n_features=6, random_state=0)


# ------------------------------------------------------------------ API checks
@pytest.mark.parametrize("Est", ALL)
@pytest.mark.parametrize("check", DATA_FREE_CHECKS)
def test_sklearn_data_free_checks(Est, check):
    getattr(estimator_checks, check)(Est.__name__, Est())


@pytest.mark.parametrize("Est", ALL)
def test_tags_and_package_export(Est):
    tags = Est().__sklearn_tags__()
    assert tags.input_tags.two_d_array is False and tags.input_tags.three_d_array is True
    assert tags.transformer_tags.preserves_dtype == ["float32"]
    assert getattr(skdiagatt, Est.__name__) is Est


# ----------------------------------------------------------------- numerics
def test_row_pca_is_sklearn_pca_on_the_stacked_rows(ragged):
    est = RowPCA(n_components=3).fit(ragged)
    ref = PCA(n_components=3).fit(np.concatenate(ragged))
    np.testing.assert_allclose(est.components_, ref.components_)
    np.testing.assert_allclose(est.explained_variance_, ref.explained_variance_)
    np.testing.assert_allclose(est.explained_variance_ratio_, ref.explained_variance_ratio_)
    np.testing.assert_allclose(est.mean_, ref.mean_)
    assert (est.n_components_, est.n_features_in_, est.n_rows_seen_) == (3, 5, 29)
    Z = est.transform(ragged)
    assert isinstance(Z, list) and len(Z) == len(ragged)
    for z, x in zip(Z, ragged):
        assert z.shape == (x.shape[0], 3) and z.dtype == np.float32
        np.testing.assert_allclose(z, ref.transform(x), rtol=1e-5, atol=1e-5)
    # fit_transform, and a 3-D array is its list of samples
    for a, b in zip(clone(est).fit_transform(ragged), Z):
        np.testing.assert_array_equal(a, b)
    cube = np.stack([x[:1] for x in ragged])
    for a, x in zip(est.transform(cube), cube):
        np.testing.assert_array_equal(a, est.transform([x])[0])


def test_row_pca_options_and_inverse(ragged):
    full = RowPCA().fit(ragged)  # None: every component
    assert full.n_components_ == 5
    back = full.inverse_transform(full.transform(ragged))
    for b, x in zip(back, ragged):
        assert b.shape == x.shape and b.dtype == np.float32
        np.testing.assert_allclose(b, x, rtol=1e-5, atol=1e-4)
    white = np.concatenate(RowPCA(2, whiten=True).fit_transform(ragged))
    np.testing.assert_allclose(white.var(axis=0, ddof=1), 1.0, rtol=1e-5)
    share = RowPCA(0.9).fit(ragged)
    assert share.explained_variance_ratio_.sum() >= 0.9
    assert share.n_components_ == PCA(0.9).fit(np.concatenate(ragged)).n_components_
    rand = [RowPCA(2, svd_solver="randomized", random_state=0).fit_transform(ragged)
            for _ in range(2)]
    for a, b in zip(*rand):
        np.testing.assert_array_equal(a, b)
    assert RowPCA(3).fit(ragged).get_feature_names_out().tolist() == ["rowpca0", "rowpca1",
                                                                     "rowpca2"]


def test_row_standard_scaler_is_sklearn_scaler_on_the_stacked_rows(ragged):
    est = RowStandardScaler().fit(ragged)
    ref = StandardScaler().fit(np.concatenate(ragged))
    np.testing.assert_allclose(est.mean_, ref.mean_)
    np.testing.assert_allclose(est.scale_, ref.scale_)
    Z = est.transform(ragged)
    for z, x in zip(Z, ragged):
        assert z.shape == x.shape and z.dtype == np.float32
        np.testing.assert_allclose(z, ref.transform(x), rtol=1e-5, atol=1e-5)
    for b, x in zip(est.inverse_transform(Z), ragged):
        np.testing.assert_allclose(b, x, rtol=1e-5, atol=1e-4)
    centred = RowStandardScaler(with_std=False).fit_transform(ragged)
    np.testing.assert_allclose(np.concatenate(centred).mean(axis=0), 0.0, atol=1e-5)
    assert est.get_feature_names_out().tolist() == [f"x{j}" for j in range(5)]


# ------------------------------------------------------------------- errors
@pytest.mark.parametrize("Est", ALL)
def test_errors_name_the_sample(Est, ragged):
    nan = [x.copy() for x in ragged[:3]]
    nan[1][0, 2] = np.nan
    with pytest.raises(ValueError, match=r"X\[1\] contains NaN at row 0, column 2"):
        Est().fit(nan)
    with pytest.raises(ValueError, match=r"X\[1\] has 4 features, expected 5 \(like X\[0\]\)"):
        Est().fit([ragged[0], np.ones((3, 4))])
    with pytest.raises(ValueError, match=r"X\[1\] is empty"):
        Est().fit([ragged[0], np.ones((0, 5))])
    with pytest.raises(ValueError, match="3-D array"):
        Est().fit(np.ones((4, 5)))  # one 2-D table, not a set of samples
    with pytest.raises(NotFittedError):
        Est().transform(ragged)
    with pytest.raises(NotFittedError):
        Est().get_feature_names_out()
    est = Est().fit(ragged)
    with pytest.raises(ValueError, match=r"X\[0\] has 4 features, expected 5 \(as seen in fit\)"):
        est.transform([np.ones((2, 4))])
    with pytest.raises(ValueError, match=r"X\[2\] contains NaN"):
        est.transform([ragged[0], ragged[1], np.full((2, 5), np.nan)])


def test_output_that_overflows_float32_is_an_error(ragged):
    identity = RowStandardScaler(with_mean=False, with_std=False).fit(ragged)
    with pytest.raises(ValueError, match=r"X\[1\] gives a non-finite transformed row"):
        identity.transform([ragged[0], np.full((2, 5), 1e300)])


def test_row_pca_component_count_errors(ragged):
    with pytest.raises(ValueError, match=r"n_components=6 must be at most min\(total rows"):
        RowPCA(6).fit(ragged)
    with pytest.raises(ValueError, match="n_components"):
        RowPCA(-1).fit(ragged)
    est = RowPCA(2).fit(ragged)
    with pytest.raises(ValueError, match=r"X\[0\] has 5 features, expected 2"):
        est.inverse_transform(ragged[:1])


def test_global_table_output_leaves_the_ragged_list_alone(ragged):
    for Est in ALL:
        assert not hasattr(Est(), "set_output")  # no table can hold ragged samples
        with sklearn.config_context(transform_output="pandas"):
            est = Est()
            out = est.fit_transform(ragged), est.transform(ragged)
        assert all(isinstance(o, list) and len(o) == len(ragged) for o in out)


# --------------------------------------------------- clone, pickle, pipelines
@pytest.mark.parametrize("Est", ALL)
def test_clone_and_pickle(Est, ragged):
    est = Est().fit(ragged)
    fresh = clone(est)
    assert fresh.get_params() == est.get_params()
    assert not hasattr(fresh, "n_features_in_")
    again = pickle.loads(pickle.dumps(est))
    for a, b in zip(again.transform(ragged), est.transform(ragged)):
        np.testing.assert_array_equal(a, b)


def test_pipeline_with_diagatt_clone_and_pickle(sim):
    X, y, rows, _ = sim
    pipe = Pipeline(
        [
            ("scale", RowStandardScaler()),
            ("pca", RowPCA(3)),
            ("est", DiagAttRegressor(max_iter=2, calibration_iter=1, random_state=0)),
        ]
    ).fit(X, y)
    pred = pipe.predict(X)
    assert pred.shape == (len(X),) and np.all(np.isfinite(pred))
    assert pipe["est"].n_features_in_ == 3
    loc = pipe["est"].localize(pipe[:-1].transform(X))  # row j of the output is row j of X[i]
    assert all(np.all((r >= 0) & (r < x.shape[0])) for r, x in zip(loc, X))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(pipe)).predict(X), pred)
    np.testing.assert_allclose(clone(pipe).fit(X, y).predict(X), pred, rtol=1e-5, atol=1e-6)


def test_grid_search_over_the_components(sim):
    # A convex final step: every DiagAtt fit on new shapes would compile again.
    X, y, _, _ = sim
    pipe = Pipeline([("pca", RowPCA()), ("est", GroupLassoRegressor(alpha=0.1))])
    grid = GridSearchCV(pipe, {"pca__n_components": [2, 6]}, cv=2).fit(X, y)
    assert grid.best_params_["pca__n_components"] in (2, 6)
    assert grid.best_estimator_["pca"].n_components_ == grid.best_params_["pca__n_components"]
    assert grid.predict(X[:3]).shape == (3,)


# -------------------------------------------------------------- any transformer
def test_row_wise_is_the_transformer_on_the_stacked_rows(ragged):
    from sklearn.kernel_approximation import Nystroem

    from skdiagatt.preprocessing import RowWise

    assert skdiagatt.RowWise is RowWise
    stacked = np.concatenate(ragged)
    pca = PCA(3).fit(stacked)
    out = RowWise(PCA(3)).fit(ragged)
    for a, x in zip(out.transform(ragged), ragged):
        np.testing.assert_allclose(a, pca.transform(x), rtol=1e-5, atol=1e-5)
    for a, b in zip(RowWise(StandardScaler()).fit_transform(ragged), RowStandardScaler().fit_transform(ragged)):
        np.testing.assert_array_equal(a, b)
    back = out.inverse_transform(out.transform(ragged))
    assert [b.shape for b in back] == [x.shape for x in ragged]
    kernel = RowWise(Nystroem(n_components=7, random_state=0)).fit(ragged)
    assert [z.shape for z in kernel.transform(ragged)] == [(x.shape[0], 7) for x in ragged]
    assert kernel.get_feature_names_out().tolist() == [f"nystroem{j}" for j in range(7)]
    with pytest.raises(AttributeError, match="Nystroem has no inverse_transform"):
        kernel.inverse_transform(kernel.transform(ragged))


def test_row_wise_errors_name_the_sample_and_leave_the_transformer_alone(ragged):
    from skdiagatt.preprocessing import RowWise

    inner = StandardScaler()
    with pytest.raises(ValueError, match=r"X\[1\] has 4 features, expected 5 \(like X\[0\]\)"):
        RowWise(inner).fit([ragged[0], np.ones((3, 4))])
    est = RowWise(inner).fit(ragged)
    assert not hasattr(inner, "mean_")  # cloned, not fitted in place
    with pytest.raises(ValueError, match=r"X\[0\] has 4 features, expected 5 \(as seen in fit\)"):
        est.transform([np.ones((2, 4))])
    again = pickle.loads(pickle.dumps(est))
    for a, b in zip(again.transform(ragged), est.transform(ragged)):
        np.testing.assert_array_equal(a, b)


def test_row_wise_kernel_rows_in_a_searched_pipeline():
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline

    from skdiagatt import DiagAttClassifier
    from skdiagatt.datasets import make_individualized_classification
    from skdiagatt.preprocessing import RowWise

    X, y, _, _ = make_individualized_classification(60, n_rows=(3, 6), n_features=4, random_state=0)
    pipe = make_pipeline(RowStandardScaler(), RowWise(Nystroem(n_components=8, random_state=0)),
                         DiagAttClassifier(max_iter=2, random_state=0))
    grid = GridSearchCV(pipe, {"rowwise__transformer__gamma": [0.1, 1.0]}, cv=2).fit(X, y)
    assert grid.best_estimator_[-1].n_features_in_ == 8
    assert grid.predict_proba(X[:3]).shape == (3, 2)


# ------------------------------------- scikit-learn's 2-D transformers and samples
def test_scikit_learn_transformers_refuse_samples_before_our_estimator_runs(sim):
    """The limit the user guide describes: the error comes from scikit-learn, not from us."""
    from sklearn.pipeline import make_pipeline

    X, y, _, _ = sim
    with pytest.raises(ValueError, match="inhomogeneous"):  # a ragged list
        make_pipeline(StandardScaler(), DiagAttRegressor()).fit(X, y)
    same_length = make_individualized_regression(10, n_rows=5, n_features=6, random_state=0)[0]
    with pytest.raises(ValueError, match="Found array with dim 3"):
        make_pipeline(StandardScaler(), DiagAttRegressor()).fit(np.stack(same_length), y[:10])


@pytest.mark.parametrize("as_table", [
    lambda X: np.vstack(X),                        # the rows of all samples stacked
    lambda X: np.stack(X).reshape(len(X), -1),     # each sample flattened to one row
])
def test_one_table_reaching_an_estimator_names_the_row_wise_transformers(as_table, sim):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X = make_individualized_regression(10, n_rows=5, n_features=6, random_state=0)[0]
    y = sim[1][:10]
    pipe = make_pipeline(FunctionTransformer(as_table), DiagAttRegressor())
    hint = r"transform each sample's rows instead: skdiagatt.RowStandardScaler, skdiagatt.RowPCA, or " \
           r"skdiagatt.RowWise\(transformer\)"
    with pytest.raises(ValueError, match=r"got an array of shape \(\d+, \d+\).*" + hint):
        pipe.fit(X, y)
    for est in (GroupLassoRegressor(), RowStandardScaler()):
        with pytest.raises(ValueError, match=hint):
            est.fit(as_table(X), y)
