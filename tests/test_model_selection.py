"""The one-standard-error rule towards peaked attention, inside real scikit-learn searches."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
from sklearn.metrics import log_loss, mean_squared_error
from sklearn.model_selection import GridSearchCV, KFold, PredefinedSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skdiagatt import DiagAttClassifier, DiagAttRegressor, RowStandardScaler
from skdiagatt.baselines import GroupLassoClassifier
from skdiagatt.datasets import make_individualized_classification, make_individualized_regression
from skdiagatt.metrics import attention_entropy
from skdiagatt.model_selection import (
    attention_scoring,
    median_attention_entropy,
    peaked_within_one_se,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
FAST = dict(max_iter=3, calibration_iter=1, random_state=0)


@pytest.fixture(scope="module")
def classification():
    X, y, _, _ = make_individualized_classification(80, n_rows=(1, 8), n_features=4, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def classification_search(classification):
    X, y = classification
    fold = np.where(np.arange(len(X)) % 4 == 0, 0, -1)  # one validation split of 20 samples
    search = GridSearchCV(DiagAttClassifier(**FAST), {"alpha": [1e-3, 1e-1, 10.0]},
                          cv=PredefinedSplit(fold), scoring=attention_scoring("log_loss"),
                          refit=peaked_within_one_se, error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return search.fit(X, y)


# ------------------------------------------------------------------ entropy
def test_entropy_of_uniform_one_hot_and_single_row():
    np.testing.assert_allclose(attention_entropy([np.full(5, 0.2), [[0.0, 1.0, 0.0]]])[:2], [1.0, 0.0])
    assert np.isnan(attention_entropy([[1.0]])[0])
    # Heads are averaged: one uniform head and one one-hot head give 1/2.
    assert attention_entropy([[[0.5, 0.5], [1.0, 0.0]]])[0] == pytest.approx(0.5)


@pytest.mark.parametrize("bad, what", [([[0.5, 0.6]], "sum to one"), ([[1.5, -0.5]], "non-negative"),
                                       ([[np.nan, 1.0]], "finite")])
def test_entropy_rejects_weights_that_are_not_a_distribution(bad, what):
    with pytest.raises(ValueError, match=f"sample 1.*{what}"):
        attention_entropy([[0.5, 0.5]] + bad)


def test_median_entropy_matches_the_fitted_weights(classification_search, classification):
    X, _ = classification
    model = classification_search.best_estimator_
    expected = np.nanmedian(attention_entropy(model.attention(X)))
    assert median_attention_entropy(model, X) == pytest.approx(expected)
    # A model without attention weights scores NaN (chosen on the loss alone).
    pooled = make_pipeline(FunctionTransformer(lambda Z: np.stack([z.mean(0) for z in Z])), Ridge())
    assert np.isnan(median_attention_entropy(pooled.fit(X, np.zeros(len(X))), X))
    # so does one whose attention() says it has none (the group lasso)
    lasso = GroupLassoClassifier(max_iter=20).fit(X, (np.arange(len(X)) % 2))
    assert np.isnan(median_attention_entropy(lasso, X))


# ------------------------------------------------------------------ scorers
def test_scorers_agree_with_sklearn_losses(classification_search, classification):
    search, (X, y) = classification_search, classification
    model = search.best_estimator_
    scoring = attention_scoring("log_loss")
    assert scoring["score"](model, X, y) == pytest.approx(-log_loss(y, model.predict_proba(X)))
    per_sample = -np.log(model.predict_proba(X)[np.arange(len(y)), y])
    assert scoring["score_se"](model, X, y) == pytest.approx(per_sample.std(ddof=1) / np.sqrt(len(y)))

    Xr, yr, _, _ = make_individualized_regression(40, n_rows=(2, 6), n_features=3, random_state=1)
    reg = DiagAttRegressor(**FAST).fit(Xr, yr)
    score = attention_scoring("squared_error")["score"]
    assert score(reg, Xr, yr) == pytest.approx(-mean_squared_error(yr, reg.predict(Xr)))


def test_unknown_label_and_unknown_loss_are_named(classification_search, classification):
    search, (X, y) = classification_search, classification
    y_bad = np.array(y)
    y_bad[3] = 7
    with pytest.raises(ValueError, match="sample 3: label 7"):
        attention_scoring()["score"](search.best_estimator_, X, y_bad)
    with pytest.raises(ValueError, match="loss must be one of"):
        attention_scoring("hinge")


# ------------------------------------------------------------------ the rule
def test_rule_keeps_the_most_peaked_candidate_within_one_se():
    base = {"mean_test_score": np.array([-0.50, -0.52, -0.60, -0.51]),
            "mean_test_score_se": np.full(4, 0.03),
            "mean_test_attention_entropy": np.array([0.95, 0.70, 0.40, np.nan]),
            "split0_test_score": np.zeros(4)}
    assert peaked_within_one_se(base) == 1
    # A tighter standard error leaves only the best.
    assert peaked_within_one_se({**base, "mean_test_score_se": np.full(4, 0.005)}) == 0
    # Without entropies (no attention) the rule is the best score.
    no_att = {k: v for k, v in base.items() if k != "mean_test_attention_entropy"}
    assert peaked_within_one_se(no_att) == 0


def test_rule_falls_back_to_the_spread_over_folds():
    results = {"mean_test_score": np.array([-0.50, -0.53]), "std_test_score": np.array([0.08, 0.01]),
               "mean_test_attention_entropy": np.array([0.9, 0.5]),
               "split0_test_score": np.zeros(2), "split1_test_score": np.zeros(2),
               "split2_test_score": np.zeros(2), "split3_test_score": np.zeros(2)}
    assert peaked_within_one_se(results) == 1  # se = 0.08 / 2 = 0.04 >= 0.03
    assert peaked_within_one_se({**results, "std_test_score": np.array([0.04, 0.01])}) == 0
    one_split = {k: v for k, v in results.items() if not k.startswith(("split1", "split2", "split3"))}
    with pytest.raises(ValueError, match="standard error of the score is unknown"):
        peaked_within_one_se(one_split)
    with pytest.raises(ValueError, match="no 'mean_test_score'"):
        peaked_within_one_se({"mean_test_loss": np.zeros(2)})


def test_in_a_grid_search_with_one_validation_split(classification_search, classification):
    search, (X, _) = classification_search, classification
    res = search.cv_results_
    assert search.best_index_ == peaked_within_one_se(res)
    best_loss = int(np.argmax(res["mean_test_score"]))
    assert res["mean_test_attention_entropy"][search.best_index_] <= res["mean_test_attention_entropy"][best_loss]
    assert res["mean_test_score"][search.best_index_] >= res["mean_test_score"][best_loss] - res["mean_test_score_se"][best_loss]
    # What users do with a search: refit on everything, predict, pickle, clone.
    assert search.best_estimator_.get_params()["alpha"] == res["params"][search.best_index_]["alpha"]
    again = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(again.predict_proba(X), search.predict_proba(X))
    assert clone(search).get_params()["refit"] is peaked_within_one_se


def test_in_a_k_fold_search_over_a_pipeline():
    X, y, _, _ = make_individualized_regression(60, n_rows=(2, 6), n_features=3, random_state=2)
    pipe = make_pipeline(RowStandardScaler(), DiagAttRegressor(**FAST))
    search = GridSearchCV(pipe, {"diagattregressor__alpha": [1e-2, 1.0]}, cv=KFold(3),
                          scoring=attention_scoring("squared_error"), refit=peaked_within_one_se,
                          error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, y)
    assert search.best_index_ == peaked_within_one_se(search.cv_results_)
    assert np.all(np.isfinite(search.cv_results_["mean_test_attention_entropy"]))
    assert np.all(np.isfinite(search.predict(X)))
