"""What the competitors of NTK-Attention share: its kernels and loop, minus its prefix state."""

from .._shared.params import TRAINING_RULES, Anything, Boolean, Either, Integer, Options, Real
from ..ntk import NTKPrefixRegressor

__all__ = ["FrozenAttentionBaseline"]


class FrozenAttentionBaseline(NTKPrefixRegressor):
    """:class:`~skdiagatt.NTKPrefixRegressor` with a trainable part of its own instead of ``Z`` and ``k``.

    Subclasses add their parameters to ``_parameter_rules`` and
    ``_shape_parameters`` and define ``_init_params`` and ``_param_shapes``;
    the kernels (:mod:`skdiagatt.kernels.ntk_readout`) tell the methods
    apart by the names of the trained parameters.
    """

    # Settings of the parent that the baselines fix: Adam, in raw units.
    degree = 0
    train_state = True
    state_scale = 1.0
    solver = "adam"
    _shape_parameters = ("n_heads", "head_dim", "attention_weights")
    _parameter_rules = {
        **TRAINING_RULES,
        "n_heads": Integer(1),
        "head_dim": Either(Options(None), Integer(1)),
        "attention_weights": Anything(),
        "pooling": Options("mean", "first", None),
        "causal": Boolean(),
        "alpha": Real(0.0, closed=True),
    }
