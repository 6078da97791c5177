"""Laws of the background rows of :func:`~skdiagatt.datasets.make_structured_regression`.

Three laws share a centre ``mu`` (d,) and a matrix ``Sigma`` (d, d):

- ``"gaussian"``: ``N(mu, Sigma)``, the paper's background.
- ``"t"``: the multivariate Student t with ``df`` degrees of freedom, location
  ``mu`` and scale matrix ``Sigma``, drawn as a Gaussian scale mixture
  ``x = mu + L z / sqrt(g / df)`` with ``g ~ chi2(df)``; its covariance is
  ``df / (df - 2) Sigma`` for ``df > 2``.  Heavy tails: a few background rows
  lie far out, where a Gaussian law would put almost none.
- ``"clusters"``: a mixture of ``n_clusters`` Gaussians ``N(m_k, Sigma)`` with
  weights ``w_k`` whose weighted mean is ``mu``, as embeddings of real
  objects form groups.

The functions here draw the law's parameters and rows, and give its row
log-density and first two moments for the Bayes references of
:mod:`skdiagatt.bayes`.
"""

import numbers

import numpy as np
from scipy.special import gammaln, logsumexp
from sklearn.utils import Bunch

#: The background laws :func:`~skdiagatt.datasets.make_structured_regression` draws.
BACKGROUNDS = ("gaussian", "t", "clusters")


def check_background(background, df, n_clusters, cluster_separation):
    """Raise a ``ValueError`` naming the parameter when an option is out of range."""
    if background not in BACKGROUNDS:
        raise ValueError(f"background must be one of {BACKGROUNDS}, got {background!r}")
    if not (isinstance(df, numbers.Real) and df > 0 and np.isfinite(df)):
        raise ValueError(f"df must be a finite number > 0, got {df!r}")
    if not (isinstance(n_clusters, numbers.Integral) and n_clusters >= 1):
        raise ValueError(f"n_clusters must be an integer >= 1, got {n_clusters!r}")
    if not (isinstance(cluster_separation, numbers.Real) and cluster_separation >= 0
            and np.isfinite(cluster_separation)):
        raise ValueError(f"cluster_separation must be a finite number >= 0, got {cluster_separation!r}")


def background_law(background, mu, sigma, chol, df, n_clusters, cluster_separation, rng):
    """The law's parameters as a Bunch; draws from ``rng`` only for ``"clusters"``.

    Cluster ``k`` is centred at ``mu + L (s u_k) - c``, with ``u_k`` a random
    unit vector in the whitened coordinates, ``s = cluster_separation`` and
    ``c`` the offset that makes the weighted mean of the centres ``mu``.
    Weights are Dirichlet(5, ..., 5): unequal groups, none negligible.
    """
    law = Bunch(background=background, mu=mu, Sigma=sigma, chol=chol)
    if background == "t":
        law.df = float(df)
    elif background == "clusters":
        d = mu.shape[0]
        weights = rng.dirichlet(np.full(n_clusters, 5.0))
        u = rng.standard_normal((n_clusters, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        offsets = cluster_separation * u @ chol.T
        offsets -= weights @ offsets
        law.cluster_weights = weights
        law.cluster_means = mu + offsets
        # One covariance per cluster, so that the Bayes code needs no special case.
        law.cluster_covs = np.broadcast_to(sigma, (n_clusters, d, d)).copy()
    return law


def draw_rows(law, p, rng):
    """``p`` background rows, shape (p, d).

    The Gaussian draws come first and are the same as those of a Gaussian
    background, so that the ``"gaussian"`` law consumes ``rng`` as before.
    """
    d = law.mu.shape[0]
    Z = rng.standard_normal((p, d))
    if law.background == "gaussian":
        return law.mu + Z @ law.chol.T
    if law.background == "t":
        g = rng.chisquare(law.df, size=p)
        return law.mu + (Z @ law.chol.T) / np.sqrt(g / law.df)[:, None]
    labels = rng.choice(law.cluster_weights.shape[0], size=p, p=law.cluster_weights)
    # Shared covariance: one Cholesky factor serves every cluster.
    return law.cluster_means[labels] + Z @ law.chol.T


def truth_fields(law):
    """The entries of ``truth`` that describe the background beyond ``mu`` and ``Sigma``."""
    fields = {"background": law.background}
    for key in ("df", "cluster_weights", "cluster_means", "cluster_covs"):
        if key in law:
            fields[key] = law[key]
    return fields


def gauss_logpdf_rows(X, mean, prec, logdet):
    """``log N(x; mean, cov)`` per row, up to ``-d/2 log(2 pi)``: shape (p,)."""
    r = X - mean
    return -0.5 * (np.einsum("pa,ab,pb->p", r, prec, r) + logdet)


def t_logpdf_rows(X, mu, sigma, df):
    """Multivariate t log-density per row, up to ``-d/2 log(2 pi)``: shape (p,).

    The same constant is left out as in :func:`gauss_logpdf_rows`, so that
    differences with Gaussian log-densities are exact log-likelihood ratios.
    """
    d = mu.shape[0]
    _, logdet = np.linalg.slogdet(sigma)
    r = X - mu
    delta = np.einsum("pa,ab,pb->p", r, np.linalg.inv(sigma), r)
    const = gammaln((df + d) / 2) - gammaln(df / 2) - 0.5 * d * np.log(df / 2)
    return const - 0.5 * logdet - 0.5 * (df + d) * np.log1p(delta / df)


def mixture_logpdf_rows(X, weights, means, covs):
    """Gaussian-mixture log-density per row (logsumexp over clusters), up to ``-d/2 log(2 pi)``."""
    comps = []
    for w, m, c in zip(weights, means, covs):
        _, logdet = np.linalg.slogdet(c)
        comps.append(np.log(w) + gauss_logpdf_rows(X, m, np.linalg.inv(c), logdet))
    return logsumexp(np.stack(comps), axis=0)


def background_moments(truth):
    """Mean (d,) and covariance (d, d) of a background row under ``truth``'s law.

    Raises
    ------
    ValueError
        For a t background with ``df <= 2``: it has no covariance.
    """
    kind = truth.get("background", "gaussian")
    if kind == "gaussian":
        return truth.mu, truth.Sigma
    if kind == "t":
        if truth.df <= 2:
            raise ValueError(f"a t background with df={truth.df} <= 2 has no covariance")
        return truth.mu, truth.df / (truth.df - 2) * truth.Sigma
    w, m, c = truth.cluster_weights, truth.cluster_means, truth.cluster_covs
    mean = w @ m
    r = m - mean
    # Law of total covariance: within-cluster plus between-cluster parts.
    return mean, np.einsum("k,kab->ab", w, c) + (r.T * w) @ r
