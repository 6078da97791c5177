"""skdiagatt: individualized regression on matrix-valued samples.

Estimators take a ragged list of 2-D arrays (rows = tokens, patches or
instances; their number varies per sample) or a 3-D array, and expose
``fit / predict / localize / attention``.  Row-wise transformers
(:mod:`skdiagatt.preprocessing`) learn on the pooled rows of all samples and
map each sample's rows, keeping the ragged layout.  :func:`localize`,
:func:`attention` and :func:`row_contributions` reach the estimator inside a
fitted pipeline or search (:mod:`skdiagatt.inspection`).
:func:`set_compilation_cache` keeps compiled programs on disk for later
processes; the environment variable ``SKDIAGATT_COMPILATION_CACHE`` does the
same from the shell.
"""

from . import _compilation
from ._compilation import compilation_cache, set_compilation_cache
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
    "set_compilation_cache",
    "compilation_cache",
    "__version__",
]

# Opt-in: importing skdiagatt changes JAX's settings only when this variable is set.
_compilation.cache_from_environment()
