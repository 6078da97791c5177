import jax
import jax.numpy as jnp
import numpy as np

from skdiagatt.kernels.softmax import masked_log_softmax, masked_logsumexp, masked_softmax


def test_masked_softmax_matches_numpy_and_ignores_padding():
    rng = np.random.RandomState(0)
    s = rng.randn(4, 6).astype(np.float32) * 5
    where = np.array([[1] * 6, [1] * 3 + [0] * 3, [1] + [0] * 5, [1] * 5 + [0]], bool)
    garbage = np.where(where, s, 1e3).astype(np.float32)
    out = np.asarray(masked_softmax(jnp.asarray(garbage), jnp.asarray(where)))
    for i in range(4):
        v = s[i, where[i]].astype(np.float64)
        ref = np.exp(v - v.max()) / np.exp(v - v.max()).sum()
        np.testing.assert_allclose(out[i, where[i]], ref, rtol=1e-5, atol=1e-7)
        assert np.all(out[i, ~where[i]] == 0)
    lse = np.asarray(masked_logsumexp(jnp.asarray(garbage), jnp.asarray(where)))
    for i in range(4):
        v = s[i, where[i]].astype(np.float64)
        np.testing.assert_allclose(lse[i], v.max() + np.log(np.exp(v - v.max()).sum()), rtol=1e-5)
    ls = np.asarray(masked_log_softmax(jnp.asarray(garbage), jnp.asarray(where)))
    np.testing.assert_allclose(np.exp(ls)[where], out[where], rtol=1e-5, atol=1e-7)


def test_extreme_scores_stay_finite_with_finite_gradients():
    s = jnp.array([[1e4, -1e4, 0.0, 3e4]], jnp.float32)
    where = jnp.array([[True, True, True, False]])
    out = masked_softmax(s, where)
    assert np.all(np.isfinite(out))
    g = jax.grad(lambda x: jnp.sum(masked_softmax(x, where) * jnp.arange(4.0)))(s)
    assert np.all(np.isfinite(g))
    g2 = jax.grad(lambda x: jnp.sum(masked_logsumexp(x, where)))(s)
    assert np.all(np.isfinite(g2))
