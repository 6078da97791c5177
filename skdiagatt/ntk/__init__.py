"""NTK-Attention (Liang, Shi, Song, Yang, arXiv 2406.14036): ``NTKPrefixRegressor``.

The estimator (``_estimator``) with its prefix state (``_prefix_state``) and
the exact solve of the state (``_solve``), on the shared estimator shell
(:mod:`skdiagatt._shared`) and the JAX kernels (:mod:`skdiagatt.kernels.ntk_readout`).
"""

from ._estimator import NTKPrefixRegressor

__all__ = ["NTKPrefixRegressor"]
