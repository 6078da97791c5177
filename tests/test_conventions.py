"""scikit-learn conventions: label checks, convergence warnings, warm-start history,
argument errors under the public class name, and the hint for one unwrapped sample."""

import warnings

import pytest
from sklearn.exceptions import ConvergenceWarning

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor, RowPCA
from skdiagatt.baselines import (
    GroupLassoClassifier,
    StdAttClassifier,
    StdAttRegressor,
    TwoStepClassifier,
)
from skdiagatt.datasets import make_individualized_regression

FAST = dict(max_iter=3, calibration_iter=1, objective="latent", random_state=0)


@pytest.fixture(scope="module")
def data():
    X, y, _, _ = make_individualized_regression(48, n_rows=5, n_features=3, random_state=0)
    return X, y


@pytest.mark.parametrize(
    "cls", [DiagAttClassifier, StdAttClassifier, TwoStepClassifier, GroupLassoClassifier]
)
def test_continuous_labels_are_refused(cls, data):
    X, y = data
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        cls().fit(X, y)


def test_continuous_labels_are_refused_by_partial_fit(data):
    X, y = data
    with pytest.raises(ValueError, match="Unknown label type"):
        DiagAttClassifier().partial_fit(X, y)


def _fit_recording(est, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    return [w for w in caught if issubclass(w.category, ConvergenceWarning)]


@pytest.mark.parametrize("cls", [DiagAttRegressor, StdAttRegressor])
def test_reaching_max_iter_warns_and_an_early_stop_does_not(cls, data):
    X, y = data
    caught = _fit_recording(cls(**FAST), X, y)
    assert len(caught) == 1 and "max_iter=3" in str(caught[0].message)
    assert cls.__name__ in str(caught[0].message)
    # A tolerance no epoch can beat: the stopping rule fires after n_iter_no_change epochs.
    est = cls(**dict(FAST, max_iter=10), tol=1e9, n_iter_no_change=2)
    assert _fit_recording(est, X, y) == []
    assert est.loss_curve_phase_.count("main") == 3
    # Reaching max_iter with a loss that no longer falls by tol is no warning.
    est = cls(**FAST, tol=1e9, n_iter_no_change=100)
    assert _fit_recording(est, X, y) == [] and est.n_iter_ >= 3


@pytest.mark.parametrize("cls", [DiagAttRegressor, StdAttRegressor])
def test_warm_start_continues_the_history(cls, data):
    X, y = data
    est = cls(**FAST).fit(X, y)
    first = list(est.loss_curve_)
    assert est.n_iter_ == 4 and est.loss_curve_phase_ == ["main"] * 3 + ["calibration"]
    est.set_params(warm_start=True).fit(X, y)
    assert est.n_iter_ == 8 and len(est.loss_curve_) == 8
    assert est.loss_curve_[:4] == first
    assert est.loss_curve_phase_ == (["main"] * 3 + ["calibration"]) * 2
    est.set_params(warm_start=False).fit(X, y)
    assert est.n_iter_ == 4 and est.loss_curve_ == first


def test_partial_fit_records_main_phase_epochs(data):
    X, y = data
    est = DiagAttRegressor(random_state=0).partial_fit(X, y).partial_fit(X, y)
    assert est.n_iter_ == 2 and est.loss_curve_phase_ == ["main", "main"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: DiagAttRegressor(n_head=2), r"^DiagAttRegressor got .* 'n_head'; did you mean 'n_heads'"),
        (lambda: DiagAttClassifier(temprature=1.0), r"^DiagAttClassifier .* did you mean 'temperature'"),
        (lambda: NTKPrefixRegressor(degre=2), r"^NTKPrefixRegressor .* did you mean 'degree'"),
        (lambda: RowPCA(n_component=2), r"^RowPCA .* did you mean 'n_components'"),
        (lambda: DiagAttRegressor(zzz=1), r"its parameters are n_heads, temperature"),
        (lambda: DiagAttRegressor(1, 2), r"^DiagAttRegressor\(\): too many positional"),
    ],
)
def test_wrong_arguments_name_the_public_class(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_one_unwrapped_sample_gets_a_hint(data):
    X, y = data
    est = DiagAttRegressor(**FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    for one in (X[0], X[0].tolist()):
        with pytest.raises(ValueError, match=r"wrap one sample as \[x\]"):
            est.predict(one)
    assert est.predict([X[0]]).shape == (1,)
