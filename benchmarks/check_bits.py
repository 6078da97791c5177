"""Bit-identity check of a fixed set of small fits, for refactorings that must not change results.

Every case fits an estimator through the public API and records its fitted
arrays (parameters, loss and validation curves, statistics) and its
predictions.  ``save`` writes them to an ``.npz`` file; ``cmp`` refits and
requires every array to be equal bit for bit (same dtype, same shape, NaN
where the reference has NaN)::

    python benchmarks/check_bits.py save /tmp/bits.npz    # before the change
    python benchmarks/check_bits.py cmp /tmp/bits.npz     # after it

The cases cover the training paths: bucketed and packed (ragged) data,
minibatches differentiated in slices, several heads, ``value_refit``, early
stopping, warm starts, low-rank and exclusive heads, the classifier (also
multiple-instance), NTK-Attention (row targets, frozen state, varpro), the
standard-attention baseline, ``partial_fit`` and ``fit_chunks``.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import jax  # noqa: E402

from skdiagatt import DiagAttClassifier, DiagAttRegressor, NTKPrefixRegressor  # noqa: E402
from skdiagatt.baselines import StdAttClassifier, StdAttRegressor  # noqa: E402
from skdiagatt.datasets import (  # noqa: E402
    make_individualized_classification,
    make_individualized_regression,
)


def _regression(n, n_rows, d=6, seed=0):
    return make_individualized_regression(n, n_rows=n_rows, n_features=d, random_state=seed)[:2]


def _fit(est, X, y):
    est.fit(X, y)
    return est, X


def _partial(est, X, y):
    for start in range(0, len(y), 40):
        est.partial_fit(X[start : start + 40], y[start : start + 40])
    return est, X


def _chunks(est, X, y):
    est.fit_chunks([(X[:60], y[:60]), (X[60:], y[60:])])
    return est, X


def _warm(est, X, y):
    est.fit(X, y)
    est.set_params(warm_start=True).fit(X[::-1], y[::-1])
    return est, X


def _partial_classes(est, X, y):
    classes = np.unique(y)
    for start in range(0, len(y), 40):
        est.partial_fit(X[start : start + 40], y[start : start + 40], classes=classes)
    return est, X


def _row_targets(X):
    return [x[:, 0] - x[:, 1] for x in X]


def _cases():
    """Name -> (estimator, data, how it is fitted)."""
    equal = _regression(120, 12)
    ragged = _regression(120, (5, 40), seed=1)
    long = _regression(64, 1100, d=5, seed=2)  # minibatches of more rows than one slice
    long_ragged = _regression(96, (400, 700), d=5, seed=3)
    cls = make_individualized_classification(120, n_rows=(5, 30), n_features=6, random_state=4)[:2]
    fast = dict(max_iter=4, random_state=0)
    return {
        "diagatt_bucketed": (DiagAttRegressor(**fast), equal, _fit),
        "diagatt_packed": (DiagAttRegressor(**fast), ragged, _fit),
        "diagatt_2heads": (DiagAttRegressor(n_heads=2, **fast), ragged, _fit),
        "diagatt_value_refit": (DiagAttRegressor(value_refit=True, **fast), equal, _fit),
        "diagatt_early_stopping": (DiagAttRegressor(early_stopping=True, **fast), ragged, _fit),
        "diagatt_bucket_slices": (DiagAttRegressor(max_iter=2, batch_size=32, random_state=0), long, _fit),
        "diagatt_packed_slices": (DiagAttRegressor(max_iter=2, batch_size=32, random_state=0), long_ragged, _fit),
        "diagatt_classifier": (DiagAttClassifier(**fast), cls, _fit),
        "diagatt_partial_fit": (DiagAttRegressor(random_state=0), ragged, _partial),
        "diagatt_fit_chunks": (DiagAttRegressor(**fast), ragged, _chunks),
        "ntk": (NTKPrefixRegressor(prefix_length=16, **fast), ragged, _fit),
        "ntk_partial_fit": (NTKPrefixRegressor(prefix_length=16, random_state=0), ragged, _partial),
        "ntk_fit_chunks": (NTKPrefixRegressor(prefix_length=16, **fast), ragged, _chunks),
        "stdatt_ragged": (StdAttRegressor(**fast), ragged, _fit),
        "diagatt_warm_start": (DiagAttRegressor(**fast), ragged, _warm),
        "diagatt_low_rank": (DiagAttRegressor(rank=2, symmetric=False, score_form="quadratic", **fast), ragged, _fit),
        "diagatt_exclusive": (DiagAttRegressor(n_heads=2, exclusive_heads=True, init="mixture", **fast), ragged, _fit),
        "diagatt_classifier_partial_fit": (DiagAttClassifier(random_state=0), cls, _partial_classes),
        "diagatt_classifier_chunks": (DiagAttClassifier(**fast), cls, _chunks),
        "diagatt_mil": (DiagAttClassifier(assumption="standard-mil", learning_rate=0.1, **fast), cls, _fit),
        "diagatt_mil_partial_fit": (DiagAttClassifier(assumption="standard-mil", random_state=0), cls, _partial),
        "ntk_warm_start": (NTKPrefixRegressor(prefix_length=16, **fast), ragged, _warm),
        "ntk_early_stopping": (NTKPrefixRegressor(prefix_length=16, early_stopping=True, **fast), ragged, _fit),
        "ntk_frozen_state": (NTKPrefixRegressor(train_state=False, state_scale=4.0, **fast), ragged, _fit),
        "ntk_rows": (NTKPrefixRegressor(prefix_length=16, pooling=None, **fast), (ragged[0], _row_targets(ragged[0])), _fit),
        "ntk_varpro": (NTKPrefixRegressor(prefix_length=16, solver="varpro", **fast), ragged, _fit),
        "stdatt_latent_classifier": (StdAttClassifier(objective="latent", **fast), cls, _fit),
        "stdatt_warm_start": (StdAttRegressor(**fast), equal, _warm),
    }


def _arrays(name, est, X):
    """The fitted state and predictions of one case as ``{key: ndarray}``."""
    out = {}
    for attr, value in sorted(vars(est).items()):
        if not attr.endswith("_") or attr.startswith("_") or value is None:
            continue
        leaves = jax.tree_util.tree_leaves_with_path(value)
        for path, leaf in leaves:
            if isinstance(leaf, (str, bytes)):
                continue
            arr = np.asarray(leaf)
            if arr.dtype == object:
                continue
            out[f"{name}/{attr}{jax.tree_util.keystr(path)}"] = arr
    pred = est.predict(X)
    out[f"{name}/predict"] = np.concatenate(pred) if isinstance(pred, list) else np.asarray(pred)
    return out


def record(names=None):
    out = {}
    for name, (est, (X, y), how) in _cases().items():
        if names and name not in names:
            continue
        out.update(_arrays(name, *how(est, X, y)))
        print(f"{name}: fitted", flush=True)
    return out


def compare(reference, current):
    """The keys that differ (missing, extra, or not bit-identical)."""
    bad = sorted(set(reference) ^ set(current))
    for key in sorted(set(reference) & set(current)):
        a, b = reference[key], current[key]
        same = a.dtype == b.dtype and a.shape == b.shape and (
            a.tobytes() == b.tobytes() if a.dtype.kind != "f" else np.array_equal(a, b, equal_nan=True)
        )
        if not same:
            bad.append(key)
    return bad


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["save", "cmp"])
    parser.add_argument("file")
    parser.add_argument("--case", action="append", help="only these cases (repeatable)")
    args = parser.parse_args(argv)
    current = record(args.case)
    if args.action == "save":
        np.savez(args.file, **current)
        print(f"saved {len(current)} arrays to {args.file}")
        return 0
    with np.load(args.file) as f:
        reference = {k: f[k] for k in f.files if not args.case or k.split("/")[0] in args.case}
    bad = compare(reference, current)
    for key in bad:
        print(f"DIFFERS: {key}")
    print(f"{len(current) - len(bad)} of {len(current)} arrays bit-identical" if not bad else f"{len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
