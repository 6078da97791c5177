"""P-Tuning-style baseline of NTK-Attention: an explicit, trainable prefix of m rows."""

import numpy as np

from .._shared.params import Integer
from ._frozen_attention import FrozenAttentionBaseline

__all__ = ["PrefixTuningRegressor"]


class PrefixTuningRegressor(FrozenAttentionBaseline):
    """Frozen attention over ``[P; X]`` with a trainable prefix ``P`` (m, d) and read-out.

    The finite-prefix counterpart of :class:`skdiagatt.NTKPrefixRegressor`: the
    prefix rows are parameters, attended exactly (cost grows with m), as in
    P-Tuning v2 / prefix tuning.  Same kernels, loop and sklearn behaviour.

    Parameters
    ----------
    n_heads, head_dim, attention_weights, pooling, causal, alpha, max_iter, \
learning_rate, batch_size, tol, n_iter_no_change, early_stopping, \
validation_fraction, random_state, verbose, callback, warm_start
        As in :class:`skdiagatt.NTKPrefixRegressor`.
    prefix_length : int, default=10
        m, the number of trainable prefix rows, initialised ``N(0, I)``.

    Attributes
    ----------
    params_ : dict of ndarray
        ``P`` (m, d), ``W_out`` (H * d_h, t), ``b`` (t,).

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.baselines.prefix_tuning import PrefixTuningRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = [rng.randn(5, 4) for _ in range(40)]   # 40 samples of 5 rows, d = 4
    >>> y = np.array([x[:, 0].mean() for x in X])
    >>> est = PrefixTuningRegressor(prefix_length=4, max_iter=3, random_state=0).fit(X, y)
    >>> est.predict(X[:2]).shape
    (2,)
    >>> est.params_["P"].shape, est.params_["W_out"].shape   # (m, d), (H * d_h, t)
    ((4, 4), (4, 1))
    >>> bool(est.loss_curve_[-1] < est.loss_curve_[0])
    True
    """

    feature_map = "exact"  # a label: the kernels go by the parameters' names
    init = "prefix"
    _shape_parameters = FrozenAttentionBaseline._shape_parameters + ("prefix_length",)
    _parameter_rules = {**FrozenAttentionBaseline._parameter_rules, "prefix_length": Integer(1)}

    def __init__(
        self,
        n_heads=1,
        *,
        head_dim=None,
        attention_weights=None,
        prefix_length=10,
        pooling="mean",
        causal=False,
        alpha=1e-4,
        max_iter=50,
        learning_rate=0.01,
        batch_size="auto",
        tol=1e-4,
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=0.1,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
    ):
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.attention_weights = attention_weights
        self.prefix_length = prefix_length
        self.pooling = pooling
        self.causal = causal
        self.alpha = alpha
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    def _init_params(self, frozen, t, rng):
        H, d, _ = frozen["W_K"].shape
        dv = frozen["W_V"].shape[-1]
        return {
            "P": rng.standard_normal((self.prefix_length, d)).astype(np.float32),
            "W_out": np.zeros((H * dv, t), np.float32),
            "b": np.zeros(t, np.float32),
        }

    def _param_shapes(self, d, t):
        W = self._projections(d, np.random.RandomState(0))
        H, dv = W["W_K"].shape[0], W["W_V"].shape[-1]
        return {"P": (self.prefix_length, d), "W_out": (H * dv, t), "b": (t,)}
