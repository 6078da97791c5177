"""The multiple-instance mode of DiagAttClassifier and the algorithmic unit tests it must pass."""

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import roc_auc_score

from skdiagatt import DiagAttClassifier, DiagAttRegressor
from skdiagatt.datasets import make_mil_multi_concept, make_mil_presence, make_mil_threshold
from skdiagatt.diagatt._mil_start import SHARPNESS_GRID, choose_mil_start, pool_scores
from skdiagatt.kernels.mil import bag_logit, mil_forward, mil_loss

MIL = dict(assumption="standard-mil", learning_rate=0.1, random_state=0)
SMALL = dict(bag_size=(4, 10), n_features=4)


# ------------------------------------------------------------------ datasets
@pytest.mark.parametrize("make", [make_mil_presence, make_mil_multi_concept])
def test_poison_sits_on_the_negatives_in_training_and_the_positives_in_test(make):
    for split, poisoned_class in (("train", 0), ("test", 1)):
        X, y, kinds = make(40, split=split, random_state=3, **SMALL)
        assert len(X) == len(kinds) == y.size == 40 and y.sum() == 20
        for x, k, label in zip(X, kinds, y):
            assert x.shape == (k.size, 4) and 4 <= k.size <= 10
            assert (k == -1).sum() == (label == poisoned_class)


def test_labels_follow_the_concepts():
    _, y, kinds = make_mil_presence(30, random_state=0, **SMALL)
    assert [int((k == 1).any()) for k in kinds] == y.tolist()
    _, y, kinds = make_mil_multi_concept(30, random_state=0, **SMALL)
    assert [int({1, 2} <= set(k.tolist())) for k in kinds] == y.tolist()
    assert all(len({1, 2} & set(k.tolist())) == 1 for k, label in zip(kinds, y) if not label)
    _, y, kinds = make_mil_threshold(30, threshold=3, random_state=0, **SMALL)
    assert [int((k == 1).sum()) for k in kinds] == (2 + y).tolist()


def test_splits_share_the_concept_and_draw_other_bags():
    Xa, _, ka = make_mil_presence(200, split="train", random_state=5, **SMALL)
    Xb, _, kb = make_mil_presence(200, split="test", random_state=5, **SMALL)
    mean = lambda X, K, kind: np.mean([x[k == kind][0] for x, k in zip(X, K) if (k == kind).any()], 0)  # noqa: E731
    for kind in (1, -1):
        assert np.linalg.norm(mean(Xa, ka, kind) - mean(Xb, kb, kind)) < 0.5
    assert np.linalg.norm(mean(Xa, ka, 1) - mean(Xa, ka, -1)) > 4.0
    assert not np.array_equal(Xa[0], Xb[0])
    again = make_mil_presence(200, split="train", random_state=5, **SMALL)[0]
    assert all(np.array_equal(a, b) for a, b in zip(Xa, again))


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(n_features=2), "n_features must be an int >= 3"),
        (dict(split="valid"), "split must be"),
        (dict(bag_size=(5, 2)), "bag_size"),
        (dict(separation=-1.0), "separation"),
        (dict(n_bags=1), "n_bags"),
        (dict(bag_size=1), "bag 0 needs 2 special instances"),
    ],
)
def test_generators_reject_bad_arguments(kw, match):
    args = dict(n_bags=10, n_features=4, random_state=0)
    with pytest.raises(ValueError, match=match):
        make_mil_multi_concept(**{**args, **kw})


# -------------------------------------------------------------------- kernel
def _random_params(rng, R, d):
    return {
        "W": rng.randn(R, d, d).astype(np.float32),
        "U": rng.randn(R, d).astype(np.float32),
        "b": rng.randn(R).astype(np.float32),
        "log_scale": np.zeros(R, np.float32),
    }


FROZEN = {"S": np.eye(3, dtype=np.float32), "x_scale": np.float32(1.0),
          "inv_tau": np.float32(0.5), "alpha": np.float32(0.0)}


@pytest.mark.parametrize("R", [1, 3])
def test_presence_logit_runs_from_the_mean_to_the_maximum_of_the_scores(R):
    from skdiagatt.kernels.diagatt import head_scores
    from skdiagatt.kernels.mil import presence_logits

    rng = np.random.RandomState(R)
    params = _random_params(rng, R, 3)
    X = jnp.asarray(rng.randn(50, 6, 3), jnp.float32)
    where = jnp.broadcast_to(jnp.arange(6)[None, :] < 5, (50, 6))
    psi = np.asarray(head_scores(params, FROZEN, X))[:, :, :5]
    b = params["b"][None, :]
    previous = None
    for rho in (0.0, 0.5, 2.0, 50.0):
        g, kappa = presence_logits(params, {**FROZEN, "sharpness": np.float32(rho)}, X, where)
        g = np.asarray(g) - b
        assert np.all(g >= psi.mean(-1) - 1e-4) and np.all(g <= psi.max(-1) + 1e-4)
        assert np.allclose(np.asarray(kappa).sum(-1), 1.0, atol=1e-5) and np.all(np.asarray(kappa)[..., 5] == 0)
        if rho == 0.0:
            assert np.allclose(g, psi.mean(-1), atol=1e-4)
        else:
            assert np.all(g >= previous - 1e-4)  # sharper pooling, closer to the maximum
        previous = g
    assert np.allclose(g, psi.max(-1), atol=np.log(5) / 50 + 1e-4)


def test_an_instance_above_every_other_raises_the_bag_logit():
    params = _random_params(np.random.RandomState(0), 2, 3)
    params["W"] = np.zeros_like(params["W"])
    X = np.random.RandomState(1).randn(20, 6, 3).astype(np.float32)
    X[:, 5] = 10.0 * np.sign(params["U"].sum(0))  # scores above the others for both heads
    fewer = jnp.broadcast_to(jnp.arange(6)[None, :] < 5, (20, 6))
    frozen = {**FROZEN, "sharpness": np.float32(3.0)}
    z_fewer, _ = mil_forward(params, frozen, jnp.asarray(X), fewer)
    z_all, _ = mil_forward(params, frozen, jnp.asarray(X), jnp.ones((20, 6), bool))
    assert np.all(np.asarray(z_all) > np.asarray(z_fewer))


def test_bag_logit_is_the_product_of_presence_probabilities_and_stays_finite():
    g = jnp.array([[0.3, -1.2], [40.0, 35.0], [-80.0, 3.0]])
    p = np.prod(1 / (1 + np.exp(-np.asarray(g, float))), axis=1)
    z = np.asarray(bag_logit(g))[:, 0]
    assert np.isclose(z[0], np.log(p[0] / (1 - p[0])), rtol=1e-5)
    assert np.isclose(z[2], -80.0 + np.log(1 / (1 + np.exp(-3.0))), rtol=1e-5)
    assert np.all(np.isfinite(z)) and z[1] > 30


def test_loss_gradient_is_finite_for_certain_bags():
    import jax

    params = {**_random_params(np.random.RandomState(0), 2, 3), "b": np.array([60.0, 60.0], np.float32)}
    batch = {"X": jnp.ones((2, 4, 3)), "where": jnp.ones((2, 4), bool),
             "y": jnp.array([[1.0], [0.0]]), "w": jnp.ones(2)}
    grads = jax.grad(mil_loss)(params, FROZEN, batch, ("latent", "bernoulli"))
    assert all(np.all(np.isfinite(np.asarray(v))) for v in grads.values())


# ----------------------------------------------------------------- estimator
def _fit_unit_test(make, n_heads, seed, assumption="standard-mil"):
    data = dict(n_bags=400, bag_size=(8, 16), random_state=seed)
    Xtr, ytr, _ = make(split="train", **data)
    Xte, yte, kinds = make(split="test", **data)
    clf = DiagAttClassifier(n_heads, **{**MIL, "assumption": assumption}).fit(Xtr, ytr)
    pos = np.flatnonzero(yte == 1)
    picked = clf.localize([Xte[i] for i in pos])
    hits = [np.all(kinds[i][rows] > 0) for i, rows in zip(pos, picked)]
    return roc_auc_score(yte, clf.decision_function(Xte)), np.mean(hits)


@pytest.mark.parametrize("make, n_heads", [(make_mil_presence, 1), (make_mil_multi_concept, 2)])
def test_standard_mil_passes_the_poisoned_unit_tests(make, n_heads):
    auc, localized = _fit_unit_test(make, n_heads, seed=0)
    assert auc >= 0.95 and localized >= 0.95


def test_individualized_mode_uses_the_poison():
    # The poison predicts "negative" in training: the default mode may (and
    # does) use it, and then ranks the poisoned positive test bags lowest.
    auc, _ = _fit_unit_test(make_mil_multi_concept, 2, seed=0, assumption="individualized")
    assert auc < 0.3


def test_standard_mil_model_has_no_value_vectors_and_is_reproducible():
    X, y, _ = make_mil_presence(60, random_state=1, **SMALL)
    kw = dict(MIL, n_heads=2, max_iter=2, calibration_iter=1)
    a = DiagAttClassifier(**kw).fit(X, y)
    b = clone(a).fit(X, y)
    assert "V" not in a.params_ and a.params_["b"].shape == (2,)
    assert np.array_equal(a.decision_function(X), b.decision_function(X))
    assert all(w.shape == (2, x.shape[0]) for w, x in zip(a.attention(X[:3]), X[:3]))
    assert a.linear_score_.shape == (2, 4)
    a.partial_fit(X, y)
    assert np.all(np.isfinite(a.predict_proba(X)))


@pytest.mark.parametrize("init", ["auto", "zeros"])
@pytest.mark.parametrize("n_heads", [1, 2])
def test_standard_mil_starts_at_the_share_of_positive_bags(n_heads, init):
    # Either start predicts the share of positive bags on average: the
    # offset of the cross-validated linear start is fitted with it, and from
    # zero scores each head's offset is set to it.
    X, y, _ = make_mil_presence(60, random_state=2, **SMALL)
    y[:40] = 0
    clf = DiagAttClassifier(**{**MIL, "n_heads": n_heads, "learning_rate": 1e-9, "max_iter": 1,
                               "calibration_iter": 0, "init": init}).fit(X, y)
    proba = clf.predict_proba(X)[:, 1]
    assert abs(proba.mean() - y.mean()) < 0.03
    if init == "zeros":
        assert np.ptp(proba) < 0.05  # the small random draw that breaks the heads apart
    else:
        assert roc_auc_score(y, proba) > 0.75 and clf.sharpness_ in SHARPNESS_GRID


def test_mil_start_pools_between_mean_and_maximum():
    rng = np.random.RandomState(0)
    s, starts = rng.randn(30), np.array([0, 4, 11, 20])
    bags = np.split(s, starts[1:])
    mean, weights = pool_scores(s, starts, 0.0)
    assert np.allclose(mean, [b.mean() for b in bags]) and np.allclose(weights, np.repeat([1 / 4, 1 / 7, 1 / 9, 1 / 10], [4, 7, 9, 10]))
    previous = mean
    for rho in (1.0, 3.0, 10.0, 1000.0):
        g, weights = pool_scores(s, starts, rho)
        assert np.all(g >= previous - 1e-12) and np.allclose(np.add.reduceat(weights, starts), 1.0)
        previous = g
    assert np.allclose(g, [b.max() for b in bags], atol=np.log(10) / 1000)


def test_mil_start_finds_the_concept_in_the_rows_own_units():
    # The concept lies along feature 2; feature 0 is 1000 times larger and
    # noise.  The scores act on the rows as given, so rescaling a feature
    # rescales its coefficient and leaves the scores unchanged.
    X, y, kinds = make_mil_presence(120, random_state=4, **SMALL)
    rows, starts = np.concatenate(X), np.cumsum([0] + [len(x) for x in X[:-1]])
    u, b, rho = choose_mil_start(rows, starts, y)
    g = pool_scores(rows @ u, starts, rho)[0] + b
    assert roc_auc_score(y, g) > 0.95 and rho in SHARPNESS_GRID
    scaled = rows * np.array([1000.0, 1.0, 1.0, 1.0])
    u2, b2, rho2 = choose_mil_start(scaled, starts, y)
    assert rho2 == rho and np.allclose(scaled @ u2 + b2, rows @ u + b, atol=1e-4)
    weighted = choose_mil_start(rows, starts, y, sample_weight=np.where(y == 1, 2.0, 1.0))
    assert not np.allclose(weighted[1], b)  # the weights reach the offset


def test_standard_mil_errors_name_what_does_not_apply():
    X, y, _ = make_mil_presence(40, random_state=0, **SMALL)
    with pytest.raises(ValueError, match="exactly two classes"):
        DiagAttClassifier(**MIL, max_iter=1).fit(X, np.arange(40) % 3)
    with pytest.raises(ValueError, match="value_refit=True has no meaning"):
        DiagAttClassifier(**MIL, value_refit=True).fit(X, y)
    with pytest.raises(ValueError, match="assumption must be one of"):
        DiagAttClassifier(assumption="mil").fit(X, y)
    with pytest.raises(TypeError, match="assumption"):  # a continuous response has no such choice
        DiagAttRegressor(assumption="standard-mil")
    clf = DiagAttClassifier(**MIL, max_iter=1, calibration_iter=0).fit(X, y)
    with pytest.raises(ValueError, match="not defined under assumption='standard-mil'"):
        clf.row_contributions(X)
    with pytest.raises(ValueError, match="not defined under assumption='standard-mil'"):
        clf.localize(X, by="contribution")
