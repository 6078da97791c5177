"""Pure JAX numerical kernels.

Nothing in this sub-package imports scikit-learn or knows about estimators:
every function takes padded arrays and a boolean row mask and returns arrays.
"""
