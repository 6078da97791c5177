import os

# On a GPU, XLA times candidate kernels for each product in every process and
# keeps the fastest; the pick can change the last bits of a result, so a model
# reloaded in a fresh process predicts bit for bit as before only with that
# choice fixed (docs/results/devices.md).  CPUs ignore the flag.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_deterministic_ops=true").strip()

import numpy as np
import pytest

from skdiagatt.datasets import make_individualized_classification, make_individualized_regression

#: scikit-learn's estimator checks that need no data (ragged input is not
#: what ``check_estimator``'s data checks feed), run for every estimator.
DATA_FREE_CHECKS = [
    "check_no_attributes_set_in_init",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    "check_estimator_repr",
    "check_estimator_cloneable",
]


@pytest.fixture(scope="session")
def reg_data():
    """Small ragged regression data: 120 samples of 4 to 12 rows, d = 3."""
    X, y, rows, truth = make_individualized_regression(
        120, n_rows=(4, 12), n_features=3, random_state=0
    )
    return X, y, rows, truth


@pytest.fixture(scope="session")
def cls_data():
    X, y, rows, truth = make_individualized_classification(
        120, n_rows=(4, 12), n_features=3, random_state=1
    )
    return X, y, rows, truth


def grid_sensitive_samples():
    """Ragged samples whose buckets differ between the coarse grid (48, 64) and the fine one (40, 48, 56, 64)."""
    rng = np.random.RandomState(1)
    return [rng.randn(p, 3).astype(np.float32) for p in (35, 41, 50, 60, 35, 60)]


def numpy_diagatt(X_list, Q, V, b, lin=None):
    """float64 reference of the DiagAtt prediction: a loop over unpadded samples.

    Q (R, d, d) query-key matrices with temperature folded in, V (R, d, t), b (t,),
    lin (R, d) optional linear score terms, temperature folded in.
    """
    z, kappas = [], []
    for Xi in X_list:
        Xi = np.asarray(Xi, np.float64)
        psi = np.einsum("pa,rab,pb->rp", Xi, Q, Xi)
        if lin is not None:
            psi = psi + lin @ Xi.T
        k = np.exp(psi - psi.max(axis=1, keepdims=True))
        k /= k.sum(axis=1, keepdims=True)
        z.append(b + sum(k[r] @ Xi @ V[r] for r in range(Q.shape[0])))
        kappas.append(k)
    return np.array(z), kappas
