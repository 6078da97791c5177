"""The cumulant form of the NTK-Attention state: Taylor-expand the log of the prefix's mass.

A prefix of ``m`` rows with keys ``k_j`` and values ``v_j`` enters a query
``q``'s attention through two functions of ``q``: its mass
``D(q) = sum_j exp(q . k_j / sqrt(d_h))`` and its numerator
``N(q) = D(q) vbar(q)``, where ``vbar(q)`` is the prefix's attention-weighted
mean value.  NTK-Attention (the NTK-Attention paper, Eq. 4) expands ``exp``
itself in Taylor features around ``q . k = 0``, ``D(q) ~ phi(q) . k``; that
expansion degrades as ``|q . k_j|`` grows, which a prefix whose keys have a
non-zero mean makes unavoidable.  Here the *logarithm* of the mass is expanded
instead.  ``log D(q) = log m + K(q / sqrt(d_h))`` with ``K`` the cumulant
generating function of the prefix's keys, so to second order

    log D(q) ~ log m + q . mu_k / sqrt(d_h) + q^T Sigma_k q / (2 d_h),
    vbar(q)  ~ mu_v + Sigma_vk q / sqrt(d_h)          (grad_q log D gives the tilt),

with ``mu_k``, ``Sigma_k`` the keys' mean and covariance and ``Sigma_vk`` the
values' covariance with the keys.  Both truncations are exact for jointly
Gaussian keys and values, whatever their mean, and the mass
``exp(log D) > 0`` always.  The state keeps the paper's shapes:

* ``k`` (H, C(d_h + 2, 2)): coefficients of ``log D`` on the degree-2 Taylor
  features, ``log D(q) = phi_2(q) . k``;
* ``Z`` (H, C(d_h + g, g), d_v): coefficients of ``vbar`` on the degree-``g``
  Taylor features, ``vbar(q) = phi_g(q) Z``;

and a row's output is ``T = (A V + exp(phi_2(q) . k) phi_g(q) Z) / (A 1 +
exp(phi_2(q) . k))``.  The features are those of
:func:`skdiagatt.kernels.features.taylor_features`, with
``phi_2(q) . phi_2(x) = 1 + t + t^2 / 2``, ``t = q . x / sqrt(d_h)``: the
degree-1 block of ``phi_2(mu_k)`` carries the linear term and the degree-2
blocks of ``phi_2(x_l)`` summed over rows ``x_l`` with ``sum_l x_l x_l^T =
Sigma_k`` carry the quadratic one.
"""

import math

import jax.numpy as jnp

from ._matmul import einsum
from .features import taylor_feature_dim, taylor_features

__all__ = ["log_mass_dim", "cumulant_state", "prefix_to_cumulant_state", "gaussian_cumulant_state"]


def log_mass_dim(d):
    """Length of the log-mass coefficients ``k`` for head dimension ``d``: ``C(d + 2, 2)``.

    Parameters
    ----------
    d : int

    Returns
    -------
    int

    Examples
    --------
    >>> from skdiagatt.kernels.cumulant import log_mass_dim
    >>> log_mass_dim(8)                    # log m, 8 mean-key and 36 covariance coefficients
    45
    """
    return taylor_feature_dim(d, 2)


def cumulant_state(log_m, mean_k, root_k, mean_v, cross, degree=1):
    """The state ``(Z, k)`` of given key and value moments.

    Parameters
    ----------
    log_m : array, shape (H,)
        Log of the prefix's length (its mass at ``q = 0``).
    mean_k : array, shape (H, d_h)
        Mean key.
    root_k : array, shape (H, n, d_h)
        Rows ``x_l`` with ``sum_l x_l x_l^T`` the keys' covariance.
    mean_v : array, shape (H, d_v)
        Mean value.
    cross : array, shape (H, d_h, d_v)
        Covariance of the keys with the values.
    degree : int, default=1
        ``g``, the degree of the value features (static); the rows of degree
        above 1 start at zero.

    Returns
    -------
    Z : array, shape (H, C(d_h + g, g), d_v)
    k : array, shape (H, C(d_h + 2, 2))

    Examples
    --------
    The log-mass of a state is the second-order cumulant expansion:

    >>> import jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.cumulant import cumulant_state
    >>> from skdiagatt.kernels.features import taylor_features
    >>> rng = np.random.default_rng(0)
    >>> mu, R = jnp.asarray(rng.standard_normal((1, 4))), jnp.asarray(rng.standard_normal((1, 3, 4)))
    >>> Z, k = cumulant_state(jnp.log(jnp.array([7.0])), mu, R, jnp.zeros((1, 2)), jnp.zeros((1, 4, 2)))
    >>> Z.shape, k.shape                   # C(4 + 1, 1), C(4 + 2, 2)
    ((1, 5, 2), (1, 15))
    >>> q = jnp.asarray(rng.standard_normal(4))
    >>> S = R[0].T @ R[0]
    >>> expected = np.log(7.0) + q @ mu[0] / 2 + q @ S @ q / 8     # sqrt(d_h) = 2
    >>> bool(np.isclose(taylor_features(q, 2) @ k[0], expected, atol=1e-5))
    True
    """
    H, dh = mean_k.shape
    r2 = log_mass_dim(dh)
    linear = taylor_features(mean_k, 2)[..., 1:dh + 1]  # degree-1 block: q . mu / sqrt(d_h)
    quadratic = jnp.sum(taylor_features(root_k, 2)[..., dh + 1:], axis=1)  # sum_l (q . x_l)^2 / (2 d_h)
    k = jnp.concatenate([log_m[:, None], linear, quadratic], axis=-1)
    assert k.shape == (H, r2)
    rg = taylor_feature_dim(dh, degree)
    # phi_g's degree-1 block is q / d_h^(1/4): Sigma_vk q / sqrt(d_h) needs the other d_h^(-1/4).
    Z = jnp.concatenate([mean_v[:, None, :], cross * (dh ** -0.25)], axis=1)
    Z = jnp.concatenate([Z, jnp.zeros((H, rg - dh - 1, Z.shape[-1]), Z.dtype)], axis=1)
    return Z, k


def prefix_to_cumulant_state(P, W_K, W_V, degree=1):
    """The cumulant state of an explicit prefix ``P`` (its keys' and values' moments).

    Parameters
    ----------
    P : array, shape (m, d), ``m >= 1``
    W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    degree : int, default=1

    Returns
    -------
    Z : array, shape (H, C(d_h + g, g), d_v)
    k : array, shape (H, C(d_h + 2, 2))

    Examples
    --------
    Exact, up to sampling, for a Gaussian prefix however far from zero:

    >>> import jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.cumulant import prefix_to_cumulant_state
    >>> from skdiagatt.kernels.features import taylor_features
    >>> rng = np.random.default_rng(0)
    >>> P = jnp.asarray(rng.standard_normal((200_000, 3)) + 2.0, jnp.float32)
    >>> W_K, W_V = jnp.asarray(0.3 * rng.standard_normal((2, 1, 3, 2)), jnp.float32)
    >>> Z, k = prefix_to_cumulant_state(P, W_K, W_V)
    >>> q = jnp.array([0.7, -1.1])
    >>> exact = jnp.log(jnp.sum(jnp.exp(P @ W_K[0] @ q / jnp.sqrt(2.0))))
    >>> bool(np.isclose(taylor_features(q, 2) @ k[0], exact, atol=1e-2))
    True
    """
    m = P.shape[0]
    K = einsum("md,hde->hme", P, W_K)
    V = einsum("md,hde->hme", P, W_V)
    mean_k, mean_v = jnp.mean(K, axis=1), jnp.mean(V, axis=1)
    Kc = (K - mean_k[:, None]) / math.sqrt(m)
    cross = einsum("hme,hmv->hev", Kc, (V - mean_v[:, None]) / math.sqrt(m))
    log_m = jnp.full((K.shape[0],), math.log(m), K.dtype)
    return cumulant_state(log_m, mean_k, Kc, mean_v, cross, degree)


def gaussian_cumulant_state(W_K, W_V, log_m, mean=None, degree=1):
    """The cumulant state of a prefix of rows ``N(mean, I)`` (exact moments).

    Parameters
    ----------
    W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    log_m : float
        Log of the prefix's length.
    mean : array, shape (d,), optional
        Default 0.
    degree : int, default=1

    Returns
    -------
    Z : array, shape (H, C(d_h + g, g), d_v)
    k : array, shape (H, C(d_h + 2, 2))

    Examples
    --------
    >>> import jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.cumulant import gaussian_cumulant_state
    >>> W_K = W_V = jnp.ones((1, 3, 2)) / 3
    >>> Z, k = gaussian_cumulant_state(W_K, W_V, np.log(10.0))
    >>> bool(np.isclose(k[0, 0], np.log(10.0))), float(Z[0, 0, 0])   # log m; the mean value
    (True, 0.0)
    """
    H, d, _ = W_K.shape
    mean = jnp.zeros(d, W_K.dtype) if mean is None else jnp.asarray(mean, W_K.dtype)
    mean_k = einsum("d,hde->he", mean, W_K)
    mean_v = einsum("d,hde->he", mean, W_V)
    # Keys W_K^T p with p ~ N(mean, I): covariance W_K^T W_K = sum over the rows of W_K.
    cross = einsum("hde,hdv->hev", W_K, W_V)
    return cumulant_state(jnp.full((H,), log_m, W_K.dtype), mean_k, W_K, mean_v, cross, degree)
