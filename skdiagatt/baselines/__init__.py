"""Competitors of DiagAtt in the paper's simulation study (the DiagAtt paper, Section 5).

All take the same ragged input as the main estimators (a list of ``(p_i, d)``
arrays or a ``(n, p, d)`` array) and offer ``fit / predict / localize``:

- :class:`GroupLassoRegressor`, :class:`GroupLassoClassifier` -- rows of the
  zero-padded samples as groups (Yuan and Lin, 2006);
- :class:`TwoStepRegressor`, :class:`TwoStepClassifier` -- a Gaussian mixture
  on the pooled rows selects the rows, then a linear / logistic model;
- :class:`StdAttRegressor`, :class:`StdAttClassifier` -- standard multi-head
  self-attention, pooled, linear read-out, trained by the same loop as DiagAtt;
- :class:`OracleRegressor` -- told the true rows: the RMSE floor;
- :class:`PrefixTuningRegressor` -- NTK-Attention's finite counterpart: an
  explicit trainable prefix attended exactly (P-Tuning style);
- :class:`LoRARegressor` -- NTK-Attention's other competitor: low-rank updates
  of the frozen query and value projections (Hu et al., 2022).

MDSP (Tang et al., 2021) is not included: no public implementation exists.
"""

from .group_lasso import GroupLassoClassifier, GroupLassoRegressor
from .lora import LoRARegressor
from .oracle import OracleRegressor
from .prefix_tuning import PrefixTuningRegressor
from .stdatt import StdAttClassifier, StdAttRegressor
from .two_step import TwoStepClassifier, TwoStepRegressor

__all__ = [
    "GroupLassoRegressor",
    "GroupLassoClassifier",
    "TwoStepRegressor",
    "TwoStepClassifier",
    "StdAttRegressor",
    "StdAttClassifier",
    "OracleRegressor",
    "PrefixTuningRegressor",
    "LoRARegressor",
]
