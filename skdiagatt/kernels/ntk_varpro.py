"""NTK-Attention's read-out and ``Z`` solved exactly given ``k`` (variable projection).

Given the prefix mass ``k``, a row's output ``T = (A V + phi(Q) Z) / den`` with
``den = A 1 + phi(Q) k`` is linear in ``Z``, and the prediction
``b + pool(T) W_out`` is linear in ``W_out`` and in ``z_h = Z_h W_out_h`` (head
``h``'s block) jointly:

    y = b + sum_h pool(A_h V_h / den_h) W_out_h + pool(phi(Q_h) / den_h) z_h.

So for fixed ``k`` the best ``(W_out, z, b)`` is a ridge regression on the
*design* ``F(k) = [pool(A V / den), pool(phi(Q) / den)]`` (one row per sample,
or per valid row without pooling), and the training loss becomes a function of
``k`` alone, ``L(k) = min_theta loss(k, theta)``, minimised over ``k`` by a
quasi-Newton method (``optax.lbfgs``).  The derivative of ``L`` is that of
the loss at the inner minimum (the inner gradient vanishes there), which
autodiff through the linear solve gives.

The regression is reduced to its weighted moments (counts, sums, ``F^T F``,
``F^T y``), summed bucket by bucket: its size is the number of features
``p = H (d_v + r)``, not the number of samples.  The penalty is
``alpha_value * mean(diag(F_c^T W F_c)) ||theta||^2`` (``F_c`` centred): relative to the
design's scale, which varies with the mass in ``k`` by orders of magnitude.

Shapes: ``k`` (H, r); ``frozen`` as in :mod:`skdiagatt.kernels.ntk_readout`;
``theta`` (p, t) with the ``H d_v`` read-out rows first (heads concatenated,
the layout of ``W_out``), then the ``H r`` rows of ``z``.
"""

import jax
import jax.numpy as jnp

from ._matmul import matmul
from .features import feature_dim
from .ntk_attention import ntk_attention
from .ntk_readout import pool_rows

__all__ = ["ntk_design", "varpro_loss", "heldout_loss", "ridge_gcv"]


def ntk_design(k, frozen, X, where, config):
    """The design ``F(k)``: per row (``pooling=None``) or pooled per sample.

    Parameters
    ----------
    k : array, shape (H, r)
    frozen : dict
        ``W_Q``, ``W_K`` (H, d, d_h), ``W_V`` (H, d, d_v).
    X, where, config
        As in :func:`skdiagatt.kernels.ntk_readout.ntk_readout_forward`.

    Returns
    -------
    array, shape (B, p) when pooling, (B, L, p) when ``pooling`` is None
        ``p = H (d_v + r)``: ``A V / den`` of every head, then ``phi(Q) / den``.

    Examples
    --------
    With ``z = Z W_out`` the design reproduces the NTK-Attention prediction:

    >>> import jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.ntk_readout import ntk_readout_forward
    >>> from skdiagatt.kernels.ntk_varpro import ntk_design
    >>> rng = np.random.default_rng(0)
    >>> X = jnp.asarray(rng.standard_normal((2, 3, 4)), jnp.float32)
    >>> where = jnp.array([[True, True, True], [True, True, False]])
    >>> W_Q, W_K, W_V = jnp.asarray(0.5 * rng.standard_normal((3, 1, 4, 2)), jnp.float32)
    >>> frozen = {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "alpha_value": 0.0}
    >>> Z, k = (jnp.asarray(rng.standard_normal(s), jnp.float32) for s in ((1, 6, 2), (1, 6)))
    >>> W_out = jnp.asarray(rng.standard_normal((2, 1)), jnp.float32)
    >>> config = ("taylor", 2, False, "mean")
    >>> F = ntk_design(k ** 2, frozen, X, where, config)
    >>> F.shape                            # p = 1 * (2 + 6)
    (2, 8)
    >>> theta = jnp.concatenate([W_out, Z[0] @ W_out])
    >>> z = ntk_readout_forward({"Z": Z, "k": k ** 2, "W_out": W_out, "b": jnp.zeros(1)}, frozen, X, where, config)
    >>> bool(np.allclose(F @ theta, z, atol=1e-5))
    True
    """
    feature_map, degree, causal, pooling = config
    W_V = frozen["W_V"]
    H, d, dv = W_V.shape
    r = feature_dim(feature_map, frozen["W_Q"].shape[-1], degree)  # rows of Z
    # Values [V, 0] and prefix values [0, I]: one stable kernel gives both blocks.
    values = jnp.concatenate([W_V, jnp.zeros((H, d, r), W_V.dtype)], axis=-1)
    eye = jnp.broadcast_to(jnp.eye(r, dtype=W_V.dtype), (H, r, r))
    Z = jnp.concatenate([jnp.zeros((H, r, dv), W_V.dtype), eye], axis=-1)
    T = ntk_attention(X, where, Z, k, frozen["W_Q"], frozen["W_K"], values,
                      feature_map=feature_map, degree=degree, causal=causal)  # (B, L, H, dv + r)
    B, L = where.shape
    T = jnp.concatenate([T[..., :dv].reshape(B, L, H * dv), T[..., dv:].reshape(B, L, H * r)], axis=-1)
    return pool_rows(T, where, pooling)


def design_moments(k, frozen, batch, config):
    """Weighted, centred moments of ``(F(k), y)`` over one batch.

    Parameters
    ----------
    k, frozen, config
        As in :func:`ntk_design`.
    batch : dict
        ``X``, ``where``, ``y`` and ``w`` as in
        :func:`skdiagatt.kernels.ntk_readout.ntk_readout_loss`; without
        pooling every valid row of a sample weighs ``w / rows``.

    Returns
    -------
    dict
        ``n`` (total weight), the means ``f`` (p,) and ``y`` (t,), and the
        weighted sums of centred products ``ff`` (p, p), ``fy`` (p, t),
        ``yy`` (scalar).  Centring within the batch, not by raw sums, keeps
        float32 accurate where a column's mean dwarfs its spread.
    """
    F = ntk_design(k, frozen, batch["X"], batch["where"], config)
    Y, w = batch["y"], batch["w"].astype(F.dtype)
    if config[3] is None:
        rows = batch["where"].astype(F.dtype)
        w = (w / jnp.maximum(jnp.sum(rows, axis=1), 1.0))[:, None] * rows
        F, Y, w = F.reshape(-1, F.shape[-1]), Y.reshape(-1, Y.shape[-1]), w.reshape(-1)
    n = jnp.sum(w)
    safe = jnp.maximum(n, jnp.finfo(F.dtype).tiny)
    f, ybar = (w @ F) / safe, (w @ Y) / safe
    Fc, Yc = F - f, Y - ybar
    Fw = Fc * w[:, None]
    return {"n": n, "f": f, "y": ybar, "ff": matmul(Fw.T, Fc), "fy": matmul(Fw.T, Yc),
            "yy": jnp.sum(w[:, None] * Yc * Yc)}


def data_moments(k, frozen, batches, config):
    """:func:`merge_moments` of every batch's :func:`design_moments`: the moments of all ``batches``."""
    return merge_moments([design_moments(k, frozen, b, config) for b in batches])


def merge_moments(parts):
    """Moments of the union of batches (Chan, Golub and LeVeque's pairwise update)."""
    n = sum(p["n"] for p in parts)
    f = sum(p["n"] * p["f"] for p in parts) / n
    y = sum(p["n"] * p["y"] for p in parts) / n
    out = {"n": n, "f": f, "y": y}
    out["ff"] = sum(p["ff"] + p["n"] * jnp.outer(p["f"] - f, p["f"] - f) for p in parts)
    out["fy"] = sum(p["fy"] + p["n"] * jnp.outer(p["f"] - f, p["y"] - y) for p in parts)
    out["yy"] = sum(p["yy"] + p["n"] * jnp.sum((p["y"] - y) ** 2) for p in parts)
    return out


def ridge_from_moments(mom, alpha_value):
    """The ridge read-out and the loss it reaches, from merged moments.

    Parameters
    ----------
    mom : dict
        :func:`merge_moments` of :func:`design_moments` over the data.
    alpha_value : float
        Penalty relative to the design's mean centred variance.

    Returns
    -------
    theta : array, shape (p, t)
    b : array, shape (t,)
    loss : scalar
        ``0.5 * weighted mean ||y - b - F theta||^2 + penalty``, at the minimum.
    """
    n = mom["n"]
    G, c = mom["ff"] / n, mom["fy"] / n
    scale = jnp.trace(G) / G.shape[0]
    lam = alpha_value * scale
    eye = jnp.eye(G.shape[0], dtype=G.dtype)
    # The design's columns can be nearly collinear; a floor relative to its
    # scale keeps the Cholesky factor finite even with alpha_value = 0.
    theta = jax.scipy.linalg.solve(G + 2.0 * (lam + 1e-6 * scale) * eye, c, assume_a="pos")
    fit = jnp.sum(theta * matmul(G, theta)) - 2.0 * jnp.sum(theta * c)
    loss = 0.5 * (mom["yy"] / n + fit) + lam * jnp.sum(theta * theta)
    return theta, mom["y"] - mom["f"] @ theta, loss


def ridge_gcv(mom, alphas):
    """Generalized cross-validation of the ridge read-out along a path of penalties.

    Parameters
    ----------
    mom : dict
        :func:`merge_moments` of :func:`design_moments` over the data.
    alphas : array, shape (a,)
        Penalties relative to the design's mean centred variance, as
        ``alpha_value`` in :func:`ridge_from_moments`.

    Returns
    -------
    array, shape (a,)
        ``GCV(alpha) = (RSS / n) / (1 - (df + 1) / n)^2`` (Golub, Heath and
        Wahba, 1979), ``df = sum_i s_i / (s_i + 2 lam)`` the trace of the
        hat matrix on the centred design (the intercept adds one), from one
        eigendecomposition ``G = U diag(s) U^T`` of the design's second
        moment: with ``c~ = U^T c``, ``RSS / n = yy / n - sum c~^2 (s + 4 lam)
        / (s + 2 lam)^2``.  ``n`` is the total weight (the sample count for
        unit weights); infinite where ``df + 1 >= n``.

    Examples
    --------
    The criterion is the mean squared residual inflated by the fitted degrees
    of freedom:

    >>> import numpy as np
    >>> from skdiagatt.kernels.ntk_varpro import ridge_from_moments, ridge_gcv
    >>> rng = np.random.default_rng(0)
    >>> F = rng.standard_normal((50, 4))
    >>> y = F @ np.array([[1.0], [0.0], [0.0], [0.0]]) + rng.standard_normal((50, 1))
    >>> Fc, yc = F - F.mean(0), y - y.mean(0)
    >>> mom = {"n": 50.0, "f": F.mean(0), "y": y.mean(0), "ff": Fc.T @ Fc, "fy": Fc.T @ yc,
    ...        "yy": float((yc ** 2).sum())}
    >>> theta, b, _ = ridge_from_moments(mom, 0.1)
    >>> hat = Fc @ np.linalg.solve(Fc.T @ Fc / 50 + 2 * (0.1 + 1e-6) * np.trace(Fc.T @ Fc / 50) / 4 * np.eye(4), Fc.T / 50)
    >>> rss = float(np.sum((yc - Fc @ np.asarray(theta)) ** 2))
    >>> direct = rss / 50 / (1 - (np.trace(hat) + 1) / 50) ** 2
    >>> bool(np.isclose(ridge_gcv(mom, np.array([0.1]))[0], direct, rtol=1e-4))
    True
    """
    n = mom["n"]
    G, c = mom["ff"] / n, mom["fy"] / n
    scale = jnp.trace(G) / G.shape[0]
    s, U = jnp.linalg.eigh(G)
    s = jnp.maximum(s, 0.0)
    ct2 = jnp.sum(matmul(U.T, c) ** 2, axis=1)  # (p,): summed over targets
    # The diagonal ridge_from_moments adds to G, 2 lam per penalty (its floor included): (a, 1).
    diag = 2.0 * (jnp.asarray(alphas)[:, None] + 1e-6) * scale
    rss = mom["yy"] / n - jnp.sum(ct2 * (s + 2.0 * diag) / (s + diag) ** 2, axis=1)
    df = jnp.sum(s / (s + diag), axis=1) + 1.0
    gcv = jnp.maximum(rss, 0.0) / (1.0 - df / n) ** 2
    return jnp.where(df < n, gcv, jnp.inf)


def heldout_loss(mom, theta, b):
    """Half the weighted mean squared error of ``b + F theta`` on data summarised by ``mom``.

    Parameters
    ----------
    mom : dict
        :func:`merge_moments` of held-out batches.
    theta : array, shape (p, t)
    b : array, shape (t,)

    Returns
    -------
    scalar
        ``0.5 * sum_i w_i ||y_i - b - F_i theta||^2 / sum_i w_i``: with centred
        ``F_c, y_c`` the cross terms with the mean residual
        ``y_bar - b - f_bar theta`` sum to zero, leaving
        ``(yy - 2 <theta, fy> + <theta, ff theta>) / n + ||mean residual||^2``.

    Examples
    --------
    >>> import jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.ntk_varpro import heldout_loss
    >>> rng = np.random.default_rng(0)
    >>> F, y = rng.standard_normal((8, 3)), rng.standard_normal((8, 1))
    >>> Fc, yc = F - F.mean(0), y - y.mean(0)
    >>> mom = {"n": 8.0, "f": F.mean(0), "y": y.mean(0), "ff": Fc.T @ Fc, "fy": Fc.T @ yc, "yy": float((yc ** 2).sum())}
    >>> theta, b = rng.standard_normal((3, 1)), np.array([0.5])
    >>> direct = 0.5 * np.mean(np.sum((y - b - F @ theta) ** 2, axis=1))
    >>> bool(np.isclose(heldout_loss(mom, theta, b), direct))
    True
    """
    n = mom["n"]
    resid = mom["y"] - b - mom["f"] @ theta
    spread = mom["yy"] - 2.0 * jnp.sum(theta * mom["fy"]) + jnp.sum(theta * matmul(mom["ff"], theta))
    return 0.5 * (spread / n + jnp.sum(resid * resid))


def varpro_loss(k, frozen, batches, config, alpha_value):
    """``L(k)``: the training loss with the read-out and ``Z`` at their exact minimum.

    Parameters
    ----------
    k : array, shape (H, r)
    frozen : dict
        ``W_Q``, ``W_K`` (H, d, d_h), ``W_V`` (H, d, d_v).
    batches : sequence of dict
        Batches covering the training data (see :func:`design_moments`);
        their moments are merged.
    config : tuple
        ``(feature_map, degree, causal, pooling)``, static.
    alpha_value : float
        Ridge penalty relative to the design's scale.

    Returns
    -------
    scalar

    Examples
    --------
    Splitting the data into batches does not change the loss, and no read-out
    does better than the one it solves for:

    >>> import jax.numpy as jnp, numpy as np
    >>> from skdiagatt.kernels.ntk_readout import ntk_readout_loss
    >>> from skdiagatt.kernels.ntk_varpro import varpro_loss
    >>> rng = np.random.default_rng(0)
    >>> X = jnp.asarray(rng.standard_normal((6, 3, 4)), jnp.float32)
    >>> where, y, w = jnp.ones((6, 3), bool), jnp.asarray(rng.standard_normal((6, 1)), jnp.float32), jnp.ones(6)
    >>> W_Q, W_K, W_V = jnp.asarray(0.5 * rng.standard_normal((3, 1, 4, 2)), jnp.float32)
    >>> frozen = {"W_Q": W_Q, "W_K": W_K, "W_V": W_V}
    >>> k = jnp.abs(jnp.asarray(rng.standard_normal((1, 6)), jnp.float32))
    >>> config = ("taylor", 2, False, "mean")
    >>> whole = varpro_loss(k, frozen, [{"X": X, "where": where, "y": y, "w": w}], config, 0.0)
    >>> halves = [{"X": X[s], "where": where[s], "y": y[s], "w": w[s]} for s in (slice(0, 3), slice(3, 6))]
    >>> bool(np.isclose(whole, varpro_loss(k, frozen, halves, config, 0.0), atol=1e-5))
    True
    >>> Z = jnp.asarray(rng.standard_normal((1, 6, 2)), jnp.float32)
    >>> params = {"Z": Z, "k": k, "W_out": jnp.ones((2, 1)), "b": jnp.zeros(1)}
    >>> other = ntk_readout_loss(params, {**frozen, "alpha_value": 0.0}, {"X": X, "where": where, "y": y, "w": w}, config)
    >>> bool(whole <= other)
    True
    """
    return ridge_from_moments(data_moments(k, frozen, batches, config), alpha_value)[2]


def state_from_ridge(theta, H, dv):
    """``W_out`` (H d_v, t) and ``Z`` (H, r, d_v) with ``Z_h W_out_h = z_h``.

    ``Z_h = z_h W_out_h^+`` (pseudo-inverse), exact when head h's block of
    ``W_out`` has full column rank ``t <= d_v``.
    """
    W_out = theta[: H * dv]
    z = theta[H * dv:].reshape(H, -1, theta.shape[-1])  # (H, r, t)
    W_h = W_out.reshape(H, dv, -1)
    Z = jnp.einsum("hrt,htv->hrv", z, jnp.linalg.pinv(W_h))
    return W_out, Z
