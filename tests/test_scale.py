"""Beyond memory and beyond one device: chunks, partial_fit, data parallelism, n_jobs.

Every test here is small (one bucket length, a few epochs) so the file runs in
well under a minute; the speed figures themselves are in
``benchmarks/bench_speed.py`` / ``docs/results/performance.md``.
"""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor, _testing
from skdiagatt.baselines import StdAttRegressor
from skdiagatt.datasets import make_individualized_classification, make_individualized_regression

FAST = dict(max_iter=3, calibration_iter=2, batch_size=16, random_state=0)
NTK_FAST = dict(max_iter=3, prefix_length=16, batch_size=16, random_state=0, solver="adam")  # as fit_chunks
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def data():
    """96 samples of 6 rows (a single bucket length), d = 4."""
    X, y, _, _ = make_individualized_regression(96, n_rows=6, n_features=4, random_state=0)
    return np.stack(X).astype(np.float32), y


@pytest.fixture(scope="module")
def memmap(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("chunks") / "X.npy"
    np.save(path, data[0])
    return np.load(path, mmap_mode="r")


def _same(a, b):
    assert a.params_.keys() == b.params_.keys()
    for k in a.params_:
        np.testing.assert_array_equal(a.params_[k], b.params_[k], err_msg=k)
    assert a.loss_curve_ == b.loss_curve_


def _chunks(X, y, size):
    return [(X[i : i + size], y[i : i + size]) for i in range(0, len(X), size)]


# ------------------------------------------------------------- beyond memory
@pytest.mark.parametrize("Est, kw", [(DiagAttRegressor, FAST), (NTKPrefixRegressor, NTK_FAST),
                                     (DiagAttRegressor, {**FAST, "value_refit": True, "alpha_value": 0.01}),
                                     (StdAttRegressor, {**FAST, "objective": "latent"})])
def test_one_chunk_is_the_in_memory_fit(data, Est, kw):
    X, y = data
    _same(Est(**kw).fit(X, y), Est(**kw).fit_chunks([(X, y)]))


@pytest.mark.parametrize("Est, kw", [(DiagAttRegressor, FAST), (NTKPrefixRegressor, NTK_FAST)])
def test_memmap_chunks_match_in_memory_chunks(data, memmap, Est, kw):
    """Same seed, same chunk schedule: reading the chunks from disk changes nothing."""
    X, y = data
    in_memory = Est(**kw).fit_chunks(_chunks(X, y, 32))
    from_disk = Est(**kw).fit_chunks(memmap, y, chunk_size=32)
    _same(in_memory, from_disk)
    generator = Est(**kw).fit_chunks(lambda: iter(_chunks(memmap, y, 32)))
    _same(in_memory, generator)
    np.testing.assert_array_equal(from_disk.predict(memmap), in_memory.predict(X))


def test_chunked_fit_learns_like_the_in_memory_fit(data):
    X, y = data
    full = DiagAttRegressor(**FAST).fit(X, y)
    chunked = DiagAttRegressor(**FAST).fit_chunks(X, y, chunk_size=32)
    # Different minibatches (chunk-local), same procedure and statistics.
    np.testing.assert_array_equal(chunked.preconditioner_, full.preconditioner_)
    assert chunked.n_iter_ == full.n_iter_
    assert abs(chunked.loss_curve_[-1] - full.loss_curve_[-1]) < 0.1


def test_fit_chunks_rejects_bad_sources(data):
    X, y = data
    est = DiagAttRegressor(**FAST)
    with pytest.raises(TypeError, match="chunks must be"):
        est.fit_chunks(42)
    with pytest.raises(ValueError, match="chunk 1 has"):
        est.fit_chunks([(X[:10], y[:10]), (X[10:20], y[:3])])
    with pytest.raises(ValueError, match="chunk 1: X\\[0\\] has 3 features"):
        est.fit_chunks([(X[:10], y[:10]), (X[10:20, :, :3], y[10:20])])
    with pytest.raises(ValueError, match="early_stopping"):
        DiagAttRegressor(early_stopping=True).fit_chunks([(X, y)])


@pytest.mark.parametrize("Est, kw", [(DiagAttRegressor, FAST), (NTKPrefixRegressor, NTK_FAST),
                                     (StdAttRegressor, FAST)])
def test_partial_fit_from_memmap_matches_in_memory(data, memmap, Est, kw):
    X, y = data
    a, b = Est(**kw), Est(**kw)
    for _ in range(2):
        for (Xa, ya), (Xb, yb) in zip(_chunks(X, y, 32), _chunks(memmap, y, 32)):
            a.partial_fit(Xa, ya)
            b.partial_fit(Xb, yb)
    _same(a, b)
    assert a.n_iter_ == len(a.loss_curve_) == 6
    assert a.loss_curve_[-1] < a.loss_curve_[0]


def test_partial_fit_state_survives_pickle(data):
    X, y = data
    est = DiagAttRegressor(**FAST).partial_fit(X[:48], y[:48])
    copy = pickle.loads(pickle.dumps(est))
    est.partial_fit(X[48:], y[48:])
    copy.partial_fit(X[48:], y[48:])
    _same(est, copy)
    # The optimizer state is carried: a fresh optimizer on the second chunk differs.
    fresh = pickle.loads(pickle.dumps(DiagAttRegressor(**FAST).partial_fit(X[:48], y[:48])))
    fresh.__dict__.pop("_partial_state")
    fresh.partial_fit(X[48:], y[48:])
    assert not np.array_equal(fresh.params_["W"], est.params_["W"])


def test_partial_fit_after_fit_continues(data):
    X, y = data
    est = DiagAttRegressor(**FAST).fit(X, y)
    before = est.predict(X)
    est.partial_fit(X, y)
    assert est.n_iter_ == FAST["max_iter"] + 1
    assert not np.array_equal(before, est.predict(X))


def test_classifier_partial_fit_with_classes():
    X, y, _, _ = make_individualized_classification(64, n_rows=5, n_features=3, random_state=0)
    X, y = np.stack(X), np.where(y == 1, "yes", "no")
    clf = DiagAttClassifier(**FAST)
    first = y[:16] == "no"
    with pytest.raises(ValueError, match="at least two classes"):
        DiagAttClassifier(**FAST).partial_fit(X[:16][first], y[:16][first])
    clf.partial_fit(X[:16][first], y[:16][first], classes=["no", "yes"])
    clf.partial_fit(X[16:], y[16:])
    assert clf.classes_.tolist() == ["no", "yes"]
    assert clf.predict_proba(X).shape == (64, 2)
    with pytest.raises(ValueError, match="not in classes"):
        clf.partial_fit(X[:4], np.array(["no", "maybe", "yes", "no"]))


# --------------------------------------------- minibatches: filler and slices
def test_minibatches_have_little_filler_and_every_slice_a_real_sample():
    from skdiagatt._testing import plan_minibatches

    rng = np.random.RandomState(0)
    for _ in range(40):
        m, length, n_dev = int(rng.randint(1, 3000)), int(rng.choice([1, 7, 104, 448, 5000])), int(rng.choice([1, 2]))
        drawn = []
        for _, idx, w, n_slices in plan_minibatches([({"X": np.empty((m, length, 0))}, m, None)], 256, rng, n_dev):
            real = int(w.sum())
            assert idx.size % (n_slices * n_dev) == 0
            if m <= 256:  # one minibatch, filler at most about 1/8
                assert idx.size <= m + max(m // 8, 4 * n_slices * n_dev)
            else:  # the width of a full minibatch, whatever the count
                assert idx.size == 256
            assert real * length <= n_slices * (1 << 15) or 2 * n_slices > real
            assert np.all(w.reshape(-1, n_slices).sum(axis=0) > 0)  # each slice idx[c::n_slices]
            drawn.append(idx[:real])
        assert np.array_equal(np.sort(np.concatenate(drawn)), np.arange(m))


# ------------------------------------------------------- packed ragged data
@pytest.fixture(scope="module")
def ragged():
    """80 samples of 1 to 30 rows (several bucket lengths), d = 4."""
    X, y, _, _ = make_individualized_regression(80, n_rows=(1, 30), n_features=4, random_state=2)
    return X, y


def test_ragged_training_data_are_packed_and_one_length_is_not(ragged):
    from skdiagatt._training import PackedData, training_data

    X, y = ragged
    Y = np.asarray(y, np.float32)[:, None]
    assert isinstance(training_data(X, Y, pack=True), PackedData)
    assert isinstance(training_data(X, Y, pack=False), list)
    same = [x[:5] for x in X if x.shape[0] >= 5]  # one bucket length
    assert isinstance(training_data(same, Y[: len(same)], pack=True), list)
    rows = [np.zeros((x.shape[0], 1), np.float32) for x in X]  # row-level targets
    assert isinstance(training_data(X, rows, pack=True), list)


def _packed_inputs(ragged, rng):
    """What fit_loop takes for a one-head DiagAtt fit of the ragged fixture: packed data, params, frozen."""
    from skdiagatt import _training

    X, y = ragged
    est = DiagAttRegressor(**FAST)
    data = _training.training_data([np.asarray(x, np.float32) for x in X],
                                   np.asarray(y, np.float32)[:, None], pack=True)
    d = X[0].shape[1]
    params = est._init_params(d, 1, rng)
    frozen = est._frozen({"c": np.float32(1.0), "S": np.eye(d, dtype=np.float32)}, d)
    frozen["log_scale"] = params.pop("log_scale")
    return data, params, frozen


def test_packed_minibatches_hold_every_sample_once_with_its_blocks():
    from skdiagatt._shared.ragged import make_blocks
    from skdiagatt._testing import Layout, PackedData, plan_minibatches
    from skdiagatt._training import steps_per_epoch

    rng = np.random.RandomState(0)
    sliced = 0
    for _ in range(30):
        n, n_dev, C = int(rng.randint(1, 900)), int(rng.choice([1, 2])), int(rng.choice([1, 2, 3]))
        layout = Layout(packed_slice_rows=int(rng.choice([64, 300, 1 << 14])))
        lengths = np.maximum(1, rng.lognormal(2.5, 1.0, n).astype(int))
        blocks = make_blocks([np.empty((p, 0), np.float32) for p in lengths], C)
        K = blocks.X.shape[0] + int(rng.randint(0, 3))  # capacity rounded up
        data = PackedData(arrays={"X": np.empty((K, C, 0))}, first=blocks.first)
        batches = plan_minibatches(data, 64, rng, n_dev, layout)
        assert len(batches) == -(-n // 64)
        if len(set(lengths.tolist())) > 8:  # several bucket lengths: what fit_chunks schedules
            assert steps_per_epoch(lengths, 64, pack=True) == len(batches)
        sizes = [int(w.sum()) for _, _, w, _ in batches]
        assert max(sizes) - min(sizes) <= 1  # stratified by length: equal sizes
        drawn = []
        for _, idx, w, nc in batches:
            real, width = int(w.sum()), idx["idx"].size
            assert width == (64 if n > 64 else width) and width % (nc * n_dev) == 0
            assert idx["blocks"].size % (nc * n_dev) == 0
            # At most packed_slice_rows rows a slice unless every slice holds one sample.
            rows = np.sum(np.diff(blocks.first)[idx["idx"][w > 0]]) * C
            assert rows <= nc * layout.packed_slice_rows or 2 * nc > real
            sliced += nc > 1
            for c in range(nc):  # slice c: samples idx[c::nc], blocks at c::nc, seg its own slots
                own_idx, own_w = idx["idx"][c::nc], w[c::nc]
                b, seg = idx["blocks"][c::nc], idx["seg"][c::nc]
                k = int(own_w.sum())
                assert k > 0 and np.all(own_w[:k] == 1) and np.all(own_w[k:] == 0) and np.all(np.diff(seg) >= 0)
                # Filler blocks (the empty block K - 1) go to the slice's last slot, keeping seg sorted.
                assert np.all(b[seg >= k] == K - 1) and np.all(b[seg == own_idx.size - 1] >= 0)
                for slot, i in enumerate(own_idx[:k]):
                    mine = b[(seg == slot) & (b != K - 1)]
                    np.testing.assert_array_equal(mine, np.arange(blocks.first[i], blocks.first[i + 1]))
                assert np.sum(b != K - 1) == np.sum(np.diff(blocks.first)[own_idx[:k]])
            drawn.append(idx["idx"][w > 0])
        assert np.array_equal(np.sort(np.concatenate(drawn)), np.arange(n))
    assert sliced > 10


@pytest.mark.parametrize("which", ["one bucket", "packed", "NTK in buckets"])
def test_runs_of_steps_per_call_give_the_fit_of_one_step_per_call(data, ragged, which):
    """fit runs up to ``Layout.run_steps`` consecutive minibatches of a bucket in one call; how many
    changes nothing, bit for bit (5-6 steps per epoch: runs of 1, and of 3 then 2 or 3)."""
    from skdiagatt._testing import Layout, use_layout

    X, y = data if which == "one bucket" else ragged
    make = (lambda: NTKPrefixRegressor(**NTK_FAST)) if which.startswith("NTK") else (lambda: DiagAttRegressor(**FAST))
    fits = {}
    for run in (1, 3):
        with use_layout(Layout(run_steps=run)):
            fits[run] = make().fit(X, y)
    ref = fits.pop(1)
    for run, est in fits.items():
        assert est.loss_curve_ == ref.loss_curve_, run
        for k in ref.params_:
            np.testing.assert_array_equal(est.params_[k], ref.params_[k], err_msg=f"{k}, runs of {run}")


def _one_step(params, opt_state, frozen, data, idx, w, lr, loss_fn, config, n_slices):
    """One Adam step as fit runs it: a run of one minibatch (``_testing.train_steps``)."""
    from skdiagatt import _testing

    idx1, w1 = _testing.stacked([_testing.Minibatch(data, idx, w, n_slices)], 1)
    p, s, losses = _testing.train_steps(params, opt_state, frozen, data, idx1, w1, np.asarray([lr]),
                                        np.int32(1), loss_fn, config, n_slices)
    return p, s, losses[0]


def test_a_sliced_packed_step_is_the_whole_step(ragged):
    import jax
    import jax.numpy as jnp

    from skdiagatt import _testing
    from skdiagatt.kernels.diagatt import diagatt_loss

    data, params, frozen = _packed_inputs(ragged, np.random.RandomState(1))
    params["W"] = 0.3 * np.random.RandomState(2).randn(*params["W"].shape).astype(np.float32)
    out = {}
    for rows in (1 << 14, 60):
        layout = _testing.Layout(packed_slice_rows=rows)
        _, idx, w, n = _testing.plan_minibatches(data, 32, np.random.RandomState(0), layout=layout)[0]
        p = jax.tree.map(jnp.asarray, params)
        out[n] = (idx, _one_step(p, _testing.OPTIMIZER.init(p), frozen, data.arrays, idx, w,
                                 np.float32(0.1), diagatt_loss, ("latent", "gaussian"), n))
    assert sorted(out) == [1, 8]
    np.testing.assert_array_equal(np.sort(out[8][0]["idx"]), np.sort(out[1][0]["idx"]))
    (_, (p1, s1, l1)), (_, (p8, s8, l8)) = out[1], out[8]
    np.testing.assert_allclose(l8, l1, rtol=1e-5)
    for k in p1:
        np.testing.assert_allclose(p8[k], p1[k], rtol=1e-5, atol=1e-6, err_msg=k)
    for a, b in zip(jax.tree.leaves(s8), jax.tree.leaves(s1)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("kw", [FAST, {**FAST, "value_refit": True, "alpha_value": 0.01},
                                {**FAST, "n_heads": 2, "exclusive_heads": True}])
def test_one_chunk_of_ragged_data_is_the_in_memory_fit(ragged, kw):
    X, y = ragged
    _same(DiagAttRegressor(**kw).fit(X, y), DiagAttRegressor(**kw).fit_chunks([(X, y)]))


def test_samples_larger_than_the_working_memory_are_uploaded_in_random_chunks(ragged):
    import sklearn

    from skdiagatt._training import ChunkStream, memory_data
    from skdiagatt._training.data import FINE, chunk_bytes, padded_lengths

    X, y = ragged
    X = [np.asarray(x, np.float32) for x in X]
    whole, lengths = memory_data(X, y, pack=True, rng=np.random.RandomState(0))
    assert lengths is None and not isinstance(whole, ChunkStream)  # kilobytes: uploaded whole
    assert memory_data(X, y, pack=True)[1] is None  # no rng: never chunked
    with sklearn.config_context(working_memory=0.01):  # chunks of 1.3 kB: several chunks
        stream, lengths = memory_data(X, y, pack=True, rng=np.random.RandomState(0))
        budget = chunk_bytes()
        # Up to a third of the working memory the samples go up whole, beyond in chunks.
        padded = int(padded_lengths(np.array([len(x) for x in X]), FINE).sum()) * X[0].shape[1] * 4
    with sklearn.config_context(working_memory=3 * padded / 2**20):
        assert memory_data(X, y, pack=True, rng=np.random.RandomState(0))[1] is None
    with sklearn.config_context(working_memory=2.9 * padded / 2**20):
        assert memory_data(X, y, pack=True, rng=np.random.RandomState(0))[1] is not None
    assert isinstance(stream, ChunkStream) and len(lengths) > 3
    seen = []
    for samples, targets, weights in stream.make_iter():
        assert weights is None and len(samples) == len(targets) > 0
        seen += [(x.tobytes(), t) for x, t in zip(samples, targets)]
        assert sum(x.size for x in samples) * 4 < 2 * budget
    assert sorted(seen) == sorted((x.tobytes(), t) for x, t in zip(X, y))  # every sample once
    assert [len(lk) for lk in lengths] == [len(part[0]) for part in stream.make_iter()]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Est", [DiagAttRegressor, StdAttRegressor])
def test_a_fit_streamed_from_memory_is_reproducible_and_as_good(ragged, Est):
    import sklearn

    X, y = ragged
    kw = dict(max_iter=20, batch_size=16, random_state=0)
    whole = Est(**kw).fit(X, y)
    with sklearn.config_context(working_memory=0.06):  # about 3 chunks
        streamed = Est(**kw).fit(X, y)
        again = Est(**kw).fit(X, y)
    _same(streamed, again)
    assert streamed.loss_curve_ != whole.loss_curve_  # chunked minibatches: another fit
    assert len(streamed.loss_curve_) == len(whole.loss_curve_)
    assert streamed.score(X, y) > whole.score(X, y) - 0.1


def test_a_fit_that_stops_early_leaves_the_random_state_of_a_full_fit(ragged):
    # fit_loop draws the next epoch's minibatches before it reads an epoch's
    # loss; when it then stops, the draw is given back.
    from skdiagatt import _training
    from skdiagatt.kernels.diagatt import diagatt_loss

    data, params, frozen = _packed_inputs(ragged, np.random.RandomState(0))
    out = {}
    for max_iter, tol in ((4, 0.0), (20, 1e9)):  # tol 1e9: stops after epoch 4 (3 without gain)
        rng = np.random.RandomState(5)
        fitted, result = _training.fit_loop(
            diagatt_loss, ("latent", "gaussian"), params, frozen, data, max_iter=max_iter,
            learning_rate=0.01, batch_size=16, random_state=rng, tol=tol, n_iter_no_change=3,
            total_steps=40,
        )
        out[max_iter] = (fitted, result, rng.random_sample(3))
    (full, r_full, draw_full), (stopped, r_stop, draw_stop) = out[4], out[20]
    assert r_stop.stopped == "tol" and r_stop.n_iter == r_full.n_iter == 4
    assert r_stop.loss_curve == r_full.loss_curve
    for k in full:
        np.testing.assert_array_equal(stopped[k], full[k], err_msg=k)
    np.testing.assert_array_equal(draw_stop, draw_full)


def test_ragged_fit_with_early_stopping_is_reproducible(ragged):
    X, y = ragged
    kw = {**FAST, "early_stopping": True, "n_iter_no_change": 10}
    a, b = DiagAttRegressor(**kw).fit(X, y), DiagAttRegressor(**kw).fit(X, y)
    _same(a, b)
    assert len(a.validation_scores_) == 5 and np.all(np.isfinite(a.validation_scores_))
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


@pytest.fixture(scope="module")
def fitted_ragged(ragged):
    X, y = ragged
    return DiagAttRegressor(**{**FAST, "n_heads": 2}).fit(X, y)


@pytest.mark.parametrize("predict_rows", [1 << 17, 16])  # 16 rows: groups of 4 blocks, a sample alone
def test_ragged_inference_is_packed_and_matches_the_buckets(fitted_ragged, ragged, predict_rows):
    from skdiagatt import _training
    from skdiagatt._testing import Layout, use_layout
    from skdiagatt.diagatt import _estimators as module

    est, samples = fitted_ragged, fitted_ragged._validate_X(ragged[0], reset=False)
    assert max(s.shape[0] for s in samples) > predict_rows or predict_rows > 1000
    frozen = est._frozen_fitted()
    for fn, rows in ((module._linear_predictor, False), (module._weights, True), (module._contributions, True)):
        with use_layout(Layout(predict_rows=predict_rows)):
            packed = _training.map_samples(fn, samples, est.params_, frozen, pack=True, rows=rows)
            padded = _training.map_samples(fn, samples, est.params_, frozen, pack=False, rows=rows)
        if not rows:
            packed, padded = [packed], [padded]
        assert len(packed) == len(padded)
        for a, b in zip(packed, padded):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_ragged_prediction_is_each_sample_predicted_alone(fitted_ragged, ragged):
    # Bit for bit: a packed sample is reduced block after block in its own
    # slot, whatever the group around it and however much filler pads it.
    from skdiagatt._testing import Layout, use_layout

    X = ragged[0][:12]
    alone = [fitted_ragged.predict([x])[0] for x in X]
    np.testing.assert_array_equal(fitted_ragged.predict(X), alone)
    with use_layout(Layout(predict_min_rows=1 << 13)):  # twice the filler
        np.testing.assert_array_equal([fitted_ragged.predict([x])[0] for x in X], alone)
    weights = fitted_ragged.attention(X)
    for x, w in zip(X, weights):
        assert w.shape == (2, x.shape[0])
        np.testing.assert_array_equal(w, fitted_ragged.attention([x])[0])


def test_a_sample_alone_of_any_length_compiles_nothing_after_the_first(fitted_ragged, ragged):
    X = ragged[0]
    rng = np.random.RandomState(3)
    fitted_ragged.predict([X[0]])
    fitted_ragged.localize([X[0]])
    before = _testing.compile_count()
    for p in (7, 13, 22, 29, 30, 100):  # 100: longer than every training sample
        x = rng.randn(p, X[0].shape[1])
        fitted_ragged.predict([x])
        fitted_ragged.localize([x])
    assert _testing.compile_count() == before


def test_a_longer_sample_alone_compiles_one_program_per_power_of_two(fitted_ragged):
    # Groups of 16 blocks at least: 65 to 128 rows are 17 to 32 blocks, one
    # shape; 129 to 256 rows the next.
    rng = np.random.RandomState(4)
    counts = []
    with _testing.use_layout(_testing.Layout(predict_min_rows=64)):
        for p in (70, 100, 128, 129, 250):
            fitted_ragged.predict([rng.randn(p, 4)])
            counts.append(_testing.compile_count())
    assert np.diff(counts).tolist() == [0, 0, 1, 0]


def test_new_ragged_data_of_a_similar_size_compile_nothing(fitted_ragged, ragged):
    # Packed, a data set compiles one shape per power of two of its blocks; in
    # buckets, most new data sets would compile again (other sample counts).
    from skdiagatt.diagatt import _estimators as module

    X, _ = ragged
    fitted_ragged.predict(X)
    fitted_ragged.attention(X)
    before = module._linear_predictor._cache_size(), module._weights._cache_size()
    rng = np.random.RandomState(7)
    for _ in range(3):  # 80 new samples of 1 to 30 rows: 256 to 512 blocks
        new = [rng.randn(p, X[0].shape[1]) for p in rng.randint(1, 31, size=len(X))]
        fitted_ragged.predict(new)
        fitted_ragged.attention(new)
    assert (module._linear_predictor._cache_size(), module._weights._cache_size()) == before


def test_a_sliced_step_is_the_whole_step():
    import jax
    import jax.numpy as jnp

    from skdiagatt import _testing
    from skdiagatt.kernels.diagatt import diagatt_loss

    rng = np.random.RandomState(1)
    d, L, B = 5, 9, 24
    X = rng.randn(40, L, d).astype(np.float32)
    data = {"X": jnp.asarray(X), "where": jnp.asarray(np.arange(L)[None] < rng.randint(1, L + 1, 40)[:, None]),
            "y": jnp.asarray(rng.randn(40, 1).astype(np.float32))}
    params = {"W": 0.1 * rng.randn(1, d, d).astype(np.float32), "V": rng.randn(1, d, 1).astype(np.float32),
              "b": np.zeros(1, np.float32), "log_sigma": np.zeros(1, np.float32)}
    frozen = {"x_scale": np.float32(1.0), "S": np.eye(d, dtype=np.float32), "inv_tau": np.float32(0.5),
              "alpha": np.float32(1e-2), "alpha_value": np.float32(0.0), "log_scale": np.zeros(1, np.float32)}
    idx = rng.permutation(40)[:B].astype(np.int32)
    w = (np.arange(B) < 21).astype(np.float32)  # 3 filler samples at the end
    out = {}
    for n_slices in (1, 4):
        p = {k: jnp.asarray(v) for k, v in params.items()}
        state = _testing.OPTIMIZER.init(p)
        out[n_slices] = _one_step(p, state, frozen, data, idx, w, np.float32(0.1),
                                  diagatt_loss, ("latent", "gaussian"), n_slices)
    np.testing.assert_allclose(out[4][2], out[1][2], rtol=1e-5)
    for k in params:
        np.testing.assert_allclose(out[4][0][k], out[1][0][k], rtol=1e-5, atol=1e-6, err_msg=k)
    for a, b in zip(jax.tree.leaves(out[4][1]), jax.tree.leaves(out[1][1])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


def test_the_optimizer_state_starts_as_the_optimizer_would_start_it_and_compiles_nothing():
    import jax

    params = {"W": np.ones((2, 3, 3), np.float32), "log_scale": np.zeros(2, np.float32)}
    before = _testing.compile_count()
    ours = _testing.init_opt_state(params)
    assert _testing.compile_count() == before
    theirs = _testing.OPTIMIZER.init({k: jax.numpy.asarray(v) for k, v in params.items()})
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def test_compiled_programs_are_released_near_the_map_limit(data):
    from skdiagatt import _testing

    if not os.path.exists("/proc/self/maps"):
        pytest.skip("no /proc on this system")
    X, y = data
    est = DiagAttRegressor(**FAST).fit(X, y)
    assert _testing.train_steps._cache_size() > 0
    import jax

    before_count = _testing.compile_count()
    jax.jit(lambda a: a * 3 + 1)(np.arange(7.0))  # a new program: counted
    assert _testing.compile_count() == before_count + 1
    always = _testing.Layout(check_every=0)
    assert not _testing.release_programs_near_map_limit(always)  # far from the limit
    assert _testing.release_programs_near_map_limit(_testing.Layout(check_every=0, map_fraction=0.0))
    assert _testing.train_steps._cache_size() == 0
    before = est.predict(X)
    refit = DiagAttRegressor(**FAST).fit(X, y)  # compiles again, same result
    np.testing.assert_array_equal(refit.predict(X), before)


_LAZY_LISTENER = textwrap.dedent(
    """
    import jax.monitoring
    calls = []
    register = jax.monitoring.register_event_duration_secs_listener
    jax.monitoring.register_event_duration_secs_listener = lambda f: (calls.append(f), register(f))
    import skdiagatt, skdiagatt._testing
    imported = len(calls)
    skdiagatt._testing.compile_count()
    skdiagatt._testing.compile_count()
    print("RESULT", imported, len(calls))
    """
)


@pytest.mark.scale_out
def test_importing_registers_no_listener_and_counting_registers_one():
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", _LAZY_LISTENER], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    assert line.split()[1:] == ["0", "1"]


def test_a_layout_is_frozen_and_used_only_inside_its_block():
    import dataclasses

    from skdiagatt._testing import Layout, current_layout, use_layout

    default = current_layout()
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.run_steps = 1
    with use_layout(Layout(run_steps=1)) as inner:
        assert current_layout() is inner and inner.run_steps == 1
    assert current_layout() is default
    with pytest.raises(TypeError, match="Layout"):
        with use_layout({"run_steps": 1}):
            pass


# ------------------------------------------------------- beyond one device
_TWO_DEVICES = textwrap.dedent(
    """
    import json, os
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax, numpy as np
    from skdiagatt import DiagAttRegressor, NTKPrefixRegressor, _training
    from skdiagatt.datasets import make_individualized_regression
    X, y, _, _ = make_individualized_regression(60, n_rows=6, n_features=4, random_state=0)
    out = {"devices": len(jax.devices()), "training": len(_training.training_devices())}
    # 60 samples, batches of 16: the last batch (12) and the sharding both get exercised.
    for name, est in [("diagatt", DiagAttRegressor(max_iter=3, calibration_iter=2, batch_size=16,
                                                   random_state=0)),
                      ("ntk", NTKPrefixRegressor(max_iter=3, prefix_length=16, batch_size=16,
                                                 solver="adam", random_state=0))]:
        two = est.fit(X, y)
        curve2, pred2 = list(two.loss_curve_), two.predict(X)
        with _training.use_devices(jax.devices()[:1]):
            one = est.fit(X, y)
        out[name] = {"two": curve2, "one": list(one.loss_curve_),
                     "pred_diff": float(np.max(np.abs(pred2 - one.predict(X))))}
    # Ragged samples: packed minibatches, blocks sharded over the devices.
    Xr, yr, _, _ = make_individualized_regression(60, n_rows=(1, 20), n_features=4, random_state=1)
    kw = dict(max_iter=3, calibration_iter=2, batch_size=16, random_state=0)
    two = DiagAttRegressor(**kw).fit(Xr, yr)
    with _training.use_devices(jax.devices()[:1]):
        one = DiagAttRegressor(**kw).fit(Xr, yr)
    out["packed"] = {"two": list(two.loss_curve_), "one": list(one.loss_curve_),
                     "pred_diff": float(np.max(np.abs(two.predict(Xr) - one.predict(Xr))))}
    # Minibatches differentiated in 4 interleaved slices (as long samples are).
    from skdiagatt._testing import Layout, use_layout
    with use_layout(Layout(slice_rows=32, packed_slice_rows=32)):
        two = DiagAttRegressor(max_iter=3, calibration_iter=2, batch_size=16, random_state=0).fit(X, y)
        with _training.use_devices(jax.devices()[:1]):
            one = DiagAttRegressor(max_iter=3, calibration_iter=2, batch_size=16, random_state=0).fit(X, y)
        out["sliced"] = {"two": list(two.loss_curve_), "one": list(one.loss_curve_),
                         "pred_diff": float(np.max(np.abs(two.predict(X) - one.predict(X))))}
        two = DiagAttRegressor(**kw).fit(Xr, yr)  # packed and sliced
        with _training.use_devices(jax.devices()[:1]):
            one = DiagAttRegressor(**kw).fit(Xr, yr)
        out["packed_sliced"] = {"two": list(two.loss_curve_), "one": list(one.loss_curve_),
                                "pred_diff": float(np.max(np.abs(two.predict(Xr) - one.predict(Xr))))}
    print("RESULT" + json.dumps(out))
    """
)


@pytest.mark.scale_out
def test_two_devices_give_the_loss_curve_of_one():
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES], capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    res = json.loads(line[len("RESULT"):])
    assert res["devices"] == 2 and res["training"] == 2
    for name in ("diagatt", "ntk", "sliced", "packed", "packed_sliced"):
        two, one = np.array(res[name]["two"]), np.array(res[name]["one"])
        assert two.shape == one.shape and two.size >= 3
        np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-6, err_msg=name)
        assert res[name]["pred_diff"] < 1e-4


@pytest.mark.scale_out
def test_grid_search_with_two_processes(data):
    X, y = data
    # Candidates of the same shapes: each worker process compiles the steps once.
    grid = {"alpha": [1e-3, 1e-2]}
    serial = GridSearchCV(DiagAttRegressor(**FAST), grid, cv=2).fit(X, y)
    parallel = GridSearchCV(DiagAttRegressor(**FAST), grid, cv=2, n_jobs=2).fit(X, y)
    np.testing.assert_allclose(
        parallel.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"],
        rtol=1e-6,
    )
    assert parallel.best_params_ == serial.best_params_


def test_epoch_loss_is_the_weighted_mean_of_the_minibatches_with_its_standard_error():
    from skdiagatt._training.loop import _epoch_loss, placement

    # Two runs of steps (the second padded to the run length), minibatch weights 1, 3, 4.
    losses = [(np.array([1.0, 2.0], np.float32), 2), (np.array([4.0, 0.0], np.float32), 1)]
    mean, se = _epoch_loss(losses, [1.0, 3.0, 4.0], placement())
    w, loss = np.array([1.0, 3.0, 4.0]), np.array([1.0, 2.0, 4.0])
    assert mean == pytest.approx(w @ loss / w.sum())
    assert se == pytest.approx(np.sqrt(np.sum((w * (loss - mean)) ** 2)) / w.sum())
    assert _epoch_loss(losses[:1], [1.0, 3.0], placement())[1] > 0
    assert _epoch_loss([(np.array([2.0], np.float32), 1)], [5.0], placement())[1] == 0.0
