"""The multiple-instance read-out of diagonalized attention: evidence only for the positive class.

Each head r scores every instance (row) of a bag with the DiagAtt score
``psi_rl = s_r (x_l^T W_r x_l + u_r^T x_l)`` (:func:`~skdiagatt.kernels.diagatt.head_scores`).
Its *presence* logit pools those scores by the smooth maximum of sharpness
``rho = frozen["sharpness"]``,

    ``g_r = b_r + M_rho(psi_r)``,  ``M_rho(psi) = (1 / rho) log( (1 / L) sum_l exp(rho psi_l) )``,

``sigmoid(g_r)`` the probability that the bag holds head r's concept, and
the bag is positive when it holds every concept:
``P(y = 1) = prod_r sigmoid(g_r)``.  ``M_rho`` runs from the mean of the
scores (``rho = 0``: every instance counts, the collective assumption of
multiple-instance learning) to their maximum (``rho -> infinity``: one
instance decides, the standard assumption; Foulds & Frank, Knowledge
Engineering Review 25, 2010); at any ``rho`` it lies between the two and
grows with every score.  With R heads a positive bag needs evidence of each
of R concepts (the presence-based assumption).  A sum of the heads' ``g_r``
would not do: one very typical instance of a concept would then stand in for
a missing other.

The attention weights ``kappa_r = softmax(rho psi_r)`` are the gradient of
``g_r`` in the scores: the instances head r's evidence comes from (uniform at
``rho = 0``).

Parameters (a dict pytree): those of :mod:`skdiagatt.kernels.diagatt`
without the value vectors ``V`` and ``log_sigma``: ``W`` (R, d, d) or ``L``
(and ``M``) (R, d, q), optional ``U`` (R, d), ``log_scale`` (R,), and the
heads' offsets ``b`` (R,).  ``frozen`` as there, plus ``sharpness`` (scalar,
``rho >= 0``; 1 when absent).  Data: ``X`` (B, L, d) padded bags with
``where`` (B, L), or packed blocks (:mod:`skdiagatt.kernels.rows`); labels
``y`` (B, 1) in {0, 1}.
"""

import jax
import jax.numpy as jnp

from .diagatt import head_scores, penalty
from .losses import bernoulli_loglik
from .rows import row_logsumexp, row_softmax, row_total

__all__ = ["presence_logits", "bag_logit", "mil_forward", "mil_logit", "mil_loss"]


def presence_logits(params, frozen, X, where):
    """Each head's presence logit ``g_r = b_r + M_rho(psi_r)`` and the attention weights.

    Parameters
    ----------
    params, frozen : dict
        See the module docstring.
    X : array, shape (B, L, d)
    where : bool array, shape (B, L), or PackedRows

    Returns
    -------
    g : array, shape (B, R)
    kappa : array, shape (B, R, L)
        ``softmax(rho psi_r)`` over each bag's real instances.

    Examples
    --------
    One head scoring ``u^T x`` with ``u = (1, 0)``: ``g`` is ``b`` plus the
    smooth maximum of the instances' first coordinates, between their mean
    and their maximum, and the mean itself at ``rho = 0``.

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.mil import presence_logits
    >>> params = {"W": np.zeros((1, 2, 2), np.float32), "U": np.array([[1.0, 0.0]], np.float32),
    ...           "b": np.array([-1.0], np.float32), "log_scale": np.zeros(1, np.float32)}
    >>> frozen = {"S": np.eye(2, dtype=np.float32), "x_scale": np.float32(1.0), "inv_tau": np.float32(1.0)}
    >>> X = jnp.array([[[2.0, 5.0], [0.0, -5.0], [-9.0, 0.0]]] * 2)
    >>> where = jnp.array([[True, True, False], [True, True, True]])
    >>> g, kappa = presence_logits(params, frozen, X, where)
    >>> bool(np.isclose(g[0, 0], -1.0 + np.log((np.exp(2.0) + 1.0) / 2), rtol=1e-5))
    True
    >>> g0, kappa0 = presence_logits(params, {**frozen, "sharpness": 0.0}, X, where)
    >>> np.allclose(g0[:, 0], [-1.0 + 1.0, -1.0 - 7.0 / 3]), np.allclose(kappa0[1, 0], 1 / 3)
    (True, True)
    """
    psi = head_scores(params, frozen, X)
    rho = jnp.asarray(frozen.get("sharpness", 1.0), psi.dtype)
    # Both branches are computed and one is kept, so the other must stay
    # finite: rho = 0 divides by a stand-in 1.
    safe = jnp.where(rho > 0, rho, 1.0)
    log_count = row_logsumexp(jnp.zeros_like(psi), where)
    smooth = (row_logsumexp(safe * psi, where) - log_count) / safe
    kappa = row_softmax(rho * psi, where)
    mean = row_total(jnp.sum(kappa * psi, axis=-1), where)  # kappa is uniform at rho = 0
    return params["b"] + jnp.where(rho > 0, smooth, mean), kappa


def bag_logit(g):
    """The logit of ``P(y = 1) = prod_r sigmoid(g_r)``, shape (B, 1), from ``g`` (B, R).

    ``log P(y = 1) - log P(y = 0)``, formed without cancellation; with one
    head it is ``g`` itself.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.mil import bag_logit
    >>> np.allclose(bag_logit(jnp.array([[1.5], [-30.0]]))[:, 0], [1.5, -30.0], rtol=1e-6)
    True
    >>> p = 1 / (1 + np.exp(-2.0)) ** 2                          # two heads at g = 2
    >>> bool(np.isclose(bag_logit(jnp.array([[2.0, 2.0]]))[0, 0], np.log(p / (1 - p)), rtol=1e-5))
    True
    """
    log_p1 = -jnp.sum(jax.nn.softplus(-g), axis=1, keepdims=True)
    # log(1 - exp(a)) for a < 0: two forms, each accurate on its side of -log 2;
    # a is kept below 0 so that a certain bag keeps a finite logit and gradient.
    a = jnp.minimum(log_p1, -1e-30)
    # Each form gets an input clamped to its side: the unused one must stay
    # finite, or its infinite gradient turns the selected one's into NaN.
    near = jnp.log(-jnp.expm1(jnp.maximum(a, -0.6931472)))
    far = jnp.log1p(-jnp.exp(jnp.minimum(a, -0.6931472)))
    log_p0 = jnp.where(a > -0.6931472, near, far)
    return log_p1 - log_p0


def mil_forward(params, frozen, X, where):
    """Bag logits (B, 1) of ``P(y = 1) = prod_r sigmoid(g_r)`` and the attention weights (B, R, L).

    Parameters
    ----------
    params, frozen, X, where
        As for :func:`presence_logits`.

    Returns
    -------
    z : array, shape (B, 1)
    kappa : array, shape (B, R, L)

    Examples
    --------
    Two heads, one per coordinate: the bag needs a high first coordinate
    *and* a high second one, in any instances.

    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.mil import mil_forward
    >>> params = {"W": np.zeros((2, 2, 2), np.float32), "U": 5 * np.eye(2, dtype=np.float32),
    ...           "b": np.full(2, -10.0, np.float32), "log_scale": np.zeros(2, np.float32)}
    >>> frozen = {"S": np.eye(2, dtype=np.float32), "x_scale": np.float32(1.0), "inv_tau": np.float32(1.0)}
    >>> both = [[3.0, 0.0], [0.0, 3.0]]; one = [[3.0, 0.0], [3.0, 0.0]]
    >>> z, _ = mil_forward(params, frozen, jnp.array([both, one]), jnp.ones((2, 2), bool))
    >>> (np.asarray(z[:, 0]) > 0).tolist()
    [True, False]
    """
    g, kappa = presence_logits(params, frozen, X, where)
    return bag_logit(g), kappa


def mil_logit(params, frozen, X, where):
    """The bag logits of :func:`mil_forward` alone, shape (B, 1).

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.mil import mil_logit
    >>> params = {"W": np.zeros((1, 2, 2), np.float32), "U": np.zeros((1, 2), np.float32),
    ...           "b": np.full(1, 0.5, np.float32), "log_scale": np.zeros(1, np.float32)}
    >>> frozen = {"S": np.eye(2, dtype=np.float32), "x_scale": np.float32(1.0), "inv_tau": np.float32(1.0)}
    >>> z = mil_logit(params, frozen, jnp.ones((1, 4, 2)), jnp.ones((1, 4), bool))
    >>> bool(np.isclose(z[0, 0], 0.5))                         # four instances scoring 0: the offset
    True
    """
    return mil_forward(params, frozen, X, where)[0]


def mil_loss(params, frozen, batch, config):
    """Weighted mean logistic loss of the bag logits plus the score penalty.

    Parameters
    ----------
    params : dict
        The trainable parameters; ``frozen`` supplies the others (merged,
        ``params`` first).
    frozen : dict
    batch : dict
        ``X``, ``where``, ``y`` (B, 1) 0/1 labels, ``w`` (B,) sample weights.
    config : tuple
        ``(objective, family)``, static, for the signature the training loop
        calls every objective with: there are no latent rows here, so every
        phase minimizes the same loss; ``family`` must be "bernoulli".

    Returns
    -------
    scalar

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.mil import mil_loss
    >>> params = {"W": np.zeros((1, 2, 2), np.float32), "U": np.zeros((1, 2), np.float32),
    ...           "b": np.zeros(1, np.float32), "log_scale": np.zeros(1, np.float32)}
    >>> frozen = {"S": np.eye(2, dtype=np.float32), "x_scale": np.float32(1.0),
    ...           "inv_tau": np.float32(1.0), "alpha": np.float32(0.0)}
    >>> batch = {"X": jnp.ones((2, 2, 2)), "where": jnp.ones((2, 2), bool),
    ...          "y": jnp.array([[1.0], [0.0]]), "w": jnp.ones(2)}
    >>> round(float(mil_loss(params, frozen, batch, ("latent", "bernoulli"))), 4)  # z = 0: log 2
    0.6931
    """
    _, family = config
    if family != "bernoulli":
        raise ValueError(f"the multiple-instance read-out needs binary labels, got {family!r}")
    merged = {**frozen, **params}
    z, _ = mil_forward(merged, frozen, batch["X"], batch["where"])
    nll = -bernoulli_loglik(batch["y"], z)
    w = batch["w"]
    return jnp.sum(w * nll) / jnp.sum(w) + penalty(params, frozen)
