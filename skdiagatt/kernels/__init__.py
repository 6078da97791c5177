"""Pure JAX numerical kernels.

Nothing in this sub-package imports scikit-learn or knows about estimators:
every function takes padded arrays and a boolean row mask and returns arrays
(the DiagAtt objectives also take packed blocks of rows: :mod:`.rows`).
Every matrix product goes through :mod:`skdiagatt.kernels._matmul` and runs
at float32 precision on every backend (not TensorFloat-32 on a GPU).
"""
