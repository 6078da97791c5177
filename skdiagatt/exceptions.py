"""Warnings of skdiagatt beyond scikit-learn's (:mod:`sklearn.exceptions`)."""

__all__ = ["InertParameterWarning"]


class InertParameterWarning(UserWarning):
    """A parameter set away from its default has no effect on the fit under the other settings.

    ``validation_fraction`` without ``early_stopping``, say: a grid search
    over it would fit the same model at every value.  The message names the
    setting that makes the parameter inert.

    Examples
    --------
    >>> import warnings
    >>> from skdiagatt import DiagAttRegressor
    >>> from skdiagatt.exceptions import InertParameterWarning
    >>> from skdiagatt.datasets import make_individualized_regression
    >>> X, y, _, _ = make_individualized_regression(40, n_rows=5, n_features=3, random_state=0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = DiagAttRegressor(validation_fraction=0.3, max_iter=2, random_state=0).fit(X, y)
    >>> [str(w.message).split(";")[0] for w in caught if w.category is InertParameterWarning]
    ['DiagAttRegressor: validation_fraction=0.3 has no effect with early_stopping=False']
    """
