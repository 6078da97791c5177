"""NTKPrefixRegressor tested by what users do with it."""

import pickle
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.utils import estimator_checks

from skdiagatt import NTKPrefixRegressor
from skdiagatt._shared.ragged import COARSE, FINE, make_buckets
from skdiagatt.kernels.attention import plain_attention
from tests.conftest import grid_sensitive_samples

# Adam compiles in a fraction of the time variable projection takes: the tests of the sklearn
# shell use it; test_defaults_reach_a_shifted_prefix_and_auto_picks_the_solver fits the defaults.
FAST = dict(max_iter=3, prefix_length=32, random_state=0, solver="adam")
ADAM_TAYLOR = dict(feature_map="taylor", degree=2, solver="adam")  # the paper's map, trained by Adam


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = [rng.randn(rng.randint(3, 10), 4).astype(np.float32) for _ in range(60)]
    y = np.array([np.tanh(x[:, 0]).mean() + 0.1 * x[:, 1].max() for x in X])
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    return NTKPrefixRegressor(n_heads=2, head_dim=3, **FAST).fit(*data)


@pytest.mark.parametrize("check", ["check_no_attributes_set_in_init", "check_parameters_default_constructible",
                                   "check_get_params_invariance", "check_set_params", "check_estimator_repr"])
def test_sklearn_data_free_checks(check):
    getattr(estimator_checks, check)("NTKPrefixRegressor", NTKPrefixRegressor())


def test_frozen_projections_do_not_move(data):
    X, y = data
    rng = np.random.RandomState(1)
    given = {k: rng.randn(2, 4, 3).astype(np.float32) * 0.3 for k in ("W_Q", "W_K", "W_V")}
    copy = {k: v.copy() for k, v in given.items()}
    est = NTKPrefixRegressor(n_heads=2, attention_weights=given, max_iter=5, prefix_length=32,
                             random_state=0, solver="adam").fit(X, y)
    for k in given:
        np.testing.assert_array_equal(est.attention_weights_[k], copy[k])
        np.testing.assert_array_equal(given[k], copy[k])
    init = NTKPrefixRegressor(n_heads=2, attention_weights=given, max_iter=1, prefix_length=32,
                              random_state=0, learning_rate=1e-12, solver="adam").fit(X, y)
    assert not np.allclose(est.params_["Z"], init.params_["Z"])  # the state is trained


def test_two_d_projection_layout_is_accepted(data):
    X, y = data
    rng = np.random.RandomState(2)
    flat = {k: rng.randn(4, 6).astype(np.float32) * 0.3 for k in ("W_Q", "W_K", "W_V")}
    est = NTKPrefixRegressor(n_heads=2, attention_weights=flat, **FAST).fit(X, y)
    np.testing.assert_array_equal(est.attention_weights_["W_Q"][1], flat["W_Q"][:, 3:])


def test_zeros_init_is_plain_attention(data):
    X, y = data
    est = NTKPrefixRegressor(init="zeros", train_state=False, feature_map="taylor", **FAST).fit(X, y)
    assert np.all(est.params_["Z"] == 0) and np.all(est.params_["k"] == 0)
    W = est.attention_weights_
    b = make_buckets([np.asarray(x, np.float32) for x in X])
    pred = est.predict(X)
    for bucket in b.buckets:
        T = plain_attention(jnp.asarray(bucket.X), jnp.asarray(bucket.where), W["W_Q"], W["W_K"], W["W_V"])
        T = np.asarray(T).reshape(T.shape[0], T.shape[1], -1)
        pooled = T.sum(1) / bucket.where.sum(1, keepdims=True)
        z = pooled @ est.params_["W_out"] + est.params_["b"]
        ref = z[:, 0] * est.y_scale_ + est.y_mean_
        np.testing.assert_allclose(pred[bucket.index], ref, rtol=1e-4, atol=1e-5)


def test_clone_pickle_grid_search(fitted, data):
    X, y = data
    assert not hasattr(clone(fitted), "params_")
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict(X), fitted.predict(X))
    grid = GridSearchCV(NTKPrefixRegressor(**FAST), {"feature_map": ["taylor", "elu"]}, cv=2).fit(X, y)
    assert grid.best_params_["feature_map"] in ("taylor", "elu")


def test_reproducible(data):
    X, y = data
    a = NTKPrefixRegressor(**FAST).fit(X, y)
    b = NTKPrefixRegressor(**FAST).fit(X, y)
    for k in a.params_:
        np.testing.assert_array_equal(a.params_[k], b.params_[k])


def test_localize_and_attention(fitted, data):
    X, _ = data
    att = fitted.attention(X)
    for x, w in zip(X, att):
        assert w.shape == (2, x.shape[0]) and np.all(w >= 0) and np.all(w.sum(1) <= 1 + 1e-5)
    loc = fitted.localize(X, top_k=2)
    assert all(len(r) == 2 and np.all(r < x.shape[0]) for r, x in zip(loc, X))


def test_padding_invariance(fitted, data):
    X, _ = data
    full = fitted.predict(X)
    np.testing.assert_allclose(fitted.predict([X[4], X[1]]), full[[4, 1]], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pooling", ["mean", None])
def test_predictions_do_not_depend_on_the_bucket_grid(pooling):
    X = grid_sensitive_samples()
    y = np.array([x[:, 0].mean() for x in X]) if pooling else [x[:, 0] for x in X]
    est = NTKPrefixRegressor(pooling=pooling, causal=pooling is None, **FAST).fit(X, y)
    assert est._bucket_growth == COARSE
    coarse = est.predict(X)
    est._bucket_growth = FINE
    fine = est.predict(X)
    np.testing.assert_allclose(np.concatenate([np.ravel(v) for v in coarse]),
                               np.concatenate([np.ravel(v) for v in fine]), rtol=1e-5, atol=1e-6)


def test_token_level_targets(data):
    X, _ = data
    y_rows = [np.column_stack([x[:, 0], -x[:, 1]]) for x in X]
    est = NTKPrefixRegressor(pooling=None, causal=True, **FAST).fit(X, y_rows)
    pred = est.predict(X)
    assert all(p.shape == (x.shape[0], 2) for p, x in zip(pred, X))
    assert np.isfinite(est.score(X, y_rows))
    with pytest.raises(ValueError, match="list of one"):
        NTKPrefixRegressor(pooling=None, **FAST).fit(X, np.zeros(len(X)))


def test_row_target_score_weighs_each_sample(data):
    X, _ = data
    y_rows = [np.column_stack([x[:, 0], -x[:, 1]]) for x in X]
    est = NTKPrefixRegressor(pooling=None, causal=True, **FAST).fit(X, y_rows)
    w = np.arange(len(X)) % 3  # 0, 1 or 2: left out, once, twice
    repeated = [i for i in range(len(X)) for _ in range(w[i])]
    weighted = est.score(X, y_rows, sample_weight=w)
    assert weighted == pytest.approx(est.score([X[i] for i in repeated], [y_rows[i] for i in repeated]), rel=1e-6)
    assert weighted != pytest.approx(est.score(X, y_rows), rel=1e-6)
    with pytest.raises(ValueError, match="sample_weight"):
        est.score(X, y_rows, sample_weight=w[:-1])


def test_bad_inputs(fitted, data):
    X, y = data
    with pytest.raises(NotFittedError):
        NTKPrefixRegressor().predict(X)
    with pytest.raises(ValueError, match=r"X\[1\] has 5 features, expected 4"):
        fitted.predict([X[0], np.ones((2, 5))])
    with pytest.raises(ValueError, match="attention_weights"):
        NTKPrefixRegressor(attention_weights={"W_Q": np.ones((4, 2))}, **FAST).fit(X, y)
    with pytest.raises(ValueError, match=r"attention_weights\['W_K'\] has shape"):
        NTKPrefixRegressor(attention_weights={"W_Q": np.ones((1, 4, 2)), "W_K": np.ones((3, 3)),
                                              "W_V": np.ones((1, 4, 2))}, **FAST).fit(X, y)
    with pytest.raises(ValueError, match="feature_map"):
        NTKPrefixRegressor(feature_map="rbf", **FAST).fit(X, y)


def test_learns_a_prefix_that_frozen_attention_cannot_fit():
    """Targets made by attention with a hidden long prefix: training Z, k must help."""
    rng = np.random.RandomState(0)
    d, H = 4, 1
    W = {k: (rng.randn(H, d, d) * 0.5).astype(np.float32) for k in ("W_Q", "W_K", "W_V")}
    X = [rng.randn(rng.randint(4, 9), d).astype(np.float32) for _ in range(300)]
    P = (rng.randn(64, d) + 1.5).astype(np.float32)
    from skdiagatt.kernels.attention import prefix_attention

    b = make_buckets(X)
    y = np.empty(len(X))
    for bucket in b.buckets:
        T = np.asarray(prefix_attention(jnp.asarray(bucket.X), jnp.asarray(bucket.where), jnp.asarray(P),
                                        W["W_Q"], W["W_K"], W["W_V"]))
        pooled = T.reshape(T.shape[0], T.shape[1], -1).sum(1) / bucket.where.sum(1, keepdims=True)
        y[bucket.index] = pooled @ np.arange(1, d + 1)
    common = dict(attention_weights=W, n_heads=H, max_iter=60, random_state=0, prefix_length=16, **ADAM_TAYLOR)
    frozen = NTKPrefixRegressor(init="zeros", train_state=False, **common).fit(X[:200], y[:200])
    ntk = NTKPrefixRegressor(init="zeros", **common).fit(X[:200], y[:200])
    assert ntk.score(X[200:], y[200:]) > frozen.score(X[200:], y[200:]) + 0.05


def test_prefix_tuning_baseline(data):
    from skdiagatt.baselines.prefix_tuning import PrefixTuningRegressor

    X, y = data
    est = PrefixTuningRegressor(prefix_length=5, max_iter=3, random_state=0).fit(X, y)
    assert est.params_["P"].shape == (5, 4)
    assert est.predict(X).shape == (len(X),)
    assert "feature_map" not in est.get_params() and est.get_params()["prefix_length"] == 5
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    mass = est.attention(X[:3])
    assert all(np.all(m.sum(1) < 1) for m in mass)  # the prefix takes part of the mass


def test_lora_baseline(data):
    from skdiagatt.baselines import LoRARegressor

    X, y = data
    est = LoRARegressor(rank=2, max_iter=3, random_state=0).fit(X, y)
    shapes = {k: v.shape for k, v in est.params_.items()}
    assert shapes == {"A_Q": (4, 2), "B_Q": (1, 2, 4), "A_V": (4, 2), "B_V": (1, 2, 4), "W_out": (4, 1), "b": (1,)}
    assert "feature_map" not in est.get_params() and est.get_params()["rank"] == 2
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    for m in est.attention(X[:3]):  # no prefix: every query's mass stays on the rows
        np.testing.assert_allclose(m.sum(1), 1.0, atol=1e-5)


def test_lora_adapts_the_frozen_query_and_value():
    """Targets of attention with rank-one changed W_Q and W_V: LoRA learns them, the frozen layer cannot."""
    from skdiagatt.baselines import LoRARegressor
    from skdiagatt.kernels.attention import plain_attention

    rng = np.random.RandomState(1)
    d, H, n = 6, 2, 500
    W = {k: (0.4 * rng.randn(H, d, 3)).astype(np.float32) for k in ("W_Q", "W_K", "W_V")}
    a, bq, bv = rng.randn(d, 1), rng.randn(H, 1, 3), rng.randn(H, 1, 3)
    true_q = W["W_Q"] + np.einsum("dq,hqe->hde", a, bq)
    true_v = W["W_V"] + np.einsum("dq,hqe->hde", a, bv)
    X = rng.randn(n, 7, d).astype(np.float32)
    T = np.asarray(plain_attention(jnp.asarray(X), jnp.ones((n, 7), bool), jnp.asarray(true_q, jnp.float32),
                                   W["W_K"], jnp.asarray(true_v, jnp.float32)))
    y = T.reshape(n, 7, -1).mean(1) @ rng.randn(H * 3)
    common = dict(attention_weights=W, n_heads=H, max_iter=80, learning_rate=0.02, random_state=0)
    lora = LoRARegressor(rank=1, **common).fit(X[:400], y[:400])
    frozen = NTKPrefixRegressor(init="zeros", train_state=False, feature_map="elu", **common).fit(X[:400], y[:400])
    assert lora.score(X[400:], y[400:]) > frozen.score(X[400:], y[400:]) + 0.1


def test_state_gradient_at_zero_is_the_true_one():
    """Training from Z = k = 0 must not be stuck: d/dZ at zero equals a finite difference."""
    import jax

    from skdiagatt.kernels.ntk_attention import ntk_attention

    rng = np.random.RandomState(0)
    X = jnp.asarray(rng.randn(2, 5, 3).astype(np.float32))
    where = jnp.ones((2, 5), bool)
    W = [jnp.asarray(rng.randn(1, 3, 3).astype(np.float32) * 0.5) for _ in range(3)]
    Z = jnp.zeros((1, 10, 3))
    k = jnp.zeros((1, 10))

    def f(Z):
        return jnp.sum(ntk_attention(X, where, Z, k, *W) * jnp.arange(3.0))

    g = np.asarray(jax.grad(f)(Z))
    eps = 1e-2
    e = np.zeros((1, 10, 3), np.float32)
    e[0, 4, 1] = eps
    fd = (f(Z + e) - f(Z - e)) / (2 * eps)
    assert abs(g[0, 4, 1]) > 1e-3
    np.testing.assert_allclose(g[0, 4, 1], fd, rtol=1e-2)


def _prefix_target_data(seed):
    """Targets made by attention with a hidden prefix of 64 shifted rows (as in the test above)."""
    rng = np.random.RandomState(seed)
    d, H = 4, 1
    W = {k: (rng.randn(H, d, d) * 0.5).astype(np.float32) for k in ("W_Q", "W_K", "W_V")}
    X = [rng.randn(rng.randint(4, 9), d).astype(np.float32) for _ in range(300)]
    P = (rng.randn(64, d) + 1.5).astype(np.float32)
    from skdiagatt.kernels.attention import prefix_attention

    y = np.empty(len(X))
    for bucket in make_buckets(X).buckets:
        T = np.asarray(prefix_attention(jnp.asarray(bucket.X), jnp.asarray(bucket.where), jnp.asarray(P),
                                        W["W_Q"], W["W_K"], W["W_V"]))
        pooled = T.reshape(T.shape[0], T.shape[1], -1).sum(1) / bucket.where.sum(1, keepdims=True)
        y[bucket.index] = pooled @ np.arange(1, d + 1)
    return X, y, W


def test_prefix_state_is_trained_in_units_of_the_prefix_length(data):
    """A state built from m rows has entries ~m; Adam steps ~learning_rate must still move it.

    Trained in raw units (state_scale=1.0) the Eq. 4 state of a 4096-row
    prefix moves by ~3e-5 of its size in 5 epochs; in units of sqrt(m)
    ("auto") by ~3e-3, sqrt(m) = 64 times as far. params_ must hold the state
    in raw units either way: with a negligible step it is exactly Eq. 4.
    """
    from skdiagatt.kernels.ntk_attention import prefix_to_state

    X, y = data
    rng = np.random.RandomState(1)
    W = {k: rng.randn(2, 4, 3).astype(np.float32) * 0.3 for k in ("W_Q", "W_K", "W_V")}
    m = 4096
    # Given projections: the prefix is the first draw of random_state.
    P = np.random.RandomState(0).standard_normal((m, 4)).astype(np.float32)
    Z0, k0 = (np.asarray(a) for a in prefix_to_state(P, W["W_K"], W["W_V"]))
    # batch_size=16: four steps an epoch.
    common = dict(n_heads=2, attention_weights=W, prefix_length=m, batch_size=16, random_state=0, **ADAM_TAYLOR)

    def moved(est):
        return np.linalg.norm(est.params_["k"] - k0) / np.linalg.norm(k0)

    auto = moved(NTKPrefixRegressor(max_iter=5, **common).fit(X, y))
    raw = moved(NTKPrefixRegressor(max_iter=5, state_scale=1.0, **common).fit(X, y))
    assert raw < 1e-4 and auto > 1e-3
    twice = NTKPrefixRegressor(**common).partial_fit(X, y).partial_fit(X, y)
    assert moved(twice) > 1e-3
    still = NTKPrefixRegressor(max_iter=1, learning_rate=1e-12, **common).fit(X, y)
    np.testing.assert_allclose(still.params_["k"], k0, rtol=1e-6)
    np.testing.assert_allclose(still.params_["Z"], Z0, rtol=1e-6, atol=1e-6 * np.abs(Z0).max())
    with pytest.raises(ValueError, match="state_scale"):
        NTKPrefixRegressor(state_scale=0.0, **FAST).fit(X, y)


def test_long_random_prefix_init_learns():
    """init="prefix" with m = 1024 must learn, not sit at the random prefix (docs/results/ntk_learning.md)."""
    X, y, W = _prefix_target_data(seed=1)
    common = dict(attention_weights=W, n_heads=1, max_iter=60, random_state=0, init="prefix", prefix_length=1024,
                  **ADAM_TAYLOR)
    auto = NTKPrefixRegressor(**common).fit(X[:200], y[:200]).score(X[200:], y[200:])
    raw = NTKPrefixRegressor(state_scale=1.0, **common).fit(X[:200], y[:200]).score(X[200:], y[200:])
    frozen = NTKPrefixRegressor(init="zeros", train_state=False, attention_weights=W, n_heads=1, max_iter=60,
                                random_state=0, **ADAM_TAYLOR).fit(X[:200], y[:200]).score(X[200:], y[200:])
    assert auto > raw + 0.05 and auto > frozen + 0.1


def test_prefix_of_any_length_in_bounded_memory(data):
    """Short prefixes are drawn and summed block by block, exactly as compressing them whole;
    2^40 rows and np.inf fit without materializing anything."""
    from skdiagatt.kernels.ntk_attention import prefix_to_state
    from skdiagatt.kernels.prefix_moments import gaussian_prefix_state
    from skdiagatt.ntk._prefix_state import EXACT_ROWS, random_prefix_state

    rng = np.random.RandomState(3)
    W_K, W_V = (jnp.asarray(0.3 * rng.randn(2, 4, 3), jnp.float32) for _ in range(2))
    m = 9_000  # three blocks
    whole = prefix_to_state(jnp.asarray(np.random.RandomState(5).standard_normal((m, 4)), jnp.float32), W_K, W_V)
    streamed = random_prefix_state(m, W_K, W_V, "taylor", 2, np.random.RandomState(5))
    for a, b in zip(whole, streamed):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-2)

    huge = 2 ** 40
    Z, k = random_prefix_state(huge, W_K, W_V, "taylor", 2, np.random.RandomState(5))
    Ze, ke = gaussian_prefix_state(W_K, W_V)
    np.testing.assert_allclose(k[:, 0], huge, rtol=1e-6)  # every row's constant feature is 1
    # The fluctuation about m E is that of the sum of m rows: of order sqrt(m), far below m.
    spread = np.abs(k / huge - np.asarray(ke)).max()
    assert 0 < spread < 1e-3
    Zi, ki = random_prefix_state(np.inf, W_K, W_V, "taylor", 2, np.random.RandomState(5))
    np.testing.assert_array_equal(ki, np.asarray(ke))
    assert EXACT_ROWS < huge

    X, y = data
    est = NTKPrefixRegressor(n_heads=2, head_dim=3, max_iter=1, prefix_length=huge, random_state=0).fit(X, y)
    assert np.all(np.isfinite(est.predict(X)))
    frozen = NTKPrefixRegressor(n_heads=2, head_dim=3, max_iter=1, prefix_length=np.inf, train_state=False,
                                random_state=0, feature_map="taylor").fit(X, y)
    expected = gaussian_prefix_state(jnp.asarray(frozen.attention_weights_["W_K"]),
                                     jnp.asarray(frozen.attention_weights_["W_V"]))
    np.testing.assert_array_equal(frozen.params_["k"], np.asarray(expected[1]))
    for bad in (0, 2.5, -np.inf, "long", True):
        with pytest.raises(ValueError, match="prefix_length"):
            NTKPrefixRegressor(prefix_length=bad, max_iter=1).fit(X, y)


def test_varpro_solves_the_readout_and_z_exactly(data):
    """solver='varpro': the fitted model predicts what the exact ridge solution does, fits the
    training data better than Adam in as many passes, and is reproducible."""
    from skdiagatt.kernels.ntk_varpro import ntk_design

    X, y = data
    common = dict(n_heads=2, head_dim=3, max_iter=8, prefix_length=32, random_state=0)
    est = NTKPrefixRegressor(solver="varpro", **common).fit(X, y)
    adam = NTKPrefixRegressor(solver="adam", **common).fit(X, y)
    assert est.score(X, y) > adam.score(X, y)
    # The loss curve's last value is the ridge optimum; the forward pass reproduces it.
    b = make_buckets(X, COARSE).buckets[0]
    F = ntk_design(jnp.asarray(est.params_["k"]), est.attention_weights_, jnp.asarray(b.X), jnp.asarray(b.where),
                   est._config())
    p = np.asarray(F @ jnp.concatenate([est.params_["W_out"], est.params_["Z"][0] @ est.params_["W_out"][:3],
                                        est.params_["Z"][1] @ est.params_["W_out"][3:]]))
    np.testing.assert_allclose(est.predict([X[i] for i in b.index]),
                               (p[:, 0] + est.params_["b"][0]) * est.y_scale_[0] + est.y_mean_[0], rtol=1e-4, atol=1e-4)
    assert est.loss_curve_[-1] <= est.loss_curve_[0]
    seen = []  # a callback sees every L-BFGS iteration and changes nothing
    again = NTKPrefixRegressor(solver="varpro", callback=seen.append, **common).fit(X, y)
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    assert [i.train_loss for i in seen] == pytest.approx(est.loss_curve_[:-1])
    assert {i.phase for i in seen} == {"main"} == set(est.loss_curve_phase_)
    with pytest.raises(ValueError, match="solver"):
        NTKPrefixRegressor(**{**FAST, "solver": "sgd"}).fit(X, y)
    with pytest.raises(ValueError, match="train_state"):
        NTKPrefixRegressor(**{**FAST, "solver": "varpro"}, train_state=False).fit(X, y)
    with pytest.raises(ValueError, match="targets"):
        NTKPrefixRegressor(**{**FAST, "solver": "varpro"}, head_dim=1).fit(X, np.c_[y, y])
    # "auto" trains by Adam where variable projection cannot reach every product Z W_out.
    two = NTKPrefixRegressor(**{**FAST, "solver": "auto"}, head_dim=1).fit(X, np.c_[y, y])
    assert two.predict(X).shape == (len(X), 2) and two.n_iter_ == FAST["max_iter"]


def test_defaults_reach_a_shifted_prefix_and_auto_picks_the_solver():
    """The default cumulant state, solved by variable projection, fits targets made by a prefix whose
    keys are far from zero (where exp's Taylor series about 0 is poor); solver="auto" is "varpro"
    here."""
    X, y, W = _prefix_target_data(seed=2)
    from skdiagatt.ntk._solve import _step

    common = dict(attention_weights=W, n_heads=1, random_state=0, max_iter=15)
    programs = _step._cache_size()
    est = NTKPrefixRegressor(**common).fit(X[:200], y[:200])
    assert _step._cache_size() <= programs + 1  # the L-BFGS step compiles once per fit, not per iteration
    assert est.params_["k"].shape == (1, 15) and est.params_["Z"].shape == (1, 15, 4)
    assert est.score(X[200:], y[200:]) > 0.97
    same = NTKPrefixRegressor(solver="varpro", **common).fit(X[:200], y[:200])
    np.testing.assert_array_equal(same.predict(X[200:]), est.predict(X[200:]))
    assert len(est.loss_curve_) == est.n_iter_ + 1  # L-BFGS iterations, then the exact solve


def test_varpro_with_early_stopping_keeps_the_best_validated_state():
    """early_stopping=True: L-BFGS on the training part, the held-out loss monitored every iteration,
    and the k of least held-out loss kept (its solve is the fitted model)."""
    from skdiagatt._training.data import training_data
    from skdiagatt.ntk._solve import _batches, _validation_loss, fit_varpro

    X, y, W = _prefix_target_data(seed=2)
    y = y + np.random.RandomState(0).randn(len(y)) * y.std()  # noisy: the training loss overfits
    # The start as given (no path of masses): the test is about the iterations after it.
    common = dict(attention_weights=W, n_heads=1, random_state=0, max_iter=12, n_iter_no_change=12,
                  init="prefix", alpha_value=1e-4)
    est = NTKPrefixRegressor(early_stopping=True, validation_fraction=0.3, **common).fit(X[:120], y[:120])
    assert est.n_iter_ == len(est.loss_curve_) - 1 and len(est.validation_scores_) == est.n_iter_
    assert np.all(np.isfinite(est.predict(X[120:])))
    plain = NTKPrefixRegressor(**common).fit(X[:120], y[:120])
    assert plain.validation_scores_ is None
    # The kernel-level loop: the kept state's held-out loss is the least one seen.
    W3 = {key: jnp.asarray(est.attention_weights_[key]) for key in ("W_Q", "W_K", "W_V")}
    Y = ((y - y.mean()) / y.std()).astype(np.float32)[:, None]
    data, held = training_data(X[:80], Y[:80], growth=COARSE), training_data(X[80:120], Y[80:120], growth=COARSE)
    config = est._config()
    start = plain.params_["k"] * 0
    params, curve, scores = fit_varpro(start, W3, data, config, 1e-4, 10, 1e-4, 10, validation=held)
    assert len(scores) == len(curve) - 1 and len(set(scores)) > 1
    at = lambda k: float(_validation_loss(jnp.asarray(k), W3, _batches(data), _batches(held),  # noqa: E731
                                          jnp.float32(1e-4), config))
    assert at(params["k"]) == pytest.approx(min([at(start)] + scores), rel=1e-5)  # the start is a candidate


def test_default_solver_falls_back_to_adam_where_the_exact_solve_overflows(data):
    # Rows of size 1e10 overflow the float32 L-BFGS solve: "auto" trains by
    # Adam instead (finite model), "varpro" says what to do.
    X, y = data
    big = [x * np.float32(1e10) for x in X[:20]]
    with pytest.warns(ConvergenceWarning, match="trained by Adam instead"):
        est = NTKPrefixRegressor(degree=2, max_iter=2, random_state=0).fit(big, y[:20])
    assert all(np.all(np.isfinite(np.asarray(v))) for v in est.params_.values())
    with pytest.raises(ValueError, match="rescale X or use solver='adam'"):
        NTKPrefixRegressor(degree=2, max_iter=2, random_state=0, solver="varpro").fit(big, y[:20])


def _frozen_attention_targets(seed, noise):
    """Targets of plain attention's mean-pooled output, plus noise: no prefix to find."""
    rng = np.random.RandomState(seed)
    W = {k: (rng.randn(1, 4, 4) * 0.5).astype(np.float32) for k in ("W_Q", "W_K", "W_V")}
    X = [rng.randn(rng.randint(4, 9), 4).astype(np.float32) for _ in range(200)]
    y = np.empty(len(X))
    for bucket in make_buckets(X).buckets:
        T = np.asarray(plain_attention(jnp.asarray(bucket.X), jnp.asarray(bucket.where), W["W_Q"], W["W_K"], W["W_V"]))
        y[bucket.index] = (T.reshape(T.shape[0], T.shape[1], -1).sum(1) / bucket.where.sum(1, keepdims=True)) @ [1, -1, 2, 0]
    return X, y + noise * y.std() * rng.randn(len(y)), W


def test_a_cumulant_state_with_no_prefix_mass_is_frozen_attention(data):
    from skdiagatt.kernels.ntk_readout import ntk_readout_forward
    from skdiagatt.ntk._solve import gated_state

    X, y = data
    est = NTKPrefixRegressor(degree=1, init="prefix", max_iter=1, random_state=0).fit(X, y)
    assert np.abs(est.params_["Z"]).max() > 0.1  # a prefix value, which no mass must silence
    params = {**est.params_, "k": gated_state(est.params_["k"], None)}
    W = est.attention_weights_
    for bucket in make_buckets([np.asarray(x, np.float32) for x in X]).buckets:
        Xb, where = jnp.asarray(bucket.X), jnp.asarray(bucket.where)
        got = ntk_readout_forward(params, W, Xb, where, est._config())
        T = np.asarray(plain_attention(Xb, where, W["W_Q"], W["W_K"], W["W_V"]))
        pooled = T.reshape(T.shape[0], T.shape[1], -1).sum(1) / bucket.where.sum(1, keepdims=True)
        np.testing.assert_allclose(np.asarray(got), pooled @ params["W_out"] + params["b"], rtol=1e-4, atol=1e-5)


def test_auto_init_keeps_frozen_attention_where_no_prefix_helps_and_finds_one_that_does():
    from skdiagatt.ntk._solve import ALPHAS

    X, y, W = _frozen_attention_targets(seed=0, noise=0.3)
    common = dict(attention_weights=W, n_heads=1, degree=1, max_iter=1, random_state=0)
    est = NTKPrefixRegressor(**common).fit(X[:150], y[:150])
    assert est.prefix_log_gate_ == -np.inf and est.alpha_value_ in ALPHAS.astype(np.float32)
    assert np.all(est.params_["Z"] == 0)  # no prefix value either: frozen attention's read-out
    Xp, yp, Wp = _prefix_target_data(seed=2)
    found = NTKPrefixRegressor(**{**common, "attention_weights": Wp}).fit(Xp[:200], yp[:200])
    assert found.prefix_log_gate_ > -np.inf
    frozen = NTKPrefixRegressor(**{**common, "attention_weights": Wp, "max_iter": 200}, init="zeros",
                                feature_map="taylor", train_state=False, solver="adam").fit(Xp[:200], yp[:200])
    assert found.score(Xp[200:], yp[200:]) > frozen.score(Xp[200:], yp[200:]) + 0.05
    fixed = NTKPrefixRegressor(**{**common, "attention_weights": Wp}, init="prefix", alpha_value=1e-3)
    assert fixed.fit(Xp[:200], yp[:200]).prefix_log_gate_ == 0.0 and fixed.alpha_value_ == 1e-3
    again = NTKPrefixRegressor(**{**common, "attention_weights": Wp}).fit(Xp[:200], yp[:200])
    np.testing.assert_array_equal(again.predict(Xp[200:]), found.predict(Xp[200:]))


def test_auto_degree_is_two_where_the_exact_solve_stays_small_and_one_where_it_would_not():
    rng = np.random.RandomState(0)
    X = [rng.randn(rng.randint(3, 6), 8).astype(np.float32) for _ in range(30)]
    y = np.array([x[:, 0].mean() for x in X])
    small = NTKPrefixRegressor(n_heads=2, head_dim=4, max_iter=1, random_state=0).fit(X, y)
    assert small.params_["Z"].shape == (2, 15, 4)  # C(4 + 2, 2): degree 2
    # The degree follows the shapes whatever the solver: Adam keeps the wide fits cheap.
    wide = NTKPrefixRegressor(n_heads=12, head_dim=16, max_iter=1, solver="adam", random_state=0).fit(X, y)
    assert wide.params_["Z"].shape == (12, 153, 16)  # 12 (16 + 153) = 2028 columns: still 2
    wider = NTKPrefixRegressor(n_heads=4, head_dim=32, max_iter=1, solver="adam", random_state=0).fit(X, y)
    assert wider.params_["Z"].shape == (4, 33, 32)  # 4 (32 + 561) columns: degree 1
    assert wider.get_params()["degree"] == "auto"
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(wider)).predict(X), wider.predict(X))
    taylor = NTKPrefixRegressor(n_heads=4, head_dim=4, feature_map="taylor", solver="adam", max_iter=1,
                                prefix_length=8, random_state=0).fit(X, y)
    assert taylor.params_["Z"].shape == (4, 15, 4)  # the Taylor map keeps degree 2


def test_heads_without_head_dim_say_how_wide_they_are():
    rng = np.random.RandomState(0)
    X, y = [rng.randn(4, 8) for _ in range(20)], rng.randn(20)
    with pytest.warns(UserWarning, match=r"n_heads=2 splits the 8 features into heads of head_dim = d // n_heads = 4"):
        est = NTKPrefixRegressor(n_heads=2, max_iter=1, solver="adam", random_state=0).fit(X, y)
    assert est.params_["W_out"].shape[0] == 2 * 4  # H * d_v
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        NTKPrefixRegressor(n_heads=2, head_dim=8, max_iter=1, solver="adam", random_state=0).fit(X, y)
