"""Column names of samples given as DataFrames: ``feature_names_in_``, as scikit-learn keeps it.

scikit-learn records the column names of a DataFrame ``X`` at fit and checks
them at predict.  Here a sample is a table of its own, so the names are those
shared by every sample: all samples must have the same string columns in the
same order.  pandas is never imported; a sample has names when it has a
``columns`` attribute whose entries are all strings, as in scikit-learn.
"""

import warnings

import numpy as np
from sklearn.utils.validation import _get_feature_names, check_is_fitted

from .ragged import ROW_WISE_HINT, check_ragged

__all__ = ["check_feature_names", "sample_feature_names", "set_feature_names", "validate_samples"]


def _listed(names, most=5):
    names = [str(n) for n in names]
    return repr(names) if len(names) <= most else repr(names[:most])[:-1] + ", ...]"


def _mismatch(got, expected):
    """How ``got`` differs from ``expected`` (two name arrays that are not equal)."""
    known, given = set(expected), set(got)
    unseen = [n for n in got if n not in known]
    missing = [n for n in expected if n not in given]
    if not unseen and not missing:
        return f"the same names in another order: {_listed(got)} instead of {_listed(expected)}"
    parts = [f"unseen: {_listed(unseen)}"] if unseen else []
    parts += [f"missing: {_listed(missing)}"] if missing else []
    return "; ".join(parts)


def _names(sample, label):
    try:
        return _get_feature_names(sample)
    except TypeError as exc:  # column names of mixed types: scikit-learn's message, the sample named
        raise TypeError(f"{label}: {exc}") from None


def sample_feature_names(X, name="X"):
    """The column names every sample of ``X`` shares, or None when the samples have none.

    Raises ValueError naming the first sample whose names differ from the
    first sample's (other names, another order, or none at all), and when
    ``X`` is one table instead of a list of samples.
    """
    if hasattr(X, "columns"):
        raise ValueError(
            f"{name} is one table of shape {getattr(X, 'shape', '?')}; samples are matrices: pass a "
            f"list of tables, one (rows, features) table per sample; {ROW_WISE_HINT}"
        )
    if not isinstance(X, (list, tuple)) or not X:
        return None
    if all(type(sample) is np.ndarray for sample in X):  # arrays have no column names
        return None
    first = _names(X[0], f"{name}[0]")
    for i, sample in enumerate(X[1:], start=1):
        names = _names(sample, f"{name}[{i}]")
        if first is None and names is None:
            continue
        if first is None or names is None:
            has, lacks = (i, 0) if first is None else (0, i)
            raise ValueError(
                f"{name}[{has}] has string column names and {name}[{lacks}] has none: give every sample "
                "as a table with the same columns, or every sample as an array"
            )
        if not np.array_equal(names, first):
            raise ValueError(
                f"{name}[{i}] has other columns than {name}[0] ({_mismatch(names, first)}): "
                "every sample must have the same columns in the same order"
            )
    return first


def check_feature_names(estimator, X, name="X"):
    """Check the column names of ``X``'s samples against a fitted ``estimator``'s ``feature_names_in_``.

    As scikit-learn's ``validate_data``: names that differ from those seen at
    fit raise a ValueError naming the first such sample; names on one side
    only (fitted with names and given arrays, or the reverse) warn.  Returns
    the fitted names (None when fitted without).
    """
    fitted = getattr(estimator, "feature_names_in_", None)
    if fitted is not None and isinstance(X, (list, tuple)):
        for i, sample in enumerate(X):
            names = _names(sample, f"{name}[{i}]")
            if names is not None and not np.array_equal(names, fitted):
                raise ValueError(
                    f"The feature names should match those that were passed during fit: {name}[{i}] "
                    f"has {_mismatch(names, fitted)}"
                )
    names = sample_feature_names(X, name)  # samples that disagree among themselves, or one table: an error
    if (names is None) != (fitted is None):
        cls = type(estimator).__name__
        warnings.warn(
            f"{name} has feature names, but {cls} was fitted without feature names" if fitted is None
            else f"{name} does not have valid feature names, but {cls} was fitted with feature names",
            UserWarning,
            stacklevel=3,
        )
    return fitted


def set_feature_names(estimator, names):
    """Record ``feature_names_in_``, or forget a previous fit's when ``names`` is None."""
    if names is None:
        estimator.__dict__.pop("feature_names_in_", None)
    else:
        estimator.feature_names_in_ = names


def validate_samples(estimator, X, *, reset, dtype=np.float32, name="X"):
    """Validated samples of ``X`` for ``estimator``: the one check of every estimator's input.

    ``reset`` (fit): record the samples' column names in ``feature_names_in_``.
    Otherwise the estimator must be fitted: the samples must have its
    ``n_features_in_`` features, and their names are checked against the
    fitted ones (:func:`check_feature_names`).
    """
    if reset:
        names = sample_feature_names(X, name)
        samples = check_ragged(X, dtype=dtype, name=name)
        set_feature_names(estimator, names)
        return samples
    check_is_fitted(estimator)
    check_feature_names(estimator, X, name)
    return check_ragged(X, n_features=estimator.n_features_in_, dtype=dtype, name=name)
