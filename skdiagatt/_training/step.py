"""The compiled optimizer step: the minibatch gather, Adam, runs of steps in one call."""

import math
from functools import partial

import jax
import jax.numpy as jnp
import optax

from ..kernels.rows import PackedRows

__all__ = ["OPTIMIZER", "init_opt_state", "gather", "train_step", "train_steps", "eval_step", "step_size"]

# Clipping keeps one bad minibatch (huge features, tiny temperature) from
# throwing the parameters to a region where the softmax saturates for good.
_CLIP = 10.0
# Flattened: Adam runs as a few ops on one vector instead of a dozen per
# parameter array; the per-op cost of the compiled step dominates small batches.
OPTIMIZER = optax.flatten(optax.chain(optax.clip_by_global_norm(_CLIP), optax.scale_by_adam()))

init_opt_state = jax.jit(OPTIMIZER.init)  # one dispatch instead of an eager op per leaf


def gather(data, idx):
    """The samples ``idx`` (B,) of every bucket array, each gathered as whole rows of a 2-D view.

    Rows of ``L * d`` values instead of ``(L, d)`` blocks give XLA a gather
    with one contiguous slice per sample.

    Packed data (``idx`` a dict, see
    :class:`~skdiagatt._training.batches.Minibatch`): the blocks
    ``idx["blocks"]`` (K,) of the samples ``idx["idx"]`` (B,), with their
    :class:`~skdiagatt.kernels.rows.PackedRows` as ``where``.
    """
    if isinstance(idx, dict):
        X, blocks = data["X"], idx["blocks"]
        return {
            "X": X.reshape(X.shape[0], -1)[blocks].reshape(blocks.shape + X.shape[1:]),
            "where": PackedRows(valid=data["valid"][blocks], seg=idx["seg"], n=idx["idx"].shape[0]),
            "y": data["y"][idx["idx"]],
        }
    out = {}
    for key, v in data.items():
        flat = v.reshape(v.shape[0], -1)[idx] if v.ndim > 2 else v[idx]
        out[key] = flat.reshape(idx.shape + v.shape[1:])
    return out


def train_step(params, opt_state, frozen, data, idx, w, lr, loss_fn, config, n_slices=1):
    """One Adam step on the minibatch ``idx`` (B,) of the bucket ``data``, weights ``w`` (B,).

    Traced, not jitted by itself: :func:`train_steps` runs it.

    With ``n_slices > 1`` the minibatch is differentiated in ``n_slices``
    interleaved slices ``idx[c::n_slices]`` one after the other (a
    ``lax.scan``) and their gradients summed, each with its share of the
    weight: the gradient of the whole minibatch's weighted mean up to float
    rounding, with a working set that stays in cache.  Every slice must hold
    a sample of non-zero weight (as planned by
    :func:`~skdiagatt._training.batches.plan_minibatches`).
    """

    def value_and_grad(i, ws):
        batch = gather(data, i)
        batch["w"] = ws
        return jax.value_and_grad(loss_fn)(params, frozen, batch, config)

    if n_slices == 1:
        loss, grads = value_and_grad(idx, w)
    else:
        # Interleaved slices: with several devices each one is split over all of them.
        idx_s, w_s = jax.tree.map(lambda a: a.reshape(-1, n_slices).T, (idx, w))
        zeros = jax.tree.map(jnp.zeros_like, (jnp.zeros((), jnp.float32), params))

        def add_slice(acc, part):
            i, ws = part
            share = jnp.sum(ws) / jnp.sum(w)
            value = value_and_grad(i, ws)
            return jax.tree.map(lambda a, v: a + share.astype(v.dtype) * v, acc, value), None

        (loss, grads), _ = jax.lax.scan(add_slice, zeros, (idx_s, w_s))
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
    return params, opt_state, loss


@partial(jax.jit, static_argnames=("loss_fn", "config", "n_slices"), donate_argnums=(0, 1))
def train_steps(params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config, n_slices=1):
    """The first ``count`` of ``G`` stacked minibatches of one bucket, one Adam step each, in one call.

    Parameters
    ----------
    params, opt_state, frozen : pytrees
    data : dict of arrays
        The bucket (or the packed data) every minibatch is drawn from.
    idx, w : pytrees of arrays with leading axis G
        Minibatch ``s`` is ``idx[s]``, ``w[s]`` (as :func:`train_step` takes
        them); those from ``count`` on are never read (any valid indices).
    lr : array, shape (G,)
        Step sizes.
    count : int32 scalar
        Steps to run.  An argument, not a shape, so that runs of any length
        share one program and no single-step program is compiled besides it.

    Returns
    -------
    params, opt_state
    losses : array, shape (G,)
        The loss of each step (0 past ``count``).
    """

    def body(s, carry):
        p, o, losses = carry
        p, o, loss = train_step(
            p, o, frozen, data, jax.tree.map(lambda a: a[s], idx), w[s], lr[s], loss_fn, config, n_slices
        )
        return p, o, losses.at[s].set(loss)

    return jax.lax.fori_loop(0, count, body, (params, opt_state, jnp.zeros(lr.shape, jnp.float32)))


@partial(jax.jit, static_argnames=("loss_fn", "config"))
def eval_step(params, frozen, data, idx, w, loss_fn, config):
    """The weighted sum of ``loss_fn`` over the minibatch ``idx`` (validation)."""
    batch = gather(data, idx)
    batch["w"] = w
    return loss_fn(params, frozen, batch, config) * jnp.sum(w)


def step_size(learning_rate, schedule, step, total_steps):
    """The step size of step ``step`` (from 0) of ``total_steps``: constant, or cosine-decayed to 0."""
    if schedule == "constant":
        return learning_rate
    return 0.5 * learning_rate * (1.0 + math.cos(math.pi * step / total_steps))
