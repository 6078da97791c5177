"""Diagonal query-key scores ``psi_r = diag(X W_r X^T)``, one per row and head.

Shapes: ``X`` (B, L, d) padded samples; full ``W`` (R, d, d); low-rank factors
``L`` and ``M`` (R, d, q) with ``W = L L^T`` (symmetric) or ``W = L M^T``.
Every variant contracts the stacked heads in one 2-D matmul ``(B*L, d) @ (d, R*k)``:
XLA runs that shape near the machine's matmul peak, unlike a per-sample
batched einsum.
"""

import jax.numpy as jnp

__all__ = ["project_rows", "diag_scores", "lowrank_scores"]


def project_rows(X, W):
    """``X W_r`` for every head as one matmul.

    Parameters
    ----------
    X : array, shape (B, L, d)
    W : array, shape (R, d, k)

    Returns
    -------
    array, shape (B, L, R, k)
    """
    B, L, d = X.shape
    R, _, k = W.shape
    stacked = jnp.transpose(W, (1, 0, 2)).reshape(d, R * k)
    return (X.reshape(B * L, d) @ stacked).reshape(B, L, R, k)


def diag_scores(X, W):
    """``psi[b, r, l] = x_bl^T W_r x_bl``.

    Parameters
    ----------
    X : array, shape (B, L, d)
    W : array, shape (R, d, d)

    Returns
    -------
    array, shape (B, R, L)
    """
    XW = project_rows(X, W)
    return jnp.einsum("blrd,bld->brl", XW, X)


def lowrank_scores(X, L, M=None):
    """Scores of ``W = L L^T`` (``M`` None) or ``W = L M^T``, never forming W.

    Parameters
    ----------
    X : array, shape (B, L, d)
    L : array, shape (R, d, q)
    M : array, shape (R, d, q), optional

    Returns
    -------
    array, shape (B, R, L)
    """
    XL = project_rows(X, L)
    if M is None:
        return jnp.transpose(jnp.sum(XL * XL, axis=-1), (0, 2, 1))
    XM = project_rows(X, M)
    return jnp.transpose(jnp.sum(XL * XM, axis=-1), (0, 2, 1))
