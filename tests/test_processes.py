"""A fit across processes (``skdiagatt.cluster.use_processes``): two real processes on loopback.

The two processes of ``jax.distributed`` (CPU collectives by gloo, the
coordinator bound to 127.0.0.1 on a free port) each fit on their shard of
the samples; the parent compares their models with fits in one process.
With one minibatch per epoch (``batch_size >= n``) the fit across processes
is the single-process fit of the concatenated samples: the same arithmetic
except the order of the float32 sums across the two shards, so loss curves
and predictions agree to a relative ``TOL`` (the float32 rounding of a few
epochs, by orders of magnitude less than any change of the data or the
steps).  With several minibatches per epoch the processes draw other
minibatches than one process would, so that case gives both processes the
same shard: each step's minibatch is then one process's minibatch twice,
and the fit must equal the one-process fit across processes (same plan) of
that shard at half the batch size.
"""

import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor
from skdiagatt.cluster import use_processes
from skdiagatt.datasets import make_individualized_classification, make_individualized_regression

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),  # a few epochs
              pytest.mark.scale_out]
TOL = 3e-5  # relative to the largest value (at least 1); float32 sums in another order
TIMEOUT = 240  # seconds a worker may take; both are killed past it

_CHILD = r"""
import pickle, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, rank, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
address = f"127.0.0.1:{port}"
jax.distributed.initialize(coordinator_address=address, coordinator_bind_address=address, num_processes=2,
                           process_id=rank, initialization_timeout=60)
assert jax.process_count() == 2 and len(jax.devices()) == 2, jax.devices()
from skdiagatt.cluster import use_processes

with open(f"{folder}/cases.pkl", "rb") as f:
    cases = pickle.load(f)
out = {}
for name, (cls, params, shards, X_all) in cases.items():
    X, y = shards[rank]
    with use_processes():
        est = cls(**params).fit(X, y)
    predict = getattr(est, "decision_function", est.predict)
    out[name] = (est.loss_curve_, est.params_, predict(X_all), est.n_iter_)
with open(f"{folder}/out{rank}.pkl", "wb") as f:
    pickle.dump(out, f)
jax.distributed.shutdown()
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cases():
    """name -> (estimator class, parameters, the two shards, all samples to predict)."""
    X, y, _, _ = make_individualized_regression(60, n_rows=8, n_features=4, random_state=1)
    bucket = (DiagAttRegressor, dict(max_iter=3, calibration_iter=2, batch_size=64, random_state=0),
              [(X[:25], y[:25]), (X[25:], y[25:])], X)
    Xc, yc, _, _ = make_individualized_classification(60, n_rows=(4, 20), n_features=4, random_state=2)
    labels = np.array(["no", "yes"])[yc]
    packed = (DiagAttClassifier, dict(max_iter=3, calibration_iter=2, batch_size=64, random_state=0),
              [(Xc[:31], labels[:31]), (Xc[31:], labels[31:])], Xc)
    Xr, yr, _, _ = make_individualized_regression(40, n_rows=(3, 15), n_features=4, random_state=3)
    # Unwhitened: the whitener's shrinkage depends on the row count, which
    # the doubled shard doubles; the steps' averaging is what is compared.
    steps = dict(max_iter=3, calibration_iter=1, batch_size=16, init="zeros", alpha=1e-2, alpha_value=0.0,
                 whiten=False, random_state=0)
    twice = (DiagAttRegressor, steps, [(Xr, yr), (Xr, yr)], Xr)
    return {"bucket": bucket, "packed": packed, "twice": twice}


@pytest.fixture(scope="module")
def across(tmp_path_factory):
    """The cases and what each of the two processes fitted."""
    if not socket.gethostbyname(socket.gethostname()).startswith("127."):
        pytest.skip("gloo listens on the address of the host name, which is not on loopback here")
    folder = tmp_path_factory.mktemp("processes")
    cases = _cases()
    with open(folder / "cases.pkl", "wb") as f:
        pickle.dump(cases, f)
    port = str(_free_port())
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, port, str(rank), str(folder)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    try:
        logs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:  # a worker left waiting for its peer is stopped here
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    outs = [pickle.load(open(folder / f"out{rank}.pkl", "rb")) for rank in (0, 1)]
    return cases, outs


def _close(a, b, what):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(np.max(np.abs(b)), 1.0)
    assert np.max(np.abs(a - b)) <= TOL * scale, f"{what}: differ by {np.max(np.abs(a - b))}, scale {scale}"


@pytest.mark.parametrize("name", ["bucket", "packed", "twice"])
def test_every_process_ends_with_the_same_model(across, name):
    _, (first, second) = across
    assert first[name][0] == second[name][0]
    for k in first[name][1]:
        np.testing.assert_array_equal(first[name][1][k], second[name][1][k], err_msg=k)
    np.testing.assert_array_equal(first[name][2], second[name][2])


@pytest.mark.parametrize("name", ["bucket", "packed"])
def test_one_minibatch_per_epoch_gives_the_single_process_fit(across, name):
    cases, (first, _) = across
    cls, params, shards, X_all = cases[name]
    X = [x for part, _ in shards for x in part]
    y = np.concatenate([part for _, part in shards])
    one = cls(**params).fit(X, y)
    curve, fitted, predictions, n_iter = first[name]
    assert n_iter == one.n_iter_
    _close(curve, one.loss_curve_, "loss curve")
    for k in fitted:
        _close(fitted[k], one.params_[k], k)
    if name == "packed":
        _close(predictions, one.decision_function(X_all), "logits")
    else:
        _close(predictions, one.predict(X_all), "predictions")


def test_several_minibatches_per_epoch_average_over_the_processes(across):
    # Both processes hold the same shard: every step's minibatch is one
    # process's minibatch twice, whose mean gradient is that minibatch's.
    cases, (first, _) = across
    cls, params, shards, X_all = cases["twice"]
    X, y = shards[0]
    with use_processes():  # one process, the same plan
        one = cls(**{**params, "batch_size": params["batch_size"] // 2}).fit(X, y)
    curve, fitted, predictions, n_iter = first["twice"]
    assert len(curve) == len(one.loss_curve_) and n_iter == one.n_iter_ == one.loss_curve_phase_.count("main")
    _close(curve, one.loss_curve_, "loss curve")
    _close(predictions, one.predict(X_all), "predictions")


def test_inside_the_block_only_fit_trains_across_processes():
    X, y, _, _ = make_individualized_regression(20, n_rows=5, n_features=3, random_state=0)
    with use_processes():
        with pytest.raises(ValueError, match="only fit trains across processes"):
            DiagAttRegressor(max_iter=1).partial_fit(X, y)
        with pytest.raises(ValueError, match="early_stopping is not available"):
            DiagAttRegressor(max_iter=1, early_stopping=True).fit(X, y)
        with pytest.raises(ValueError, match="process 0: .*19 targets"):
            DiagAttRegressor(max_iter=1).fit(X, y[:19])
        ragged, _, _, _ = make_individualized_regression(20, n_rows=(3, 30), n_features=3, random_state=0)
        with pytest.raises(ValueError, match="one bucket length.*DiagAtt"):
            NTKPrefixRegressor(max_iter=1).fit(ragged, y)
