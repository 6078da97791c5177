"""Sections 2 and 3 of docs/results/performance.md: the DiagAtt training step, fit and predict.

    python benchmarks/speed/measure_diagatt.py [--quick] [--out FILE]

2. one DiagAtt training step (n = 9000, p = 100, d = 70, batch 256, the
   latent-row objective with Adam) in useful GFLOP/s, as a fraction of the
   matmul peak of the same rounds and against NumPy references of the same
   forward and backward (their gradients checked against JAX's), and the
   parts of the step timed alone;
3. DiagAtt fit (time per epoch, the whole fit, compile count and time, and a
   second fit on new data of the same buckets), predict on 10,000 samples,
   and predict on new ragged data packed and in buckets.

Writes JSON (``benchmarks/speed/data/diagatt.json``); ``render.py`` turns it
into the page.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from common import (
    RUN_STEPS,
    YNN_OFF,
    CompileCounter,
    blas_threads,
    l2_cache,
    measurement_main,
    peak_round,
    ragged_samples,
    run_steps,
    settle,
    timed,
)
from reference import (
    adam_state,
    diagatt_flops,
    numpy_diagatt_predict,
    numpy_diagatt_step,
    numpy_diagatt_step_vectorized,
)

from skdiagatt import DiagAttRegressor
from skdiagatt._testing import (
    bucket_length,
    bucket_slices,
    check_ragged,
    data_layout,
    device_buckets,
    diagatt_loss_inputs,
    fit_loop,
    gather,
    init_opt_state,
    make_buckets,
    matmul,
    row_quadratic,
    train_steps,
)
from skdiagatt.datasets import make_individualized_regression
from skdiagatt.kernels.diagatt import diagatt_loss


def diagatt_step_inputs(X, y, rng):
    """What one DiagAtt training step on equal-length data takes: ``samples, Y, params, frozen, data``.

    ``params`` are the estimator's initial ones but for a trained-looking
    ``W`` (not 0: scores of order one, softmax not uniform); ``data`` is the
    one bucket, on the training device.
    """
    samples = check_ragged(X)
    d = samples[0].shape[1]
    Y = ((y - y.mean()) / y.std()).astype(np.float32)[:, None]
    params, frozen = diagatt_loss_inputs(DiagAttRegressor(random_state=0), samples, rng)
    params["W"] = (0.05 * rng.standard_normal((1, d, d))).astype(np.float32)
    params["W"] = 0.5 * (params["W"] + params["W"].transpose(0, 2, 1))
    data = device_buckets(make_buckets(samples), Y)
    return samples, Y, params, frozen, data[0][0]


def consecutive_steps(steps, params, opt_state, frozen, data, batches, w, lr, n_slices):
    """Seconds per DiagAtt training step over the ``RUN_STEPS`` minibatches ``batches``, in one call.

    Each step takes the parameters the one before returned, as ``fit_loop``
    runs them.  The call donates its parameters and optimizer state, so it
    is handed copies.
    """
    p_, o_ = jax.tree.map(jnp.copy, params), jax.tree.map(jnp.copy, opt_state)
    jax.block_until_ready((p_, o_))
    t = time.perf_counter()
    out = run_steps(steps, p_, o_, frozen, data, batches, w, lr, diagatt_loss, ("latent", "gaussian"), n_slices)
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / len(batches)


def value_columns(params):
    """Columns of a DiagAtt step's thin product besides the score's: the values and a linear score term."""
    return params["V"].shape[-1] + (1 if "U" in params else 0)


def step_products(bucket_data, idx, params):
    """The two row-sized products of a DiagAtt step alone, and its memory passes, jitted and in NumPy.

    On the step's own minibatch (all computed rows, padding included): the
    forward ``X W`` fused with the row-wise score dot, as the step computes
    it, and the backward ``X^T G`` with ``G`` the (rows, d + k) right-hand
    side the step builds (``k`` value and linear-score columns).  Besides
    them, what the rest of the step is made of: the gather of the minibatch
    from the bucket, and one pass over its rows (read them, write as many
    bytes), the unit of the elementwise work.  Returns a dict of name ->
    callable.
    """
    X = np.asarray(bucket_data["X"])[idx].reshape(-1, bucket_data["X"].shape[-1])
    N, d = X.shape
    k = value_columns(params)
    rng = np.random.RandomState(3)
    W = rng.standard_normal((d, d)).astype(np.float32)
    G = rng.standard_normal((N, d + k)).astype(np.float32)
    Xj, Wj, Gj = jax.device_put(X), jax.device_put(W[None]), jax.device_put(G)
    fwd = jax.jit(row_quadratic)  # the step's own score kernel
    bwd = jax.jit(lambda x, g: matmul(x.T, g))
    row_pass = jax.jit(lambda x: 2.0 * x)
    gather_j = jax.jit(gather)
    idx_j = jax.device_put(np.asarray(idx, np.int32))
    out = np.empty_like(X)
    return {
        "jax_fwd": lambda: fwd(Xj, Wj),
        "jax_bwd": lambda: bwd(Xj, Gj),
        "numpy_fwd": lambda: X @ W,
        "numpy_bwd": lambda: X.T @ G,
        "jax_pass": lambda: row_pass(Xj),
        "numpy_pass": lambda: np.multiply(X, 2.0, out=out),
        "jax_gather": lambda: gather_j(bucket_data, idx_j),
    }


def section_diagatt_step(report, peaks, rounds):
    n, p, d, B = 9000, 100, 70, 256
    X, y, _, _ = make_individualized_regression(n, n_rows=p, n_features=d, random_state=0)
    rng = np.random.RandomState(0)
    samples, Y, params, frozen, bucket_data = diagatt_step_inputs(X, y, rng)
    idx = rng.permutation(n)[:B]
    w = np.ones(B, np.float32)
    config = ("latent", "gaussian")
    pj = jax.tree.map(jnp.asarray, params)
    fj = jax.tree.map(jnp.asarray, frozen)
    opt = init_opt_state(pj)
    lr = np.float32(0.01)
    n_slices = bucket_slices(B, bucket_data["X"].shape[1])  # as fit_loop slices it

    def ours():
        """Latency of one isolated step (dispatch, run, wait)."""
        # The step donates params and optimizer state: hand it copies.
        p_, o_ = jax.tree.map(jnp.copy, pj), jax.tree.map(jnp.copy, opt)
        jax.block_until_ready((p_, o_))
        t = time.perf_counter()
        out = run_steps(train_steps, p_, o_, fj, bucket_data, [idx], w, lr, diagatt_loss, config,
                        n_slices)
        jax.block_until_ready(out)
        return time.perf_counter() - t

    # Throughput: consecutive steps on distinct minibatches, each on the
    # parameters the previous one returned, in one call as fit_loop runs them.
    run_idx = [rng.permutation(n)[:B].astype(np.int32) for _ in range(RUN_STEPS)]

    def ours_run(step=train_steps):
        return consecutive_steps(step, pj, opt, fj, bucket_data, run_idx, w, lr, n_slices)

    # The same step with XLA:CPU's YNN fusions off; None where this XLA lacks the option.
    ynn_off = jax.jit(train_steps.__wrapped__, static_argnames=("loss_fn", "config", "n_slices"),
                      donate_argnums=(0, 1), compiler_options=YNN_OFF)
    try:
        ours_run(ynn_off)
    except jax.errors.JaxRuntimeError:
        ynn_off = None

    # Correctness of the references: gradients against JAX's.
    batch = {k: np.asarray(v)[idx] for k, v in bucket_data.items()}
    batch["w"] = w
    jloss, jgrad = jax.value_and_grad(diagatt_loss)(pj, fj, batch, config)
    ref_samples = [samples[i] for i in idx]
    _, nloss, ngrad = numpy_diagatt_step(ref_samples, Y[idx], w, params, frozen, adam_state(params), 0.01)
    Xpad = np.asarray(bucket_data["X"])[idx]
    wpad = np.asarray(bucket_data["where"])[idx]
    _, vloss, vgrad = numpy_diagatt_step_vectorized(Xpad, wpad, Y[idx], w, params, frozen, adam_state(params), 0.01)
    rel = lambda g: max(
        float(np.max(np.abs(g[k] - np.asarray(jgrad[k]))) / (np.max(np.abs(np.asarray(jgrad[k]))) + 1e-30))
        for k in ("W", "V", "b", "log_sigma", "U")
    )
    err_loop, err_vec = rel(ngrad), rel(vgrad)

    def ref_loop():
        t = time.perf_counter()
        numpy_diagatt_step(ref_samples, Y[idx], w, params, frozen, adam_state(params), 0.01)
        return time.perf_counter() - t

    def ref_vec():
        t = time.perf_counter()
        numpy_diagatt_step_vectorized(Xpad, wpad, Y[idx], w, params, frozen, adam_state(params), 0.01)
        return time.perf_counter() - t

    # NumPy gets its best BLAS thread count (2 threads collapse under load).
    threads = {}
    for name, fn in (("loop", ref_loop), ("vec", ref_vec)):
        best = {}
        for nt in (1, 2):
            with blas_threads(nt):
                fn()
                best[nt] = min(fn() for _ in range(3))
        threads[name] = min(best, key=best.get)
    for _ in range(3):
        ours()  # compile and warm up
        ours_run()
    products = step_products(bucket_data, idx, params)
    A = np.random.RandomState(1).standard_normal((2048, 2048)).astype(np.float32)
    Aj = jnp.asarray(A)
    mm = jax.jit(lambda a, b: a @ b)
    mm(Aj, Aj).block_until_ready()
    t_ours, t_run, t_loop, t_vec, pk, t_ynn = [], [], [], [], [], []
    t_prod = {name: [] for name in products}
    for _ in range(rounds):
        for name, fn in products.items():
            with blas_threads(threads["vec"]):
                settle(fn)
                t_prod[name].append(timed(fn, 3))
        settle(ours_run)
        t_run.append(np.median([ours_run() for _ in range(3)]))
        if ynn_off is not None:
            settle(lambda: ours_run(ynn_off))
            t_ynn.append(np.median([ours_run(ynn_off) for _ in range(3)]))
        settle(ours)
        t_ours.append(np.median([ours() for _ in range(8)]))
        with blas_threads(threads["loop"]):
            settle(ref_loop)
            t_loop.append(ref_loop())
        with blas_threads(threads["vec"]):
            settle(ref_vec)
            t_vec.append(ref_vec())
        pk.append(peak_round(A, Aj, mm))
    peaks.extend(pk)
    useful = B * diagatt_flops(p, d)
    med = lambda v: float(np.median(v))
    peak = max(max(pr) for pr in peaks)
    gflops = useful / med(t_run) / 1e9
    ratio_loop = float(np.median(np.array(t_loop) / np.array(t_run)))
    ratio_vec = float(np.median(np.array(t_vec) / np.array(t_run)))
    frac_rounds = float(np.median([useful / to / 1e9 / max(pr) for to, pr in zip(t_run, pk)]))
    report["step"] = dict(
        t_run=med(t_run), best_run=float(min(t_run)),
        t_ours=med(t_ours), best_ours=float(min(t_ours)), t_loop=med(t_loop), t_vec=med(t_vec),
        gflops=gflops, best_gflops=useful / min(t_run) / 1e9, frac=gflops / peak,
        latency_gflops=useful / med(t_ours) / 1e9,
        ratio_loop_latency=float(np.median(np.array(t_loop) / np.array(t_ours))),
        frac_rounds=frac_rounds, ratio_loop=ratio_loop, ratio_vec=ratio_vec,
        err_loop=err_loop, err_vec=err_vec, threads=threads, useful=useful,
        loss=(float(jloss), nloss, vloss), rounds=rounds,
        padded_rows=B * bucket_data["X"].shape[1], real_rows=B * p, d=d, l2_cache=l2_cache(),
        t_ynn=med(t_ynn) if t_ynn else None,
        ratio_ynn=float(np.median(np.array(t_run) / np.array(t_ynn))) if t_ynn else None,
        products={name: med(v) for name, v in t_prod.items()}, value_columns=value_columns(params),
    )
    return X, y


def section_diagatt_fit(report, X, y, quick):
    n = len(X)
    est = DiagAttRegressor(random_state=0, max_iter=4 if quick else 20, calibration_iter=1 if quick else 5)
    with CompileCounter() as cc1:
        t = time.perf_counter()
        est.fit(X, y)
        fit1 = time.perf_counter() - t
    # New data, same sample count and bucket lengths.
    X2, y2, _, _ = make_individualized_regression(n, n_rows=100, n_features=70, random_state=1)
    with CompileCounter() as cc2:
        t = time.perf_counter()
        est2 = DiagAttRegressor(random_state=1, max_iter=est.max_iter, calibration_iter=est.calibration_iter).fit(X2, y2)
        fit2 = time.perf_counter() - t
    # Time per epoch of the loop alone (compiled, data on the device).
    samples = check_ragged(X)
    Y = ((y - y.mean()) / y.std()).astype(np.float32)[:, None]
    data = device_buckets(make_buckets(samples), Y)
    params, frozen = diagatt_loss_inputs(est)
    kw = dict(max_iter=3, learning_rate=1e-4, batch_size=256, tol=0.0, n_iter_no_change=100)
    fit_loop(diagatt_loss, ("latent", "gaussian"), params, frozen, data,
                       random_state=np.random.RandomState(0), **{**kw, "max_iter": 1})
    t = time.perf_counter()
    fit_loop(diagatt_loss, ("latent", "gaussian"), params, frozen, data,
                       random_state=np.random.RandomState(0), **kw)
    epoch = (time.perf_counter() - t) / kw["max_iter"]
    # Predict on 10,000 samples of p = 100, d = 70.
    Xp, _, _, _ = make_individualized_regression(10000, n_rows=100, n_features=70, random_state=2)
    with CompileCounter() as ccp:
        t = time.perf_counter()
        est.predict(Xp)
        pred_cold = time.perf_counter() - t
    pred_warm = min(timed(lambda: est.predict(Xp)) for _ in range(3))
    Xp32 = np.stack(Xp).astype(np.float32)
    pred_warm32 = min(timed(lambda: est.predict(Xp32)) for _ in range(3))
    samples_p = check_ragged(Xp[:2000])
    pr, fr = (jax.tree.map(np.asarray, tree) for tree in diagatt_loss_inputs(est))
    pr["log_scale"] = fr["log_scale"]
    t = time.perf_counter()
    numpy_diagatt_predict(samples_p, pr, fr)
    ref_pred = (time.perf_counter() - t) * 5  # 2000 -> 10000 samples
    z_ref = numpy_diagatt_predict(samples_p[:200], pr, fr) * est.y_scale_[0] + est.y_mean_[0]
    pred_err = float(np.max(np.abs(z_ref - est.predict(Xp[:200]))) / np.std(z_ref))
    ragged = ragged_predict(est)
    main_flops = n * diagatt_flops(100, 70)
    cal_flops = n * diagatt_flops(100, 70, calibration=True)
    report["fit"] = dict(
        fit1=fit1, compiles1=cc1.count, compile_s1=cc1.seconds, fit2=fit2,
        compiles2=cc2.count, compile_s2=cc2.seconds, epochs=(est.max_iter, est.calibration_iter),
        n_iter=est.n_iter_, epoch=epoch, epoch_gflops=main_flops / epoch / 1e9,
        fit_gflops=(est.max_iter * main_flops + est.calibration_iter * cal_flops) / fit1 / 1e9,
        pred_cold=pred_cold, pred_warm=pred_warm, pred_warm32=pred_warm32, pred_compiles=ccp.count,
        pred_gflops=10000 * diagatt_flops(100, 70, train=False) / pred_warm / 1e9,
        ref_pred=ref_pred, pred_err=pred_err, n2_iter=est2.n_iter_, ragged=ragged,
    )


RAGGED_PREDICT = dict(n=2000, median=30, sets=3)


def ragged_predict(est):
    """Predict on new ragged data sets one after the other: packed (``est``'s
    way) and in buckets (``_pack = False``, the way of NTK-Attention and the baselines).

    Each layout sees the same data sets in the same order; every set is new
    to it, drawn from one log-normal length distribution (p99 = 10 x median).
    Returns per layout the (seconds, compilations, compile seconds) of each
    first call, the time of a repeated call on the last set, and the largest
    difference between the two layouts' predictions (in sd of the predictions).
    """
    cfg = RAGGED_PREDICT
    rng = np.random.RandomState(3)
    d = est.n_features_in_
    sets = [ragged_samples(cfg["n"], cfg["median"], d, rng) for _ in range(cfg["sets"])]
    out, preds = {}, {}
    for name, pack in (("packed", True), ("buckets", False)):
        calls = []
        with data_layout(est, pack=pack):
            for Z in sets:
                with CompileCounter() as cc:
                    t = time.perf_counter()
                    preds[name] = est.predict(Z)
                    dt = time.perf_counter() - t
                calls.append((dt, cc.count, cc.seconds))
            out[name] = dict(calls=calls, warm=min(timed(lambda: est.predict(sets[-1])) for _ in range(3)))
    out["err"] = float(np.max(np.abs(preds["packed"] - preds["buckets"])) / np.std(preds["buckets"]))
    out["mean_length"] = float(np.mean([[z.shape[0] for z in Z] for Z in sets]))
    out["buckets_per_set"] = [len({bucket_length(z.shape[0]) for z in Z}) for Z in sets]
    return out


def measure(report, peaks, rounds, quick):
    """Sections 2 and 3 into ``report``; the peak rounds taken meanwhile go to ``peaks``."""
    X, y = section_diagatt_step(report, peaks, rounds)
    section_diagatt_fit(report, X, y, quick)


def main():
    measurement_main(__doc__.splitlines()[0], "diagatt", lambda r, pk, a: measure(r, pk, a.rounds, a.quick))


if __name__ == "__main__":
    main()
