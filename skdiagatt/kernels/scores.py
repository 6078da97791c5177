"""Diagonal query-key scores ``psi_r = diag(X W_r X^T)``, one per row and head.

Shapes: ``X`` (B, L, d) padded samples; full ``W`` (R, d, d); low-rank factors
``L`` and ``M`` (R, d, q) with ``W = L L^T`` (symmetric) or ``W = L M^T``;
optional linear terms ``U`` (R, d), which make the score affine,
``x^T W_r x + u_r^T x``.

How the arithmetic is shaped, and why: every
variant flattens the rows of all samples and contracts the stacked heads in one
2-D matmul ``(B*L, d) @ (d, R*k)``.  A per-sample batched einsum runs this at a
fraction of the speed on CPU, and so does anything that breaks the row-major
``(B*L, d)`` layout (transposes, broadcasts with a size-one head axis, slices
of a wider product): each extra pass over the ``B*L*d`` rows costs about as much
as the matmul's own memory traffic.  With one head the score is a plain
row-wise dot product of ``X W`` with ``X``, which XLA fuses with the matmul.
"""

import jax
import jax.numpy as jnp

from ._matmul import einsum, matmul

__all__ = [
    "project_rows",
    "diag_scores",
    "lowrank_scores",
    "linear_scores",
    "diag_scores_and_values",
]


def _stack(W):
    """(R, d, k) -> (d, R*k): the heads side by side, for one matmul."""
    R, d, k = W.shape
    if R == 1:
        return W[0]
    return jnp.transpose(W, (1, 0, 2)).reshape(d, R * k)


def project_rows(X, W):
    """``X W_r`` for every head as one matmul.

    Parameters
    ----------
    X : array, shape (B, L, d)
    W : array, shape (R, d, k)

    Returns
    -------
    array, shape (B, L, R, k)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from skdiagatt.kernels.scores import project_rows
    >>> X = jnp.ones((2, 5, 4))           # 2 samples, 5 rows, d = 4
    >>> W = jnp.ones((3, 4, 6))           # 3 heads, k = 6
    >>> project_rows(X, W).shape
    (2, 5, 3, 6)
    """
    B, L, d = X.shape
    R, _, k = W.shape
    return matmul(X.reshape(B * L, d), _stack(W)).reshape(B, L, R, k)


def _row_quadratic(X2, W):
    """``x_n^T W_r x_n`` for the flattened rows ``X2`` (N, d): shape (N, R)."""
    N, d = X2.shape
    R = W.shape[0]
    P = matmul(X2, _stack(W))
    if R == 1:
        # No size-one head axis: XLA then fuses the product and the row sum
        # into the matmul instead of copying X to a broadcast layout.
        return jnp.sum(P * X2, axis=-1, keepdims=True)
    return jnp.sum(P.reshape(N, R, d) * X2[:, None, :], axis=-1)


def _heads_first(a, B, L):
    """(B*L, R, ...) -> (B, R, L, ...)."""
    a = a.reshape((B, L) + a.shape[1:])
    return jnp.moveaxis(a, 1, 2)


def diag_scores(X, W):
    """``psi[b, r, l] = x_bl^T W_r x_bl``.

    Parameters
    ----------
    X : array, shape (B, L, d)
    W : array, shape (R, d, d)

    Returns
    -------
    array, shape (B, R, L)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.scores import diag_scores
    >>> X = jnp.array([[[1.0, 0.0], [1.0, 2.0], [0.0, 3.0]]])    # (1, 3, 2)
    >>> W = jnp.stack([jnp.eye(2), jnp.array([[0.0, 1.0], [0.0, 0.0]])])
    >>> np.asarray(diag_scores(X, W)).tolist()      # x^T W_r x per row and head
    [[[1.0, 5.0, 9.0], [0.0, 2.0, 0.0]]]
    """
    B, L, d = X.shape
    return _heads_first(_row_quadratic(X.reshape(B * L, d), W), B, L)


def lowrank_scores(X, L, M=None):
    """Scores of ``W = L L^T`` (``M`` None) or ``W = L M^T``, never forming W.

    The cost is ``O(B L d q)`` instead of ``O(B L d^2)``.

    Parameters
    ----------
    X : array, shape (B, L, d)
    L : array, shape (R, d, q)
    M : array, shape (R, d, q), optional

    Returns
    -------
    array, shape (B, R, L)

    Examples
    --------
    The scores equal those of the full matrix ``W = L L^T``:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.scores import diag_scores, lowrank_scores
    >>> rng = np.random.RandomState(0)
    >>> X = jnp.asarray(rng.randn(2, 7, 5), jnp.float32)
    >>> L = jnp.asarray(rng.randn(3, 5, 2), jnp.float32)       # 3 heads, rank 2
    >>> lowrank_scores(X, L).shape
    (2, 3, 7)
    >>> W = jnp.einsum("rdq,req->rde", L, L)
    >>> np.allclose(lowrank_scores(X, L), diag_scores(X, W), rtol=1e-4, atol=1e-4)
    True
    """
    B, Lr, d = X.shape
    R, _, q = L.shape
    X2 = X.reshape(B * Lr, d)
    if M is None:
        XL = matmul(X2, _stack(L)).reshape(B * Lr, R, q)
        psi = jnp.sum(XL * XL, axis=-1)
    else:
        # One matmul for both factors: (N, d) @ (d, 2 R q).
        XLM = matmul(X2, jnp.concatenate([_stack(L), _stack(M)], axis=1)).reshape(B * Lr, 2, R, q)
        psi = jnp.sum(XLM[:, 0] * XLM[:, 1], axis=-1)
    return _heads_first(psi, B, Lr)


def linear_scores(X, U):
    """``u_r^T x_bl`` for every row and head: the linear part of an affine score.

    Parameters
    ----------
    X : array, shape (B, L, d)
    U : array, shape (R, d)

    Returns
    -------
    array, shape (B, R, L)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.scores import linear_scores
    >>> X = jnp.array([[[1.0, 0.0], [1.0, 2.0], [0.0, 3.0]]])    # (1, 3, 2)
    >>> U = jnp.array([[1.0, 1.0], [0.0, -1.0]])                  # 2 heads
    >>> np.asarray(linear_scores(X, U)).tolist()
    [[[1.0, 3.0, 3.0], [0.0, -2.0, -3.0]]]
    """
    B, L, d = X.shape
    return _heads_first(matmul(X.reshape(B * L, d), U.T), B, L)


def diag_scores_and_values(X, V, W=None, L=None, M=None, U=None):
    """Scores ``x^T W_r x (+ u_r^T x)`` and value read-outs ``x^T V_r`` of every row and head.

    The model's whole row-level arithmetic, shaped for speed: one matmul for
    the scores (full ``W`` or the low-rank factors) and one thin matmul for
    the values and the linear score terms together, both on the flattened
    rows, no transposes of row-sized arrays.

    Parameters
    ----------
    X : array, shape (B, L, d)
    V : array, shape (R, d, t)
    W : array, shape (R, d, d), optional
        Full query-key matrices; else ``L`` (and ``M``) must be given.
    L, M : array, shape (R, d, q), optional
        Low-rank factors, ``W = L L^T`` or ``L M^T``.
    U : array, shape (R, d), optional
        Linear score terms (an affine score).

    Returns
    -------
    psi : array, shape (B, R, L)
    values : array, shape (B, R, L, t)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.scores import diag_scores, diag_scores_and_values
    >>> rng = np.random.RandomState(0)
    >>> X = jnp.asarray(rng.randn(2, 7, 5), jnp.float32)
    >>> W = jnp.asarray(rng.randn(3, 5, 5), jnp.float32)       # 3 heads
    >>> V = jnp.asarray(rng.randn(3, 5, 1), jnp.float32)       # one target
    >>> psi, values = diag_scores_and_values(X, V, W=W)
    >>> psi.shape, values.shape
    ((2, 3, 7), (2, 3, 7, 1))
    >>> np.allclose(psi, diag_scores(X, W), rtol=1e-4, atol=1e-4)
    True
    """
    B, Lr, d = X.shape
    R, _, t = V.shape
    X2 = X.reshape(B * Lr, d)
    # The linear score terms ride along in the values' thin matmul.
    VU = _stack(V) if U is None else jnp.concatenate([_stack(V), U.T], axis=1)
    if W is not None:
        psi, both = _quadratic_and_linear(X2, W, VU)
        psi = _heads_first(psi, B, Lr)
    else:
        psi = lowrank_scores(X, L, M)
        both = matmul(X2, VU)
    values = both[:, : R * t].reshape(B * Lr, R, t)
    if U is not None:
        psi = psi + _heads_first(both[:, R * t :], B, Lr)
    return psi, _heads_first(values, B, Lr)


@jax.custom_vjp
def _quadratic_and_linear(X2, W, VU):
    """``(x_n^T W_r x_n, x_n^T VU)`` for flattened rows ``X2`` (N, d): shapes (N, R) and (N, k).

    ``W`` (R, d, d) are the query-key matrices, ``VU`` (d, k) the value and
    linear-score columns side by side.  The custom gradient exists for
    speed, not for a different derivative: JAX's own backward pass runs two
    passes over the rows for ``W`` and ``VU`` (``X^T (g x)`` and the thin
    ``X^T g``); this one contracts ``X^T [g x, g_VU]`` in a single matmul, one
    read of the row-sized array fewer per step.
    """
    return _row_quadratic(X2, W), matmul(X2, VU)


def _quadratic_and_linear_fwd(X2, W, VU):
    return _quadratic_and_linear(X2, W, VU), (X2, W, VU)


def _quadratic_and_linear_bwd(res, cotangents):
    X2, W, VU = res
    g_psi, g_lin = cotangents  # (N, R), (N, k)
    N, d = X2.shape
    R = W.shape[0]
    g_rows = (g_psi[:, :, None] * X2[:, None, :]).reshape(N, R * d)
    grads = matmul(X2.T, jnp.concatenate([g_rows, g_lin], axis=1))  # (d, R*d + k)
    # d(x^T W x)/dx = (W + W^T) x.  Unused when X is data (the usual case):
    # XLA then drops it from the compiled step.
    sym = _stack(W + jnp.transpose(W, (0, 2, 1)))
    g_X = einsum("nr,nrd->nd", g_psi, matmul(X2, sym).reshape(N, R, d)) + matmul(g_lin, VU.T)
    g_W = jnp.transpose(grads[:, : R * d].reshape(d, R, d), (1, 0, 2))
    return g_X, g_W, grads[:, R * d :]


_quadratic_and_linear.defvjp(_quadratic_and_linear_fwd, _quadratic_and_linear_bwd)
