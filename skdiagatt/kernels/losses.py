"""Log-likelihoods of the response given a linear predictor ``z``.

Every function broadcasts ``y`` against ``z``: the same response is scored
against one predictor per sample (the attention prediction) or one per row and
head (the experts of the latent-row objective).  Losses are their negatives.

Shapes: ``z`` (..., t); ``y`` broadcastable to it (targets for ``gaussian``,
0/1 labels of shape (..., 1) for ``bernoulli``, one-hot (..., C) for
``categorical``).  Each returns an array of shape (...): summed over ``t``.
"""

import jax
import jax.numpy as jnp

__all__ = [
    "gaussian_loglik", "bernoulli_loglik", "categorical_loglik", "LOGLIK", "ridge_penalty", "minibatch_objective",
]


def gaussian_loglik(y, z, log_sigma):
    """``sum_t log N(y_t; z_t, sigma_t^2)`` up to the constant ``-t/2 log(2 pi)``.

    Parameters
    ----------
    y : array, broadcastable to ``z``
        Targets.
    z : array, shape (..., t)
        Predicted means.
    log_sigma : array, shape (t,)
        Log standard deviations; zeros give ``-0.5 * ||y - z||^2``.

    Returns
    -------
    array, shape (...)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.losses import gaussian_loglik
    >>> y = jnp.array([[1.0], [3.0]])
    >>> z = jnp.array([[0.0], [1.0]])
    >>> np.asarray(gaussian_loglik(y, z, jnp.zeros(1))).tolist()
    [-0.5, -2.0]
    """
    r = (y - z) * jnp.exp(-log_sigma)
    return -0.5 * jnp.sum(r * r, axis=-1) - jnp.sum(log_sigma)


def bernoulli_loglik(y, z, log_sigma=None):
    """``y log s(z) + (1 - y) log(1 - s(z))`` with the logistic ``s``; ``t == 1``.

    Computed as ``y z - softplus(z)``, finite for logits of any size.

    Parameters
    ----------
    y : array, shape (..., 1)
        0/1 labels.
    z : array, shape (..., 1)
        Logits.
    log_sigma : ignored
        Accepted so that every family has the same signature.

    Returns
    -------
    array, shape (...)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.losses import bernoulli_loglik
    >>> out = bernoulli_loglik(jnp.array([[1.0], [0.0], [1.0]]), jnp.array([[0.0], [0.0], [-1e4]]))
    >>> np.round(np.asarray(out, dtype=float), 4).tolist()
    [-0.6931, -0.6931, -10000.0]
    """
    return jnp.sum(y * z - jax.nn.softplus(z), axis=-1)


def categorical_loglik(y, z, log_sigma=None):
    """``sum_c y_c log softmax(z)_c`` for one-hot ``y``.

    Parameters
    ----------
    y : array, shape (..., C)
        One-hot labels.
    z : array, shape (..., C)
        Class logits.
    log_sigma : ignored
        Accepted so that every family has the same signature.

    Returns
    -------
    array, shape (...)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.losses import categorical_loglik
    >>> y = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    >>> z = jnp.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1e4]])
    >>> np.round(np.asarray(categorical_loglik(y, z), dtype=float), 4).tolist()
    [-1.0986, 0.0]
    """
    return jnp.sum(y * jax.nn.log_softmax(z, axis=-1), axis=-1)


#: Response families by name, as the estimators pass them (static) to kernels.
LOGLIK = {
    "gaussian": gaussian_loglik,
    "bernoulli": bernoulli_loglik,
    "categorical": categorical_loglik,
}


def ridge_penalty(params, frozen, keys):
    """``alpha * sum_k ||params[k] - prior[k]||^2 + alpha_value * ||params["V"]||^2``.

    The score parameters ``keys`` share ``frozen["alpha"]``, the value read-out
    has its own ``frozen["alpha_value"]``; a key absent from ``params`` (fixed
    in this phase) is not penalized, nor is a missing strength.  The score
    parameters are shrunk towards ``frozen["prior"][k]`` where given (the
    training's start), else towards 0.

    Parameters
    ----------
    params : dict of arrays
    frozen : dict
    keys : tuple of str

    Returns
    -------
    scalar

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.kernels.losses import ridge_penalty
    >>> params = {"A": np.ones((2, 2)), "V": np.ones(3)}
    >>> round(float(ridge_penalty(params, {"alpha": 0.5, "alpha_value": 0.1}, ("A", "B"))), 6)
    2.3
    >>> prior = {"A": np.ones((2, 2))}                               # shrunk towards the start
    >>> round(float(ridge_penalty(params, {"alpha": 0.5, "alpha_value": 0.1, "prior": prior}, ("A",))), 6)
    0.3
    """
    pen = 0.0
    prior = frozen.get("prior", {})
    for key in keys:
        if key in params:
            delta = params[key] - prior[key] if key in prior else params[key]
            pen = pen + frozen.get("alpha", 0.0) * jnp.sum(delta**2)
    if "V" in params:
        pen = pen + frozen.get("alpha_value", 0.0) * jnp.sum(params["V"] ** 2)
    return pen


def minibatch_objective(objectives, penalty, params, frozen, batch, config):
    """Weighted mean per-sample objective of a minibatch plus the penalty: a model's ``fit_loop`` loss.

    Parameters
    ----------
    objectives : dict
        ``{name: objective(params, frozen, X, where, y, family)}``, each
        returning one loss per sample.
    penalty : callable
        ``penalty(params, frozen)``, of the trained parameters only.
    params : dict
        The trainable parameters; ``frozen`` supplies any model parameter
        that is not trained in this phase (they are merged, ``params`` first).
    frozen : dict
    batch : dict
        ``X``, ``where``, ``y`` and ``w``, the samples' weights (zero for the
        filler samples that complete a batch).
    config : tuple
        ``(objective, family)``, static: ``objective`` a key of ``objectives``.

    Returns
    -------
    scalar
        What ``fit_loop`` minimizes.

    Examples
    --------
    A filler sample (weight 0) does not count:

    >>> import jax.numpy as jnp
    >>> from skdiagatt.kernels.losses import minibatch_objective
    >>> def squared(params, frozen, X, where, y, family):
    ...     return (params["a"] * X[:, 0, 0] - y[:, 0]) ** 2
    >>> batch = {"X": jnp.ones((2, 1, 1)), "where": jnp.ones((2, 1), bool),
    ...          "y": jnp.array([[0.0], [5.0]]), "w": jnp.array([1.0, 0.0])}   # the 2nd is filler
    >>> float(minibatch_objective({"sq": squared}, lambda p, f: 0.5, {"a": 3.0}, {}, batch, ("sq", "gaussian")))
    9.5
    """
    objective, family = config
    merged = {**frozen, **params}
    per_sample = objectives[objective](merged, frozen, batch["X"], batch["where"], batch["y"], family)
    w = batch["w"]
    return jnp.sum(w * per_sample) / jnp.sum(w) + penalty(params, frozen)
