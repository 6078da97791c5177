"""What the competitors of NTK-Attention share: its kernels and loop, minus its prefix state."""

import inspect

from .._shared.params import TRAINING_RULES, Anything, Boolean, Either, Integer, Options, Real
from ..ntk import NTKPrefixRegressor

__all__ = ["FrozenAttentionBaseline"]

#: The parameters of NTK-Attention that concern its prefix state: the baselines fix them.
_PREFIX_STATE = ("feature_map", "degree", "prefix_length", "init", "train_state", "state_scale", "solver")


def _constructor(name, default):
    """An ``__init__`` taking NTK-Attention's parameters but its prefix state's, and ``name=default``.

    scikit-learn reads an estimator's parameters from the signature of its
    ``__init__``; building it from NTK-Attention's keeps the baselines' lists
    of parameters (same names, same defaults, same order) from drifting
    apart from it.  The ``__init__`` stores every argument unchanged under
    its own name, as scikit-learn requires.
    """
    shared = [p for p in inspect.signature(NTKPrefixRegressor.__init__).parameters.values()
              if p.name not in _PREFIX_STATE]
    at = [p.name for p in shared].index("attention_weights") + 1
    own = inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
    signature = inspect.Signature(shared[:at] + [own] + shared[at:])

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for key, value in list(bound.arguments.items())[1:]:  # after self
            setattr(self, key, value)

    __init__.__signature__ = signature
    return __init__


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
        "alpha_value": Real(0.0, closed=True),
    }

    def __init_subclass__(cls, parameter=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if parameter is not None:
            name, default, rule = parameter
            cls.__init__ = _constructor(name, default)
            cls._shape_parameters = FrozenAttentionBaseline._shape_parameters + (name,)
            cls._parameter_rules = {**FrozenAttentionBaseline._parameter_rules, name: rule}
