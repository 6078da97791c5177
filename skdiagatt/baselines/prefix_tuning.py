"""P-Tuning-style baseline of NTK-Attention: an explicit, trainable prefix of m rows."""

import numpy as np

from .._shared.params import Integer
from ._frozen_attention import FrozenAttentionBaseline

__all__ = ["PrefixTuningRegressor"]


class PrefixTuningRegressor(FrozenAttentionBaseline, parameter=("prefix_length", 10, Integer(1))):
    """Frozen attention over ``[P; X]`` with a trainable prefix ``P`` (m, d) and read-out.

    The finite-prefix counterpart of :class:`skdiagatt.NTKPrefixRegressor`: the
    prefix rows are parameters, attended exactly (cost grows with m), as in
    P-Tuning v2 / prefix tuning.  Same kernels, loop and sklearn behaviour.

    Parameters
    ----------
    n_heads, head_dim, attention_weights
        As in :class:`skdiagatt.NTKPrefixRegressor`.
    prefix_length : int, default=10
        m, the number of trainable prefix rows, initialised ``N(0, I)``.
    pooling, causal, alpha_value, max_iter, learning_rate, batch_size, tol, n_iter_no_change, \
early_stopping, validation_fraction, random_state, verbose, callback, warm_start
        As in :class:`skdiagatt.NTKPrefixRegressor`.

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
