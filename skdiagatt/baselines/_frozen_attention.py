"""What the competitors of NTK-Attention share: its kernels and loop, minus its prefix state."""

from .._shared.params import TRAINING_RULES, Anything, Boolean, Either, Integer, Options, Real, derived_init
from ..ntk import NTKPrefixRegressor

__all__ = ["FrozenAttentionBaseline"]

#: The parameters of NTK-Attention that concern its prefix state: the baselines fix them.
_PREFIX_STATE = ("feature_map", "degree", "prefix_length", "init", "train_state", "state_scale", "solver")


class FrozenAttentionBaseline(NTKPrefixRegressor):
    """:class:`~skdiagatt.NTKPrefixRegressor` with a trainable part of its own instead of ``Z`` and ``k``.

    A subclass names its own parameter in the class statement,
    ``class LoRARegressor(FrozenAttentionBaseline, parameter=("rank", 8, Integer(1)))``
    (name, default, rule): it takes NTK-Attention's parameters but those of
    its prefix state, and that one after ``attention_weights``, which sets
    the trained parameters' shapes.  It defines ``_init_params`` and
    ``_param_shapes``; the kernels (:mod:`skdiagatt.kernels.ntk_readout`)
    tell the methods apart by the names of the trained parameters.
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
        "alpha_value": Either(Options("auto"), Real(0.0, closed=True)),
    }

    def __init_subclass__(cls, parameter=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if parameter is not None:
            name, default, rule = parameter
            # NTK-Attention's parameters but its prefix state's, and this one
            # after attention_weights, which sets the trained parameters' shapes.
            cls.__init__ = derived_init(NTKPrefixRegressor.__init__, drop=_PREFIX_STATE, add=[(name, default)],
                                        after="attention_weights")
            cls._shape_parameters = FrozenAttentionBaseline._shape_parameters + (name,)
            cls._parameter_rules = {**FrozenAttentionBaseline._parameter_rules, name: rule}
