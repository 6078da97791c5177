"""The diagonalized-attention model (paper 000, Sections 3.2 and 4) and its objectives.

Parameters (a dict pytree):

- ``W`` (R, d, d) query-key matrices, or low-rank ``L`` (R, d, q) with ``W = L L^T``,
  plus ``M`` (R, d, q) for ``W = L M^T``;
- ``log_scale`` (R,): a per-head log inverse temperature;
- ``V`` (R, d, t) value vectors, ``b`` (t,) intercept;
- ``log_sigma`` (t,): the noise scale of the latent-row objective (regression).

Fixed inputs (``frozen``): ``x_scale``, a scalar every row is multiplied by
first (keeps float32 scores in range whatever the input's magnitude); ``S``
(d, d), a symmetric preconditioner (the query-key matrix in use is ``S W S``,
so that an L2 penalty on ``W`` acts in whitened coordinates); and ``inv_tau``,
the inverse temperature.

Data: ``X`` (B, L, d) padded samples, ``where`` (B, L) real rows, ``y`` (B, t).
"""

import jax
import jax.numpy as jnp

from .losses import LOGLIK
from .scores import diag_scores, diag_scores_and_values, lowrank_scores
from .softmax import masked_log_softmax, masked_logsumexp, masked_softmax

__all__ = [
    "query_key",
    "head_scores",
    "head_weights",
    "diagatt_forward",
    "latent_row_loss",
    "attention_loss",
    "penalty",
    "diagatt_loss",
]


def _whitened(params, S):
    # The matrices in use are S W S (or factors S L, S M): W lives in whitened
    # coordinates, where an isotropic penalty and Adam's steps make sense.
    if "W" in params:
        return {"W": jnp.einsum("ab,rbc,cd->rad", S, params["W"], S)}
    out = {"L": jnp.einsum("ab,rbq->raq", S, params["L"])}
    if "M" in params:
        out["M"] = jnp.einsum("ab,rbq->raq", S, params["M"])
    return out


def query_key(params, S):
    """Effective query-key matrices ``S W_r S``, shape (R, d, d)."""
    f = _whitened(params, S)
    if "W" in f:
        return f["W"]
    return jnp.einsum("raq,rbq->rab", f["L"], f.get("M", f["L"]))


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
    the full ``X^T (g x)`` matmul instead of a sum over the scores.

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
    mats = {"V": c * jnp.einsum("ab,rbt->rat", S, params["V"])}
    if "W" in f:
        mats["W"] = c * f["W"]
        return mats, c * s
    mats["L"] = c * f["L"]
    if "M" in f:
        mats["M"] = c * f["M"]
    return mats, s


def _scores_values(params, frozen, X):
    """Scores ``psi`` (B, R, L), temperature applied, and row values (B, R, L, t)."""
    mats, factor = _effective(params, frozen)
    psi, rows = diag_scores_and_values(X, **mats)
    return psi * factor[None, :, None], rows


def head_scores(params, frozen, X):
    """Diagonal scores ``psi`` of every head, temperature applied, shape (B, R, L)."""
    mats, factor = _effective(params, frozen)
    if "W" in mats:
        psi = diag_scores(X, mats["W"])
    else:
        psi = lowrank_scores(X, mats["L"], mats.get("M"))
    return psi * factor[None, :, None]


def head_weights(params, frozen, X, where):
    """Attention weights ``kappa`` (B, R, L): softmax of the scores over real rows."""
    return masked_softmax(head_scores(params, frozen, X), where[:, None, :])


def diagatt_forward(params, frozen, X, where):
    """Prediction ``z = b + sum_r <X^T kappa_r, V_r>`` and the weights.

    Returns
    -------
    z : array, shape (B, t)
    kappa : array, shape (B, R, L)
    """
    psi, rows = _scores_values(params, frozen, X)
    kappa = masked_softmax(psi, where[:, None, :])
    head_out = jnp.einsum("brl,brlt->brt", kappa, rows)
    return params["b"] + jnp.sum(head_out, axis=1), kappa


def latent_row_loss(params, frozen, X, where, y, family):
    """Negative log-likelihood of the latent-row (mixture-of-experts) view, per sample.

    Head r picks one row ``j ~ kappa_r``; given the pick, the response follows
    ``family`` with predictor ``b + x_j V_r + sum_{l != r} <X^T kappa_l, V_l>``
    (the other heads at their attention average).  With one head this is the
    exact likelihood of the simulator of paper 000, whose posterior over the
    active row is a softmax of a quadratic score: DiagAtt is then the Bayes
    predictor.  Its gradient in ``W`` weighs rows by their *responsibility*
    ``P(row j | X, y)`` minus ``kappa``, a far stronger signal early in
    training than the squared loss of the averaged prediction.

    Returns
    -------
    array, shape (B,)
    """
    mask = where[:, None, :]
    psi, rows = _scores_values(params, frozen, X)  # (B, R, L), (B, R, L, t)
    log_kappa = masked_log_softmax(psi, mask)
    head_out = jnp.einsum("brl,brlt->brt", jnp.exp(log_kappa), rows)
    others = jnp.sum(head_out, axis=1, keepdims=True) - head_out  # (B, R, t)
    z = params["b"] + others[:, :, None, :] + rows
    ll = LOGLIK[family](y[:, None, None, :], z, params["log_sigma"])
    per_head = masked_logsumexp(log_kappa + ll, mask)  # (B, R)
    return -jnp.mean(per_head, axis=1)


def attention_loss(params, frozen, X, where, y, family):
    """Negative log-likelihood of the attention prediction (the paper's objective), per sample.

    For ``gaussian`` this is half the squared error: ``log_sigma`` is not used.

    Returns
    -------
    array, shape (B,)
    """
    z, _ = diagatt_forward(params, frozen, X, where)
    return -LOGLIK[family](y, z, jnp.zeros(z.shape[-1], z.dtype))


def penalty(params, frozen):
    """``alpha * ||W||^2 + alpha_value * ||V||^2`` (W or its factors, whitened coordinates)."""
    pen = 0.0
    for key in ("W", "L", "M"):
        if key in params:
            pen = pen + frozen.get("alpha", 0.0) * jnp.sum(params[key] ** 2)
    if "V" in params:
        pen = pen + frozen.get("alpha_value", 0.0) * jnp.sum(params["V"] ** 2)
    return pen


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
    """
    objective, family = config
    merged = {**frozen, **params}
    per_sample = _OBJECTIVES[objective](
        merged, frozen, batch["X"], batch["where"], batch["y"], family
    )
    w = batch["w"]
    return jnp.sum(w * per_sample) / jnp.sum(w) + penalty(params, frozen)
