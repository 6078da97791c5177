"""Bayes references computed from a simulator's truth (DESIGN.md section 4).

They know the background law (``mu``, ``Sigma`` and, for
:func:`~skdiagatt.datasets.make_structured_regression`, a t or clustered
``truth.background``) and the signal parameters but not which rows are
active, so they bound what any method can reach on the same data:
``bayes_localize`` is the best localizer, ``bayes_predict`` the Bayes predictor
``E[y | X]`` (nothing beats its mean squared error on average).  Each row's
score is ``log p_signal(x) - log p_background(x)`` under the true laws;
:func:`gaussian_background_truth` gives the references of a model that takes
every background to be Gaussian.
"""

from itertools import permutations

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.special import logsumexp, softmax
from sklearn.utils import Bunch

from .datasets._backgrounds import background_moments, gauss_logpdf_rows, mixture_logpdf_rows, t_logpdf_rows

__all__ = [
    "bayes_row_scores",
    "bayes_localize",
    "bayes_predict",
    "bayes_predict_proba",
    "gaussian_background_truth",
]


def _signal_gaussians(truth):
    """Mean and covariance of each signal class's row: explicit, or ``(m mu, v Sigma)``."""
    if "signal_mean" in truth:
        return list(zip(truth.signal_mean, truth.signal_cov))
    return [(m * truth.mu, v * truth.Sigma) for m, v in truth.signal]


def _background_logpdf_rows(Xi, truth):
    """Log-density of every row under the true background law, shape (p,).

    Truths without a ``background`` entry (the paper's simulators) have the
    Gaussian background ``N(mu, Sigma)``.
    """
    kind = truth.get("background", "gaussian")
    if kind == "t":
        return t_logpdf_rows(Xi, truth.mu, truth.Sigma, truth.df)
    if kind == "clusters":
        return mixture_logpdf_rows(Xi, truth.cluster_weights, truth.cluster_means, truth.cluster_covs)
    if kind != "gaussian":
        raise ValueError(f"truth.background must be 'gaussian', 't' or 'clusters', got {kind!r}")
    _, logdet0 = np.linalg.slogdet(truth.Sigma)
    return gauss_logpdf_rows(Xi, truth.mu, np.linalg.inv(truth.Sigma), logdet0)


def _row_llr(Xi, truth, mean, cov):
    """``log N(x; mean, cov) - log p_background(x)`` for every row, shape (p,)."""
    _, logdet = np.linalg.slogdet(cov)
    active = gauss_logpdf_rows(Xi, mean, np.linalg.inv(cov), logdet)
    return active - _background_logpdf_rows(Xi, truth)


def gaussian_background_truth(truth):
    """``truth`` with its background replaced by the Gaussian of the same mean and covariance.

    The Bayes references computed from it are those of a statistician who
    models every background as Gaussian: with a heavy-tailed or clustered
    background they are no longer optimal, and the gap to the references
    computed from ``truth`` itself is the price of that misspecification.

    Parameters
    ----------
    truth : Bunch
        From :func:`skdiagatt.datasets.make_structured_regression` (or any
        simulator of :mod:`skdiagatt.datasets`, whose background is Gaussian
        already).

    Returns
    -------
    Bunch
        A copy with ``mu`` and ``Sigma`` the background's mean (d,) and
        covariance (d, d), and ``background="gaussian"``.

    Raises
    ------
    ValueError
        For a t background with ``df <= 2``: it has no covariance.

    Examples
    --------
    >>> from skdiagatt.bayes import gaussian_background_truth
    >>> from skdiagatt.datasets import make_structured_regression
    >>> X, y, rows, truth = make_structured_regression(
    ...     5, n_rows=10, n_features=4, background="t", df=4, random_state=0)
    >>> approx = gaussian_background_truth(truth)
    >>> approx.background, bool((approx.Sigma == 2 * truth.Sigma).all())
    ('gaussian', True)
    """
    mean, cov = background_moments(truth)
    out = Bunch(**{k: v for k, v in truth.items()
                   if k not in ("df", "cluster_weights", "cluster_means", "cluster_covs")})
    out.update(mu=mean, Sigma=cov, background="gaussian")
    return out


def bayes_row_scores(X, truth):
    """Per sample and signal class, the log-likelihood ratio of every row.

    For the classification simulator (two signal classes, one active row),
    the two class ratios are mixed with the class prior 1/2, giving one
    score per row.

    Parameters
    ----------
    X : list of ndarray of shape (p_i, d)
    truth : Bunch
        The truth returned by a ``make_*`` simulator of :mod:`skdiagatt.datasets`
        (``mu`` (d,), ``Sigma`` (d, d), ``signal`` or ``signal_mean`` and
        ``signal_cov``, and, for regression, ``beta``; ``background`` and its
        parameters when the background is not Gaussian).

    Returns
    -------
    list of ndarray of shape (n_classes, p_i)
        ``n_classes`` is the number of signal classes s (regression), or 1
        for the classification simulator.

    Examples
    --------
    >>> from skdiagatt.bayes import bayes_row_scores
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, truth = make_individualized_regression(
    ...     5, n_rows=(4, 9), n_features=3, random_state=0)
    >>> scores = bayes_row_scores(X, truth)
    >>> [s.shape == (1, len(x)) for s, x in zip(scores, X)]
    [True, True, True, True, True]
    """
    out = []
    for Xi in X:
        llr = np.stack([_row_llr(np.asarray(Xi, float), truth, *g) for g in _signal_gaussians(truth)])
        if "beta" not in truth:  # classification: one active row of either class
            llr = logsumexp(llr, axis=0, keepdims=True) - np.log(len(llr))
        out.append(llr)
    return out


def bayes_localize(X, truth):
    """Most probable active rows: the joint assignment of distinct rows to signal classes.

    With one class this is the arg-max row of its log-likelihood ratio; with
    several, the distinct rows ``(j_1, ..., j_s)`` maximising ``sum_k llr_k[j_k]``
    (the posterior of an assignment is proportional to the product of its
    likelihood ratios), found by a linear assignment.

    Parameters
    ----------
    X : list of ndarray of shape (p_i, d)
    truth : Bunch
        From a ``make_individualized_*`` simulator.

    Returns
    -------
    ndarray of int, shape (n, n_classes)
        Column k holds the row chosen for signal class k; compare it with the
        simulator's ``rows`` using :func:`skdiagatt.metrics.crlr`.

    Examples
    --------
    >>> from skdiagatt.bayes import bayes_localize
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> from skdiagatt.metrics import crlr
    >>> X, y, rows, truth = make_individualized_regression(
    ...     200, n_rows=20, n_features=30, random_state=0)
    >>> rows_hat = bayes_localize(X, truth)
    >>> rows_hat.shape
    (200, 1)
    >>> crlr(rows, rows_hat) > 0.9
    True
    """
    out = []
    for llr in bayes_row_scores(X, truth):
        if llr.shape[0] == 1:
            out.append(llr.argmax(axis=1))
        else:
            _, cols = linear_sum_assignment(llr, maximize=True)
            out.append(cols)
    return np.stack(out)


def _assignment_marginals(llr, n_candidates=8):
    """``P(S_k = j | X)`` over assignments of *distinct* rows to the classes.

    The posterior of an assignment is proportional to the product of the
    classes' likelihood ratios.  Assignments are enumerated over the union of
    each class's ``n_candidates`` best rows: the rows left out carry a
    negligible share of the mass in the simulators' settings.
    """
    s, p = llr.shape
    if s == 1:
        return softmax(llr, axis=1)
    top = np.argsort(-llr, axis=1)[:, :n_candidates]
    cand = np.unique(top)
    tuples = np.array(list(permutations(cand.tolist(), s)), dtype=np.int64)  # (T, s)
    logp = llr[np.arange(s), tuples].sum(axis=1)
    w = softmax(logp)
    post = np.zeros((s, p))
    for k in range(s):
        np.add.at(post[k], tuples[:, k], w)
    return post


def bayes_predict(X, truth):
    """Bayes predictor ``E[y | X] = sum_k sum_j P(S_k = j | X) <x_j, beta_k>``.

    The posterior is over assignments of *distinct* rows to the signal classes
    (exact for up to three classes).

    Parameters
    ----------
    X : list of ndarray of shape (p_i, d)
    truth : Bunch
        From :func:`skdiagatt.datasets.make_individualized_regression`.

    Returns
    -------
    ndarray of shape (n,)

    Raises
    ------
    ValueError
        If ``truth`` comes from the classification simulator (it has no ``beta``).

    Examples
    --------
    >>> from skdiagatt.bayes import bayes_predict
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> from skdiagatt.metrics import rmse
    >>> X, y, rows, truth = make_individualized_regression(
    ...     200, n_rows=20, n_features=30, random_state=0)
    >>> y_hat = bayes_predict(X, truth)
    >>> y_hat.shape
    (200,)
    >>> bool(rmse(y, y_hat) < y.std())
    True
    """
    if "beta" not in truth:
        raise ValueError("bayes_predict needs a regression truth (with beta)")
    pred = []
    for Xi, llr in zip(X, bayes_row_scores(X, truth)):
        post = _assignment_marginals(llr)  # (s, p)
        pred.append(np.sum(post * (truth.beta @ np.asarray(Xi, float).T)))
    return np.asarray(pred)


def bayes_predict_proba(X, truth):
    """``P(y = 1 | X)`` under the classification simulator with prior 1/2.

    Parameters
    ----------
    X : list of ndarray of shape (p_i, d)
    truth : Bunch
        From :func:`skdiagatt.datasets.make_individualized_classification`.

    Returns
    -------
    ndarray of shape (n,)
        Probabilities in [0, 1].

    Raises
    ------
    ValueError
        If ``truth`` comes from the regression simulator.

    Examples
    --------
    >>> from skdiagatt.bayes import bayes_predict_proba
    >>> from skdiagatt.datasets import make_individualized_classification
    >>> X, y, rows, truth = make_individualized_classification(
    ...     100, n_rows=10, n_features=10, random_state=0)
    >>> proba = bayes_predict_proba(X, truth)
    >>> proba.shape
    (100,)
    >>> float(((proba > 0.5) == y).mean()) > 0.9
    True
    """
    if "beta" in truth:
        raise ValueError("bayes_predict_proba needs a classification truth")
    negative, positive = _signal_gaussians(truth)
    proba = []
    for Xi in X:
        Xi = np.asarray(Xi, float)
        # P(X | y) ∝ mean_j N(x_j; class)/N(x_j; background) (uniform active row).
        l0 = logsumexp(_row_llr(Xi, truth, *negative))
        l1 = logsumexp(_row_llr(Xi, truth, *positive))
        proba.append(1.0 / (1.0 + np.exp(l0 - l1)))
    return np.asarray(proba)
