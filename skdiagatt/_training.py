"""The one optax training loop shared by every estimator, and chunked inference.

Estimators hand over a loss ``loss_fn(params, frozen, batch, config) -> scalar``
(a module-level function, so jitted steps are cached across fits), the
trainable ``params``, the fixed inputs ``frozen`` and data grouped in padded
buckets.  Each bucket is copied to the device once per fit; minibatches are
gathered on the device.  Array shapes are rounded (bucket lengths by the ragged
layer, sample counts and batch sizes here) so that the number of compiled
shapes stays small and a second fit on similar data compiles nothing new.
"""

import math
import time
import warnings
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.exceptions import ConvergenceWarning

__all__ = ["TrainResult", "device_buckets", "fit_loop", "map_buckets", "round_count"]

# Clipping keeps one bad minibatch (huge features, tiny temperature) from
# throwing the parameters to a region where the softmax saturates for good.
_CLIP = 10.0
_TX = optax.chain(optax.clip_by_global_norm(_CLIP), optax.scale_by_adam())
_PREDICT_ROWS = 1 << 17


def round_count(m):
    """Round a sample count up to 4 significant bits (at most 12.5% more).

    >>> [round_count(m) for m in (1, 5, 17, 100, 9000)]
    [1, 5, 18, 104, 9216]
    """
    if m <= 16:
        return m
    unit = 1 << (m.bit_length() - 4)
    return unit * math.ceil(m / unit)


def _pow2_at_most(m, cap):
    return min(1 << max(0, (m - 1).bit_length()), cap)


@dataclass
class TrainResult:
    """What a call of :func:`fit_loop` did.

    Attributes
    ----------
    loss_curve : list of float
        Mean training objective per epoch.
    validation_curve : list of float
        Mean validation objective per epoch (empty without validation data).
    n_iter : int
        Epochs run.
    stopped : str
        ``"max_iter"``, ``"tol"`` (no improvement) or ``"non-finite"``.
    """

    loss_curve: list = field(default_factory=list)
    validation_curve: list = field(default_factory=list)
    n_iter: int = 0
    stopped: str = "max_iter"


def device_buckets(buckets, targets):
    """Copy bucketed data to the device once, sample counts rounded up.

    Parameters
    ----------
    buckets : Buckets
        From :func:`skdiagatt._ragged.make_buckets`.
    targets : ndarray of shape (n, ...) or list of n arrays (row-level targets,
        padded here to each bucket's length), or None

    Returns
    -------
    list of (dict of jax arrays, int)
        Per bucket the arrays ``X``, ``where`` (and ``y``) and the count of
        real samples (the leading rows; the rest is filler never drawn).
    """
    out = []
    for b in buckets.buckets:
        m = b.index.size
        cap = round_count(m)
        data = {"X": b.X, "where": b.where}
        if targets is not None:
            if isinstance(targets, list):
                t = targets[0].shape[1:]
                y = np.zeros((m, b.length) + t, dtype=np.float32)
                for k, i in enumerate(b.index):
                    y[k, : targets[i].shape[0]] = targets[i]
            else:
                y = targets[b.index]
            data["y"] = y
        padded = {}
        for key, arr in data.items():
            fill = np.zeros((cap - m,) + arr.shape[1:], dtype=arr.dtype)
            padded[key] = jnp.asarray(np.concatenate([arr, fill]))
        out.append((padded, m))
    return out


@partial(jax.jit, static_argnames=("loss_fn", "config"), donate_argnums=(0, 1))
def _train_step(params, opt_state, frozen, data, idx, w, lr, loss_fn, config):
    batch = {k: v[idx] for k, v in data.items()}
    batch["w"] = w
    loss, grads = jax.value_and_grad(loss_fn)(params, frozen, batch, config)
    updates, opt_state = _TX.update(grads, opt_state, params)
    params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
    return params, opt_state, loss


@partial(jax.jit, static_argnames=("loss_fn", "config"))
def _eval_step(params, frozen, data, idx, w, loss_fn, config):
    batch = {k: v[idx] for k, v in data.items()}
    batch["w"] = w
    return loss_fn(params, frozen, batch, config) * jnp.sum(w)


def _batches(data, batch_size, rng):
    """Index arrays of fixed size per bucket; the last one padded with weight 0."""
    out = []
    for b, (_, m) in enumerate(data):
        size = _pow2_at_most(m, batch_size)
        perm = rng.permutation(m) if rng is not None else np.arange(m)
        for start in range(0, m, size):
            idx = perm[start : start + size]
            w = np.ones(size, dtype=np.float32)
            if idx.size < size:
                w[idx.size :] = 0.0
                idx = np.concatenate([idx, np.zeros(size - idx.size, dtype=idx.dtype)])
            out.append((b, idx, w))
    if rng is not None:
        order = rng.permutation(len(out))
        out = [out[k] for k in order]
    return out


def _mean_loss(params, frozen, data, loss_fn, config, batch_size):
    total, count = 0.0, 0.0
    for b, idx, w in _batches(data, batch_size, None):
        total += float(_eval_step(params, frozen, data[b][0], idx, w, loss_fn, config))
        count += float(w.sum())
    return total / count


def fit_loop(
    loss_fn,
    config,
    params,
    frozen,
    data,
    *,
    max_iter,
    learning_rate,
    batch_size,
    random_state,
    tol=1e-4,
    n_iter_no_change=5,
    validation=None,
    verbose=0,
    label="fit",
):
    """Minimise ``loss_fn`` with Adam on minibatches, cosine-decayed step size.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(params, frozen, batch, config) -> scalar``; ``batch`` holds
        the bucket arrays gathered at the batch indices and ``w`` (B,), the
        sample weights (0 for filler).  Must be a module-level function.
    config : hashable
        Static settings passed to ``loss_fn``.
    params, frozen : dict of arrays
        Trained and fixed inputs.
    data : list
        From :func:`device_buckets`.
    max_iter : int
        Epochs; the step size decays from ``learning_rate`` to 0 over them.
    learning_rate : float
    batch_size : int
    random_state : numpy RandomState
        Shuffles the minibatches.
    tol, n_iter_no_change : float, int
        Stop when the monitored loss (validation if given, else training) has
        not improved by ``tol`` for ``n_iter_no_change`` epochs.
    validation : list or None
        Held-out data in the layout of ``data``; the best epoch's parameters
        are returned.
    verbose : int
        Print one line per epoch when > 0.
    label : str
        Prefix of the progress lines.

    Returns
    -------
    params : dict of numpy arrays
    result : TrainResult
    """
    params = jax.tree.map(jnp.asarray, params)
    frozen = jax.tree.map(jnp.asarray, frozen)
    opt_state = _TX.init(params)
    steps_per_epoch = len(_batches(data, batch_size, None))
    total_steps = max(1, max_iter * steps_per_epoch)
    result = TrainResult()
    best, best_params, stale = np.inf, None, 0
    last_good = jax.tree.map(np.array, params)
    step = 0
    start = time.perf_counter()
    for epoch in range(max_iter):
        losses, weights = [], []
        for b, idx, w in _batches(data, batch_size, random_state):
            lr = 0.5 * learning_rate * (1.0 + math.cos(math.pi * step / total_steps))
            params, opt_state, loss = _train_step(
                params, opt_state, frozen, data[b][0], idx, w, np.float32(lr), loss_fn, config
            )
            losses.append(loss)
            weights.append(w.sum())
            step += 1
        epoch_loss = float(np.dot(np.asarray(jnp.stack(losses)), weights) / np.sum(weights))
        if not np.isfinite(epoch_loss):
            warnings.warn(
                f"{label}: the objective became non-finite at epoch {epoch + 1}; "
                "training stopped and the last finite parameters were kept. "
                "Try a smaller learning_rate or a larger temperature.",
                ConvergenceWarning,
                stacklevel=3,
            )
            result.stopped = "non-finite"
            params = last_good
            break
        last_good = jax.tree.map(np.array, params)
        result.loss_curve.append(epoch_loss)
        result.n_iter = epoch + 1
        monitored = epoch_loss
        if validation is not None:
            monitored = _mean_loss(params, frozen, validation, loss_fn, config, batch_size)
            result.validation_curve.append(monitored)
        if verbose:
            val = f", validation {monitored:.5f}" if validation is not None else ""
            print(
                f"[{label}] epoch {epoch + 1}/{max_iter}: loss {epoch_loss:.5f}{val}, "
                f"{time.perf_counter() - start:.1f}s",
                flush=True,
            )
        if monitored < best - tol:
            best, stale = monitored, 0
            if validation is not None:
                best_params = last_good
        else:
            stale += 1
        if stale >= n_iter_no_change:
            result.stopped = "tol"
            break
    if validation is not None and best_params is not None:
        params = best_params
    return jax.tree.map(np.asarray, params), result


def map_buckets(fn, buckets, *args):
    """Apply a jitted ``fn(*args, X, where)`` to every bucket in fixed-size chunks.

    Chunks hold a power-of-two number of samples (about ``2**17`` rows at
    most); the last one is completed with copies of its first sample, whose
    results are dropped.

    Returns
    -------
    list (one per bucket) of pytrees of numpy arrays with leading axis m_b
    """
    out = []
    for b in buckets.buckets:
        m, L = b.X.shape[0], b.X.shape[1]
        size = _pow2_at_most(m, max(1, _PREDICT_ROWS // L))
        parts = []
        for start in range(0, m, size):
            X, where = b.X[start : start + size], b.where[start : start + size]
            k = X.shape[0]
            if k < size:
                X = np.concatenate([X, np.repeat(X[:1], size - k, axis=0)])
                where = np.concatenate([where, np.repeat(where[:1], size - k, axis=0)])
            res = fn(*args, jnp.asarray(X), jnp.asarray(where))
            parts.append(jax.tree.map(lambda a: np.asarray(a)[:k], res))
        out.append(jax.tree.map(lambda *a: np.concatenate(a), *parts))
    return out
