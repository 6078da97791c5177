"""A parameter set to a value that the other settings make inert is named at fit, and truly changes nothing."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from skdiagatt import DiagAttClassifier, DiagAttRegressor
from skdiagatt.datasets import make_individualized_classification, make_individualized_regression
from skdiagatt.exceptions import InertParameterWarning

FAST = dict(max_iter=2, random_state=0)


@pytest.fixture(scope="module")
def regression():
    X, y, _, _ = make_individualized_regression(40, n_rows=5, n_features=3, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def classification():
    X, y, _, _ = make_individualized_classification(40, n_rows=5, n_features=3, random_state=0)
    return X, y


def _fit(est, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    return est, [str(w.message) for w in caught if w.category is InertParameterWarning]


CASES = [
    (DiagAttRegressor, {}, {"validation_fraction": 0.3}, "early_stopping=False"),
    (DiagAttRegressor, {}, {"symmetric": False}, "rank='auto'"),
    (DiagAttRegressor, {}, {"exclusive_heads": False}, "n_heads=1"),
    (DiagAttRegressor, {}, {"value_refit": True}, "alpha_value='auto'"),
    (DiagAttRegressor, {"objective": "attention"}, {"calibration_iter": 3}, "objective='attention'"),
    (DiagAttClassifier, {"assumption": "standard-mil"}, {"alpha_value": 1.0}, "standard-mil"),
    (DiagAttClassifier, {"assumption": "standard-mil", "n_heads": 2}, {"exclusive_heads": False}, "standard-mil"),
]


@pytest.mark.parametrize("cls, base, inert, setting", CASES)
def test_inert_parameter_is_named_and_changes_nothing(cls, base, inert, setting, regression, classification):
    X, y = regression if cls is DiagAttRegressor else classification
    reference, messages = _fit(cls(**base, **FAST), X, y)
    assert messages == []
    est, messages = _fit(cls(**base, **inert, **FAST), X, y)
    (name, value), = inert.items()
    assert len(messages) == 1 and f"{name}={value!r}" in messages[0] and setting in messages[0]
    # The claim of the warning holds: the fit is bit-identical to the default's.
    for key, array in reference.params_.items():
        np.testing.assert_array_equal(est.params_[key], array)


@pytest.mark.parametrize("params", [
    {"symmetric": False, "rank": 2},
    {"exclusive_heads": False, "n_heads": 2},
    {"value_refit": True, "alpha_value": 0.1},
    {"validation_fraction": 0.3, "early_stopping": True},
    {"objective": "attention"},
    {"calibration_iter": 3},
])
def test_effective_parameters_are_not_named(params, regression):
    _, messages = _fit(DiagAttRegressor(**params, **FAST), *regression)
    assert messages == []


def test_grid_search_over_an_inert_parameter_says_so(regression):
    search = GridSearchCV(DiagAttRegressor(**FAST), {"validation_fraction": [0.1, 0.3]}, cv=2)
    with pytest.warns(InertParameterWarning, match="validation_fraction=0.3 has no effect"):
        search.fit(*regression)
    scores = search.cv_results_["mean_test_score"]
    assert scores[0] == scores[1]
