"""Localization through composed models: pipelines and fitted searches.

``make_pipeline(RowStandardScaler(), DiagAttRegressor())`` has no ``localize``
method of its own: scikit-learn's :class:`~sklearn.pipeline.Pipeline` exposes
only the methods it knows.  These functions find the attention estimator
inside a fitted model -- a pipeline (its last step, after the earlier steps
transform ``X``), a fitted search (its ``best_estimator_``), or nestings of
both -- and call its method on ``X`` as the estimator sees it.  Row-wise
transformers keep the rows of each sample in place, so the row indices and
weights refer to the rows of the ``X`` given.
"""

from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

__all__ = ["attention", "final_estimator", "localize", "row_contributions"]


def final_estimator(model, X=None):
    """The estimator at the end of a fitted model, and ``X`` as it sees it.

    Parameters
    ----------
    model : estimator, Pipeline or fitted search (``best_estimator_``)
        Nestings (a pipeline in a search, a search in a pipeline) are followed.
    X : samples or None
        Passed through the transforming steps on the way (None: not transformed).

    Returns
    -------
    estimator : the last step
    X : the transformed samples (or None)

    Raises
    ------
    NotFittedError
        If a pipeline or a search is not fitted.
    ValueError
        If a search holds no refitted ``best_estimator_`` (``refit=False``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import GridSearchCV
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdiagatt import DiagAttRegressor, RowPCA
    >>> from skdiagatt.inspection import final_estimator
    >>> X, y = np.random.RandomState(0).normal(size=(40, 5, 3)), np.arange(40.0)
    >>> search = GridSearchCV(make_pipeline(RowPCA(2), DiagAttRegressor(max_iter=1)),
    ...                       {"rowpca__n_components": [1, 2]}, cv=2).fit(X, y)
    >>> est, Xt = final_estimator(search, X)
    >>> type(est).__name__, Xt[0].shape == (5, search.best_params_["rowpca__n_components"])
    ('DiagAttRegressor', True)
    """
    while True:
        if isinstance(model, Pipeline):
            check_is_fitted(model)
            if X is not None:
                # Step by step: a slice model[:-1] would be checked as a fitted
                # pipeline of its own, which stateless transformers fail.
                for _, step in model.steps[:-1]:
                    if step is not None and step != "passthrough":
                        X = step.transform(X)
            model = model[-1]
        elif hasattr(model, "best_estimator_"):
            model = model.best_estimator_
        elif _is_search(model):
            check_is_fitted(model)
            raise ValueError(
                f"{type(model).__name__} has no best_estimator_ (refit=False): localize "
                "through a search refitted on the best parameters"
            )
        else:
            return model, X


def _is_search(model):
    # Duck typing: GridSearchCV, RandomizedSearchCV, the halving searches.
    return all(hasattr(model, k) for k in ("estimator", "cv", "refit"))


def _call(method, model, X, **kwargs):
    est, Xt = final_estimator(model, X)
    if not callable(getattr(est, method, None)):
        where = "" if est is model else f" (the final estimator of {type(model).__name__})"
        raise TypeError(
            f"{type(est).__name__}{where} has no {method}() method: {method} needs an "
            "attention estimator such as DiagAttRegressor or DiagAttClassifier as the "
            "last step"
        )
    return getattr(est, method)(Xt, **kwargs)


def localize(model, X, **kwargs):
    """Rows of interest of each sample, through pipelines and fitted searches.

    Parameters
    ----------
    model : fitted estimator, Pipeline or search
        Its final estimator has a ``localize`` method (e.g.
        :class:`~skdiagatt.DiagAttRegressor`).
    X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        The samples as the model takes them (before its transforming steps).
    **kwargs
        Passed on: ``top_k``, ``by`` (see :meth:`~skdiagatt.DiagAttRegressor.localize`).

    Returns
    -------
    list of ndarray of int
        Row indices of each sample of ``X``.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdiagatt import DiagAttRegressor, RowStandardScaler, localize
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, rows, _ = make_individualized_regression(100, n_rows=6, n_features=3,
    ...                                                random_state=0)
    >>> pipe = make_pipeline(RowStandardScaler(), DiagAttRegressor(max_iter=2, random_state=0))
    >>> found = localize(pipe.fit(X, y), X[:2], top_k=2)
    >>> [r.shape for r in found]
    [(2,), (2,)]
    """
    return _call("localize", model, X, **kwargs)


def attention(model, X):
    """Attention weights of every head over each sample's rows, through composed models.

    Parameters
    ----------
    model : fitted estimator, Pipeline or search
    X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

    Returns
    -------
    list of ndarray of shape (n_heads, p_i)

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt import DiagAttClassifier, attention
    >>> X = np.random.RandomState(0).normal(size=(40, 5, 3))
    >>> clf = DiagAttClassifier(n_heads=2, max_iter=1).fit(X, X[:, 0, 0] > 0)
    >>> attention(clf, X[:2])[0].shape  # a bare estimator works too
    (2, 5)
    """
    return _call("attention", model, X)


def row_contributions(model, X):
    """Each row's additive term in the output, through composed models.

    Parameters
    ----------
    model : fitted estimator, Pipeline or search
        Its final estimator has ``row_contributions`` (DiagAtt estimators).
    X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

    Returns
    -------
    list of ndarray of shape (n_heads, p_i), or (n_heads, p_i, n_outputs)
        See :meth:`~skdiagatt.DiagAttRegressor.row_contributions`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdiagatt import DiagAttRegressor, RowStandardScaler, row_contributions
    >>> X = np.random.RandomState(0).normal(size=(40, 5, 3))
    >>> pipe = make_pipeline(RowStandardScaler(), DiagAttRegressor(max_iter=1)).fit(X, X[:, 0, 0])
    >>> terms = row_contributions(pipe, X[:2])
    >>> bool(np.allclose(terms[0].sum() + pipe[-1].intercept_, pipe.predict(X[:1])[0], atol=1e-4))
    True
    """
    return _call("row_contributions", model, X)
