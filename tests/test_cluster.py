"""Beyond one machine on Dask: model selection on a LocalCluster, chunks from Dask collections.

The cluster is real: two worker processes on loopback, started once for this
file and stopped by its fixture.  Data and grids are tiny (one shape, a few
epochs) so that the workers compile few programs; the speed-up itself is
measured by ``benchmarks/bench_dask.py`` (``docs/results/scaling.md``).
"""

import io
import os
import pickle
import re
from pathlib import Path

import dask
import dask.bag as db
import joblib
import numpy as np
import pytest
from dask.distributed import Client, LocalCluster
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV, cross_validate

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor
from skdiagatt.cluster import JaxWorker, iter_dask_chunks, worker_cpus
from skdiagatt.datasets import make_individualized_regression

pytestmark = pytest.mark.scale_out  # a real Dask cluster (run by `python -m pytest -m scale_out`)

FAST = dict(max_iter=2, calibration_iter=1, batch_size=16, random_state=0)
NTK_FAST = dict(max_iter=2, prefix_length=16, batch_size=16, random_state=0)


@pytest.fixture(scope="module")
def data():
    """48 samples of 5 rows (one bucket length), d = 3."""
    X, y, _, _ = make_individualized_regression(48, n_rows=5, n_features=3, random_state=0)
    return np.stack(X).astype(np.float32), y


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("jax_cache")


@pytest.fixture(scope="module")
def client(cache_dir):
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.register_plugin(JaxWorker(cache_dir=cache_dir))
        yield client


def _same(a, b):
    assert a.params_.keys() == b.params_.keys()
    for k in a.params_:
        np.testing.assert_array_equal(a.params_[k], b.params_[k], err_msg=k)
    assert a.loss_curve_ == b.loss_curve_


# --------------------------------------------------------- what ships out
class _Recorder(pickle.Unpickler):
    """Unpickles while recording the top-level package of every class it loads."""

    def load_recording(self):
        self.packages = set()
        return self.load(), self.packages

    def find_class(self, module, name):
        self.packages.add(module.split(".")[0])
        return super().find_class(module, name)


@pytest.mark.parametrize("Est, kw", [(DiagAttRegressor, FAST), (NTKPrefixRegressor, NTK_FAST),
                                     (DiagAttClassifier, FAST)])
def test_pickles_are_small_and_hold_no_device_state(data, Est, kw):
    X, y = data
    y = y > np.median(y) if Est is DiagAttClassifier else y
    unfitted = pickle.dumps(Est(**kw))
    assert len(unfitted) < 1000
    est = Est(**kw).fit(X, y)
    est.partial_fit(X, y)  # keeps its optimizer state for the next call
    blob = pickle.dumps(est)
    copy, packages = _Recorder(io.BytesIO(blob)).load_recording()
    # NumPy arrays and optax's state containers only: no jax.Array, no compiled program.
    assert packages <= {"numpy", "optax", "skdiagatt", "builtins", "collections"}, packages
    arrays = sum(v.nbytes for v in _arrays(vars(est)))
    assert len(blob) < arrays + 8000, (len(blob), arrays)
    np.testing.assert_array_equal(copy.predict(X), est.predict(X))


def _arrays(obj):
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v)
    elif hasattr(obj, "_fields"):  # optax's named tuples
        yield from _arrays(tuple(obj))


# ------------------------------------------------------- the workers' JAX
def test_worker_cpus_split_the_machine():
    assert [sorted(worker_cpus(range(4), i)) for i in range(5)] == [[0], [1], [2], [3], [0]]
    assert sorted(worker_cpus([0, 2, 4, 6], 1, threads=2)) == [4, 6]
    assert sorted(worker_cpus([3], 5, threads=2)) == [3]
    with pytest.raises(ValueError, match="threads"):
        JaxWorker(threads=0)


def _busy_threads():
    """Threads of this process that carried over a tenth of a JAX product's CPU time."""
    import jax.numpy as jnp
    import psutil

    x = jnp.ones((1000, 1000), jnp.float32)
    (x @ x).block_until_ready()  # compiled and warm
    proc = psutil.Process()
    before = {t.id: t.user_time + t.system_time for t in proc.threads()}
    for _ in range(15):
        (x @ x).block_until_ready()
    spent = [t.user_time + t.system_time - before.get(t.id, 0.0) for t in proc.threads()]
    return sum(s > 0.1 * sum(spent) for s in spent)


def test_each_worker_computes_on_its_own_core(client):
    cpus = client.run(lambda: sorted(os.sched_getaffinity(0)))
    assert len(cpus) == 2 and all(len(c) == 1 for c in cpus.values())
    if len(os.sched_getaffinity(0)) > 1:
        assert len({c[0] for c in cpus.values()}) == 2
    assert set(client.run(_busy_threads).values()) == {1}


# ------------------------------------------------------ model selection
def _scores(cv_results):
    return {k: v for k, v in cv_results.items() if "test_score" in k or k == "params"}


def test_grid_search_on_the_cluster_equals_one_job(client, data, cache_dir):
    X, y = data
    grid = {"alpha": [1e-3, 1e-1]}
    local = GridSearchCV(DiagAttRegressor(**FAST), grid, cv=2, n_jobs=1).fit(X, y)
    with joblib.parallel_config(backend="dask"):
        remote = GridSearchCV(DiagAttRegressor(**FAST), grid, cv=2).fit(X, y)
        randomized = RandomizedSearchCV(DiagAttRegressor(**FAST), {"alpha": [1e-3, 1e-2, 1e-1]},
                                        n_iter=2, cv=2, random_state=0).fit(X, y)
    for k, v in _scores(local.cv_results_).items():
        np.testing.assert_array_equal(remote.cv_results_[k], v, err_msg=k)
    assert remote.best_params_ == local.best_params_
    assert any(cache_dir.iterdir())  # the workers' compiled programs, shared
    local_random = RandomizedSearchCV(DiagAttRegressor(**FAST), {"alpha": [1e-3, 1e-2, 1e-1]},
                                      n_iter=2, cv=2, random_state=0, n_jobs=1).fit(X, y)
    for k, v in _scores(local_random.cv_results_).items():
        np.testing.assert_array_equal(randomized.cv_results_[k], v, err_msg=k)


def test_cross_validate_on_the_cluster_returns_the_local_models(client, data):
    X, y = data
    local = cross_validate(DiagAttRegressor(**FAST), X, y, cv=2, return_estimator=True)
    with joblib.parallel_config(backend="dask"):
        remote = cross_validate(DiagAttRegressor(**FAST), X, y, cv=2, return_estimator=True)
    np.testing.assert_array_equal(remote["test_score"], local["test_score"])
    for a, b in zip(local["estimator"], remote["estimator"]):
        _same(a, b)  # fitted on a worker, shipped back as NumPy


# ------------------------------------------------ chunks from Dask sources
@pytest.fixture(scope="module")
def shards(data, tmp_path_factory):
    """The data as four .npy shards of 12 samples (X and y files)."""
    X, y = data
    folder = tmp_path_factory.mktemp("shards")
    for k in range(4):
        np.save(folder / f"X_{k}.npy", X[12 * k : 12 * (k + 1)])
        np.save(folder / f"y_{k}.npy", y[12 * k : 12 * (k + 1)])
    return [(str(folder / f"X_{k}.npy"), str(folder / f"y_{k}.npy")) for k in range(4)]


def _load(paths):
    return np.load(paths[0]), np.load(paths[1])


def _in_memory(data):
    X, y = data
    return [(X[i : i + 12], y[i : i + 12]) for i in range(0, len(X), 12)]


@pytest.mark.parametrize("Est, kw", [(DiagAttRegressor, FAST), (NTKPrefixRegressor, NTK_FAST)])
def test_fit_chunks_from_dask_sources_is_the_in_memory_fit(data, shards, Est, kw):
    reference = Est(**kw).fit_chunks(_in_memory(data))
    bag = db.from_sequence(shards, npartitions=2).map(_load)  # two shards a partition
    _same(reference, Est(**kw).fit_chunks(bag))
    _same(reference, Est(**kw).fit_chunks([dask.delayed(_load)(p) for p in shards]))
    parts = [(dask.delayed(np.load)(xp), dask.delayed(np.load)(yp)) for xp, yp in shards]
    _same(reference, Est(**kw).fit_chunks(parts))


def test_each_pass_reads_the_shards_lazily_in_order(data, shards):
    read = []

    def load(paths):
        read.append(paths[0])
        return _load(paths)

    with dask.config.set(scheduler="sync"):  # in this process, to see the reads
        est = DiagAttRegressor(**FAST).fit_chunks([dask.delayed(load)(p) for p in shards])
    passes = len(read) // len(shards)
    assert passes >= 2 and read == [p for p, _ in shards] * passes
    assert est.n_iter_ == FAST["max_iter"]


def test_partial_fit_over_a_bag_is_the_in_memory_loop(data, shards):
    a, b = DiagAttRegressor(**FAST), DiagAttRegressor(**FAST)
    for Xk, yk in _in_memory(data):
        a.partial_fit(Xk, yk)
    for Xk, yk in iter_dask_chunks(db.from_sequence(shards, npartitions=4).map(_load)):
        b.partial_fit(Xk, yk)
    _same(a, b)


def test_weighted_chunks_from_dask_sources(data):
    """``(X, y, w)`` triples read from a bag or delayed objects are the triples held in memory."""
    X, y = data
    w = np.linspace(0.5, 2.0, len(X))  # chunks of the shape the tests above compiled
    triples = [(X[i : i + 12], y[i : i + 12], w[i : i + 12]) for i in range(0, len(X), 12)]
    reference = DiagAttRegressor(**FAST).fit_chunks(triples)
    with dask.config.set(scheduler="sync"):
        bag = db.from_sequence(triples, npartitions=2)
        _same(reference, DiagAttRegressor(**FAST).fit_chunks(bag))
        _same(reference, DiagAttRegressor(**FAST).fit_chunks([dask.delayed(t) for t in triples]))
        Xk, yk, wk = next(iter_dask_chunks(bag))  # for partial_fit(Xk, yk, sample_weight=wk)
    np.testing.assert_array_equal(wk, w[:12])


def test_fit_chunks_reads_on_the_cluster(client, data, shards):
    reference = DiagAttRegressor(**FAST).fit_chunks(_in_memory(data))
    bag = db.from_sequence(shards, npartitions=4).map(_load)  # computed by the workers
    _same(reference, DiagAttRegressor(**FAST).fit_chunks(bag))


def test_bad_dask_sources_are_named(data, shards):
    X, _ = data
    with pytest.raises(TypeError, match="dask.bag.Bag"):
        DiagAttRegressor(**FAST).fit_chunks(dask.delayed(_load)(shards[0]))
    with pytest.raises(TypeError, match="chunk 1 is not an"):
        DiagAttRegressor(**FAST).fit_chunks(db.from_sequence([_load(shards[0]), X[0]], npartitions=1))
    with pytest.raises(ValueError, match="chunk 1: X\\[0\\] has 2 features"):
        DiagAttRegressor(**FAST).fit_chunks([dask.delayed(_load)(shards[0]),
                                             dask.delayed((X[:4, :, :2], np.zeros(4)))])
    with pytest.raises(TypeError, match="source must be"):
        next(iter_dask_chunks([(X, X)]))


# ------------------------------------------------------------ the docs page
def _recipes():
    page = (Path(__file__).resolve().parent.parent / "docs" / "scaling_out.md").read_text()
    return re.findall(r"```python\n(.*?)```", page, re.S)


def test_scaling_out_recipes_are_python_and_the_streaming_one_runs():
    recipes = _recipes()
    assert len(recipes) == 3
    for code in recipes:
        compile(code, "docs/scaling_out.md", "exec")
    # The cluster recipe starts its own workers (run by hand and by the benchmark);
    # the recipe across processes is the example script, verbatim (the same path
    # runs in tests/test_processes.py); the streaming recipe runs here as written.
    assert "LocalCluster" in recipes[0] and "LocalCluster" not in recipes[1]
    example = Path(__file__).resolve().parent.parent / "examples" / "fit_across_processes.py"
    assert recipes[2].strip() == example.read_text().strip()
    with dask.config.set(scheduler="sync"):
        exec(compile(recipes[1], "docs/scaling_out.md", "exec"), {"__name__": "recipe"})
