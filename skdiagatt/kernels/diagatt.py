"""The diagonalized-attention model (the DiagAtt paper, Sections 3.2 and 4) and its objectives.

Parameters (a dict pytree):

- ``W`` (R, d, d) query-key matrices, or low-rank ``L`` (R, d, q) with ``W = L L^T``,
  plus ``M`` (R, d, q) for ``W = L M^T``;
- ``U`` (R, d), optional: linear score terms, for the affine score
  ``x^T W_r x + u_r^T x`` (the log-likelihood ratio of two Gaussians with
  different means has this form; the quadratic form alone is even in x);
- ``log_scale`` (R,): a per-head log inverse temperature;
- ``V`` (R, d, t) value vectors, ``b`` (t,) intercept;
- ``log_sigma`` (t,): the noise scale of the latent-row objective (regression).

Fixed inputs (``frozen``): ``x_scale``, a scalar every row is multiplied by
first (keeps float32 scores in range whatever the input's magnitude); ``S``
(d, d), a symmetric preconditioner (the query-key matrix in use is ``S W S``,
so that an L2 penalty on ``W`` acts in whitened coordinates); and ``inv_tau``,
the inverse temperature.

Data: ``X`` (B, L, d) padded samples, ``where`` (B, L) real rows, ``y`` (B, t).
The objectives, the weights, the forward pass and the pooled rows also take
a packed minibatch: ``X`` (K, C, d) in blocks of C rows and ``where`` a
:class:`~skdiagatt.kernels.rows.PackedRows` (see :mod:`skdiagatt.kernels.rows`);
per-sample outputs are then (n, ...), per-row ones (K, R, C).
"""

import jax.numpy as jnp

from ._matmul import einsum, matmul
from .losses import LOGLIK, minibatch_objective, ridge_penalty
from .rows import per_block, row_log_softmax, row_logsumexp, row_softmax, row_total
from .scores import diag_scores, diag_scores_and_values, linear_scores, lowrank_scores

__all__ = [
    "query_key",
    "head_scores",
    "head_weights",
    "competing_scores",
    "diagatt_forward",
    "row_contributions",
    "pooled_rows",
    "latent_row_loss",
    "attention_loss",
    "penalty",
    "diagatt_loss",
]


def _whitened(params, S):
    # The matrices in use are S W S (or factors S L, S M): W lives in whitened
    # coordinates, where an isotropic penalty and Adam's steps make sense.
    if "W" in params:
        out = {"W": einsum("ab,rbc,cd->rad", S, params["W"], S)}
    else:
        out = {"L": einsum("ab,rbq->raq", S, params["L"])}
        if "M" in params:
            out["M"] = einsum("ab,rbq->raq", S, params["M"])
    if "U" in params:
        out["U"] = matmul(params["U"], S)
    return out


def query_key(params, S):
    """Effective query-key matrices ``S W_r S``, shape (R, d, d) (the quadratic part).

    Parameters
    ----------
    params : dict
        ``W`` (R, d, d) or low-rank ``L`` (and ``M``) (R, d, q).
    S : array, shape (d, d)
        The symmetric whitener.

    Returns
    -------
    array, shape (R, d, d)

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels.diagatt import query_key
    >>> L = np.arange(6, dtype=np.float32).reshape(1, 3, 2)            # rank 2
    >>> S = 2 * np.eye(3, dtype=np.float32)
    >>> np.allclose(query_key({"L": L}, S), 4 * L[0] @ L[0].T)
    True
    """
    f = _whitened(params, S)
    if "W" in f:
        return f["W"]
    return einsum("raq,rbq->rab", f["L"], f.get("M", f["L"]))


def _effective(params, frozen):
    """The matrices that act on the raw rows, constants folded in, and the score factors.

    The row scale ``c`` and the whitener ``S`` are folded into the small
    (d, d) or (d, q) matrices once per call, so that the row-sized arrays are
    touched only by the matmuls (no pass that rescales X): ``V_eff = c S V_r``;
    low rank ``L_eff = c S L_r`` (and ``M_eff = c S M_r``); full
    ``W_eff = c S W_r S`` with the second factor c applied to the scores.  One c
    on each side of the product keeps every intermediate near the size of the
    scaled rows, so rows of size 1e20 or 1e-20 neither overflow nor underflow
    float32.  The per-head inverse temperature ``s_r = inv_tau exp(log_scale_r)``
    multiplies the (B, R, L) scores: folded into ``W_eff`` it would make its
    gradient (the calibration phase trains ``log_scale`` with W fixed) cost
    the full ``X^T (g x)`` matmul instead of a sum over the scores.  Linear
    terms carry c once: ``U_eff = S u_r``, times c unless the factor has it.

    Returns
    -------
    mats : dict
        ``V`` and ``W`` or ``L`` (and ``M``), each (R, d, .), for
        :func:`~skdiagatt.kernels.scores.diag_scores_and_values`.
    factor : array, shape (R,)
        Multiplies the scores of each head.
    """
    S, c = frozen["S"], frozen["x_scale"]
    s = frozen["inv_tau"] * jnp.exp(params["log_scale"])  # (R,)
    f = _whitened(params, S)
    # A model without value vectors (the multiple-instance read-out) has scores only.
    mats = {"V": c * einsum("ab,rbt->rat", S, params["V"])} if "V" in params else {}
    if "W" in f:
        mats["W"] = c * f["W"]
        if "U" in f:
            mats["U"] = f["U"]
        return mats, c * s
    mats["L"] = c * f["L"]
    if "M" in f:
        mats["M"] = c * f["M"]
    if "U" in f:
        mats["U"] = c * f["U"]
    return mats, s


def _scores_values(params, frozen, X):
    """Scores ``psi`` (B, R, L), temperature applied, and row values (B, R, L, t)."""
    mats, factor = _effective(params, frozen)
    psi, rows = diag_scores_and_values(X, **mats)
    return psi * factor[None, :, None], rows


def head_scores(params, frozen, X):
    """Diagonal scores ``psi`` of every head, temperature applied, shape (B, R, L).

    Parameters
    ----------
    params : dict
    frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)

    Returns
    -------
    array, shape (B, R, L)

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels import diagatt as K
    >>> from skdiagatt.kernels._examples import diagatt_inputs
    >>> params, frozen, X, where, y = diagatt_inputs()   # R=2 heads, d=3; 4 samples padded to 5 rows
    >>> psi = K.head_scores(params, frozen, X)
    >>> psi.shape
    (4, 2, 5)
    >>> x = np.asarray(X[0, 2]); bool(np.isclose(psi[0, 1, 2], x @ params["W"][1] @ x, rtol=1e-4))
    True
    """
    mats, factor = _effective(params, frozen)
    if "W" in mats:
        psi = diag_scores(X, mats["W"])
    else:
        psi = lowrank_scores(X, mats["L"], mats.get("M"))
    if "U" in mats:
        psi = psi + linear_scores(X, mats["U"])
    return psi * factor[None, :, None]


def competing_scores(psi, where, frozen):
    """The scores whose softmax gives the attention weights, shape (B, R, L).

    Without ``frozen["exclusion"]`` (or with one head) this is ``psi`` itself:
    each head takes a softmax of its own scores.  With it (a strength lambda)
    the heads compete for rows: ``psi_r + lambda sum_{l != r} log(1 -
    softmax(psi_l))``.  When every sample's rows of interest are
    distinct, the posterior that head r's row is j carries the factor
    ``P(no other head's row is j)``; this is one mean-field step towards it.
    Without it a head whose score also rewards another head's row (a large
    quadratic term picks up a high-variance row) keeps some weight there.

    Parameters
    ----------
    psi : array, shape (B, R, L)
    where : bool array, shape (B, L)
    frozen : dict
        ``exclusion`` (scalar), optional.

    Returns
    -------
    array, shape (B, R, L)
        Padded rows are left to the masked softmax that follows.

    Examples
    --------
    Two heads that both prefer row 0: with exclusion, head 1, which prefers
    it less, gives row 0 less weight.

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels import diagatt as K
    >>> psi = jnp.array([[[4.0, 0.0, 0.0], [2.0, 1.0, 0.0]]])
    >>> where = jnp.array([[True, True, True]])
    >>> K.competing_scores(psi, where, {}) is psi
    True
    >>> plain = K.row_softmax(psi, where)
    >>> excl = K.row_softmax(K.competing_scores(psi, where, {"exclusion": 1.0}), where)
    >>> bool(excl[0, 1, 0] < plain[0, 1, 0]), np.allclose(excl.sum(-1), 1.0)
    (True, True)
    """
    if "exclusion" not in frozen or psi.shape[1] == 1:
        return psi
    log_kappa = row_log_softmax(psi, where)
    # log(1 - kappa), floored: a head sure of a row (kappa -> 1) must not
    # send -inf (and an infinite gradient) to the other heads.
    free = jnp.log(jnp.maximum(-jnp.expm1(log_kappa), 1e-6))
    others = jnp.sum(free, axis=1, keepdims=True) - free
    return psi + frozen["exclusion"] * others


def head_weights(params, frozen, X, where):
    """Attention weights ``kappa`` (B, R, L): softmax of the scores over real rows.

    Parameters
    ----------
    params, frozen : dict
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
        The real rows.

    Returns
    -------
    array, shape (B, R, L)
        Zero on padded rows; sums to one over each sample's real rows.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels import diagatt as K
    >>> from skdiagatt.kernels._examples import diagatt_inputs
    >>> params, frozen, X, where, y = diagatt_inputs()   # R=2 heads, d=3; 4 samples padded to 5 rows
    >>> kappa = K.head_weights(params, frozen, X, where)
    >>> np.allclose(kappa.sum(axis=-1), 1.0), float(kappa[2, :, 1:].max())
    (True, 0.0)
    """
    psi = competing_scores(head_scores(params, frozen, X), where, frozen)
    return row_softmax(psi, where)


def diagatt_forward(params, frozen, X, where):
    """Prediction ``z = b + sum_r <X^T kappa_r, V_r>`` and the weights.

    Parameters
    ----------
    params, frozen : dict
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)

    Returns
    -------
    z : array, shape (B, t)
    kappa : array, shape (B, R, L)

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels import diagatt as K
    >>> from skdiagatt.kernels._examples import diagatt_inputs
    >>> params, frozen, X, where, y = diagatt_inputs()   # R=2 heads, d=3; 4 samples padded to 5 rows
    >>> z, kappa = K.diagatt_forward(params, frozen, X, where)
    >>> z.shape, kappa.shape
    ((4, 1), (4, 2, 5))
    >>> x = np.asarray(X[1, :3])                   # sample 1: its 3 real rows
    >>> ref = sum(np.asarray(kappa[1, r, :3]) @ x @ params["V"][r] for r in range(2))
    >>> np.allclose(z[1], ref, rtol=1e-4, atol=1e-5)
    True
    """
    kappa, rows = _weights_and_values(params, frozen, X, where)
    head_out = row_total(einsum("brl,brlt->brt", kappa, rows), where)
    return params["b"] + jnp.sum(head_out, axis=1), kappa


def _weights_and_values(params, frozen, X, where):
    """Attention weights (B, R, L) and row read-outs ``x_l V_r`` (B, R, L, t)."""
    psi, rows = _scores_values(params, frozen, X)
    return row_softmax(competing_scores(psi, where, frozen), where), rows


def row_contributions(params, frozen, X, where):
    """Each row's term ``kappa_rl x_l V_r`` of the prediction, shape (B, R, L, t).

    The prediction of :func:`diagatt_forward` is linear in the rows once the
    weights are fixed: ``z = b + sum_{r, l} contributions[:, r, l]``.  Padded
    rows contribute 0.  A row can have a large weight and a small term (its
    read-out is near 0), or the reverse; the term is what the row adds to
    the output, with its sign.

    Parameters
    ----------
    params, frozen, X, where
        As for :func:`diagatt_forward`.

    Returns
    -------
    array, shape (B, R, L, t)

    Examples
    --------
    One head, rows (1, 0) and (0, 2), value vector (1, -1): uniform weights
    (``W = 0``) halve each row's read-out.

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.diagatt import diagatt_forward, row_contributions
    >>> params = {"W": np.zeros((1, 2, 2), np.float32), "V": np.array([[[1.0], [-1.0]]], np.float32),
    ...           "b": np.array([2.0], np.float32), "log_scale": np.zeros(1, np.float32)}
    >>> frozen = {"S": np.eye(2, dtype=np.float32), "x_scale": np.float32(1.0), "inv_tau": np.float32(1.0)}
    >>> X, where = jnp.array([[[1.0, 0.0], [0.0, 2.0]]]), jnp.ones((1, 2), bool)
    >>> c = row_contributions(params, frozen, X, where)
    >>> np.asarray(c)[0, 0, :, 0].tolist()
    [0.5, -1.0]
    >>> z, _ = diagatt_forward(params, frozen, X, where)        # b + the terms
    >>> float(z[0, 0])
    1.5
    """
    kappa, rows = _weights_and_values(params, frozen, X, where)
    return kappa[..., None] * rows



def pooled_rows(params, frozen, X, where):
    """Each head's attention-pooled row in the coordinates of ``V``, shape (B, R, d).

    ``H_r = c S X^T kappa_r``, so that the prediction of
    :func:`diagatt_forward` is ``z = b + sum_r <H_r, V_r>``: linear in the
    read-out ``(V, b)`` once the weights are fixed (see
    :mod:`skdiagatt.kernels.glm`).

    Parameters
    ----------
    params, frozen, X, where
        As for :func:`diagatt_forward`.

    Returns
    -------
    array, shape (B, R, d)

    Examples
    --------
    One head with scores ``x^T x`` on rows (1, 0) and (0, 3), weights
    ``softmax(1, 9)``, rows scaled by ``c = 2``:

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.diagatt import diagatt_forward, pooled_rows
    >>> params = {"W": np.eye(2, dtype=np.float32)[None], "V": np.ones((1, 2, 1), np.float32),
    ...           "b": np.zeros(1, np.float32), "log_scale": np.zeros(1, np.float32)}
    >>> frozen = {"S": np.eye(2, dtype=np.float32), "x_scale": np.float32(2.0), "inv_tau": np.float32(0.5)}
    >>> X, where = jnp.array([[[1.0, 0.0], [0.0, 3.0]]]), jnp.ones((1, 2), bool)
    >>> H = pooled_rows(params, frozen, X, where)                  # (1, 1, 2)
    >>> k = np.exp([2.0, 18.0]) / np.exp([2.0, 18.0]).sum()       # c^2 x^T x * inv_tau
    >>> bool(np.allclose(H[0, 0], 2.0 * np.array([k[0], 3 * k[1]]), rtol=1e-5))
    True
    >>> z, _ = diagatt_forward(params, frozen, X, where)           # z = b + <H, V>
    >>> bool(np.allclose(z[0, 0], H.sum(), rtol=1e-5))
    True
    """
    kappa = head_weights(params, frozen, X, where)
    pooled = row_total(einsum("brl,bld->brd", kappa, X), where)
    # S is symmetric: (c S X^T kappa_r)^T = c (X^T kappa_r)^T S.
    return frozen["x_scale"] * matmul(pooled, frozen["S"])

def latent_row_loss(params, frozen, X, where, y, family):
    """Negative log-likelihood of the latent-row (mixture-of-experts) view, per sample.

    Head r picks one row ``j ~ kappa_r``; given the pick, the response follows
    ``family`` with predictor ``b + x_j V_r + sum_{l != r} <X^T kappa_l, V_l>``
    (the other heads at their attention average).  With one head this is the
    exact likelihood of the simulator of the DiagAtt paper, whose posterior over the
    active row is a softmax of a quadratic score: DiagAtt is then the Bayes
    predictor.  Its gradient in ``W`` weighs rows by their *responsibility*
    ``P(row j | X, y)`` minus ``kappa``, a far stronger signal early in
    training than the squared loss of the averaged prediction.

    Parameters
    ----------
    params, frozen : dict
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    y : array, shape (B, t)
    family : {"gaussian", "bernoulli", "categorical"}

    Returns
    -------
    array, shape (B,)

    Examples
    --------
    With one row per sample there is nothing to pick: the loss is the
    response's plain negative log-likelihood at that row's read-out.

    >>> import numpy as np
    >>> from skdiagatt.kernels import diagatt as K
    >>> from skdiagatt.kernels._examples import diagatt_inputs
    >>> params, frozen, X, where, y = diagatt_inputs()   # R=2 heads, d=3; 4 samples padded to 5 rows
    >>> one = {**params, "V": params["V"][:1], "W": params["W"][:1], "log_scale": params["log_scale"][:1]}
    >>> nll = K.latent_row_loss(one, frozen, X[:, :1], where[:, :1], y, "gaussian")
    >>> z = X[:, 0] @ params["V"][0]
    >>> np.allclose(nll, 0.5 * (y - z)[:, 0] ** 2, atol=1e-5)   # log_sigma = 0
    True
    """
    psi, rows = _scores_values(params, frozen, X)  # (B, R, L), (B, R, L, t)
    log_kappa = row_log_softmax(competing_scores(psi, where, frozen), where)
    head_out = row_total(einsum("brl,brlt->brt", jnp.exp(log_kappa), rows), where)
    others = jnp.sum(head_out, axis=1, keepdims=True) - head_out  # (B, R, t)
    z = params["b"] + per_block(others, where)[:, :, None, :] + rows
    ll = LOGLIK[family](per_block(y, where)[:, None, None, :], z, params["log_sigma"])
    per_head = row_logsumexp(log_kappa + ll, where)  # (B, R)
    return -jnp.mean(per_head, axis=1)


def attention_loss(params, frozen, X, where, y, family):
    """Negative log-likelihood of the attention prediction (the paper's objective), per sample.

    For ``gaussian`` this is half the squared error: ``log_sigma`` is not used.

    Parameters
    ----------
    params, frozen : dict
    X : array, shape (B, L, d)
    where : bool array, shape (B, L)
    y : array, shape (B, t)
    family : {"gaussian", "bernoulli", "categorical"}

    Returns
    -------
    array, shape (B,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels import diagatt as K
    >>> from skdiagatt.kernels._examples import diagatt_inputs
    >>> params, frozen, X, where, y = diagatt_inputs()   # R=2 heads, d=3; 4 samples padded to 5 rows
    >>> z, _ = K.diagatt_forward(params, frozen, X, where)
    >>> np.allclose(K.attention_loss(params, frozen, X, where, y, "gaussian"),
    ...             0.5 * ((y - z) ** 2)[:, 0], atol=1e-5)
    True
    """
    z, _ = diagatt_forward(params, frozen, X, where)
    return -LOGLIK[family](y, z, jnp.zeros(z.shape[-1], z.dtype))


def penalty(params, frozen):
    """``alpha * (||W||^2 + ||U||^2) + alpha_value * ||V||^2`` (whitened coordinates).

    ``W`` stands for the low-rank factors when those are the parameters.

    Parameters
    ----------
    params : dict
        Only the trained parameters: a frozen ``W`` is not penalized.
    frozen : dict
        ``alpha`` and ``alpha_value`` (0 when absent).

    Returns
    -------
    scalar

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels.diagatt import penalty
    >>> params = {"W": np.ones((1, 2, 2)), "U": np.ones((1, 2)), "V": np.ones((1, 2, 1))}
    >>> round(float(penalty(params, {"alpha": 0.5, "alpha_value": 0.1})), 6)   # 0.5 * (4 + 2) + 0.1 * 2
    3.2
    """
    return ridge_penalty(params, frozen, ("W", "L", "M", "U"))


_OBJECTIVES = {"latent": latent_row_loss, "attention": attention_loss}


def diagatt_loss(params, frozen, batch, config):
    """Weighted mean objective of a minibatch plus the penalty.

    Parameters
    ----------
    params : dict
        The trainable parameters; ``frozen`` supplies any model parameter that is
        not trained in this phase (they are merged, ``params`` first).
    frozen : dict
    batch : dict
        ``X`` (B, L, d), ``where`` (B, L), ``y`` (B, t), ``w`` (B,) sample weights
        (zero for the filler samples that complete a batch).
    config : tuple
        ``(objective, family)``, static: ``objective`` in ``{"latent", "attention"}``.

    Returns
    -------
    scalar

    Examples
    --------
    Filler samples (weight 0) change nothing:

    >>> import numpy as np
    >>> from skdiagatt.kernels import diagatt as K
    >>> from skdiagatt.kernels._examples import diagatt_inputs
    >>> params, frozen, X, where, y = diagatt_inputs()   # R=2 heads, d=3; 4 samples padded to 5 rows
    >>> batch = {"X": X, "where": where, "y": y, "w": np.array([1.0, 1.0, 1.0, 0.0], np.float32)}
    >>> full = K.diagatt_loss(params, frozen, batch, ("latent", "gaussian"))
    >>> first3 = {k: v[:3] for k, v in batch.items()}
    >>> bool(np.isclose(full, K.diagatt_loss(params, frozen, first3, ("latent", "gaussian")), rtol=1e-5))
    True
    """
    return minibatch_objective(_OBJECTIVES, penalty, params, frozen, batch, config)
