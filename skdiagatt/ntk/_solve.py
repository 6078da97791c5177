"""``NTKPrefixRegressor(solver="varpro")``: ``k`` by L-BFGS, ``Z`` and the read-out exactly."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._training.progress import Progress
from ..kernels.ntk_varpro import (
    data_moments,
    heldout_loss,
    ridge_from_moments,
    ridge_gcv,
    state_from_ridge,
    varpro_loss,
)

__all__ = ["fit_varpro", "mass_path", "gated_state", "ALPHAS", "LOG_GATES"]

#: ``alpha_value="auto"``: the read-out penalties compared, relative to the design's mean variance.
ALPHAS = np.logspace(-6, 2, 17)
#: ``init="auto"``: the factors (their logs) the initial prefix's mass is multiplied by on the
#: path from frozen attention (None: no prefix mass) to the initial state (0).
LOG_GATES = (None, -8.0, -6.0, -4.0, -2.0, 0.0)
#: Added to a cumulant state's log-mass for no mass at all: its exponential is 0 in float32.
_NO_MASS = -1e4


def _batches(data):
    """Bucket dicts with sample weights: the samples' own (1 by default), 0 for the filler."""
    out = []
    for arrays, count, weights in data:
        w = (np.arange(arrays["X"].shape[0]) < count).astype(np.float32)
        if weights is not None:
            w[:count] *= weights
        out.append({**arrays, "w": jax.device_put(w)})
    return out


@partial(jax.jit, static_argnames=("config",))
def _step(k, state, frozen, batches, alpha_value, config):
    def objective(k):
        return varpro_loss(k, frozen, batches, config, alpha_value)

    solver = optax.lbfgs()
    value, grad = optax.value_and_grad_from_state(objective)(k, state=state)
    updates, state = solver.update(grad, state, k, value=value, grad=grad, value_fn=objective)
    return optax.apply_updates(k, updates), state, value


@jax.jit
def _lbfgs_start(k):
    """``k`` and a fresh L-BFGS state, strongly typed (one program, not one per leaf)."""
    return jax.tree.map(lambda a: jnp.array(a, dtype=jnp.asarray(a).dtype), (k, optax.lbfgs().init(k)))


def _in_step_form(tree, batches):
    """``tree`` (from :func:`_lbfgs_start`) committed where the data sit committed on one device.

    That is the form of ``_step``'s outputs; a fresh L-BFGS start is weakly
    typed in places (:func:`_lbfgs_start` makes it strong) and uncommitted,
    and ``jit`` compiles ``_step`` anew for each form, so without this it
    would compile twice.
    """
    ref = batches[0]["X"]
    if isinstance(ref, jax.Array) and ref.committed and len(ref.devices()) == 1:
        return jax.device_put(tree, next(iter(ref.devices())))
    return tree


# Jitted: its slices, reshapes, pseudo-inverse and product would otherwise
# each compile a program of their own in every process.
_state_from_ridge = jax.jit(state_from_ridge, static_argnums=(1, 2))


@partial(jax.jit, static_argnames=("config",))
def _solve(k, frozen, batches, alpha_value, config):
    return ridge_from_moments(data_moments(k, frozen, batches, config), alpha_value)


@partial(jax.jit, static_argnames=("config",))
def _validation_loss(k, frozen, batches, validation, alpha_value, config):
    """The held-out loss of the read-out and ``Z`` solved on ``batches`` for this ``k``."""
    theta, b, _ = _solve(k, frozen, batches, alpha_value, config)
    return heldout_loss(data_moments(k, frozen, validation, config), theta, b)


def gated_state(k, log_gate):
    """A cumulant state's ``k`` with the prefix's mass multiplied by ``exp(log_gate)``; None: no mass.

    A row's output ``(A V + mass(q) vbar(q)) / (A 1 + mass(q))`` is plain
    attention where the prefix has no mass, whatever its mean value.  The
    cumulant state holds the log of the mass, whose first coefficient (on
    the constant feature) is ``log m``.  (The other states hold the mass and
    the value's numerator apart, ``phi(q) . k`` and ``phi(q) Z``: no mass
    there is not plain attention unless ``Z`` vanishes too.)

    Parameters
    ----------
    k : ndarray, shape (H, C(d_h + 2, 2))
    log_gate : float or None

    Returns
    -------
    ndarray, shape (H, C(d_h + 2, 2)), float32
    """
    k = np.array(k, dtype=np.float32)
    k[:, 0] += _NO_MASS if log_gate is None else log_gate
    return k


@partial(jax.jit, static_argnames=("config",))
def _gcv(k, frozen, batches, alphas, config):
    return ridge_gcv(data_moments(k, frozen, batches, config), alphas)


def mass_path(k, frozen, data, config, alphas, log_gates=LOG_GATES):
    """The point of least generalized cross-validation on the path from frozen attention to ``k``.

    ``k`` is a cumulant state (:func:`gated_state`).  For each factor of the prefix's mass (:func:`gated_state`) the read-out
    and ``Z`` times it are a ridge regression on the design of that state
    (:mod:`skdiagatt.kernels.ntk_varpro`), scored for every penalty by
    :func:`~skdiagatt.kernels.ntk_varpro.ridge_gcv`.  Frozen attention is
    the path's first point and wins ties: the prefix enters only as far as
    the criterion supports it.

    Parameters
    ----------
    k : ndarray, shape (H, r)
        The initial state's mass coefficients.
    frozen, data, config
        As in :func:`fit_varpro`.
    alphas : ndarray, shape (a,)
        Penalties relative to the design's scale.
    log_gates : sequence of float or None

    Returns
    -------
    k : ndarray, shape (H, r)
        The chosen point's state.
    log_gate : float
        Its factor's log (``-inf``: frozen attention).
    alpha : float
        Its penalty.
    scores : ndarray, shape (len(log_gates), a)
        The criterion at every point and penalty.
    """
    batches = _batches(data)
    frozen = jax.device_put({key: frozen[key] for key in ("W_Q", "W_K", "W_V")})
    alphas = np.asarray(alphas, np.float32)
    scores = np.array([np.asarray(_gcv(jax.device_put(gated_state(k, g)), frozen, batches,
                                       jax.device_put(alphas), config)) for g in log_gates], np.float64)
    scores[~np.isfinite(scores)] = np.inf
    i, j = np.unravel_index(np.argmin(scores), scores.shape)
    gate = log_gates[i]
    return gated_state(k, gate), -np.inf if gate is None else float(gate), float(alphas[j]), scores


def fit_varpro(k, frozen, data, config, alpha_value, max_iter, tol, n_iter_no_change, verbose=0, callback=None,
               validation=None):
    """Minimise the training loss over ``k`` with ``Z`` and the read-out at their exact optimum.

    Parameters
    ----------
    k : ndarray, shape (H, r)
        The start.
    frozen : dict
        ``W_Q``, ``W_K``, ``W_V``.
    data : list
        :func:`skdiagatt._training.training_data` buckets with targets.
    config : tuple
        ``(feature_map, degree, causal, pooling)``.
    alpha_value : float
        Ridge penalty relative to the design's scale
        (:func:`skdiagatt.kernels.ntk_varpro.ridge_from_moments`).
    max_iter : int
        L-BFGS iterations at most (0: solve ``Z`` and the read-out for the given ``k``).
    tol, n_iter_no_change
        Stop once the monitored loss has not fallen by ``tol`` (relative) for
        that many iterations.
    verbose, callback
        Progress per iteration (:class:`~skdiagatt._training.progress.Progress`);
        a true return of ``callback`` stops the iterations.
    validation : list or None
        Held-out buckets (as ``data``).  Given, the loss monitored is theirs,
        for the read-out and ``Z`` solved on ``data``, and the ``k`` of the
        least held-out loss is kept, the start included: ``k`` has as many
        entries per head as the quadratic log-mass, which few samples cannot
        pin down.

    Returns
    -------
    params : dict of ndarray
        ``Z``, ``k``, ``W_out``, ``b``.
    loss_curve : list of float
        The training loss at the start of every iteration, then at the end.
    validation_curve : list of float
        The held-out loss after every iteration (empty without ``validation``).
    """
    batches = _batches(data)
    # device_put, not jnp.asarray: the same arrays, without a program per shape.
    frozen = jax.device_put({key: frozen[key] for key in ("W_Q", "W_K", "W_V")})
    alpha_value = jax.device_put(np.float32(alpha_value))
    k, state = _in_step_form(_lbfgs_start(k), batches)
    held = _batches(validation) if validation else None
    curve, scores, best, stale = [], [], np.inf, 0
    kept = k
    if held is not None:  # the start is a candidate too: k moves only where held-out data gain
        best = float(_validation_loss(k, frozen, batches, held, alpha_value, config))
    with Progress("NTKPrefixRegressor main", max_iter, verbose, callback) as progress:
        for it in range(max_iter):
            k_next, state, value = _step(k, state, frozen, batches, alpha_value, config)
            value = float(value)
            curve.append(value)
            if not np.isfinite(value):
                raise FloatingPointError(f"the training loss became {value} at L-BFGS iteration {it + 1}")
            k = k_next
            monitored = value
            if held is not None:
                monitored = float(_validation_loss(k, frozen, batches, held, alpha_value, config))
                scores.append(monitored)
            if monitored < best - tol * max(abs(best), 1e-12):
                stale = 0
            else:
                stale += 1
            if monitored < best:
                best, kept = monitored, k
            if progress.end_epoch(value, monitored if held is not None else None) or stale >= n_iter_no_change:
                break
    if held is not None:
        k = kept
    theta, b, value = _solve(k, frozen, batches, alpha_value, config)
    curve.append(float(value))
    H, _, dv = frozen["W_V"].shape
    W_out, Z = _state_from_ridge(theta, H, dv)
    params = {"Z": Z, "k": k, "W_out": W_out, "b": b}
    params = {key: np.asarray(v, np.float32) for key, v in params.items()}
    bad = [key for key, v in params.items() if not np.all(np.isfinite(v))]
    if bad or not np.isfinite(curve[-1]):
        raise FloatingPointError(f"the exact read-out solve gave non-finite {', '.join(bad) or 'loss'}")
    return params, curve, scores
