"""The scikit-learn shell shared by every estimator on matrix-valued samples.

No arithmetic on data lives here: validation goes through ``_ragged``, the
numbers through ``kernels`` and ``_training``.
"""

import difflib
import functools
import inspect
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.multiclass import check_classification_targets

from .._training import map_samples
from ..exceptions import InertParameterWarning
from .feature_names import validate_samples
from .params import inert_parameters, validate_parameters
from .ragged import FINE, take

__all__ = [
    "MatrixSampleEstimator",
    "PublicArguments",
    "check_labels",
    "check_targets",
    "check_finite_output",
    "check_sample_weight",
    "drop_zero_weight",
    "take",
    "standardize_targets",
    "FORMAT_VERSION",
]

#: Version of the fitted-state layout stored in pickles; bump it whenever the
#: fitted attributes change meaning, so old models fail loudly, not silently.
FORMAT_VERSION = 1


def check_targets(y, n_samples, *, numeric=True):
    """Validate the response of ``fit``: one entry per sample, finite if numeric.

    Returns
    -------
    ndarray of shape (n,) or (n, t)
    """
    if y is None:
        raise ValueError("y is required: this estimator is supervised")
    if isinstance(y, (list, tuple)) and any(np.ndim(v) > 0 for v in y):
        y = np.asarray(y, dtype=object if not numeric else None)
    y = np.asarray(y)
    if y.ndim == 0:
        raise ValueError(f"y must be 1-D (n,) or 2-D (n, t), got a scalar {y!r}")
    if y.ndim > 2:
        raise ValueError(f"y must be 1-D (n,) or 2-D (n, t), got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"y has {y.shape[0]} entries but X has {n_samples} samples")
    if numeric:
        if y.dtype == object or not np.issubdtype(y.dtype, np.number) and y.dtype != bool:
            raise TypeError(f"y must be numeric for regression, got dtype {y.dtype}")
        y = y.astype(np.float64)
        bad = np.flatnonzero(~np.all(np.isfinite(y.reshape(n_samples, -1)), axis=1))
        if bad.size:
            raise ValueError(f"y[{bad[0]}] is not finite ({y[bad[0]]})")
        if y.ndim == 2 and y.shape[1] == 0:
            raise ValueError("y has 0 targets")
    return y


def check_sample_weight(sample_weight, n_samples, *, name="sample_weight", nonzero=True):
    """Validate ``sample_weight``: one finite, non-negative number per sample, not all zero.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), scalar or None
    n_samples : int
    name : str, default="sample_weight"
        What the error messages call the weights.
    nonzero : bool, default=True
        Refuse weights that are 0 for every sample (a chunk of a larger data
        set may have them).

    Returns
    -------
    ndarray of shape (n,), float64, or None
        None when ``sample_weight`` is None; a scalar weighs every sample alike.
    """
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight)
    if w.dtype == object or np.iscomplexobj(w) or not (np.issubdtype(w.dtype, np.number) or w.dtype == bool):
        raise TypeError(f"{name} must be real numbers, got dtype {w.dtype}")
    if w.ndim == 0:
        w = np.full(n_samples, w)
    if w.shape != (n_samples,):
        raise ValueError(f"{name} has shape {w.shape}, expected ({n_samples},): one weight per sample")
    w = w.astype(np.float64)
    for bad, what in ((~np.isfinite(w), "is not finite"), (w < 0, "is negative")):
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{i}] {what} ({w[i]}); weights must be finite and >= 0")
    if nonzero and not np.any(w > 0):
        raise ValueError(f"{name} is 0 for every sample: there is nothing to fit")
    return w


def drop_zero_weight(samples, y, sample_weight):
    """Validate ``sample_weight`` and leave out the samples of weight 0.

    Returns
    -------
    samples, y, weights
        The samples of positive weight, their entries of ``y`` and their
        weights (:func:`check_sample_weight`; None when ``sample_weight`` is
        None, every sample kept).  ``y`` (one entry per sample, or None) is
        checked against the samples before any sample is left out.
    """
    weights = check_sample_weight(sample_weight, len(samples))
    if weights is None or np.all(weights > 0):
        return samples, y, weights
    n = len(samples)
    if y is None or len(y) != n:
        raise ValueError(f"y has {0 if y is None else len(y)} entries but X has {n} samples")
    keep = np.flatnonzero(weights > 0)
    return take(samples, keep), take(y, keep), weights[keep]


def check_labels(y, n_samples):
    """Validate the class labels of ``fit``: one per sample, 1-D and discrete.

    Continuous or mixed-type labels raise scikit-learn's "Unknown label type"
    instead of becoming one class per distinct value.

    Returns
    -------
    ndarray of shape (n,)
    """
    y = check_targets(y, n_samples, numeric=False)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n,) for classification, got shape {y.shape}")
    check_classification_targets(y)
    return y


@functools.lru_cache(maxsize=None)
def _init_parameters(cls):
    return inspect.signature(cls.__init__)


class PublicArguments:
    """Mixin: a wrong constructor argument is reported under the public class name.

    The ``__init__`` of an estimator is often inherited from a private base;
    Python's own message would then name that base
    (``_DiagAttBase.__init__() got an unexpected keyword argument``).
    """

    def __new__(cls, *args, **kwargs):
        if args or kwargs:
            _check_arguments(cls, args, kwargs)
        return super().__new__(cls)


def _check_arguments(cls, args, kwargs):
    signature = _init_parameters(cls)
    try:
        signature.bind(None, *args, **kwargs)
    except TypeError as exc:
        names = [k for k in signature.parameters if k != "self"]
        unknown = [k for k in kwargs if k not in names]
        if not unknown:
            raise TypeError(f"{cls.__name__}(): {exc}") from None
        close = difflib.get_close_matches(unknown[0], names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"its parameters are {', '.join(names)}"
        raise TypeError(
            f"{cls.__name__} got an unexpected keyword argument {unknown[0]!r}; {hint}"
        ) from None


def _looks_fitted(state):
    # scikit-learn's convention: fitted attributes end with "_".
    return any(k.endswith("_") and not k.startswith("__") for k in state)


def standardize_targets(Y, stats=None, weights=None):
    """Centre and scale targets column-wise, or apply the ``stats`` of an earlier fit.

    Parameters
    ----------
    Y : ndarray of shape (n, t), float64
    stats : (mean, scale) or None
    weights : ndarray of shape (n,) or None
        Sample weights of the mean and the standard deviation.

    Returns
    -------
    Z : ndarray of shape (n, t), float32
    mean, scale : ndarray of shape (t,)

    Raises
    ------
    ValueError
        If the targets' spread overflows float64 or float32 arithmetic.
    """
    if stats is None:
        with np.errstate(over="ignore", invalid="ignore"):
            if weights is None:
                mean, scale = Y.mean(axis=0), Y.std(axis=0)
            else:
                mean = np.average(Y, axis=0, weights=weights)
                scale = np.sqrt(np.average((Y - mean) ** 2, axis=0, weights=weights))
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(scale))):
            raise ValueError(
                "y has values too large to standardize (their variance overflows float64); "
                "rescale y"
            )
        scale = np.where(scale > 0, scale, 1.0)
    else:
        mean, scale = stats
    with np.errstate(over="ignore", invalid="ignore"):
        Z = ((Y - mean) / scale).astype(np.float32)
    if not np.all(np.isfinite(Z)):
        bad = np.flatnonzero(~np.all(np.isfinite(Z.reshape(Z.shape[0], -1)), axis=1))[0]
        raise ValueError(f"y[{bad}] is too far from the training targets' range to be represented")
    return Z, mean, scale


def check_finite_output(values, name="prediction"):
    """Raise if any sample's output is not finite; ``values`` is (n, ...) or a list of n arrays.

    Inputs pass validation when they are finite in float32, but products of
    huge values can still overflow; no NaN or infinity may leave a model.
    """
    if isinstance(values, np.ndarray) and values.ndim > 0:
        # One pass over an array of outputs, not one call per sample.
        finite = np.isfinite(values).reshape(values.shape[0], -1).all(axis=1)
    else:
        finite = [bool(np.all(np.isfinite(v))) for v in values]
    if not all(finite):
        i = int(np.flatnonzero(~np.asarray(finite))[0])
        raise ValueError(
            f"X[{i}] gives a non-finite {name}: its values are too large for "
            "float32 arithmetic; rescale the input"
        )
    return values


def _check_positive_int(value, name, minimum=1):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


class MatrixSampleEstimator(PublicArguments, BaseEstimator):
    """Base of the estimators: ragged input, fitted-state checks, localization.

    Subclasses implement ``_head_weights(samples)`` returning, per validated
    sample, the attention weights of shape (H, p_i).  ``_pack`` is True where the
    training loss accepts packed minibatches (:mod:`skdiagatt.kernels.rows`):
    ragged training data are then packed (:func:`~skdiagatt._training.training_data`).
    ``_bucket_growth`` is the bucket grid of the data left in buckets
    (:func:`~skdiagatt._shared.ragged.bucket_length`).  ``_chunk_large_data``
    is True where training samples in memory too large to upload at once are
    streamed in chunks (:func:`~skdiagatt._training.memory_data`).
    """

    _pack = False
    _bucket_growth = FINE
    _chunk_large_data = True
    #: ``{parameter: rule}`` for every ``__init__`` parameter (:mod:`skdiagatt._shared.params`).
    _parameter_rules = {}

    def __getstate__(self):
        state = super().__getstate__()
        if _looks_fitted(state):
            state["_skdiagatt_format"] = FORMAT_VERSION
        return state

    def __setstate__(self, state):
        fmt = state.get("_skdiagatt_format", None if _looks_fitted(state) else FORMAT_VERSION)
        if fmt != FORMAT_VERSION:
            raise ValueError(
                f"this {type(self).__name__} was saved with skdiagatt model format {fmt}, "
                f"but this version of skdiagatt reads format {FORMAT_VERSION}; refit the "
                "model or load it with the skdiagatt version that saved it"
            )
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Samples are matrices (a list of 2-D arrays or a 3-D array), not rows
        # of a 2-D table: the generic 2-D estimator checks do not apply.
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    def _validate_X(self, X, *, reset, dtype=np.float32):
        """Validated samples, checked against ``n_features_in_`` and ``feature_names_in_`` unless ``reset``."""
        return validate_samples(self, X, reset=reset, dtype=dtype)

    def _validate_parameters(self):
        """Check the declared parameters (``_parameter_rules``), then their combinations."""
        validate_parameters(self)
        self._check_combination()
        for name, setting in inert_parameters(self).items():
            warnings.warn(
                f"{type(self).__name__}: {name}={getattr(self, name)!r} has no effect with {setting}; "
                f"the fit is the one of the default {name}",
                InertParameterWarning,
                stacklevel=4,
            )

    def _check_combination(self):
        """Hook: raise if the parameters, each valid alone, do not go together."""

    def _map_samples(self, fn, samples, *args, rows=False):
        """:func:`~skdiagatt._training.map_samples` in this estimator's layout (packed, or its bucket grid)."""
        return map_samples(fn, samples, *args, pack=self._pack, rows=rows, growth=self._bucket_growth)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "params_")

    def attention(self, X):
        """Attention weights of every head over each sample's rows.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)

        Returns
        -------
        list of ndarray of shape (n_heads, p_i)
            Non-negative, each head's weights sum to one over the sample's rows.
        """
        samples = self._validate_X(X, reset=False)
        return check_finite_output(self._head_weights(samples), "attention weight")

    def localize(self, X, top_k=None, by="attention"):
        """Rows of interest of each sample.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        top_k : int or None, default=None
            None: the arg-max row of each head (at most ``n_heads`` distinct
            rows, in head order).  An int: the ``top_k`` rows of largest total
            over the heads, largest first (all rows if the sample has fewer, with a warning).
        by : {"attention", "contribution"}, default="attention"
            "attention": rank rows by attention weight.  "contribution"
            (DiagAtt): by the row's term in the output
            (``row_contributions``) in the direction of the prediction:
            towards the predicted class, or away from ``intercept_`` for each
            target; the rule that selects rows from a linear model on
            mean-pooled rows, so the two can be compared.

        Returns
        -------
        list of ndarray of int
        """
        if top_k is not None:
            _check_positive_int(top_k, "top_k")
        out = []
        for w in self._row_ranking(X, by):
            if top_k is None:
                rows = np.argmax(w, axis=1)
                _, first = np.unique(rows, return_index=True)
                out.append(rows[np.sort(first)].astype(np.int64))
            else:
                total = w.sum(axis=0)
                out.append(np.argsort(-total, kind="stable")[:top_k].astype(np.int64))
        short = [i for i, rows in enumerate(out) if top_k is not None and len(rows) < top_k]
        if short:
            warnings.warn(
                f"top_k={top_k} exceeds the rows of {len(short)} sample(s) (X[{short[0]}] has "
                f"{len(out[short[0]])}); those samples return all their rows",
                UserWarning,
                stacklevel=2,
            )
        return out

    def _row_ranking(self, X, by):
        """Per sample an array (n_heads, p_i) whose larger entries mark the rows of interest."""
        if by != "attention":
            raise ValueError(f'{type(self).__name__} localizes by "attention" only, got by={by!r}')
        return self.attention(X)
