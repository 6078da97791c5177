"""The NTK-Attention state of a Gaussian prefix in closed form.

A prefix of ``m`` rows drawn i.i.d. from ``N(mu, I_d)`` compresses (the NTK-Attention paper,
Eq. 4) into ``Z = sum_r phi(u_r) v_r^T`` and ``k = sum_r phi(u_r)`` with keys
``u = W_K^T p`` and values ``v = W_V^T p``.  Their expectations are ``m`` times
the per-row moments ``E[phi(u) v^T]`` and ``E[phi(u)]``, which this module
computes exactly, without drawing a row:

* ``"taylor"``: ``phi`` is a weighted monomial of degree ``<= g``.  Moments of a
  Gaussian follow from Stein's identity ``E[x_l f(x)] = mu_l E[f(x)] +
  sum_i Sigma_li E[d_i f(x)]``: a monomial of degree ``j`` is one of degree
  ``j - 1`` times ``x_l``, so its moment is read off moments of degree
  ``j - 1`` and ``j - 2``.  The same identity with ``v_e`` in place of ``x_l``
  gives ``E[phi(u) v_e]`` from the moments of ``phi`` alone.
* ``"elu"``: ``phi_i`` depends on one coordinate of ``u``, so its moments are
  one-dimensional Gaussian integrals (normal CDFs), and Stein's identity again
  gives ``E[phi_i(u) v_e] = mu_ve E[phi_i] + Cov(v_e, u_i) E[phi_i']``.

Pure ``jax.numpy``; the index tables are built with NumPy at trace time.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr

from .features import _taylor_tables

__all__ = ["gaussian_prefix_state", "taylor_gaussian_moments"]


@functools.lru_cache(maxsize=None)
def _lowering_tables(d, degree):
    """For every Taylor monomial ``x^beta`` (all degrees, in feature order):
    ``lower[n, i]``, the index of ``x^(beta - e_i)`` (0 where ``beta_i = 0``),
    and ``count[n, i] = beta_i``.  Also the (parent, last) gathers that build
    degree ``j`` from degree ``j - 1`` and the first index of every degree.
    """
    gathers, _ = _taylor_tables(d, degree)
    exponents = [np.zeros((1, d), np.int64)]
    for parent, last in gathers:
        block = exponents[-1][parent].copy()
        block[np.arange(last.size), last] += 1
        exponents.append(block)
    beta = np.concatenate(exponents)
    where = {tuple(b): n for n, b in enumerate(beta)}
    lower = np.zeros(beta.shape, np.int32)
    for n, b in enumerate(beta):
        for i in np.flatnonzero(b):
            c = b.copy()
            c[i] -= 1
            lower[n, i] = where[tuple(c)]
    starts = np.cumsum([0] + [e.shape[0] for e in exponents])
    return lower, beta.astype(np.float32), gathers, tuple(int(s) for s in starts)


def _times_linear(M, rows, lower, count, mu_w, cov_w):
    """``E[x^beta w_e]`` for a Gaussian ``w`` jointly with ``x`` (Stein's identity).

    ``M`` holds ``E[x^gamma]`` for every monomial known so far, ``rows`` the
    moments of the monomials ``beta`` and ``lower``, ``count`` their rows of
    the lowering tables; ``mu_w`` (e,) and ``cov_w`` (e, d) ``= Cov(w, x)``.
    Returns shape (len(rows), e).
    """
    down = count * M[lower]  # E[d_i x^beta], (n, d)
    return rows[:, None] * mu_w[None, :] + down @ cov_w.T


def taylor_gaussian_moments(mu, cov, degree):
    """``E[x^beta]`` for ``x ~ N(mu, cov)``, every monomial of degree ``<= g``.

    Parameters
    ----------
    mu : array, shape (d,)
    cov : array, shape (d, d)
    degree : int
        ``g`` (static).

    Returns
    -------
    array, shape (C(d + g, g),)
        Unweighted monomial moments in the order of
        :func:`skdiagatt.kernels.features.taylor_features`.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from skdiagatt.kernels.prefix_moments import taylor_gaussian_moments
    >>> M = taylor_gaussian_moments(jnp.array([1.0, 0.0]), jnp.array([[2.0, 0.5], [0.5, 1.0]]), 2)
    >>> [round(float(v), 4) for v in M]    # 1, x0, x1, x0^2, x0 x1, x1^2
    [1.0, 1.0, 0.0, 3.0, 0.5, 1.0]
    """
    d = mu.shape[-1]
    lower, count, gathers, starts = _lowering_tables(d, int(degree))
    lower, count = jnp.asarray(lower), jnp.asarray(count, mu.dtype)
    M = jnp.ones((1,), mu.dtype)
    for j, (parent, last) in enumerate(gathers, start=1):
        # Degree j: x^beta = x^parent * x_last, so E = E[x_last * x^parent].
        # Its moment needs those of degrees j - 1 and j - 2, all in M already.
        lo, hi = starts[j - 1], starts[j]
        sub = _times_linear(M, M[lo:hi], lower[lo:hi], count[lo:hi], mu, cov)  # (n_{j-1}, d)
        M = jnp.concatenate([M, sub[jnp.asarray(parent), jnp.asarray(last)]])
    return M


def _taylor_state(mu_u, cov_uu, mu_v, cov_vu, degree, scale):
    """Per-row ``E[phi(u) v^T]`` (r, d_v) and ``E[phi(u)]`` (r,) for Taylor ``phi``."""
    d = mu_u.shape[-1]
    s = math.sqrt(1.0 / math.sqrt(d) if scale is None else scale)
    lower, count, _, _ = _lowering_tables(d, int(degree))
    _, weights = _taylor_tables(d, int(degree))
    M = taylor_gaussian_moments(s * mu_u, s * s * cov_uu, degree)
    Mv = _times_linear(M, M, jnp.asarray(lower), jnp.asarray(count, M.dtype), mu_v, s * cov_vu)
    w = jnp.asarray(weights, M.dtype)
    return Mv * w[:, None], M * w


def _elu_state(mu_u, cov_uu, mu_v, cov_vu):
    """Per-row ``E[phi(u) v^T]`` and ``E[phi(u)]`` for ``phi(u) = elu(c u) + 1``, ``c = d_h^(-1/4)``."""
    c = mu_u.shape[-1] ** -0.25
    a = c * mu_u
    b = jnp.maximum(c * jnp.sqrt(jnp.diagonal(cov_uu)), jnp.finfo(a.dtype).tiny)
    z = a / b
    # E[y; y > 0] + E[e^y - 1; y < 0] for y ~ N(a, b^2), and E[elu'(y)].
    tail = jnp.exp(a + 0.5 * b * b + log_ndtr(-z - b))
    pdf = jnp.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    mean = a * ndtr(z) + b * pdf + tail - ndtr(-z) + 1.0
    slope = c * (ndtr(z) + tail)
    return mean[:, None] * mu_v[None, :] + slope[:, None] * cov_vu.T, mean


@functools.partial(jax.jit, static_argnames=("feature_map", "degree"))
def gaussian_prefix_state(W_K, W_V, mean=None, feature_map="taylor", degree=2):
    """Per-row expectation of the NTK-Attention state of a prefix ``P_r ~ N(mean, I)``.

    ``m`` such rows sum (Eq. 4) to a state whose expectation is ``m`` times
    these; the limit ``m -> inf`` of ``Z / m`` and ``k / m`` is this state.

    Parameters
    ----------
    W_K : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)
    mean : array, shape (d,), optional
        The prefix rows' mean; default 0.
    feature_map : {"taylor", "elu"}, default="taylor"
    degree : int, default=2
        Taylor degree (static); ignored by ``"elu"``.

    Returns
    -------
    Z : array, shape (H, r, d_v)
        ``E[phi(W_K^T p) (W_V^T p)^T]``.
    k : array, shape (H, r)
        ``E[phi(W_K^T p)]``.

    Examples
    --------
    The mean over many drawn rows approaches it:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.ntk_attention import prefix_to_state
    >>> from skdiagatt.kernels.prefix_moments import gaussian_prefix_state
    >>> rng = np.random.default_rng(0)
    >>> W_K, W_V = jnp.asarray(0.5 * rng.standard_normal((2, 1, 3, 2)), jnp.float32)
    >>> Z, k = gaussian_prefix_state(W_K, W_V)
    >>> Z.shape, k.shape, float(k[0, 0])  # r = C(2 + 2, 2) = 6; the constant feature
    ((1, 6, 2), (1, 6), 1.0)
    >>> P = jnp.asarray(rng.standard_normal((200_000, 3)), jnp.float32)
    >>> Zm, km = prefix_to_state(P, W_K, W_V)
    >>> bool(np.allclose(km / 200_000, k, atol=0.01) and np.allclose(Zm / 200_000, Z, atol=0.01))
    True
    """
    d = W_K.shape[1]
    mean = jnp.zeros(d, W_K.dtype) if mean is None else jnp.asarray(mean, W_K.dtype)

    def one_head(Wk, Wv):
        mu_u, mu_v = mean @ Wk, mean @ Wv
        cov_uu, cov_vu = Wk.T @ Wk, Wv.T @ Wk
        if feature_map == "taylor":
            return _taylor_state(mu_u, cov_uu, mu_v, cov_vu, degree, None)
        if feature_map == "elu":
            return _elu_state(mu_u, cov_uu, mu_v, cov_vu)
        raise ValueError(f"feature_map must be 'taylor' or 'elu', got {feature_map!r}")

    return jax.vmap(one_head)(W_K, W_V)
