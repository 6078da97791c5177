"""scikit-learn conventions: label checks, convergence warnings, warm-start history,
argument errors under the public class name, and the hint for one unwrapped sample."""

import ast
import pathlib
import warnings

import numpy as np
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
    # n_iter_: the main phase's epochs, as max_iter counts them; loss_curve_ has the calibration's too
    assert est.n_iter_ == 3 and est.loss_curve_phase_ == ["main"] * 3 + ["calibration"]
    est.set_params(warm_start=True).fit(X, y)
    assert est.n_iter_ == 6 and len(est.loss_curve_) == 8
    assert est.loss_curve_[:4] == first
    assert est.loss_curve_phase_ == (["main"] * 3 + ["calibration"]) * 2
    est.set_params(warm_start=False).fit(X, y)
    assert est.n_iter_ == 3 and est.loss_curve_ == first


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


# ------------------------------------------------------------ code structure
ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_MODULE_LINES, MAX_BODY_LINES = 600, 80


def _modules(*folders):
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def _body_lines(fn):
    """Lines of a function's body, its docstring left out."""
    body = fn.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return fn.end_lineno - body[0].lineno + 1


def test_modules_and_function_bodies_stay_small():
    too_long = []
    for path in _modules("skdiagatt"):
        source = path.read_text()
        name = path.relative_to(ROOT)
        if len(source.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _body_lines(node) > MAX_BODY_LINES:
                too_long.append(f"{name}:{node.lineno} {node.name}: a body of {_body_lines(node)} lines")
    assert too_long == [], f"over {MAX_MODULE_LINES} lines a module or {MAX_BODY_LINES} a body"


def _private_names(tree):
    """``skdiagatt`` names with a private part (but the ``_testing`` seam) that ``tree`` imports."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "skdiagatt":
            for alias in node.names:
                parts = node.module.split(".") + [alias.name]
                if "_testing" not in parts and any(p.startswith("_") for p in parts):
                    yield node.lineno, ".".join(parts)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "skdiagatt" and "_testing" not in parts and any(p.startswith("_") for p in parts):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            inner = node.value
            while isinstance(inner, ast.Attribute):
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "skdiagatt" and node.attr != "_testing":
                yield node.lineno, f"skdiagatt...{node.attr}"


def test_benchmarks_and_examples_use_only_the_public_api():
    private = [f"{p.relative_to(ROOT)}:{line} {name}" for p in _modules("benchmarks", "examples")
               for line, name in _private_names(ast.parse(p.read_text()))]
    assert private == [], "import only public names, or the seam skdiagatt._testing"


def test_the_private_import_check_sees_what_it_must():
    tree = ast.parse("from skdiagatt._shared.base import x\nfrom skdiagatt._testing import y\n"
                     "import skdiagatt.kernels._matmul\nskdiagatt._shared.ragged.check_ragged\n")
    assert [name for _, name in _private_names(tree)] == [
        "skdiagatt._shared.base.x", "skdiagatt.kernels._matmul", "skdiagatt..._shared"]


def _estimators_with_rules():
    import skdiagatt
    from skdiagatt import baselines

    classes = {getattr(m, n) for m in (skdiagatt, baselines) for n in m.__all__}
    from skdiagatt.baselines.prefix_tuning import PrefixTuningRegressor
    from skdiagatt.text import TokenEmbedder

    classes |= {PrefixTuningRegressor, TokenEmbedder}
    return sorted((c for c in classes if isinstance(c, type) and hasattr(c, "_parameter_rules")),
                  key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _estimators_with_rules(), ids=lambda c: c.__name__)
def test_every_parameter_is_declared_once(cls):
    """Each constructor parameter has exactly one rule, and nothing else has one."""
    assert set(cls._parameter_rules) == set(cls._get_param_names())


@pytest.mark.parametrize("cls", [DiagAttRegressor, NTKPrefixRegressor, StdAttRegressor])
def test_a_bad_parameter_is_named_with_what_it_must_be(cls, data):
    X, y = data
    with pytest.raises(ValueError, match=r"^max_iter must be ('auto' or )?an integer >= 1, got 0$"):
        cls(max_iter=0).fit(X, y)
    with pytest.raises(ValueError, match=r"^validation_fraction must be in \(0, 1\), got 1.5$"):
        cls(validation_fraction=1.5).fit(X, y)
    with pytest.raises(ValueError, match=r"^batch_size must be 'auto' or an integer >= 1, got 'big'$"):
        cls(batch_size="big").fit(X, y)


def test_the_fitting_bases_cannot_be_instantiated_without_their_methods():
    from skdiagatt._shared.phased import PhasedEstimator
    from skdiagatt._shared.two_phase import TwoPhaseEstimator

    for base in (PhasedEstimator, TwoPhaseEstimator):
        with pytest.raises(TypeError, match="abstract"):
            base()


@pytest.mark.parametrize("cls, change", [
    (DiagAttRegressor, dict(n_heads=2)),
    (DiagAttRegressor, dict(score_form="quadratic")),
    (StdAttRegressor, dict(key_dim=2)),
    (NTKPrefixRegressor, dict(n_heads=2)),
    (NTKPrefixRegressor, dict(head_dim=1)),
])
def test_a_warm_start_that_does_not_fit_the_settings_is_refused(cls, change, data):
    """Every estimator checks the previous fit's parameters against the current settings."""
    X, y = data
    est = cls(max_iter=1, random_state=0).fit(X, y)
    params = {k: v.copy() for k, v in est.params_.items()}
    name = next(iter(change))
    for continue_fit in (lambda e: e.set_params(warm_start=True).fit(X, y), lambda e: e.partial_fit(X, y)):
        with pytest.raises(ValueError, match=f"do not fit the current settings .*see .*{name}"):
            continue_fit(est.set_params(**change))
        est.set_params(warm_start=False, **{name: cls().get_params()[name]})
        assert all(np.array_equal(params[k], est.params_[k]) for k in params)
