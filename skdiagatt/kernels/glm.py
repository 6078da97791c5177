"""The value read-out refitted exactly: a penalized GLM on attention-pooled rows.

With the attention weights fixed, the attention prediction
``z = b + sum_r <H_r, V_r>`` is linear in the read-out ``(V, b)``, where
``H_r`` (d,) is head r's attention-pooled row in the value coordinates.  The
attention objective restricted to ``(V, b)``,

    mean_i -loglik(y_i, z_i) + alpha_value * ||V||^2,

is then a convex GLM problem (ridge, L2-logistic or L2-multinomial
regression), solved here to its minimum by L-BFGS instead of the few epochs of
Adam that train it jointly with the scores.

Shapes: ``H`` (n, R, d) pooled rows, ``Y`` (n, t) targets in the family's
coding, ``V`` (R, d, t), ``b`` (t,).
"""

from functools import partial

import jax
import jax.numpy as jnp
import optax

from ._matmul import einsum
from .losses import LOGLIK

__all__ = ["readout_objective", "fit_readout"]


def readout_objective(V, b, H, Y, log_sigma, alpha_value, family, w=None):
    """Mean negative log-likelihood of the read-out plus ``alpha_value * ||V||^2``.

    Parameters
    ----------
    V : array, shape (R, d, t)
    b : array, shape (t,)
    H : array, shape (n, R, d)
    Y : array, shape (n, t)
    log_sigma : array, shape (t,)
        Used by the Gaussian family only.
    alpha_value : float
    family : {"gaussian", "bernoulli", "categorical"}
    w : array, shape (n,), optional
        Sample weights of the mean (0 for filler samples); default all 1.

    Returns
    -------
    scalar

    Examples
    --------
    Ridge regression on one pooled feature, at its closed-form minimum the
    gradient vanishes:

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.glm import readout_objective
    >>> H = jnp.array([[[1.0]], [[2.0]], [[3.0]]])          # n = 3, R = 1, d = 1
    >>> Y = jnp.array([[1.0], [2.0], [2.0]])
    >>> Hc, Yc = H[:, 0, 0] - H.mean(), Y[:, 0] - Y.mean()
    >>> v = float(Hc @ Yc / (Hc @ Hc + 3 * 2 * 0.1))          # alpha_value = 0.1, sigma = 1
    >>> V, b = jnp.array([[[v]]]), jnp.array([float(Y.mean() - v * H.mean())])
    >>> g = jax.grad(readout_objective, (0, 1))(V, b, H, Y, jnp.zeros(1), 0.1, "gaussian")
    >>> bool(np.allclose(g[0], 0.0, atol=1e-6) and np.allclose(g[1], 0.0, atol=1e-6))
    True
    """
    z = b + einsum("nrd,rdt->nt", H, V)
    ll = LOGLIK[family](Y, z, log_sigma)
    nll = -(jnp.mean(ll) if w is None else jnp.sum(w * ll) / jnp.sum(w))
    return nll + alpha_value * jnp.sum(V * V)


@partial(jax.jit, static_argnames=("family", "max_iter"))
def fit_readout(V, b, H, Y, log_sigma, alpha_value, family, max_iter=500, tol=1e-6, w=None):
    """Minimise :func:`readout_objective` over ``(V, b)`` by L-BFGS from ``(V, b)``.

    Parameters
    ----------
    V, b, H, Y, log_sigma, alpha_value, family, w
        As in :func:`readout_objective`; ``V`` and ``b`` are the start.  Pad
        ``H`` and ``Y`` to a fixed count with weight-0 samples to reuse the
        compiled solver across data sets of similar size.
    max_iter : int
        Iterations at most (each one gradient and a line search).
    tol : float
        Stop once the gradient's largest entry is below ``tol``.

    Returns
    -------
    V : array, shape (R, d, t)
    b : array, shape (t,)
    n_iter : int array
        Iterations run.

    Examples
    --------
    >>> import jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.glm import fit_readout, readout_objective
    >>> rng = np.random.RandomState(0)
    >>> H = jnp.asarray(rng.randn(200, 1, 3), jnp.float32)
    >>> Y = (H[:, 0, :1] @ jnp.ones((1, 1)) + 0.1 > 0).astype(jnp.float32)   # labels 0 / 1
    >>> V0, b0 = jnp.zeros((1, 3, 1)), jnp.zeros(1)
    >>> V, b, n_iter = fit_readout(V0, b0, H, Y, jnp.zeros(1), 0.01, "bernoulli")
    >>> f = lambda V, b: float(readout_objective(V, b, H, Y, jnp.zeros(1), 0.01, "bernoulli"))
    >>> f(V, b) < f(V0, b0)
    True
    """
    def objective(theta):
        return readout_objective(theta["V"], theta["b"], H, Y, log_sigma, alpha_value, family, w)

    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    def step(carry):
        theta, state, k = carry
        value, grad = value_and_grad(theta, state=state)
        updates, state = solver.update(grad, state, theta, value=value, grad=grad,
                                       value_fn=objective)
        return optax.apply_updates(theta, updates), state, k + 1

    def going(carry):
        theta, state, k = carry
        grad = optax.tree_utils.tree_get(state, "grad")
        small = optax.tree_utils.tree_max(jax.tree.map(jnp.abs, grad)) < tol
        return (k == 0) | ((k < max_iter) & ~small)

    theta = {"V": V, "b": b}
    theta, _, k = jax.lax.while_loop(going, step, (theta, solver.init(theta), 0))
    return theta["V"], theta["b"], k
