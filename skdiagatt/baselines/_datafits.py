"""The losses of the NumPy group-lasso solver, one per target family, named as the kernels name them.

Each datafit is the negative log-likelihood of one family of
:mod:`skdiagatt.kernels.losses` in the linear predictor ``z`` (n, t), up to
terms free of ``z``, for targets ``Y`` (n, t) as the estimators encode them:

- ``"gaussian"``:    ``1/2 ||y - z||^2``         (y real, t >= 1; unit variance);
- ``"bernoulli"``:   ``log(1 + e^z) - y z``      (y in {0, 1}, t = 1);
- ``"categorical"``: ``logsumexp(z) - <y, z>``   (y one-hot, t = C).

A datafit gives each sample's loss, its derivative in ``z``, the constant
predictor that minimizes the mean loss (the intercept when every
coefficient is zero), and the curvature bound that a proximal-gradient step
needs (the Lipschitz constant of the gradient in ``z``).  As in skglm, the
solver asks these four things and knows nothing else about the loss.
"""

import numpy as np
from scipy.special import expit, logsumexp, softmax

__all__ = ["DATAFITS", "Quadratic", "Logistic", "Multinomial"]


class Quadratic:
    """The Gaussian family: half the squared error."""

    curvature = 1.0

    @staticmethod
    def value(z, Y):
        """Each sample's loss, shape (n,)."""
        r = z - Y
        return 0.5 * np.sum(r * r, axis=1)

    @staticmethod
    def gradient(z, Y):
        """The derivative of each sample's loss in ``z``, shape (n, t)."""
        return z - Y

    @staticmethod
    def intercept(m):
        """The constant predictor of least mean loss, given the targets' mean ``m`` (t,)."""
        return m


class Logistic:
    """The Bernoulli family: the logistic loss of one logit."""

    curvature = 0.25

    @staticmethod
    def value(z, Y):
        return np.sum(np.logaddexp(0.0, z) - Y * z, axis=1)

    @staticmethod
    def gradient(z, Y):
        return expit(z) - Y

    @staticmethod
    def intercept(m):
        m = np.clip(m, 1e-12, 1 - 1e-12)  # one class only: a finite logit
        return np.log(m / (1 - m))


class Multinomial:
    """The categorical family: the softmax cross-entropy of C logits."""

    curvature = 0.5

    @staticmethod
    def value(z, Y):
        return logsumexp(z, axis=1) - np.sum(Y * z, axis=1)

    @staticmethod
    def gradient(z, Y):
        return softmax(z, axis=1) - Y

    @staticmethod
    def intercept(m):
        m = np.clip(m, 1e-12, None)  # a class absent: a finite logit
        return np.log(m) - np.log(m).mean()


#: Family name -> datafit.
DATAFITS = {"gaussian": Quadratic, "bernoulli": Logistic, "categorical": Multinomial}
