"""The compiled optimizer step: the minibatch gather, Adam, runs of steps in one call."""

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree
from jax.sharding import PartitionSpec as P

from ..kernels.rows import PackedRows

__all__ = [
    "OPTIMIZER", "init_opt_state", "gather", "train_step", "train_steps", "train_steps_across", "eval_step",
    "step_size",
]

# The mesh axis of a fit across processes: one device per process.
_AXIS = "batch"
# Clipping keeps one bad minibatch (huge features, tiny temperature) from
# throwing the parameters to a region where the softmax saturates for good.
_CLIP = 10.0
# Flattened: Adam runs as a few ops on one vector instead of a dozen per
# parameter array; the per-op cost of the compiled step dominates small batches.
OPTIMIZER = optax.flatten(optax.chain(optax.clip_by_global_norm(_CLIP), optax.scale_by_adam()))


def init_opt_state(params):
    """``OPTIMIZER.init(params)``, built on the host without compiling a program.

    Adam starts with its step count and both moment estimates at zero
    (Kingma & Ba, ICLR 2015, Algorithm 1) and the norm clipping keeps no
    state, so the state is zeros of the shapes ``OPTIMIZER.init`` traces to;
    a jitted ``init`` would compile one small program per parameter size,
    for each phase of a fit on new shapes.
    """
    return jax.tree.map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), jax.eval_shape(OPTIMIZER.init, params))


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


def train_step(params, opt_state, frozen, data, idx, w, lr, loss_fn, config, n_slices=1, reduce=None):
    """One Adam step on the minibatch ``idx`` (B,) of the bucket ``data``, weights ``w`` (B,).

    Traced, not jitted by itself: :func:`train_steps` runs it.

    With ``n_slices > 1`` the minibatch is differentiated in ``n_slices``
    interleaved slices ``idx[c::n_slices]`` one after the other (a
    ``lax.scan``) and their gradients summed, each with its share of the
    weight: the gradient of the whole minibatch's weighted mean up to float
    rounding, with a working set that stays in cache.  Every slice must hold
    a sample of non-zero weight (as planned by
    :func:`~skdiagatt._training.batches.plan_minibatches`).

    ``reduce(loss, grads, w)``, when given, turns this minibatch's loss and
    gradient into those of the minibatch of every process
    (:func:`train_steps_across`) before the update.
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
    if reduce is not None:
        loss, grads = reduce(loss, grads, w)
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
    return _run_steps(params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config, n_slices)


def _run_steps(params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config, n_slices, reduce=None):
    """The loop of :func:`train_steps` (traced)."""

    def body(s, carry):
        p, o, losses = carry
        p, o, loss = train_step(
            p, o, frozen, data, jax.tree.map(lambda a: a[s], idx), w[s], lr[s], loss_fn, config, n_slices, reduce
        )
        return p, o, losses.at[s].set(loss)

    return jax.lax.fori_loop(0, count, body, (params, opt_state, jnp.zeros(lr.shape, jnp.float32)))


def _across_processes(loss, grads, w):
    """This process's minibatch loss and gradient -> those of all processes' minibatches together.

    Each process's weighted mean enters with its weight, so the result is
    the weighted mean over every process's samples (plus the penalty, the
    same in every process).  A process without a sample in this step
    (weight 0: its mean is 0 / 0) contributes nothing.  The loss, the
    gradient and the weight travel as one vector: one collective per step.
    """
    mine = jnp.sum(w)
    flat, unravel = ravel_pytree((loss, grads))
    flat = jnp.where(mine > 0, jnp.append(mine * flat, mine), 0)
    total = jax.lax.psum(flat, _AXIS)
    return unravel(total[:-1] / total[-1])


@partial(jax.jit, static_argnames=("loss_fn", "config", "mesh"), donate_argnums=(0, 1))
def train_steps_across(params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config, mesh):
    """:func:`train_steps` with one process's shard of ``data``, ``idx`` and ``w`` on each device of ``mesh``.

    ``mesh`` has one axis, ``"batch"``, of one device per process; ``data``'s
    arrays are sharded along their first axis, ``idx`` and ``w`` along
    their second (each process's own minibatches, indices into its own
    shard), the rest is replicated.  Every step's loss and gradient are
    summed over the processes (:func:`_across_processes`), so the update,
    hence the parameters, are the same everywhere.  Minibatches are not
    sliced.
    """
    rep, rows, steps = P(), P(_AXIS), P(None, _AXIS)

    def local(params, opt_state, frozen, data, idx, w, lr, count):
        return _run_steps(params, opt_state, frozen, data, idx, w, lr, count, loss_fn, config, 1, _across_processes)

    # Unchecked: the kernels' custom gradients do not declare how their values
    # vary over the mesh; the outputs are replicated because every update
    # follows a psum.
    run = jax.shard_map(local, mesh=mesh, in_specs=(rep, rep, rep, rows, steps, steps, rep, rep),
                        out_specs=(rep, rep, rep), check_vma=False)
    return run(params, opt_state, frozen, data, idx, w, lr, count)


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
