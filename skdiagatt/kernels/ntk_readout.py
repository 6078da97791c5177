"""Prefix attention followed by pooling and a linear read-out, and its training loss.

Parameters (trained): ``Z`` (H, r, d_v), ``k`` (H, r) -- the compressed
infinitely long prefix of NTK-Attention -- or, for the P-Tuning-style
baseline, an explicit prefix ``P`` (m, d) attended exactly, or, for the LoRA
baseline, low-rank updates ``A_Q`` (d, q), ``B_Q`` (H, q, d_h), ``A_V`` (d, q),
``B_V`` (H, q, d_v) of the query and value projections; and the read-out
``W_out`` (H * d_v, t), ``b`` (t,).
Fixed (``frozen``): ``Z`` and ``k`` too when they are not trained, the attention projections ``W_Q``, ``W_K`` (H, d, d_h),
``W_V`` (H, d, d_v) and ``alpha_value``, the L2 penalty of the read-out.
Static ``config``: ``(feature_map, degree, causal, pooling)`` with pooling in
``{"mean", "first", None}`` (None: one prediction per row).
"""

import jax.numpy as jnp

from ._matmul import einsum, matmul
from .attention import attention_weights, key_attention_mass, plain_attention, prefix_attention
from .features import feature_dim
from .losses import gaussian_loglik
from .ntk_attention import ntk_attention

__all__ = ["adapted_projections", "ntk_readout_forward", "ntk_readout_loss", "ntk_row_mass"]


def adapted_projections(params, W_Q, W_V):
    """``W_Q`` and ``W_V`` plus their low-rank updates where ``params`` has them.

    LoRA (Hu et al., 2022, Eq. 3) adds ``A B`` to a frozen projection, with
    ``A`` (d, q) shared by the heads and ``B`` (H, q, d_h) split like the
    projection's columns: head ``h`` gets ``W_h + A B_h``.

    Parameters
    ----------
    params : dict
        Trained parameters; the updates are ``A_Q`` (d, q), ``B_Q`` (H, q, d_h),
        ``A_V`` (d, q), ``B_V`` (H, q, d_v), and without them the projections
        are returned as they are.
    W_Q : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)

    Returns
    -------
    W_Q : array, shape (H, d, d_h)
    W_V : array, shape (H, d, d_v)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from skdiagatt.kernels.ntk_readout import adapted_projections
    >>> params = {"A_Q": jnp.ones((3, 1)), "B_Q": jnp.ones((2, 1, 4)),
    ...           "A_V": jnp.ones((3, 1)), "B_V": jnp.zeros((2, 1, 4))}
    >>> W_Q, W_V = adapted_projections(params, jnp.zeros((2, 3, 4)), jnp.zeros((2, 3, 4)))
    >>> float(W_Q.sum()), float(W_V.sum())           # rank one: every entry of A B is 1
    (24.0, 0.0)
    """
    if "A_Q" in params:
        W_Q = W_Q + einsum("dq,hqe->hde", params["A_Q"], params["B_Q"])
        W_V = W_V + einsum("dq,hqe->hde", params["A_V"], params["B_V"])
    return W_Q, W_V


def _attend(params, frozen, X, where, config, Z, k, W_V):
    feature_map, degree, causal, _ = config
    if "A_Q" in params:
        W_Q, W_V = adapted_projections(params, frozen["W_Q"], W_V)
        return plain_attention(X, where, W_Q, frozen["W_K"], W_V, causal=causal)
    if "P" in params:
        return prefix_attention(X, where, params["P"], frozen["W_Q"], frozen["W_K"], W_V, causal=causal)
    return ntk_attention(
        X, where, Z, k, frozen["W_Q"], frozen["W_K"], W_V,
        feature_map=feature_map, degree=degree, causal=causal,
    )


def pool_rows(T, where, pooling):
    """Row outputs (B, L, e) to one vector per sample (B, e) by ``pooling``; None keeps the rows."""
    if pooling == "mean":
        n = jnp.maximum(jnp.sum(where, axis=1, keepdims=True), 1).astype(T.dtype)
        return jnp.sum(T, axis=1) / n  # padded rows of T are exactly 0
    if pooling == "first":
        return T[:, 0]
    return T


def ntk_readout_forward(params, frozen, X, where, config):
    """Predictions of the NTK-Attention read-out.

    Parameters
    ----------
    params : dict
        Trained parameters: ``Z`` (H, r, d_v) and ``k`` (H, r), or ``P``
        (m, d) for an exact prefix, or LoRA's ``A_Q``, ``B_Q``, ``A_V``,
        ``B_V`` (see the module docstring); ``W_out`` (H * d_v, t), ``b`` (t,).
    frozen : dict
        ``W_Q``, ``W_K`` (H, d, d_h), ``W_V`` (H, d, d_v), ``alpha_value``; ``Z`` and
        ``k`` too when they are not trained.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    config : tuple
        ``(feature_map, degree, causal, pooling)``, static.

    Returns
    -------
    array, shape (B, t) when pooling, (B, L, t) when ``pooling`` is None

    Examples
    --------
    Mean pooling averages the attention outputs of the valid rows before the
    read-out:

    >>> import jax
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.ntk_attention import ntk_attention
    >>> from skdiagatt.kernels.ntk_readout import ntk_readout_forward
    >>> from skdiagatt.kernels._examples import ntk_readout_inputs
    >>> params, frozen, X, where, config = ntk_readout_inputs()   # B=2, L=3 (the 2nd: 2 rows), d=4; H=2
    >>> forward = jax.jit(ntk_readout_forward, static_argnames="config")  # as the estimators do
    >>> z = forward(params, frozen, X, where, config)
    >>> z.shape                            # (B, t)
    (2, 1)
    >>> T = ntk_attention(X, where, params["Z"], params["k"], *(frozen[w] for w in ("W_Q", "W_K", "W_V")))
    >>> bool(np.allclose(z[:, 0], T.sum((1, 2, 3)) / where.sum(1), atol=1e-5))
    True
    """
    pooling = config[3]
    params = {**frozen, **params}  # Z and k may be held fixed (in frozen)
    T = _attend(params, frozen, X, where, config, params.get("Z"), params.get("k"), frozen["W_V"])
    B, L = where.shape
    T = T.reshape(B, L, -1)  # heads concatenated: (B, L, H * d_v)
    return matmul(pool_rows(T, where, pooling), params["W_out"]) + params["b"]


def ntk_readout_loss(params, frozen, batch, config):
    """Half the mean squared error (per sample, or per valid row) plus the read-out penalty.

    Parameters
    ----------
    params, frozen
        As in :func:`ntk_readout_forward`.
    batch : dict
        ``X`` (B, L, d), ``where`` (B, L), ``y`` (B, t) -- (B, L, t) when
        ``pooling`` is None -- and ``w`` (B,) sample weights (zero for filler
        samples).
    config : tuple
        As in :func:`ntk_readout_forward`.

    Returns
    -------
    scalar
        ``sum_i w_i ||y_i - z_i||^2 / 2 / sum_i w_i + alpha_value ||W_out||^2``;
        with ``pooling`` None, ``||y_i - z_i||^2`` is the mean over the valid
        rows of sample ``i``.

    Examples
    --------
    The penalty is ``alpha_value * ||W_out||^2 = 0.1 * 4`` on top of the data term:

    >>> import jax
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels._examples import ntk_readout_inputs
    >>> params, frozen, X, where, config = ntk_readout_inputs()   # B=2, L=3 (the 2nd: 2 rows), d=4; H=2
    >>> from skdiagatt.kernels.ntk_readout import ntk_readout_loss
    >>> loss = jax.jit(ntk_readout_loss, static_argnames="config")  # as the estimators do
    >>> batch = {"X": X, "where": where, "y": jnp.ones((2, 1)), "w": jnp.ones(2)}
    >>> data_term = loss(params, {**frozen, "alpha_value": 0.0}, batch, config)
    >>> round(float(loss(params, frozen, batch, config) - data_term), 4)
    0.4
    """
    z = ntk_readout_forward(params, frozen, batch["X"], batch["where"], config)
    zero = jnp.zeros(z.shape[-1], z.dtype)
    per = -gaussian_loglik(batch["y"], z, zero)
    w = batch["w"]
    if config[3] is None:
        rows = batch["where"].astype(per.dtype)
        per = jnp.sum(per * rows, axis=1) / jnp.maximum(jnp.sum(rows, axis=1), 1.0)
    return jnp.sum(w * per) / jnp.sum(w) + frozen["alpha_value"] * jnp.sum(params["W_out"] ** 2)


def ntk_row_mass(params, frozen, X, where, config):
    """Average attention mass each row receives from the sample's queries, per head.

    Under NTK-Attention a query ``i`` spends the share ``s_i = phi(q_i) k /
    (A_i 1 + phi(q_i) k)`` on the prefix and the rest on the rows of X in the
    proportions of plain attention.  ``s_i`` comes from the same stable kernel
    with the prefix's values set to one and the rows' values to zero.

    Parameters
    ----------
    params, frozen, X, where, config
        As in :func:`ntk_readout_forward`.

    Returns
    -------
    array, shape (B, H, L)
        Zero at padded rows; sums over the rows to ``1 -`` the (average)
        prefix share.

    Examples
    --------
    >>> import jax
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.ntk_readout import ntk_row_mass
    >>> from skdiagatt.kernels._examples import ntk_readout_inputs
    >>> params, frozen, X, where, config = ntk_readout_inputs()   # B=2, L=3 (the 2nd: 2 rows), d=4; H=2
    >>> row_mass = jax.jit(ntk_row_mass, static_argnames="config")  # as the estimators do
    >>> mass = row_mass(params, frozen, X, where, config)
    >>> mass.shape, float(mass[1, 0, 2])   # (B, H, L); padded row
    ((2, 2, 3), 0.0)
    >>> bool(((mass.sum(-1) > 0) & (mass.sum(-1) < 1)).all())  # the prefix takes a share
    True
    >>> no_prefix = row_mass({**params, "k": jnp.zeros_like(params["k"])}, frozen, X, where, config)
    >>> np.round(np.asarray(no_prefix.sum(-1)), 4).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    params = {**frozen, **params}
    if "P" in params or "A_Q" in params:
        W_Q = adapted_projections(params, frozen["W_Q"], frozen["W_V"])[0]
        w = attention_weights(X, where, W_Q, frozen["W_K"], P=params.get("P"), causal=config[2])
        return key_attention_mass(w, where)
    if config[0] == "cumulant":  # Z = e_0: the prefix's mean value is 1 (phi_g[0] = 1)
        rows = feature_dim("cumulant", frozen["W_Q"].shape[-1], config[1])
        ones = jnp.zeros((params["k"].shape[0], rows, 1), params["k"].dtype).at[:, 0].set(1.0)
    else:
        ones = params["k"][..., None]  # Z = k: every prefix key carries value 1
    no_values = jnp.zeros(frozen["W_V"].shape[:2] + (1,), frozen["W_V"].dtype)
    share = _attend(params, frozen, X, where, config, ones, params["k"], no_values)[..., 0]
    keep = jnp.clip(1.0 - share, 0.0, 1.0)  # (B, L, H)
    w = attention_weights(X, where, frozen["W_Q"], frozen["W_K"], causal=config[2])
    w = w * jnp.transpose(keep, (0, 2, 1))[..., None]
    return key_attention_mass(w, where)
