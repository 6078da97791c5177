"""Feature maps ``phi`` with ``phi(q) . phi(k) ~ exp(q . k / sqrt(d_h))``.

NTK-Attention (the NTK-Attention paper, Section 4) replaces the ``m`` prefix keys by the
sums ``Z = sum_r phi(k_r) v_r^T`` and ``k = sum_r phi(k_r)``; how well that
works depends only on how well ``phi(q) . phi(k)`` reproduces the softmax
kernel. Two maps are offered:

* ``"taylor"`` -- the polynomial method of Alman & Song (the NTK-Attention paper, Lemma
  H.7): the exponential truncated after degree ``g``, written as an inner
  product of deduplicated symmetric monomials, so that
  ``phi(q) . phi(k) == sum_{j<=g} (q . k / sqrt(d_h))^j / j!`` exactly.
* ``"elu"`` -- ``elu(x / d_h^(1/4)) + 1``, what the authors' public code
  actually uses (``r = d_h``). It is positive but is *not* an approximation
  of ``exp``; it is a different (linear-attention) kernel.

Every function here is pure ``jax.numpy``; index tables are built with NumPy
at trace time, so the maps are static-shape and ``jit`` friendly.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ._matmul import matmul

__all__ = [
    "taylor_feature_dim",
    "taylor_features",
    "taylor_products",
    "elu_features",
    "feature_dim",
    "feature_map",
    "apply_feature_map",
    "taylor_remainder_bound",
    "taylor_remainder_pointwise",
]

FEATURE_MAPS = ("taylor", "elu", "cumulant")


def taylor_feature_dim(d, degree):
    """Number of Taylor features: monomials of degree ``<= degree`` in ``d`` variables.

    Parameters
    ----------
    d : int
        Input dimension ``d_h``.
    degree : int
        Truncation degree ``g >= 0``.

    Returns
    -------
    int
        ``C(d + g, g)``.

    Examples
    --------
    >>> from skdiagatt.kernels.features import taylor_feature_dim
    >>> taylor_feature_dim(4, 2)           # 1 + 4 + 10 monomials
    15
    >>> taylor_feature_dim(64, 3)          # why degree 3 is costly at d_h = 64
    47905
    """
    return math.comb(int(d) + int(degree), int(degree))


@functools.lru_cache(maxsize=None)
def _taylor_tables(d, degree):
    """Static tables that grow degree-``j`` monomials from degree ``j - 1``.

    Monomials are the multisets ``i_1 <= ... <= i_j`` in lexicographic order;
    each is its parent ``(i_1, ..., i_{j-1})`` times ``x[i_j]``, so a degree-j
    block is one gather of the previous block times one gather of ``x``:
    ``O(C(d+g, g))`` memory per row, not ``O(g C(d+g, g))`` as for gathering
    all ``g`` factors; and one gather per degree, not ``d`` slices, keeps the
    program small to compile.

    The weight of a monomial in ``(q . k)^j / j!`` expanded over multisets is
    ``multinomial(j; counts) / j! = 1 / prod(counts!)``; each of ``phi(q)`` and
    ``phi(k)`` carries its square root. Appending ``i_j`` to a parent in which
    it already occurs ``c - 1`` times multiplies ``prod(counts!)`` by ``c``.

    Returns
    -------
    gathers : tuple of (parent, last) per degree ``1..degree``
        int32 arrays of shape (C(d + j - 1, j),).
    weights : ndarray of float64, shape (C(d + degree, degree),)
        ``1 / sqrt(prod(counts!))`` for every monomial, degree 0 first.
    """
    gathers = []
    weights = [np.ones(1)]
    last_prev = np.full(1, -1, dtype=np.int64)  # the empty monomial
    run_prev = np.zeros(1, dtype=np.int64)  # multiplicity of its last index
    for _ in range(degree):
        first = np.maximum(last_prev, 0)
        n_child = d - first
        parent = np.repeat(np.arange(last_prev.size), n_child)
        offset = np.arange(parent.size) - np.repeat(np.cumsum(n_child) - n_child, n_child)
        last = np.repeat(first, n_child) + offset
        run = np.where(last == last_prev[parent], run_prev[parent] + 1, 1)
        gathers.append((parent.astype(np.int32), last.astype(np.int32)))
        weights.append(weights[-1][parent] / np.sqrt(run))
        last_prev, run_prev = last, run
    return tuple(gathers), np.concatenate(weights)


def taylor_features(x, degree=2, scale=None):
    """Truncated-Taylor features of the exponential kernel.

    Parameters
    ----------
    x : array, shape (..., d_h)
    degree : int, default=2
        Truncation degree ``g`` (static).
    scale : float, optional
        Kernel temperature; ``phi(q) . phi(k)`` approximates
        ``exp(scale * q . k)``. Defaults to ``1 / sqrt(d_h)``.

    Returns
    -------
    array, shape (..., C(d_h + g, g))
        Features ordered by degree, then lexicographically, with
        ``phi(q) . phi(k) == sum_{j=0}^{g} (scale * q . k)^j / j!``
        up to rounding.

    Examples
    --------
    The inner product of the features is the truncated exponential series:

    >>> import math
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.features import taylor_features
    >>> q = jnp.array([0.3, -1.2, 0.5, 0.8])
    >>> k = jnp.array([1.0, 0.4, -0.7, 0.2])
    >>> phi_q, phi_k = taylor_features(q, degree=3), taylor_features(k, degree=3)
    >>> phi_q.shape                        # C(4 + 3, 3)
    (35,)
    >>> t = float(q @ k) / math.sqrt(4)    # default scale 1 / sqrt(d_h)
    >>> series = sum(t ** j / math.factorial(j) for j in range(4))
    >>> bool(np.isclose(float(phi_q @ phi_k), series, rtol=1e-5))
    True
    """
    _, weights = _taylor_tables(x.shape[-1], int(degree))
    xs = _tempered(x, scale)
    blocks = [jnp.ones(x.shape[:-1] + (1,), x.dtype)] + _monomial_blocks(xs, degree)
    return jnp.concatenate(blocks, axis=-1) * jnp.asarray(weights, x.dtype)


def _tempered(x, scale):
    """``sqrt(scale) x`` (default scale ``1 / sqrt(d)``): the temperature inside every monomial."""
    if scale is None:
        scale = 1.0 / math.sqrt(x.shape[-1])
    return x * jnp.asarray(math.sqrt(scale), x.dtype)


def _monomial_blocks(x, degree):
    """Unweighted monomials of ``x`` (..., d), one block per degree ``1..degree``."""
    if int(degree) == 0:
        return []
    gathers, _ = _taylor_tables(x.shape[-1], int(degree))
    blocks = [x]
    for parent, last in gathers[1:]:
        # Static in-bounds indices: "clip" skips the out-of-bounds fill logic.
        prev = jnp.take(blocks[-1], parent, axis=-1, mode="clip", indices_are_sorted=True)
        blocks.append(prev * jnp.take(x, last, axis=-1, mode="clip"))
    return blocks


def taylor_products(x, S, degree=2, scale=None):
    """``phi(x) @ S`` for Taylor features ``phi``, scaled into range, without forming ``phi``.

    What NTK-Attention needs of the features is only their products with its
    state, ``phi(Q) Z`` and ``phi(Q) k``.  Here they are summed degree by
    degree, the monomial weights folded into the rows of ``S`` (a small
    array) rather than into the ``(..., r)`` features, and the size of the
    features divided out of ``x`` first: with ``m = max(1, max |x_s|)``
    (``x_s = sqrt(scale) x``) every monomial of ``x_s / m`` is at most 1, and
    degree ``j`` carries ``m^(j - g) <= 1``.  So nothing overflows however
    large ``x`` is, and ``phi(x) @ S = out * exp(log_n)``.

    Parameters
    ----------
    x : array, shape (..., d)
    S : array, shape (C(d + g, g), e)
        Rows in the order of :func:`taylor_features`.
    degree : int, default=2
        ``g`` (static).
    scale : float, optional
        As in :func:`taylor_features` (default ``1 / sqrt(d)``).

    Returns
    -------
    out : array, shape (..., e)
    log_n : array, shape (...)
        ``g log m``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.features import taylor_features, taylor_products
    >>> rng = np.random.RandomState(0)
    >>> x = jnp.asarray(3 * rng.randn(5, 4), jnp.float32)
    >>> S = jnp.asarray(rng.randn(15, 2), jnp.float32)        # r = C(4 + 2, 2) = 15
    >>> out, log_n = taylor_products(x, S, degree=2)
    >>> out.shape, log_n.shape
    ((5, 2), (5,))
    >>> np.allclose(out * jnp.exp(log_n)[:, None], taylor_features(x, 2) @ S, rtol=1e-5, atol=1e-5)
    True

    Notes
    -----
    Evaluated alone (prediction), the monomials of many rows are formed and
    multiplied a tile of rows at a time (:func:`_tile_rows`), with the same
    results: no ``(rows, r)`` buffer is allocated.  Formed whole, that buffer
    is a fresh allocation of every call, and faulting its pages in can cost
    more than the product itself.  Differentiated (training), the rows are
    taken whole: runs of compiled training steps keep their buffers from one
    step to the next, while tiles would have to be recomputed or stored by
    the backward pass.
    """
    return _tiled_taylor_products(x, S, int(degree), scale)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _tiled_taylor_products(x, S, degree, scale):
    lead, d = x.shape[:-1], x.shape[-1]
    rows = math.prod(lead)
    tile = _tile_rows(rows, S.shape[0])
    if tile == rows:
        return _taylor_products(x, S, degree, scale)
    n_tiles = -(-rows // tile)
    xt = jnp.pad(x.reshape(rows, d), ((0, n_tiles * tile - rows), (0, 0))).reshape(n_tiles, tile, d)
    out, log_n = jax.lax.map(lambda t: _taylor_products(t, S, degree, scale), xt)
    return out.reshape(-1, S.shape[1])[:rows].reshape(lead + S.shape[1:]), log_n.reshape(-1)[:rows].reshape(lead)


def _whole_forward(x, S, degree, scale):
    # The residual is the VJP of the untiled computation (a pytree of arrays).
    return jax.vjp(lambda x, S: _taylor_products(x, S, degree, scale), x, S)


def _whole_backward(degree, scale, vjp, cotangents):
    return vjp(cotangents)


_tiled_taylor_products.defvjp(_whole_forward, _whole_backward)


# Monomials per tile of :func:`taylor_products`: 8 MiB of float32, small
# enough to stay cached, large enough that the per-tile overhead is small.
_TILE_ELEMENTS = 1 << 21


def _tile_rows(rows, r):
    """Rows per tile of :func:`taylor_products`: all of them if they fit, else a multiple of 8.

    The tiles are as equal as the multiple of 8 allows, so that padding adds
    fewer than 8 rows per tile.

    >>> _tile_rows(100, 2145), _tile_rows(8192, 2145), _tile_rows(1000, 47905)
    (100, 912, 40)
    """
    cap = max(8, _TILE_ELEMENTS // r // 8 * 8)
    if rows <= cap:
        return rows
    n_tiles = -(-rows // cap)
    return 8 * -(-rows // (8 * n_tiles))


def _taylor_products(x, S, degree, scale):
    """:func:`taylor_products` on all rows of ``x`` at once."""
    _, weights = _taylor_tables(x.shape[-1], degree)
    xs = _tempered(x, scale)
    m = jnp.maximum(jnp.max(jnp.abs(xs), axis=-1), jnp.ones((), x.dtype))
    Sw = S * jnp.asarray(weights, S.dtype)[:, None]
    log_m = jnp.log(m)
    out = Sw[0] * jnp.exp(-degree * log_m)[..., None]
    start = 1
    for j, block in enumerate(_monomial_blocks(xs / m[..., None], degree), start=1):
        stop = start + block.shape[-1]
        part = matmul(block, Sw[start:stop])
        out = out + (part if j == degree else part * jnp.exp((j - degree) * log_m)[..., None])
        start = stop
    return out, degree * log_m


def elu_features(x):
    """``elu(x / d_h^(1/4)) + 1``, the positive map of the authors' public code.

    Parameters
    ----------
    x : array, shape (..., d_h)

    Returns
    -------
    array, shape (..., d_h)
        Strictly positive wherever ``exp`` does not underflow.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.features import elu_features
    >>> x = jnp.array([[-3.0, 0.0, 2.0, 5.0]])
    >>> phi = elu_features(x)
    >>> phi.shape, bool((phi > 0).all())
    ((1, 4), True)
    >>> float(phi[0, 1])                   # elu(0) + 1
    1.0
    >>> bool(np.isclose(float(phi[0, 2]), 1 + 2 / 4 ** 0.25))  # identity + 1 for x > 0
    True
    """
    d = x.shape[-1]
    return jax.nn.elu(x * jnp.asarray(d ** -0.25, x.dtype)) + 1.0


def feature_dim(name, d, degree=2):
    """Feature dimension ``r`` of map ``name`` on inputs of dimension ``d``.

    For ``"cumulant"`` (:mod:`.cumulant`) this is the number of rows of
    ``Z``, the degree-``g`` Taylor features of the prefix's mean value; its
    log-mass ``k`` has :func:`.cumulant.log_mass_dim` entries.

    Parameters
    ----------
    name : {"taylor", "elu", "cumulant"}
    d : int
    degree : int, default=2
        Ignored by ``"elu"``.

    Returns
    -------
    int

    Examples
    --------
    >>> from skdiagatt.kernels.features import feature_dim
    >>> feature_dim("taylor", 8, degree=2), feature_dim("elu", 8)
    (45, 8)
    """
    if name in ("taylor", "cumulant"):
        return taylor_feature_dim(d, degree)
    if name == "elu":
        return int(d)
    raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {name!r}")


def feature_map(name, degree=2):
    """Return the feature function ``x -> phi(x)`` named ``name``.

    Parameters
    ----------
    name : {"taylor", "elu", "cumulant"}
    degree : int, default=2
        Taylor degree; ignored by ``"elu"``.  ``"cumulant"`` maps to the
        Taylor features of its values (:mod:`.cumulant`).

    Returns
    -------
    callable
        Maps ``(..., d_h)`` to ``(..., feature_dim(name, d_h, degree))``.

    Examples
    --------
    Degree 1 gives ``phi(q) . phi(k) = 1 + q . k / sqrt(d_h)``:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.features import feature_map
    >>> phi = feature_map("taylor", degree=1)
    >>> q, k = jnp.array([1.0, 2.0, 0.0, -1.0]), jnp.array([0.5, 0.5, 3.0, 1.0])
    >>> phi(q).shape
    (5,)
    >>> bool(np.isclose(float(phi(q) @ phi(k)), 1 + float(q @ k) / 2))
    True
    """
    if name in ("taylor", "cumulant"):
        return functools.partial(taylor_features, degree=int(degree))
    if name == "elu":
        return elu_features
    raise ValueError(f"feature_map must be one of {FEATURE_MAPS}, got {name!r}")


def apply_feature_map(x, name="taylor", degree=2):
    """``feature_map(name, degree)(x)``.

    Parameters
    ----------
    x : array, shape (..., d_h)
    name : {"taylor", "elu"}
    degree : int, default=2

    Returns
    -------
    array, shape (..., r)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from skdiagatt.kernels.features import apply_feature_map
    >>> x = jnp.ones((2, 3, 4))            # any leading axes, d_h = 4
    >>> apply_feature_map(x, "taylor", degree=2).shape, apply_feature_map(x, "elu").shape
    ((2, 3, 15), (2, 3, 4))
    """
    return feature_map(name, degree)(x)


def taylor_remainder_pointwise(t, degree, relative=True):
    """Lagrange bound on the Taylor remainder of ``exp`` at ``t`` (elementwise).

    ``exp(t) - sum_{j<=g} t^j / j! = exp(xi) t^(g+1) / (g+1)!`` for some
    ``xi`` between 0 and ``t``, hence

    * absolute: ``|R(t)| <= exp(max(t, 0)) |t|^(g+1) / (g+1)!``
    * relative: ``|R(t)| / exp(t) <= exp(max(-t, 0)) |t|^(g+1) / (g+1)!``

    Parameters
    ----------
    t : array_like, shape (...)
    degree : int
        ``g``.
    relative : bool, default=True

    Returns
    -------
    array, shape (...)

    Examples
    --------
    The bound holds at every point, for the absolute and the relative error:

    >>> import math
    >>> import numpy as np
    >>> from skdiagatt.kernels.features import taylor_remainder_pointwise
    >>> t = np.linspace(-3.0, 3.0, 13)
    >>> err = np.abs(np.exp(t) - sum(t ** j / math.factorial(j) for j in range(3)))
    >>> absolute = np.asarray(taylor_remainder_pointwise(t, 2, relative=False))
    >>> relative = np.asarray(taylor_remainder_pointwise(t, 2))
    >>> bool(np.all(err <= absolute * (1 + 1e-6))), bool(np.all(err / np.exp(t) <= relative * (1 + 1e-6)))
    (True, True)
    """
    t = jnp.asarray(t)
    grow = jnp.maximum(-t, 0.0) if relative else jnp.maximum(t, 0.0)
    return jnp.exp(grow) * jnp.abs(t) ** (degree + 1) / math.factorial(degree + 1)


def taylor_remainder_bound(t_max, degree):
    """Uniform Lagrange bound ``exp(T) T^(g+1) / (g+1)!`` for ``|t| <= T``.

    Bounds both the absolute error ``|exp(t) - sum_{j<=g} t^j/j!|`` and the
    relative error (the same divided by ``exp(t)``) over ``[-T, T]``: the
    worst cases are ``t = T`` and ``t = -T`` respectively, and both give this
    value (see :func:`taylor_remainder_pointwise`).

    Parameters
    ----------
    t_max : float or array_like
        ``T >= 0``.
    degree : int
        ``g``.

    Returns
    -------
    float or array

    Examples
    --------
    >>> import math
    >>> import numpy as np
    >>> from skdiagatt.kernels.features import taylor_remainder_bound
    >>> round(taylor_remainder_bound(1.0, 2), 4)   # e / 3!
    0.453
    >>> t = np.linspace(-1.0, 1.0, 21)             # the worst error on [-1, 1]
    >>> err = np.abs(np.exp(t) - (1 + t + t ** 2 / 2))
    >>> bool(err.max() <= taylor_remainder_bound(1.0, 2))
    True
    >>> taylor_remainder_bound([0.5, 1.0], 4).shape
    (2,)
    """
    t_max = np.abs(np.asarray(t_max, dtype=np.float64))
    out = np.exp(t_max) * t_max ** (degree + 1) / math.factorial(degree + 1)
    return float(out) if out.ndim == 0 else out
