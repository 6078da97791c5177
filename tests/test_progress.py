"""What ``verbose`` prints and what ``callback`` receives while an estimator trains.

``solver="varpro"``'s callback is checked in ``tests/test_ntk.py``, on a fit
that test runs anyway.
"""

import re

import numpy as np
import pytest

from skdiagatt import DiagAttRegressor, EpochInfo, NTKPrefixRegressor, _testing
from skdiagatt.baselines import StdAttRegressor

FAST = dict(max_iter=3, calibration_iter=2, batch_size=16, random_state=0)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def small():
    rng = np.random.RandomState(0)
    X = rng.randn(48, 5, 3)
    return X, X[:, 0, 0] + 0.1 * rng.randn(48)


class Recorder:
    def __init__(self, stop_at=None):
        self.infos, self.stop_at = [], stop_at

    def __call__(self, info):
        self.infos.append(info)
        return info.epoch == self.stop_at and "calibration" not in info.phase


def test_verbose_says_when_it_compiles_and_estimates_the_time_left(capsys):
    # 13 features and 3 rows: shapes no other test compiles.
    rng = np.random.RandomState(1)
    X = rng.randn(40, 3, 13)
    before = _testing.compile_count()
    DiagAttRegressor(**FAST, verbose=1).fit(X, X[:, 0, 0])
    assert _testing.compile_count() > before
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[DiagAttRegressor main] epoch 1/3: compiling")
    epochs = [x for x in lines if re.match(r"\[DiagAttRegressor main\] epoch \d/3: loss", x)]
    assert len(epochs) == 3
    duration = r"\d+\.\d m?s"
    assert re.search(rf"; {duration}( \({duration} compiling\))?; about {duration} left$", epochs[0])
    assert "left" not in epochs[-1]  # the last epoch: nothing left
    assert any(x.startswith("[DiagAttRegressor calibration] epoch 2/2: loss") for x in lines)


def test_callback_sees_every_epoch_of_every_phase(small):
    X, y = small
    rec = Recorder()
    est = DiagAttRegressor(**FAST, callback=rec).fit(X, y)
    assert [(i.phase, i.epoch) for i in rec.infos] == [
        ("main", 1), ("main", 2), ("main", 3), ("calibration", 1), ("calibration", 2)]
    assert [i.phase for i in rec.infos] == est.loss_curve_phase_  # one name per phase
    assert all(isinstance(i, EpochInfo) for i in rec.infos)
    assert [i.train_loss for i in rec.infos] == pytest.approx(est.loss_curve_)
    assert all(i.valid_loss is None and np.isfinite([i.seconds, i.compile_seconds, i.remaining]).all()
               for i in rec.infos)
    assert all(i.remaining == 0 for i in rec.infos if i.epoch == i.max_iter)
    # Watching changes nothing: same random_state, same bits.
    plain = DiagAttRegressor(**FAST).fit(X, y)
    for k in plain.params_:
        np.testing.assert_array_equal(est.params_[k], plain.params_[k])


def test_callback_gets_the_validation_loss_with_early_stopping(small):
    X, y = small
    rec = Recorder()
    est = DiagAttRegressor(**FAST, early_stopping=True, callback=rec).fit(X, y)
    assert [i.valid_loss for i in rec.infos] == pytest.approx(est.validation_scores_)


def test_a_true_return_stops_the_phase_and_calibration_still_runs(small):
    X, y = small
    rec = Recorder(stop_at=2)
    est = DiagAttRegressor(**{**FAST, "max_iter": 10}, callback=rec).fit(X, y)
    assert est.loss_curve_phase_ == ["main", "main", "calibration", "calibration"]
    assert est.n_iter_ == 2  # the main phase's epochs
    assert [i.phase for i in rec.infos] == est.loss_curve_phase_  # one name per phase


@pytest.mark.parametrize("Est, kw", [
    (StdAttRegressor, dict(FAST)),
    (NTKPrefixRegressor, dict(max_iter=2, prefix_length=4, batch_size=16, random_state=0)),
])
def test_every_trained_estimator_calls_back(small, Est, kw):
    X, y = small
    rec = Recorder()
    est = Est(**kw, callback=rec).fit(X, y)
    assert len(rec.infos) >= 2
    assert [i.phase for i in rec.infos] == est.loss_curve_phase_[:len(rec.infos)]
    assert est.get_params()["callback"] is rec


def test_a_callback_that_is_not_callable_is_refused_and_the_model_kept(small):
    X, y = small
    est = DiagAttRegressor(**FAST).fit(X, y)
    before = {k: v.copy() for k, v in est.params_.items()}
    with pytest.raises(ValueError, match="callback must be None or a callable"):
        est.set_params(callback="print").fit(X, y)
    for k, v in before.items():
        np.testing.assert_array_equal(est.params_[k], v)
