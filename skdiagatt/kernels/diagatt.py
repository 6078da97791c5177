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
from .scores import diag_scores, lowrank_scores, project_rows
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


def head_scores(params, frozen, X):
    """Diagonal scores ``psi`` of every head, temperature applied, shape (B, R, L)."""
    X = X * frozen["x_scale"]
    f = _whitened(params, frozen["S"])
    psi = diag_scores(X, f["W"]) if "W" in f else lowrank_scores(X, f["L"], f.get("M"))
    return psi * (frozen["inv_tau"] * jnp.exp(params["log_scale"]))[None, :, None]


def head_weights(params, frozen, X, where):
    """Attention weights ``kappa`` (B, R, L): softmax of the scores over real rows."""
    return masked_softmax(head_scores(params, frozen, X), where[:, None, :])


def _row_values(params, frozen, X):
    # (B, L, R, t) -> (B, R, L, t): the value read-out of every row for every
    # head; V too lives in whitened coordinates (S V is in use).
    V = jnp.einsum("ab,rbt->rat", frozen["S"], params["V"])
    X = X * frozen["x_scale"]
    return jnp.transpose(project_rows(X, V), (0, 2, 1, 3))


def diagatt_forward(params, frozen, X, where):
    """Prediction ``z = b + sum_r <X^T kappa_r, V_r>`` and the weights.

    Returns
    -------
    z : array, shape (B, t)
    kappa : array, shape (B, R, L)
    """
    kappa = head_weights(params, frozen, X, where)
    head_out = jnp.einsum("brl,brlt->brt", kappa, _row_values(params, frozen, X))
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
    log_kappa = masked_log_softmax(head_scores(params, frozen, X), mask)
    rows = _row_values(params, frozen, X)  # (B, R, L, t)
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
