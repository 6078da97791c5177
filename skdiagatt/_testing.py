"""The one seam of private machinery that tests and benchmarks may use.

Benchmarks and examples otherwise use the public API only.  What is here
lets them time and inspect the training step as ``fit`` runs it, count
compilations, and change the sizes of :class:`Layout` without editing
module globals.  Nothing here is part of the public API: it may change
with the training code it exposes.

- :class:`Layout`, :func:`use_layout` -- the sizes training and inference
  cut their work by (run length, slice and prediction-group rows, ...);
- :func:`compile_count` -- XLA compilations so far in this process;
- :func:`train_steps` -- the compiled program ``fit`` runs: a run of
  Adam steps of one bucket in one call; :func:`train_step` (traced, one
  step), :func:`eval_step`, :func:`gather` (the minibatch gather),
  :func:`init_opt_state` and :data:`OPTIMIZER`;
- :func:`plan_minibatches`, :class:`Minibatch`, :func:`stacked`,
  :func:`bucket_slices` -- the minibatches ``fit`` plans for an epoch;
- :func:`placement`, :func:`use_devices`, :func:`training_data`,
  :func:`device_buckets`, :class:`PackedData`, :func:`round_count` --
  uploading data as ``fit`` does, and :func:`fit_loop`, the loop itself;
- :func:`diagatt_loss_inputs`, :func:`data_layout` -- a DiagAtt
  estimator's parameters as its loss takes them, and the data layout
  (packed or not, bucket grid) an estimator trains and predicts in;
- :func:`check_ragged`, :func:`make_buckets`, :func:`bucket_length`,
  :data:`FINE`, :data:`COARSE` -- the ragged layer;
- kernel internals timed alone: :func:`row_quadratic` (a step's score
  product), :func:`matmul`, :func:`taylor_tables`, :func:`tile_rows`,
  :func:`untiled_taylor_products`, :func:`preconditioner`.
"""

import contextlib
import sys

import jax

from ._shared.ragged import COARSE, FINE, bucket_length, check_ragged, make_buckets
from ._shared.whitening import preconditioner
from ._training.batches import Minibatch, bucket_slices, plan_minibatches, stacked
from ._training.data import PackedData, device_buckets, training_data
from ._training.devices import placement, use_devices
from ._training.layout import Layout, current_layout, round_count, use_layout
from ._training.loop import fit_loop
from ._training.programs import compile_count, release_programs_near_map_limit
from ._training.step import OPTIMIZER, eval_step, gather, init_opt_state, train_step, train_steps
from .kernels import features as _features
from .kernels._matmul import matmul
from .kernels.features import _taylor_tables as taylor_tables
from .kernels.features import _tile_rows as tile_rows
from .kernels.scores import _row_quadratic as row_quadratic

__all__ = [
    "Layout",
    "current_layout",
    "use_layout",
    "compile_count",
    "release_programs_near_map_limit",
    "train_steps",
    "train_step",
    "eval_step",
    "gather",
    "init_opt_state",
    "OPTIMIZER",
    "plan_minibatches",
    "Minibatch",
    "stacked",
    "bucket_slices",
    "placement",
    "use_devices",
    "training_data",
    "device_buckets",
    "PackedData",
    "round_count",
    "fit_loop",
    "diagatt_loss_inputs",
    "data_layout",
    "check_ragged",
    "make_buckets",
    "bucket_length",
    "FINE",
    "COARSE",
    "row_quadratic",
    "matmul",
    "taylor_tables",
    "tile_rows",
    "untiled_taylor_products",
    "preconditioner",
]


def diagatt_loss_inputs(est, samples=None, rng=None):
    """``(params, frozen)`` of a DiagAtt estimator as its training loss takes them.

    Without ``samples``: the fitted estimator's.  With ``samples`` (validated)
    and ``rng``: the initial parameters of a one-target fit of ``est`` on
    them, with their row scale and whitener.  The output scale is fixed
    during the main phase, so it moves from ``params`` to ``frozen``.
    """
    if samples is None:
        params = {k: v for k, v in est.params_.items()}
        frozen = dict(est._frozen_fitted())
    else:
        d = samples[0].shape[1]
        c, S = preconditioner(samples, est.whiten)
        params = est._init_params(d, 1, rng)
        frozen = est._frozen({"c": c, "S": S}, d)
    frozen["log_scale"] = params.pop("log_scale")
    return params, frozen


@contextlib.contextmanager
def data_layout(est, pack=None, growth=None):
    """Inside the block ``est`` packs ragged data if ``pack`` and buckets on the grid ``growth``.

    None keeps the estimator's own; yields its ``(pack, growth)`` in force.
    """
    saved = dict(vars(est))
    if pack is not None:
        est._pack = pack
    if growth is not None:
        est._bucket_growth = growth
    try:
        yield est._pack, est._bucket_growth
    finally:
        for key in ("_pack", "_bucket_growth"):
            if key in saved:
                setattr(est, key, saved[key])
            else:
                vars(est).pop(key, None)


@contextlib.contextmanager
def untiled_taylor_products():
    """Programs traced inside form the Taylor monomials of all rows at once (no tiles).

    JAX's caches are cleared on the way in and out: a jitted kernel called
    inside would otherwise reuse its tiled trace, and the untiled one outlive
    the block.  Keep what is compiled inside as ahead-of-time executables.
    """
    tiles = _features._TILE_ELEMENTS
    jax.clear_caches()
    _features._TILE_ELEMENTS = sys.maxsize
    try:
        yield
    finally:
        _features._TILE_ELEMENTS = tiles
        jax.clear_caches()

