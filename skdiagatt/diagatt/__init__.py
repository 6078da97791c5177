"""Diagonalized attention (Peng, Lin, Wang, Feng, arXiv 2609.21320): ``DiagAttRegressor``, ``DiagAttClassifier``.

The estimators (``_estimators``) assemble DiagAtt's own parts: the start of
the row scores (``_mixture``, ``_starts``), the read-out refit
(``_evidence``, ``_readout``), the kernel rows (``_row_kernel``) and the
multiple-instance read-out of the classifier (``_mil``), on the shared
estimator shell (:mod:`skdiagatt._shared`) and the JAX kernels
(:mod:`skdiagatt.kernels.diagatt`).
"""

from ._estimators import DiagAttClassifier, DiagAttRegressor

__all__ = ["DiagAttRegressor", "DiagAttClassifier"]
