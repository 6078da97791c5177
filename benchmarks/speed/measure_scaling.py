"""Sections 5 and 6 of docs/results/performance.md: the scaling of an epoch, and the padding of the bucket grid.

    python benchmarks/speed/measure_scaling.py [--quick] [--out FILE]

5. the time per epoch of DiagAtt's compiled loop in n, p (grid-aligned, and
   ragged long-tailed lengths packed and in buckets) and d, with the memory
   XLA plans for a step; long minibatches also timed whole (not in slices);
6. the padding waste of the bucket grids on a log-normal length distribution.

Writes JSON (``benchmarks/speed/data/scaling.json``); ``render.py`` turns it
into the page and its figure.
"""

import math
import time
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
from common import LAYOUT, RUN_STEPS, lognormal_lengths, measurement_main
from reference import diagatt_flops

from skdiagatt._testing import (
    COARSE,
    FINE,
    PackedData,
    bucket_length,
    fit_loop,
    init_opt_state,
    plan_minibatches,
    round_count,
    stacked,
    train_steps,
    training_data,
    use_layout,
)
from skdiagatt.kernels.diagatt import diagatt_loss


def _scaling_point(n, lengths, d, seed=0, slice_rows=None, pack=True):
    """A compiled training loop on synthetic data: ``(loop, info)``.

    ``loop(epochs)`` runs ``fit_loop`` for that many epochs and returns its
    seconds (the first call, which compiles, is made here).  The data are
    uploaded as ``DiagAttRegressor.fit`` uploads them (``pack``): packed when
    the lengths span several buckets, in buckets otherwise.  ``info`` has the XLA-planned
    bytes of the largest step and the row counts.  ``slice_rows`` replaces
    the layout's ``slice_rows`` and ``packed_slice_rows`` during the loop (a
    huge value: whole minibatches).
    """
    rng = np.random.RandomState(seed)
    samples = [rng.standard_normal((int(p), d)).astype(np.float32) for p in lengths]
    Y = rng.standard_normal((n, 1)).astype(np.float32)
    data = training_data(samples, Y, pack=pack)
    params = {"W": (0.01 * rng.standard_normal((1, d, d))).astype(np.float32),
              "V": (0.1 * rng.standard_normal((1, d, 1))).astype(np.float32),
              "b": np.zeros(1, np.float32), "log_sigma": np.zeros(1, np.float32)}
    frozen = {"x_scale": np.float32(1.0), "S": np.eye(d, dtype=np.float32),
              "inv_tau": np.float32(1 / math.sqrt(d)), "alpha": np.float32(1e-3),
              "alpha_value": np.float32(0.0), "log_scale": np.zeros(1, np.float32)}
    kw = dict(learning_rate=1e-3, batch_size=256, tol=0.0, n_iter_no_change=100)
    config = ("latent", "gaussian")

    layout = LAYOUT if not slice_rows else replace(LAYOUT, slice_rows=slice_rows, packed_slice_rows=slice_rows)

    def loop(epochs):
        with use_layout(layout):
            t = time.perf_counter()
            fit_loop(diagatt_loss, config, params, frozen, data, max_iter=epochs,
                     random_state=np.random.RandomState(0), **kw)
            return time.perf_counter() - t

    loop(1)
    # Rows one epoch's steps compute (bucket or block padding and minibatch
    # filler included), per minibatch as fit_loop forms them (its draw).
    batches = plan_minibatches(data, 256, np.random.RandomState(0), layout=layout)
    computed = [_step_rows(arrays, idx) for arrays, idx, _, _ in batches]
    # Memory: the largest step, as XLA plans it (arguments incl. the data on
    # the device, outputs, temporaries).
    largest = batches[int(np.argmax(computed))]
    arrays = largest.arrays
    pj = jax.tree.map(jnp.asarray, {k: v for k, v in params.items()})
    fj = jax.tree.map(jnp.asarray, frozen)
    opt = init_opt_state(pj)
    idx_run, w_run = stacked([largest], RUN_STEPS)
    compiled = train_steps.lower(
        pj, opt, fj, arrays, idx_run, w_run, np.zeros(RUN_STEPS, np.float32), np.int32(RUN_STEPS),
        loss_fn=diagatt_loss, config=config, n_slices=largest.n_slices,
    ).compile()
    ma = compiled.memory_analysis()
    stored = [data.arrays] if isinstance(data, PackedData) else [b[0] for b in data]
    data_bytes = sum(int(v.nbytes) for a in stored for v in a.values())
    step_bytes = ma.temp_size_in_bytes + ma.argument_size_in_bytes + ma.output_size_in_bytes - ma.alias_size_in_bytes
    other = data_bytes - sum(int(v.nbytes) for v in arrays.values())
    stored_rows = sum(int(np.prod(a["X"].shape[:2])) for a in stored)
    info = dict(temp=int(ma.temp_size_in_bytes), mem=int(step_bytes + other), data=data_bytes,
                real_rows=int(np.sum(lengths)), padded_rows=stored_rows, computed_rows=int(sum(computed)),
                steps=len(batches), packed=isinstance(data, PackedData),
                flop=n * diagatt_flops(float(np.mean(lengths)), d))
    return loop, info


def _step_rows(arrays, idx):
    """Rows a training step computes: its samples' padded rows, or its blocks' rows (packed)."""
    if isinstance(idx, dict):
        return idx["blocks"].size * arrays["X"].shape[1]
    return idx.size * arrays["X"].shape[1]


# Seconds per epoch = (a fit of LONG epochs - a fit of SHORT epochs) / (LONG - SHORT):
# the once-per-fit work (uploading the parameters, the optimizer's state, the
# first dispatch) is not an epoch's, and a real fit spreads it over max_iter epochs.
# Four epochs apart: two apart (3 - 1), the noise of the two minima was a large
# part of a short set's epoch (the once-per-fit work came out at -8 ms, and the
# ragged slope read 0.94 and 0.85 in two runs of the same code, 2026-11-30).
SHORT_FIT, LONG_FIT = 1, 5


def _time_interleaved(points, rounds):
    """Seconds per epoch of each point, over ``rounds`` rounds that visit every point once.

    Each round times a fit of ``SHORT_FIT`` and one of ``LONG_FIT`` epochs at
    every point; a point's time per epoch is the difference of the best of
    each, divided by the extra epochs.  A burst of load from other processes
    lengthens the fits timed during it, never shortens one; interleaving
    spreads such bursts over all the points instead of one curve, and the
    minimum keeps each point's quiet moments.
    """
    short, long_ = [[] for _ in points], [[] for _ in points]
    for _ in range(rounds):
        for k, (loop, _) in enumerate(points):
            short[k].append(loop(SHORT_FIT))
            long_[k].append(loop(LONG_FIT))
    out = []
    for (_, info), t_short, t_long in zip(points, short, long_):
        epoch = (min(t_long) - min(t_short)) / (LONG_FIT - SHORT_FIT)
        # Cross-check: the two fits of one round ran on the machine of that round.
        per_round = float(np.median(np.subtract(t_long, t_short))) / (LONG_FIT - SHORT_FIT)
        out.append(dict(info, epoch=epoch, epoch_rounds=per_round, gflops=info["flop"] / epoch / 1e9,
                         setup=min(t_short) - epoch * SHORT_FIT,
                         short_spread=float(np.median(t_short) - min(t_short))))
    return out


def section_scaling(report, quick):
    out = {}
    n0 = 1024 if quick else 2048
    ns = [n0, 2 * n0, 4 * n0] if quick else [n0, 2 * n0, 4 * n0, 8 * n0]
    ps = [24, 48, 104, 216] if quick else [24, 48, 104, 216, 448]  # grid lengths: no padding
    ds = [16, 32, 64, 128] if quick else [16, 32, 64, 128, 256]
    med = [12, 24, 48] if quick else [12, 24, 48, 96]
    rng = np.random.RandomState(0)
    ragged = [np.minimum(lognormal_lengths(n0, m, rng), 40 * m) for m in med]
    long_ps = [p for p in ps if p * 256 > LAYOUT.slice_rows]
    long_ragged = [lengths for lengths in ragged if np.mean(lengths) * 256 > LAYOUT.packed_slice_rows]
    curves = {
        "n": [(n, _scaling_point(n, [104] * n, 70)) for n in ns],
        "p": [(p, _scaling_point(n0, [p] * n0, 70)) for p in ps],
        "ragged": [(float(np.mean(lengths)), _scaling_point(n0, lengths, 70)) for lengths in ragged],
        # The same samples in buckets, as before packing (pack=False).
        "ragged_buckets": [(float(np.mean(lengths)), _scaling_point(n0, lengths, 70, pack=False))
                           for lengths in ragged],
        "d": [(d, _scaling_point(n0, [48] * n0, d)) for d in ds],
        # The long minibatches once more, differentiated whole (no slices).
        "whole": [(p, _scaling_point(n0, [p] * n0, 70, slice_rows=1 << 62)) for p in long_ps],
        "ragged_whole": [(float(np.mean(lengths)), _scaling_point(n0, lengths, 70, slice_rows=1 << 62))
                         for lengths in long_ragged],
    }
    keys = [(key, x) for key, pts in curves.items() for x, _ in pts]
    timed = _time_interleaved([pt for pts in curves.values() for _, pt in pts], 3 if quick else 8)
    for (key, x), r in zip(keys, timed):
        out.setdefault(key, []).append((x, r))
    for key in ("n", "p", "ragged", "ragged_buckets", "d"):
        print(f"  {key}: {[round(r['epoch'], 3) for _, r in out[key]]}", flush=True)
    sliced = dict(out["p"])
    out["unsliced"] = [(p, sliced[p]["epoch"], r["epoch"]) for p, r in out.pop("whole", [])]
    sliced = dict(out["ragged"])
    out["ragged_unsliced"] = [(p, sliced[p]["epoch"], r["epoch"]) for p, r in out.pop("ragged_whole", [])]
    out["n0"] = n0
    report["scaling"] = out


def _grid_waste(lengths, growth=FINE):
    """Buckets, padded rows / real rows - 1 and the same with rounded sample counts, on one grid."""
    distinct, inverse = np.unique(lengths, return_inverse=True)
    padded = np.array([bucket_length(int(p), growth) for p in distinct])[inverse.ravel()]
    counts = {}
    for L in padded:
        counts[L] = counts.get(L, 0) + 1
    stored = sum(round_count(m) * L for L, m in counts.items())
    return dict(buckets=len(counts), waste=float(padded.sum() / lengths.sum() - 1),
                stored=float(stored / lengths.sum() - 1))


def section_padding(report):
    rng = np.random.RandomState(0)
    lengths = lognormal_lengths(100_000, 30, rng)
    report["padding"] = dict(
        n=lengths.size, median=float(np.median(lengths)), p99=float(np.percentile(lengths, 99)),
        mean=float(lengths.mean()), **_grid_waste(lengths), coarse=_grid_waste(lengths, COARSE),
    )


def measure(report, quick):
    """Sections 5 and 6 into ``report``."""
    section_scaling(report, quick)
    section_padding(report)


def main():
    measurement_main(__doc__.splitlines()[0], "scaling", lambda r, pk, a: measure(r, a.quick))


if __name__ == "__main__":
    main()
