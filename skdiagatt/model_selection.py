"""Model selection that prefers peaked attention among equally good fits.

A penalty chosen on validation loss alone often lands on nearly uniform
attention: with a few thousand samples, mean pooling predicts about as well as
a model that singles out rows, and the loss cannot tell them apart.  Then
``localize`` rests on noise.  The *one-standard-error rule* (Breiman, Friedman,
Olshen and Stone, *Classification and Regression Trees*, 1984, Section 3.4.3;
Hastie, Tibshirani and Friedman, *The Elements of Statistical Learning*, 2nd
ed., Section 7.10) resolves such ties: among the candidates whose validation
loss is within one standard error of the best, take the simplest.  Here the
simplest is the one whose attention is most peaked, measured by
:func:`~skdiagatt.metrics.attention_entropy` on the validation samples.

Use it with any scikit-learn search::

    search = GridSearchCV(pipe, grid, scoring=attention_scoring("log_loss"),
                          refit=peaked_within_one_se)
"""

import numpy as np

from .inspection import attention, final_estimator
from .metrics import attention_entropy

__all__ = [
    "attention_scoring",
    "median_attention_entropy",
    "peaked_within_one_se",
]

_LOSSES = ("log_loss", "squared_error")


def _per_sample_loss(estimator, X, y, loss):
    """Loss of each validation sample: (n,) array."""
    if loss == "log_loss":
        proba = np.asarray(estimator.predict_proba(X), dtype=float)
        classes = np.asarray(estimator.classes_)
        y = np.asarray(y)
        col = np.searchsorted(classes, y)
        col = np.minimum(col, classes.size - 1)
        unknown = classes[col] != y
        if np.any(unknown):
            i = int(np.flatnonzero(unknown)[0])
            raise ValueError(f"sample {i}: label {y[i].tolist()!r} is not among the classes "
                             f"seen in fit {classes.tolist()}")
        p = proba[np.arange(y.shape[0]), col]
        return -np.log(np.clip(p, np.finfo(float).tiny, 1.0))
    pred = np.asarray(estimator.predict(X), dtype=float)
    err = (pred - np.asarray(y, dtype=float).reshape(pred.shape)) ** 2
    return err.reshape(err.shape[0], -1).mean(axis=1)


class _LossScorer:
    """Scorer of the mean loss (negated: greater is better) or of its standard error.

    A class rather than a closure so that a search holding it pickles.
    """

    def __init__(self, loss, standard_error=False):
        self.loss = loss
        self.standard_error = standard_error

    def __call__(self, estimator, X, y):
        values = _per_sample_loss(estimator, X, y, self.loss)
        if not self.standard_error:
            return -float(np.mean(values))
        if values.size < 2:
            raise ValueError("the standard error of the loss needs at least 2 validation samples")
        return float(np.std(values, ddof=1) / np.sqrt(values.size))

    def __repr__(self):
        return f"_LossScorer({self.loss!r}, standard_error={self.standard_error})"


def median_attention_entropy(estimator, X, y=None):
    """Median over samples of the attention entropy relative to uniform weights.

    A scorer (``scorer(estimator, X, y)``) for scikit-learn searches: 1 means
    the fitted model pools the rows of a typical sample evenly, 0 that it puts
    all weight on one row.  *Lower is more peaked* -- unlike a loss scorer it
    is not negated.  Samples of a single row are left out.

    Parameters
    ----------
    estimator : fitted estimator, Pipeline or search
        Anything :func:`skdiagatt.inspection.attention` accepts.
    X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        The samples as ``estimator`` takes them (before any pipeline step).
    y : ignored

    Returns
    -------
    float in [0, 1], or NaN if the estimator has no attention weights or
    every sample has a single row.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt import DiagAttRegressor
    >>> X = np.random.RandomState(0).normal(size=(40, 5, 3))
    >>> model = DiagAttRegressor(max_iter=1).fit(X, X[:, 0, 0])
    >>> 0.0 <= median_attention_entropy(model, X) <= 1.0
    True
    """
    if not callable(getattr(final_estimator(estimator)[0], "attention", None)):
        return float("nan")
    try:
        weights = attention(estimator, X)
    except NotImplementedError:  # a method that keeps the name but has no weights (group lasso)
        return float("nan")
    values = attention_entropy(weights)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else float("nan")


def attention_scoring(loss="log_loss"):
    """The scorers :func:`peaked_within_one_se` reads, as a ``scoring`` dict.

    Parameters
    ----------
    loss : {"log_loss", "squared_error"}, default="log_loss"
        Per-sample loss: cross-entropy of ``predict_proba`` for classifiers,
        squared error of ``predict`` (averaged over outputs) for regressors.

    Returns
    -------
    dict of str to callable
        ``"score"``: minus the mean loss (greater is better);
        ``"score_se"``: the standard error of the mean loss over the
        validation samples; ``"attention_entropy"``:
        :func:`median_attention_entropy`.

    Raises
    ------
    ValueError
        If ``loss`` is not one of the two names.

    Examples
    --------
    >>> sorted(attention_scoring("squared_error"))
    ['attention_entropy', 'score', 'score_se']
    """
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    return {"score": _LossScorer(loss), "score_se": _LossScorer(loss, standard_error=True),
            "attention_entropy": median_attention_entropy}


def _n_splits(cv_results):
    return sum(1 for key in cv_results if key.startswith("split") and key.endswith("_test_score"))


def peaked_within_one_se(cv_results):
    """Index of the most peaked candidate among those within one standard error of the best.

    A ``refit`` callable for :class:`~sklearn.model_selection.GridSearchCV`
    and :class:`~sklearn.model_selection.RandomizedSearchCV` searched with
    ``scoring=attention_scoring(...)``.  With ``b`` the candidate of best mean
    ``score`` and ``se`` the standard error of its loss, the candidates with
    ``score >= score[b] - se`` are kept, and the one of lowest
    ``attention_entropy`` is returned (ties: the better score).  ``se`` is the
    mean over folds of ``score_se`` divided by ``sqrt(n_splits)`` -- the
    standard error of the loss over all validation samples, which a single
    validation split (``PredefinedSplit``) also gives -- or, without a
    ``score_se`` column, the spread of the fold scores divided by
    ``sqrt(n_splits)`` (the rule as in Hastie et al.).  Candidates without
    attention weights (NaN entropy) are chosen only on the score.

    Parameters
    ----------
    cv_results : dict of str to ndarray
        The search's ``cv_results_``.

    Returns
    -------
    int
        Index into the candidates (``best_index_``).

    Raises
    ------
    ValueError
        If ``cv_results`` has no ``mean_test_score`` column, no candidate has a
        finite score, or the standard error can be computed neither way.

    Examples
    --------
    >>> import numpy as np
    >>> results = {"mean_test_score": np.array([-0.50, -0.52, -0.60]),
    ...            "mean_test_score_se": np.array([0.03, 0.03, 0.03]),
    ...            "mean_test_attention_entropy": np.array([0.95, 0.70, 0.40]),
    ...            "split0_test_score": np.array([-0.50, -0.52, -0.60])}
    >>> peaked_within_one_se(results)  # -0.52 is within 0.03 of -0.50; -0.60 is not
    1
    """
    if "mean_test_score" not in cv_results:
        raise ValueError("cv_results has no 'mean_test_score': search with "
                         "scoring=attention_scoring(...) (or a dict with a 'score' entry)")
    score = np.asarray(cv_results["mean_test_score"], dtype=float)
    if not np.any(np.isfinite(score)):
        raise ValueError("no candidate has a finite validation score")
    best = int(np.nanargmax(score))
    k = max(_n_splits(cv_results), 1)
    if "mean_test_score_se" in cv_results:
        se = float(np.asarray(cv_results["mean_test_score_se"], dtype=float)[best]) / np.sqrt(k)
    elif k > 1 and "std_test_score" in cv_results:
        se = float(np.asarray(cv_results["std_test_score"], dtype=float)[best]) / np.sqrt(k)
    else:
        raise ValueError("the standard error of the score is unknown: add the 'score_se' "
                         "scorer of attention_scoring(...) or search over more than one split")
    entropy = np.asarray(cv_results.get("mean_test_attention_entropy", np.full(score.shape, np.nan)),
                         dtype=float)
    keep = np.flatnonzero(np.isfinite(score) & (score >= score[best] - se))
    entropy_kept = np.where(np.isnan(entropy[keep]), np.inf, entropy[keep])
    # lexsort: last key first -- lowest entropy, then highest score.
    order = np.lexsort((-score[keep], entropy_kept))
    return int(keep[order[0]])
