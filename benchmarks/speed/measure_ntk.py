"""Section 4 of docs/results/performance.md: NTK-Attention's training step and forward, and the prefix length.

    python benchmarks/speed/measure_ntk.py [--quick] [--out FILE]

The jitted NTK training step against a NumPy reference (gradients checked
against JAX's); the forward tiled as the library runs it and untiled, with
XLA's planned temporaries and the page faults of a call; the forward given a
prefix state against exact prefix attention at m = 2^6 ... 2^18 rows.

Writes JSON (``benchmarks/speed/data/ntk.json``); ``render.py`` turns it into
the page.
"""

import contextlib
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from common import (
    LAYOUT,
    blas_threads,
    measurement_main,
    minor_faults,
    peak_round,
    run_steps,
    settle,
    timed,
)
from reference import ntk_flops, numpy_ntk_step

from skdiagatt._testing import init_opt_state, tile_rows, train_steps, untiled_taylor_products
from skdiagatt.kernels.attention import prefix_attention_streaming
from skdiagatt.kernels.features import taylor_feature_dim
from skdiagatt.kernels.ntk_attention import ntk_attention, prefix_to_state
from skdiagatt.kernels.ntk_readout import ntk_readout_forward, ntk_readout_loss


def ntk_forward(params, frozen, B, L, d, config, tiled=True):
    """The NTK forward on ``B`` samples of ``L`` rows, compiled ahead of time, tiled or untiled."""
    fn = jax.jit(lambda p, f, X, wh: ntk_readout_forward(p, f, X, wh, config=config))
    shapes = jax.ShapeDtypeStruct((B, L, d), jnp.float32), jax.ShapeDtypeStruct((B, L), jnp.bool_)
    with contextlib.nullcontext() if tiled else untiled_taylor_products():
        return fn.lower(params, frozen, *shapes).compile()


def section_ntk(report, peaks, rounds, quick):
    B, L, d, H, degree = 64, 128, 64, 1, 2
    dh = dv = d
    r = taylor_feature_dim(dh, degree)
    rng = np.random.RandomState(0)
    std = math.sqrt(0.5 / d)
    frozen = {k: (std * rng.standard_normal((H, d, dh))).astype(np.float32) for k in ("W_Q", "W_K", "W_V")}
    frozen["alpha_value"] = np.float32(1e-4)
    P = rng.standard_normal((1024, d)).astype(np.float32)
    Z, k = prefix_to_state(jnp.asarray(P), frozen["W_K"], frozen["W_V"], "taylor", degree)
    params = {"Z": np.asarray(Z) * 1e-3, "k": np.asarray(k) * 1e-3,
              "W_out": (0.1 * rng.standard_normal((H * dv, 1))).astype(np.float32), "b": np.zeros(1, np.float32)}
    Xb = rng.standard_normal((B, L, d)).astype(np.float32)
    Y = rng.standard_normal((B, 1)).astype(np.float32)
    where = np.ones((B, L), bool)
    config = ("taylor", degree, False, "mean")
    data = {"X": jnp.asarray(Xb), "where": jnp.asarray(where), "y": jnp.asarray(Y)}
    idx = np.arange(B)
    w = np.ones(B, np.float32)
    pj, fj = jax.tree.map(jnp.asarray, params), jax.tree.map(jnp.asarray, frozen)
    opt = init_opt_state(pj)
    batch = {**{kk: np.asarray(v) for kk, v in data.items()}, "w": w}
    jl, jg = jax.value_and_grad(ntk_readout_loss)(pj, fj, batch, config)
    nl, ng = numpy_ntk_step(Xb, Y, params, frozen, degree)
    err = max(float(np.max(np.abs(ng[kk] - np.asarray(jg[kk]))) / (np.max(np.abs(np.asarray(jg[kk]))) + 1e-30))
              for kk in ng)
    # The forward compiled ahead of time, tiled as the library runs it and, as
    # before kernels.features tiled them, with the Taylor monomials of all rows
    # formed at once; on this batch and on a prediction group
    # (LAYOUT.predict_rows rows), for XLA's planned temporaries.
    forwards = {(Bt, tiled): ntk_forward(pj, fj, Bt, L, d, config, tiled)
                for Bt in (B, LAYOUT.predict_rows // L) for tiled in (True, False)}
    temps = {key: int(f.memory_analysis().temp_size_in_bytes) for key, f in forwards.items()}
    fwd, fwd_whole = forwards[(B, True)], forwards[(B, False)]

    def ours():
        p_, o_ = jax.tree.map(jnp.copy, pj), jax.tree.map(jnp.copy, opt)
        jax.block_until_ready((p_, o_))
        t = time.perf_counter()
        jax.block_until_ready(run_steps(train_steps, p_, o_, fj, data, [idx], w, np.float32(0.01),
                                        ntk_readout_loss, config))
        return time.perf_counter() - t

    def ours_fwd():
        return fwd(pj, fj, data["X"], data["where"])

    def ours_fwd_whole():
        return fwd_whole(pj, fj, data["X"], data["where"])

    tile_diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(ours_fwd()),
                                                                   jax.tree.leaves(ours_fwd_whole())))

    def ref():
        t = time.perf_counter()
        numpy_ntk_step(Xb, Y, params, frozen, degree)
        return time.perf_counter() - t

    best = {}
    for nt in (1, 2):
        with blas_threads(nt):
            ref()
            best[nt] = ref()
    nt_ref = min(best, key=best.get)
    for _ in range(2):
        ours(), jax.block_until_ready((ours_fwd(), ours_fwd_whole()))
    A = np.random.RandomState(1).standard_normal((2048, 2048)).astype(np.float32)
    Aj = jnp.asarray(A)
    mm = jax.jit(lambda a, b: a @ b)
    t_ours, t_fwd, f_fwd, t_whole, f_whole, t_ref, pk = [], [], [], [], [], [], []
    for _ in range(max(3, rounds // 2)):
        settle(ours)
        t_ours.append(np.median([ours() for _ in range(3)]))
        for t, f, run in ((t_fwd, f_fwd, ours_fwd), (t_whole, f_whole, ours_fwd_whole)):
            faults = minor_faults()
            t.append(timed(run, 3))
            f.append((minor_faults() - faults) / 3)
        with blas_threads(nt_ref):
            settle(ref)
            t_ref.append(ref())
        pk.append(peak_round(A, Aj, mm))
    peaks.extend(pk)
    med = lambda v: float(np.median(v))
    useful = B * ntk_flops(L, d, dh, dv, r)
    useful_fwd = B * ntk_flops(L, d, dh, dv, r, train=False)
    report["ntk"] = dict(
        B=B, L=L, d=d, r=r, t_ours=med(t_ours), t_fwd=med(t_fwd), t_ref=med(t_ref),
        gflops=useful / med(t_ours) / 1e9, gflops_fwd=useful_fwd / med(t_fwd) / 1e9,
        ratio=float(np.median(np.array(t_ref) / np.array(t_ours))), err=err, threads=nt_ref,
        loss=(float(jl), nl), t_whole=med(t_whole), tile_rows=tile_rows(B * L, r),
        faults_fwd=med(f_fwd), faults_whole=med(f_whole), tile_diff=tile_diff, temps=temps,
        ratio_whole=float(np.median(np.array(t_whole) / np.array(t_fwd))),
    )
    # Prefix length: NTK forward (given Z, k) against exact prefix attention.
    Bm, Lm = 8, 128
    Xm = jnp.asarray(rng.standard_normal((Bm, Lm, d)).astype(np.float32))
    wm = jnp.ones((Bm, Lm), bool)
    W = {kk: jnp.asarray((math.sqrt(0.25 / d) * rng.standard_normal((1, d, d))).astype(np.float32))
         for kk in ("W_Q", "W_K", "W_V")}
    ms = [2**6, 2**12, 2**15] if quick else [2**6, 2**12, 2**18]
    Pm = jnp.asarray(rng.standard_normal((ms[-1], d)).astype(np.float32))
    ntk_times, exact_times, calls = {}, {}, {}
    for m in ms:
        Zm, km = prefix_to_state(Pm[:m], W["W_K"], W["W_V"], "taylor", degree)
        calls[m] = (lambda Zm, km: lambda: ntk_attention(
            Xm, wm, Zm, km, W["W_Q"], W["W_K"], W["W_V"], feature_map="taylor", degree=degree))(Zm, km)
        calls[m]()
    # Round-robin over m, best of each: load from other processes falls on every m alike.
    samples_t = {m: [] for m in ms}
    for _ in range(6):
        for m in ms:
            samples_t[m].append(timed(calls[m], 3))
    ntk_times = {m: min(v) for m, v in samples_t.items()}
    for m in (ms[1], ms[-1]):
        call = lambda: prefix_attention_streaming(Xm, wm, Pm[:m], W["W_Q"], W["W_K"], W["W_V"])
        call()
        exact_times[m] = timed(call, 1 if m > 2**14 else 3)
    report["prefix"] = dict(ms=ms, ntk=ntk_times, exact=exact_times)


def main():
    measurement_main(__doc__.splitlines()[0], "ntk", lambda r, pk, a: section_ntk(r, pk, a.rounds, a.quick))


if __name__ == "__main__":
    main()
