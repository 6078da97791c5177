"""localize / attention / row_contributions through pipelines and fitted searches."""

import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

import skdiagatt
from skdiagatt import DiagAttRegressor, RowPCA, RowStandardScaler
from skdiagatt.datasets import make_individualized_regression
from skdiagatt.inspection import final_estimator

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
FAST = dict(max_iter=2, calibration_iter=1, random_state=0)


@pytest.fixture(scope="module")
def data():
    X, y, _, _ = make_individualized_regression(60, n_rows=(3, 7), n_features=4, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def pipe(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return make_pipeline(RowStandardScaler(), RowPCA(3), DiagAttRegressor(**FAST)).fit(*data)


class _Identity(TransformerMixin, BaseEstimator):
    """A user's stateless step: no fitted attributes, so it never looks fitted."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X


def _assert_same(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_through_a_pipeline(pipe, data):
    X, _ = data
    est, Xt = pipe[-1], pipe[:-1].transform(X)
    _assert_same(skdiagatt.localize(pipe, X), est.localize(Xt))
    _assert_same(skdiagatt.localize(pipe, X, top_k=2, by="contribution"),
                 est.localize(Xt, top_k=2, by="contribution"))
    _assert_same(skdiagatt.attention(pipe, X), est.attention(Xt))
    _assert_same(skdiagatt.row_contributions(pipe, X), est.row_contributions(Xt))
    # Rows stay in place: one weight per row of the samples given.
    assert [w.shape[1] for w in skdiagatt.attention(pipe, X)] == [len(x) for x in X]
    # A stateless step (never fitted on its own) is passed through too.
    stateless = make_pipeline(pipe[0], pipe[1], _Identity(), est)
    _assert_same(skdiagatt.localize(stateless, X), est.localize(Xt))


def test_through_a_search_and_a_bare_estimator(data):
    X, y = data
    search = GridSearchCV(make_pipeline(RowStandardScaler(), RowPCA(3), DiagAttRegressor(**FAST)),
                          {"diagattregressor__alpha": [1e-3, 1e-2]}, cv=2)
    search.fit(X, y)
    best = search.best_estimator_
    _assert_same(skdiagatt.localize(search, X), best[-1].localize(best[:-1].transform(X)))
    assert final_estimator(search)[0] is best[-1]
    Xt = best[:-1].transform(X)
    _assert_same(skdiagatt.localize(best[-1], Xt), best[-1].localize(Xt))


def test_errors(pipe, data):
    X, y = data
    pooled = make_pipeline(FunctionTransformer(lambda X: np.stack([x.mean(0) for x in X])), Ridge())
    with pytest.raises(TypeError, match=r"Ridge \(the final estimator of Pipeline\) has no localize"):
        skdiagatt.localize(pooled.fit(X, y), X)
    with pytest.raises(TypeError, match="Ridge has no attention"):
        skdiagatt.attention(Ridge(), X)
    with pytest.raises(NotFittedError):
        skdiagatt.localize(make_pipeline(RowStandardScaler(), DiagAttRegressor()), X)
    search = GridSearchCV(pipe, {"diagattregressor__alpha": [1e-3]}, cv=2, refit=False)
    with pytest.raises(NotFittedError):
        skdiagatt.localize(search, X)
    with pytest.raises(ValueError, match="no best_estimator_"):
        skdiagatt.localize(search.fit(X, y), X)
