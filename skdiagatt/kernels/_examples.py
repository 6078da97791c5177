"""The small inputs the kernels' docstring examples run on, drawn in one place.

Every example of a module starts from the same few padded samples and
parameters; drawing them here keeps each example to what it shows.  The
draws are fixed (seed 0), so the examples' printed values are too.
"""

import jax.numpy as jnp
import numpy as np

from .ntk_attention import prefix_to_state

__all__ = ["attention_inputs", "diagatt_inputs", "ntk_readout_inputs", "stdatt_inputs"]


def _padded(rng):
    # Two samples padded to L=3 rows of d=4 features; the second has 2 rows.
    X = jnp.asarray(rng.standard_normal((2, 3, 4)), jnp.float32)
    return X, jnp.array([[True, True, True], [True, True, False]])


def attention_inputs(prefix=True):
    """Inputs of :mod:`skdiagatt.kernels.attention`'s examples.

    Parameters
    ----------
    prefix : bool, default=True
        Draw a prefix ``P`` of m=5 rows (before the projections).

    Returns
    -------
    X : array, shape (2, 3, 4)
    where : bool array, shape (2, 3)
        The second sample has 2 rows.
    P : array, shape (5, 4)
        Only when ``prefix``.
    W_Q, W_K, W_V : array, shape (2, 4, 2)
        H=2 heads of d_h=2.
    """
    rng = np.random.default_rng(0)
    X, where = _padded(rng)
    P = (jnp.asarray(rng.standard_normal((5, 4)), jnp.float32),) if prefix else ()
    W_Q, W_K, W_V = jnp.asarray(0.5 * rng.standard_normal((3, 2, 4, 2)), jnp.float32)
    return (X, where, *P, W_Q, W_K, W_V)


def stdatt_inputs():
    """Inputs of :mod:`skdiagatt.kernels.stdatt`'s examples.

    Returns
    -------
    params : dict
        ``W_Q``, ``W_K`` (R=2, d=4, d_h=2), ``V`` (2, 4, t=1), ``b`` and
        ``log_sigma`` zero.
    frozen : dict
        ``S`` the identity, ``inv_scale`` 0.5, ``alpha`` 0.1, ``alpha_value`` 0.01.
    X : array, shape (2, 3, 4)
    where : bool array, shape (2, 3)
        The second sample has 2 rows.
    """
    rng = np.random.default_rng(0)
    X, where = _padded(rng)
    W_Q, W_K = jnp.asarray(0.5 * rng.standard_normal((2, 2, 4, 2)), jnp.float32)
    V = jnp.asarray(rng.standard_normal((2, 4, 1)), jnp.float32)
    params = {"W_Q": W_Q, "W_K": W_K, "V": V, "b": jnp.zeros(1), "log_sigma": jnp.zeros(1)}
    frozen = {"S": jnp.eye(4), "inv_scale": 0.5, "alpha": 0.1, "alpha_value": 0.01}
    return params, frozen, X, where


def diagatt_inputs():
    """Inputs of :mod:`skdiagatt.kernels.diagatt`'s examples.

    Returns
    -------
    params : dict
        ``W`` (R=2, d=3, 3), ``V`` (2, 3, t=1); ``b``, ``log_scale`` and
        ``log_sigma`` zero.
    frozen : dict
        ``S`` the identity, ``x_scale`` and ``inv_tau`` 1, ``alpha`` 0.1,
        ``alpha_value`` 0.
    X : array, shape (4, 5, 3)
    where : bool array, shape (4, 5)
        The samples have 5, 3, 1 and 4 rows.
    y : array, shape (4, 1)
    """
    rng = np.random.RandomState(0)
    R, d, t = 2, 3, 1
    params = {"W": rng.randn(R, d, d).astype(np.float32), "V": rng.randn(R, d, t).astype(np.float32),
              "b": np.zeros(t, np.float32), "log_scale": np.zeros(R, np.float32),
              "log_sigma": np.zeros(t, np.float32)}
    frozen = {"S": np.eye(d, dtype=np.float32), "x_scale": np.float32(1.0),
              "inv_tau": np.float32(1.0), "alpha": np.float32(0.1), "alpha_value": np.float32(0.0)}
    X = jnp.asarray(rng.randn(4, 5, d), jnp.float32)
    where = jnp.arange(5)[None, :] < jnp.array([5, 3, 1, 4])[:, None]
    y = jnp.asarray(rng.randn(4, t), jnp.float32)
    return params, frozen, X, where, y


def ntk_readout_inputs():
    """Inputs of :mod:`skdiagatt.kernels.ntk_readout`'s examples.

    Returns
    -------
    params : dict
        ``Z``, ``k`` of a prefix of 5 rows (:func:`~skdiagatt.kernels.ntk_attention.prefix_to_state`),
        ``W_out`` ones (H * d_v = 4, t=1), ``b`` zero.
    frozen : dict
        ``W_Q``, ``W_K``, ``W_V`` (H=2, d=4, 2), ``alpha`` 0.1.
    X : array, shape (2, 3, 4)
    where : bool array, shape (2, 3)
        The second sample has 2 rows.
    config : tuple
        ``("taylor", 2, False, "mean")``: the Taylor feature map of degree 2,
        not causal, mean pooling.
    """
    rng = np.random.default_rng(0)
    X, where = _padded(rng)
    W_Q, W_K, W_V = jnp.asarray(0.5 * rng.standard_normal((3, 2, 4, 2)), jnp.float32)
    frozen = {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "alpha_value": 0.1}
    Z, k = prefix_to_state(jnp.asarray(rng.standard_normal((5, 4)), jnp.float32), W_K, W_V)
    params = {"Z": Z, "k": k, "W_out": jnp.ones((4, 1)), "b": jnp.zeros(1)}
    return params, frozen, X, where, ("taylor", 2, False, "mean")
