"""skdiagatt: individualized regression on matrix-valued samples.

Estimators take a ragged list of 2-D arrays (rows = tokens, patches or
instances; their number varies per sample) or a 3-D array, and expose
``fit / predict / localize / attention``.  Row-wise transformers
(:mod:`skdiagatt.preprocessing`) learn on the pooled rows of all samples and
map each sample's rows, keeping the ragged layout.  :func:`localize`,
:func:`attention` and :func:`row_contributions` reach the estimator inside a
fitted pipeline or search (:mod:`skdiagatt.inspection`).
"""

from ._training.progress import EpochInfo
from .diagatt import DiagAttClassifier, DiagAttRegressor
from .inspection import attention, localize, row_contributions
from .ntk import NTKPrefixRegressor
from .preprocessing import RowPCA, RowStandardScaler, RowWise

__version__ = "0.1.0"

__all__ = [
    "DiagAttRegressor",
    "DiagAttClassifier",
    "NTKPrefixRegressor",
    "EpochInfo",
    "RowPCA",
    "RowStandardScaler",
    "RowWise",
    "attention",
    "localize",
    "row_contributions",
    "__version__",
]
