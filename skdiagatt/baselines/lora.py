"""LoRA baseline of NTK-Attention: low-rank updates of a frozen layer's query and value projections."""

import math

import numpy as np

from .._shared.params import Integer
from ._frozen_attention import FrozenAttentionBaseline

__all__ = ["LoRARegressor"]


class LoRARegressor(FrozenAttentionBaseline, parameter=("rank", 8, Integer(1))):
    """Self-attention whose ``W_Q`` and ``W_V`` get trainable rank-``q`` updates, and a read-out.

    LoRA (Hu et al., 2022) adapts a frozen pretrained projection ``W`` by
    ``W + A B`` with ``A`` (d, q) and ``B`` (q, outputs); the paper's default,
    followed here, adapts the query and value projections.  Each row's output
    is plain softmax attention over the sample's rows with the adapted
    projections (no prefix), pooled and read out linearly, as in
    :class:`skdiagatt.NTKPrefixRegressor`, whose kernels, training loop and
    sklearn behaviour it shares.  ``B`` starts at zero, so training starts
    from the frozen layer.

    Parameters
    ----------
    n_heads, head_dim, attention_weights
        As in :class:`skdiagatt.NTKPrefixRegressor`.
    rank : int, default=8
        q, the rank of each update.  ``A`` starts ``N(0, 1 / d)``.
    pooling, causal, alpha_value, max_iter, learning_rate, batch_size, tol, n_iter_no_change, \
early_stopping, validation_fraction, random_state, verbose, callback, warm_start
        As in :class:`skdiagatt.NTKPrefixRegressor`.

    Attributes
    ----------
    params_ : dict of ndarray
        ``A_Q`` (d, q), ``B_Q`` (H, q, d_h), ``A_V`` (d, q), ``B_V`` (H, q, d_v),
        ``W_out`` (H * d_v, t), ``b`` (t,).

    Examples
    --------
    >>> import numpy as np
    >>> from skdiagatt.baselines import LoRARegressor
    >>> rng = np.random.RandomState(0)
    >>> X = [rng.randn(5, 4) for _ in range(40)]   # 40 samples of 5 rows, d = 4
    >>> y = np.array([x[:, 0].mean() for x in X])
    >>> est = LoRARegressor(rank=2, max_iter=3, random_state=0).fit(X, y)
    >>> est.predict(X[:2]).shape
    (2,)
    >>> est.params_["A_Q"].shape, est.params_["B_V"].shape   # (d, q), (H, q, d_v)
    ((4, 2), (1, 2, 4))
    """

    feature_map = "lora"  # a label: the kernels go by the parameters' names
    init = "zeros"

    def _init_params(self, frozen, t, rng):
        shapes = self._shapes(frozen, t)
        params = {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}
        d = frozen["W_K"].shape[1]
        for name in ("A_Q", "A_V"):
            params[name] = (rng.standard_normal(shapes[name]) / math.sqrt(d)).astype(np.float32)
        return params

    def _shapes(self, W, t):
        H, d, dh = W["W_K"].shape
        dv, q = W["W_V"].shape[-1], int(self.rank)
        return {"A_Q": (d, q), "B_Q": (H, q, dh), "A_V": (d, q), "B_V": (H, q, dv),
                "W_out": (H * dv, t), "b": (t,)}

    def _param_shapes(self, d, t):
        return self._shapes(self._projections(d, np.random.RandomState(0)), t)
