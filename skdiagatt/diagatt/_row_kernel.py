"""DiagAtt's rows as given, with their squares, or in a Gaussian kernel's feature space.

``kernel="auto"`` chooses between the rows as given and ``"squares+rbf"``;
the other maps are chosen by hand.

The read-out ``b + sum_r <sum_l kappa_rl x_l, v_r>`` is linear in the rows.
Mapped by a feature map ``phi`` of the Gaussian kernel ``k(x, x') = exp(-gamma
|x - x'|^2)``, the pooled rows ``sum_l kappa_rl phi(x_l)`` are the kernel mean
embeddings of the attention-weighted rows (Muandet et al., *Kernel Mean
Embedding of Distributions*, 2017), and a linear read-out of them is a
non-linear function of the rows: uniform attention then gives the set
kernel of multiple-instance learning (Gaertner et al., ICML 2002).  ``phi``
is the Nystroem approximation of :class:`sklearn.kernel_approximation.Nystroem`
(Williams and Seeger, NIPS 2001) on the standardized rows, with ``gamma =
1 / d``: standardized rows lie about ``sqrt(2 d)`` apart, where the kernel
is ``exp(-2)``.

``kernel="squares"`` appends each standardized feature's square to the row,
``phi(z) = (z, z * z)``: the pooled rows are then the attention-weighted
first and second moments of every feature, so a bag can be told by the
spread of a feature among its instances as well as by its mean (the mean
and standard deviation of each feature summarise a bag in Gaertner et
al.'s statistic kernel).  ``kernel="squares+rbf"`` puts those rows in front
of the Gaussian kernel's, ``phi(z) = (z, z * z, phi_rbf(z))``, the feature
map of the sum of a linear, a diagonal quadratic and the Gaussian kernel: a
hundred landmarks approximate the Gaussian kernel coarsely in many
dimensions, and what the rows and their spreads show is not lost to that
approximation.

``kernel="auto"`` lets the targets decide, as the start does
(:mod:`skdiagatt.diagatt._starts`): pooled rows feed the ridge read-out of
largest evidence, and the rows are mapped only when the Gaussian rows'
mean-pooled rows have a cross-validated squared error below that of every
candidate start on the rows as given (uniform, mixture and response: a
signal that attention can single out shows in them) and that of the training
folds' mean target (no rows at all) by more than one standard error of the
paired difference.  The map is then ``"squares+rbf"``: no cross-validated
error of pooled rows tried told beforehand where the squares help, and
beside the Gaussian rows they were level or better on every
multiple-instance set measured (``docs/real_data.md``).  The rows as
given are the model the estimator assumes; on the simulators they stay the
choice, and the fits are as they were.
"""

import copy

import numpy as np
from sklearn.decomposition import PCA
from sklearn.feature_selection import VarianceThreshold
from sklearn.kernel_approximation import Nystroem
from sklearn.pipeline import make_pipeline, make_union
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, StandardScaler

from .._shared.sources import Samples
from .._shared.whitening import preconditioner
from ..preprocessing import _split
from ._mixture import rows_mixture, stacked_rows
from ._starts import _cv_errors, _one_standard_error, at_most, candidate_errors

__all__ = ["RowKernelMixin", "fit_row_map", "map_rows"]

#: Landmark rows of the Nystroem map (at most the training rows).
N_COMPONENTS = 100
#: Widest block of rows and squares; wider blocks keep their leading principal components.
MAX_SQUARES_WIDTH = 4 * N_COMPONENTS
_FOLDS = 3


def _with_squares(Z):
    """``(Z, Z * Z)``: each row (N, d) followed by its features' squares (N, 2 d)."""
    return np.hstack([Z, Z * Z])


def _n_landmarks(n_rows):
    """The Nystroem map's landmark rows, hence its width: ``N_COMPONENTS`` or all the rows."""
    return min(N_COMPONENTS, n_rows)


def _squares_block(rows, seed):
    """``(z, z * z)`` of the non-constant standardized features, at most ``MAX_SQUARES_WIDTH`` wide.

    Constant features are zero once standardized and so are their squares:
    dropped, they cost nothing.  The fit's cost grows with the width of the
    rows, so a block wider than ``MAX_SQUARES_WIDTH`` keeps its leading
    principal components (a cost bound, not a tuned constant).
    """
    steps = [VarianceThreshold(), FunctionTransformer(_with_squares)]
    if 2 * np.count_nonzero(rows.var(axis=0)) > MAX_SQUARES_WIDTH:
        width = min(MAX_SQUARES_WIDTH, len(rows))
        steps.append(PCA(width, svd_solver="randomized", random_state=seed))
    return make_pipeline(*steps)


def _row_map(samples, kernel, rng):
    """The map of ``kernel`` (not ``"linear"``), fitted on the rows of ``samples``.

    The rows are standardized to ``z``; ``"squares"`` gives the block ``(z,
    z * z)`` (:func:`_squares_block`), ``"rbf"`` the Gaussian kernel's rows
    ``phi_rbf(z)``, ``"squares+rbf"`` the one then the other.  ``rng`` draws
    the landmarks and the principal components' sketch.

    Later rows are first clipped to the range each feature had in training
    (``MinMaxScaler(clip=True)``; the training rows pass unchanged): the
    square of a value far beyond that range, on a row the attention picks,
    would carry a bag's logit far beyond any the read-out was fitted on.
    """
    rows = np.concatenate(samples).astype(np.float64)
    seed = rng.randint(2**31 - 1)
    parts = [_squares_block(rows, seed)] if kernel != "rbf" else []
    if kernel != "squares":
        parts.append(Nystroem(gamma=1.0 / rows.shape[1], n_components=_n_landmarks(len(rows)), random_state=seed))
    features = parts[0] if len(parts) == 1 else make_union(*parts)
    return make_pipeline(MinMaxScaler(clip=True), StandardScaler(), features).set_output(transform="default").fit(rows)


def map_rows(row_map, samples):
    """Each sample's rows through ``row_map`` (float32), or the samples themselves when it is None."""
    if row_map is None:
        return samples
    return _split(row_map.transform(np.concatenate(samples).astype(np.float64)).astype(np.float32), samples)


def _mean_rows(samples):
    return np.stack([np.asarray(x, np.float64).mean(axis=0) for x in samples])


def fit_row_map(kernel, samples, Y, sample_weight, random_state):
    """The fitted feature map of ``kernel`` (None: the rows as given) and the kernel it stands for.

    ``"auto"`` chooses on at most ``MAX_SAMPLES`` samples (see the module
    docstring).  ``random_state`` is copied, not advanced: the rest of the
    fit draws what it would draw without a map.
    """
    if kernel == "linear":
        return None, "linear"
    rng = copy.deepcopy(random_state)
    if kernel != "auto":
        return _row_map(samples, kernel, rng), kernel
    samples, Y, w = at_most(samples, np.asarray(Y, np.float64), sample_weight, rng)
    if len(samples) < 2 * _FOLDS:
        return None, "linear"  # too few samples to compare
    row_map = _row_map(samples, "squares+rbf", rng)
    folds = rng.permutation(np.arange(len(samples)) % _FOLDS)
    errors = _linear_errors(samples, Y, w, folds, rng)
    # Judged by the Gaussian rows alone: the map's last columns.
    H = _mean_rows(map_rows(row_map, samples))[:, -_n_landmarks(sum(map(len, samples))):]
    errors["rbf"] = _cv_errors(lambda train: (H[train], H[~train]), Y, w, folds)
    errors["constant"] = _constant_errors(Y, w, folds)
    if _one_standard_error(errors, w, [k for k in errors if k != "rbf"]) != "rbf":
        return None, "linear"
    return row_map, "squares+rbf"


def _constant_errors(Y, w, folds):
    """Each sample's held-out squared error (n,) of the training folds' weighted mean target.

    Kernel rows that do no better than no rows at all leave the rows as given.
    """
    err = np.empty(len(Y))
    for k in range(folds.max() + 1):
        test = folds == k
        mean = w[~test] @ Y[~test] / w[~test].sum()
        err[test] = np.sum((Y[test] - mean) ** 2, axis=1)
    return err


def _linear_errors(samples, Y, w, folds, rng):
    """The held-out errors of the start candidates on the rows as given (:func:`~skdiagatt.diagatt._starts.candidate_errors`).

    A signal that attention can single out among the rows as given shows in
    the mixture and response candidates, which mean-pooled kernel rows must
    then beat (the costlier supervised mixture is left out: it refines the
    mixture's scores, not what the rows can show).  The rows are whitened as
    the model would whiten them.
    """
    c, S = preconditioner(samples, True, w)
    Z, starts = stacked_rows(samples, c, S)
    mixture = rows_mixture(Z, starts, w, 1, affine=True, random_state=rng)
    return candidate_errors(Z, starts, Y, mixture, w, folds, supervised=False)[0]


class RowKernelMixin:
    """The ``kernel`` parameter of DiagAtt's estimators: the rows the model sees, at fit and after.

    Placed before the phased estimator among the bases: :meth:`_map_source`
    maps the training rows before the model's constants are estimated,
    :meth:`_validate_X` maps every later input the same way, and the fitted
    map is kept in ``row_map_`` (None: the rows as given) with ``kernel_``.
    """

    def _map_source(self, source, Y, rng, continued):
        if continued:  # a continued fit keeps the rows of the fit it continues
            row_map, name = self.row_map_, self.kernel_
        elif type(source) is not Samples:
            if self.kernel not in ("auto", "linear"):
                raise ValueError(
                    f"kernel={self.kernel!r} needs the samples in memory (fit or partial_fit); fits on chunks or "
                    "across processes see the rows as given: use kernel='linear' there"
                )
            row_map, name = None, "linear"
        else:
            row_map, name = fit_row_map(self.kernel, source.samples, Y, source.weights, rng)
        self._pending_rows = (row_map, name)
        if row_map is not None:
            source.samples = map_rows(row_map, source.samples)
            source.n_features = source.samples[0].shape[1]
        return source.n_features

    def _validate_X(self, X, *, reset, dtype=np.float32):
        samples = super()._validate_X(X, reset=reset, dtype=dtype)
        return samples if reset else map_rows(self.row_map_, samples)

    def _set_fitted(self, *args):
        super()._set_fitted(*args)
        self.row_map_, self.kernel_ = self.__dict__.pop("_pending_rows")
        return self
