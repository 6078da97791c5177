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

__all__ = ["gaussian_loglik", "bernoulli_loglik", "categorical_loglik", "LOGLIK"]


def gaussian_loglik(y, z, log_sigma):
    """``sum_t log N(y_t; z_t, sigma_t^2)`` up to the constant ``-t/2 log(2 pi)``.

    ``log_sigma`` has shape (t,); zeros give ``-0.5 * ||y - z||^2``.
    """
    r = (y - z) * jnp.exp(-log_sigma)
    return -0.5 * jnp.sum(r * r, axis=-1) - jnp.sum(log_sigma)


def bernoulli_loglik(y, z, log_sigma=None):
    """``y log s(z) + (1 - y) log(1 - s(z))`` with the logistic ``s``; ``t == 1``."""
    return jnp.sum(y * z - jax.nn.softplus(z), axis=-1)


def categorical_loglik(y, z, log_sigma=None):
    """``sum_c y_c log softmax(z)_c`` for one-hot ``y``."""
    return jnp.sum(y * jax.nn.log_softmax(z, axis=-1), axis=-1)


#: Response families by name, as the estimators pass them (static) to kernels.
LOGLIK = {
    "gaussian": gaussian_loglik,
    "bernoulli": bernoulli_loglik,
    "categorical": categorical_loglik,
}
