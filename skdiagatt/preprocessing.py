"""Row-wise preprocessing of matrix-valued samples: ``RowPCA``, ``RowStandardScaler``, ``RowWise``.

A sample's rows (tokens, patches, instances) all live in the same feature
space, so a preprocessing step is learned once on the rows of every training
sample pooled together and then applied to each row of each sample: the
number of rows ``p_i`` of a sample never changes, only its columns do.
:class:`RowWise` does this for any scikit-learn transformer.
"""

import numbers

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    OneToOneFeatureMixin,
    TransformerMixin,
    clone,
)
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted

from ._shared.base import PublicArguments, check_finite_output
from ._shared.feature_names import validate_samples
from ._shared.ragged import check_ragged

__all__ = ["RowPCA", "RowStandardScaler", "RowWise"]


def _split(rows, samples):
    """Cut the rows of the pooled samples back into one array per sample."""
    bounds = np.cumsum([s.shape[0] for s in samples])[:-1]
    return np.split(rows, bounds)


# auto_wrap_output_keys=None on every class, and the inner scikit-learn step
# pinned to "default" output: a global transform_output="pandas" would
# otherwise try to turn ragged samples (or the pooled rows) into one table.
class _RowTransformer(PublicArguments, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Shared shell: validate ragged input, pool the rows, map every row.

    Subclasses implement ``_fit_rows(rows)`` (store fitted attributes),
    ``_transform_rows(rows)`` and ``_inverse_rows(rows)`` on float64 (N, .)
    arrays of pooled rows.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Samples are matrices (a list of 2-D arrays or a 3-D array), not rows
        # of a 2-D table: the generic 2-D checks do not apply.
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags

    def _samples(self, X, *, reset, n_features=None):
        # float64: statistics pooled over many rows (means, covariances) keep
        # their precision and equal scikit-learn's on the stacked rows as
        # given; only the output is rounded to float32.
        if n_features is None:  # column names are those of the input space: checked in fit and transform
            return validate_samples(self, X, reset=reset, dtype=np.float64)
        check_is_fitted(self)
        return check_ragged(X, n_features=n_features, dtype=np.float64)

    def fit(self, X, y=None):
        """Learn the transformation on the rows of all samples pooled.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array of shape (n, p, n_features)
        y : ignored
            Present for :class:`~sklearn.pipeline.Pipeline` compatibility.

        Returns
        -------
        self
        """
        samples = self._samples(X, reset=True)
        rows = np.concatenate(samples)
        self._fit_rows(rows)
        self.n_features_in_ = rows.shape[1]
        self.n_rows_seen_ = rows.shape[0]
        return self

    def _map(self, samples, fn, what):
        with np.errstate(over="ignore"):  # reported below, naming the sample
            out = fn(np.concatenate(samples)).astype(np.float32)
        return check_finite_output(_split(out, samples), what)

    def transform(self, X):
        """Apply the fitted transformation to every row of every sample.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features), or array (n, p, n_features)

        Returns
        -------
        list of ndarray of shape (p_i, n_features_out), float32
            One array per sample, in order, with its rows in order.
        """
        return self._map(self._samples(X, reset=False), self._transform_rows, "transformed row")

    def inverse_transform(self, X):
        """Map transformed samples back to the input feature space.

        Parameters
        ----------
        X : list of array-like of shape (p_i, n_features_out), or array (n, p, n_features_out)

        Returns
        -------
        list of ndarray of shape (p_i, n_features), float32
        """
        check_is_fitted(self)
        samples = self._samples(X, reset=False, n_features=self._n_features_out)
        return self._map(samples, self._inverse_rows, "reconstructed row")


class RowPCA(ClassNamePrefixFeaturesOutMixin, _RowTransformer, auto_wrap_output_keys=None):
    """Principal component analysis of the rows of matrix-valued samples.

    :class:`sklearn.decomposition.PCA` fitted on the rows of all training
    samples stacked into one ``(sum_i p_i, n_features)`` table, then applied
    to each sample's rows: a sample of shape ``(p_i, n_features)`` becomes
    ``(p_i, n_components)``.  The number of rows never changes, so the
    output is the ragged input of every estimator of this package, and row
    ``j`` of the output is row ``j`` of the input (``localize`` indices stay
    valid).  Use it before an attention model to shrink its
    ``n_features x n_features`` parameters, e.g. 384-d token embeddings to 64.

    The fit runs in float64 on the rows as given; the output is float32, the
    working precision of the estimators of this package.

    Parameters
    ----------
    n_components : int, float, "mle" or None, default=None
        Components kept, as in :class:`~sklearn.decomposition.PCA`: an int,
        a float in (0, 1) for the share of row variance to explain, "mle",
        or None for all ``min(total rows, n_features)``.
    whiten : bool, default=False
        Scale the components to unit variance over the training rows.
    svd_solver : {"auto", "full", "covariance_eigh", "arpack", "randomized"}, default="auto"
        As in :class:`~sklearn.decomposition.PCA`.
    random_state : int, RandomState instance or None, default=None
        Used by the "arpack" and "randomized" solvers.

    Attributes
    ----------
    pca_ : sklearn.decomposition.PCA
        The PCA fitted on the pooled training rows.
    components_ : ndarray of shape (n_components, n_features)
        Principal axes of the rows.
    explained_variance_ : ndarray of shape (n_components,)
    explained_variance_ratio_ : ndarray of shape (n_components,)
    mean_ : ndarray of shape (n_features,)
        Mean training row.
    n_components_ : int
        Columns of every output sample.
    n_features_in_ : int
        Columns of every input sample.
    n_rows_seen_ : int
        Rows pooled in ``fit`` (``sum_i p_i``).
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.

    See Also
    --------
    RowStandardScaler : Standardize the columns of the pooled rows.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.preprocessing import RowPCA
    >>> rng = np.random.RandomState(0)
    >>> X = [rng.randn(p, 10) for p in (3, 7, 5)]          # ragged: 3 samples, d = 10
    >>> pca = RowPCA(n_components=4).fit(X)
    >>> Z = pca.transform(X)
    >>> [z.shape for z in Z], Z[0].dtype
    ([(3, 4), (7, 4), (5, 4)], dtype('float32'))
    >>> pca.get_feature_names_out().tolist()
    ['rowpca0', 'rowpca1', 'rowpca2', 'rowpca3']

    In a pipeline, before an estimator on matrix-valued samples:

    >>> from sklearn.pipeline import make_pipeline
    >>> from skdiagatt.baselines import TwoStepRegressor
    >>> y = rng.randn(3)
    >>> pipe = make_pipeline(RowPCA(2), TwoStepRegressor(random_state=0)).fit(X, y)
    >>> pipe.predict(X).shape
    (3,)
    """

    def __init__(self, n_components=None, *, whiten=False, svd_solver="auto", random_state=None):
        self.n_components = n_components
        self.whiten = whiten
        self.svd_solver = svd_solver
        self.random_state = random_state

    def _fit_rows(self, rows):
        k = self.n_components
        limit = min(rows.shape)
        if isinstance(k, numbers.Integral) and not isinstance(k, bool) and k > limit:
            # PCA's own message speaks of "n_samples", which here are rows.
            raise ValueError(
                f"n_components={k} must be at most min(total rows, n_features) = "
                f"min({rows.shape[0]}, {rows.shape[1]}) = {limit}"
            )
        pca = PCA(
            n_components=k,
            whiten=self.whiten,
            svd_solver=self.svd_solver,
            random_state=self.random_state,
        )
        pca.set_output(transform="default").fit(rows)
        self.pca_ = pca
        self.components_ = pca.components_
        self.explained_variance_ = pca.explained_variance_
        self.explained_variance_ratio_ = pca.explained_variance_ratio_
        self.mean_ = pca.mean_
        self.n_components_ = int(pca.n_components_)

    def _transform_rows(self, rows):
        return self.pca_.transform(rows)

    def _inverse_rows(self, rows):
        return self.pca_.inverse_transform(rows)

    @property
    def _n_features_out(self):
        return self.n_components_


class RowStandardScaler(OneToOneFeatureMixin, _RowTransformer, auto_wrap_output_keys=None):
    """Standardize the columns of matrix-valued samples over their pooled rows.

    :class:`sklearn.preprocessing.StandardScaler` fitted on the rows of all
    training samples stacked into one ``(sum_i p_i, n_features)`` table, then
    applied to each sample's rows: every column gets zero mean and unit
    variance over the training rows.  Shapes are unchanged.

    The fit runs in float64; the output is float32, the working precision of
    the estimators of this package.

    Parameters
    ----------
    with_mean : bool, default=True
        Subtract the mean training row.
    with_std : bool, default=True
        Divide each column by its standard deviation over the training rows
        (a constant column is left unscaled).

    Attributes
    ----------
    scaler_ : sklearn.preprocessing.StandardScaler
        The scaler fitted on the pooled training rows.
    mean_ : ndarray of shape (n_features,) or None
        Mean training row (subtracted only if ``with_mean``; None if
        ``with_mean`` and ``with_std`` are both False).
    scale_ : ndarray of shape (n_features,) or None
        Per-column divisor (None if ``with_std=False``).
    n_features_in_ : int
    n_rows_seen_ : int
        Rows pooled in ``fit`` (``sum_i p_i``).
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.

    See Also
    --------
    RowPCA : Project the pooled rows on their principal axes.

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.preprocessing import RowStandardScaler
    >>> X = [np.array([[0.0, 10.0], [2.0, 30.0]]), np.array([[4.0, 20.0]])]
    >>> Z = RowStandardScaler().fit_transform(X)
    >>> [z.shape for z in Z]
    [(2, 2), (1, 2)]
    >>> np.round(np.concatenate(Z).mean(axis=0), 6).tolist()
    [0.0, 0.0]
    """

    def __init__(self, *, with_mean=True, with_std=True):
        self.with_mean = with_mean
        self.with_std = with_std

    def _fit_rows(self, rows):
        scaler = StandardScaler(with_mean=self.with_mean, with_std=self.with_std)
        scaler.set_output(transform="default").fit(rows)
        self.scaler_ = scaler
        self.mean_ = scaler.mean_
        self.scale_ = scaler.scale_

    def _transform_rows(self, rows):
        return self.scaler_.transform(rows)

    def _inverse_rows(self, rows):
        return self.scaler_.inverse_transform(rows)

    @property
    def _n_features_out(self):
        return self.n_features_in_


class RowWise(_RowTransformer, auto_wrap_output_keys=None):
    """Any scikit-learn transformer, fitted on the pooled rows and applied to each sample's rows.

    ``RowWise(t)`` fits a clone of ``t`` on the rows of all training samples
    stacked into one ``(sum_i p_i, n_features)`` table and maps every row of
    every sample with it; the samples keep their numbers of rows.  A
    transformer that expects 2-D input (``StandardScaler``, ``PCA``,
    ``Nystroem``...) cannot take ragged samples itself.

    With :class:`sklearn.kernel_approximation.Nystroem` the rows are mapped
    to an approximation of a Gaussian kernel's feature space, and the
    attention-pooled rows of a DiagAtt model become kernel mean embeddings
    of the rows: the value read-out is then non-linear in the rows.

    Parameters
    ----------
    transformer : estimator
        A scikit-learn transformer of 2-D tables; it is cloned, not modified.

    Attributes
    ----------
    transformer_ : estimator
        The clone fitted on the pooled training rows.
    n_features_in_ : int
    n_rows_seen_ : int
        Rows pooled in ``fit`` (``sum_i p_i``).
    feature_names_in_ : ndarray of shape (n_features_in_,), dtype=object
        Column names, when every sample in ``fit`` was a DataFrame with the same string columns.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_approximation import Nystroem
    >>> from skdiagatt.preprocessing import RowWise
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(p, 3)) for p in (4, 2, 5)]
    >>> Z = RowWise(Nystroem(n_components=6, random_state=0)).fit_transform(X)
    >>> [z.shape for z in Z]
    [(4, 6), (2, 6), (5, 6)]
    """

    def __init__(self, transformer):
        self.transformer = transformer

    def _fit_rows(self, rows):
        inner = clone(self.transformer)
        if hasattr(inner, "set_output"):
            inner.set_output(transform="default")
        self.transformer_ = inner.fit(rows)

    def _transform_rows(self, rows):
        return np.asarray(self.transformer_.transform(rows))

    def _inverse_rows(self, rows):
        if not hasattr(self.transformer_, "inverse_transform"):
            raise AttributeError(f"{type(self.transformer_).__name__} has no inverse_transform")
        return np.asarray(self.transformer_.inverse_transform(rows))

    @property
    def _n_features_out(self):
        return self._transform_rows(np.zeros((1, self.n_features_in_))).shape[1]

    def get_feature_names_out(self, input_features=None):
        """The inner transformer's output names, as it gives them for the input names.

        ``input_features`` defaults to ``feature_names_in_`` (then ``x0, x1, ...``);
        given, it must equal ``feature_names_in_`` where that is set.
        """
        check_is_fitted(self)
        return self.transformer_.get_feature_names_out(_check_feature_names_in(self, input_features))
