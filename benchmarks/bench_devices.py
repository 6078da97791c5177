"""The same workloads on every JAX backend of one process; writes docs/results/devices.md.

    python benchmarks/bench_devices.py                          # CPU only (here)
    JAX_PLATFORMS=cuda,cpu python benchmarks/bench_devices.py   # a GPU machine: the GPU and its CPU

The library has no device-specific code path: ``JAX_PLATFORMS`` (or
``jax.default_device`` with ``skdiagatt._testing.use_devices``) decides
where it runs.  This script runs each workload once per backend of the
process, inside ``jax.default_device(dev)`` and ``use_devices([dev])``, and
prints, side by side:

1. one DiagAtt training step (n = 9000, p = 100, d = 70, batch 256, the
   latent-row objective with Adam): time per step over 8 consecutive steps,
   in useful GFLOP/s;
2. ``DiagAttRegressor(random_state=0).fit`` on those data (defaults: 20
   epochs and 5 calibration epochs): the first fit (compiles) and a second;
3. ``predict`` on 10,000 samples of p = 100, d = 70;
4. the NTK-Attention forward at prefix length m = 2^18 (given Z and k;
   B = 8, L = 128, d = 64);
5. reproducibility: two fits with the same ``random_state`` (DiagAtt, and
   NTK-Attention) compared bit for bit, in this process and in two fresh
   processes started side by side (on a GPU also with
   ``XLA_FLAGS=--xla_gpu_deterministic_ops=true``, which fixes XLA's choice
   of GPU kernels instead of timing candidates in every process);
6. agreement between backends: the first backend's fitted model predicts on
   every backend (the arithmetic alone), and each backend's own fit predicts
   (training included), as the largest difference over the standard
   deviation of the first backend's predictions.
"""

import argparse
import os
import platform
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "speed"))
from common import RESULTS, RUN_STEPS  # noqa: E402
from measure_diagatt import consecutive_steps, diagatt_step_inputs  # noqa: E402
from reference import diagatt_flops  # noqa: E402

import skdiagatt  # noqa: E402
from skdiagatt import (  # noqa: E402
    DiagAttRegressor,
    NTKPrefixRegressor,
    _testing,  # noqa: E402
)
from skdiagatt.datasets import make_individualized_regression  # noqa: E402
from skdiagatt.kernels.ntk_attention import ntk_attention, prefix_to_state  # noqa: E402


def backends():
    """(name, device) of every platform this process has, default backend first."""
    out = []
    for name in dict.fromkeys([jax.default_backend(), "gpu", "cpu"]):
        try:
            out.append((name, jax.devices(name)[0]))
        except RuntimeError:
            pass
    return out


def best_of(fn, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def step_time(X, y, reps):
    """Seconds per DiagAtt training step, over RUN_STEPS consecutive steps in one call (as fit runs them)."""
    n, B = len(X), 256
    rng = np.random.RandomState(0)
    samples, _, params, frozen, data = diagatt_step_inputs(X, y, rng)
    d = samples[0].shape[1]
    place = _testing.placement()
    pj, fj = place.put(jax.tree.map(jnp.asarray, params)), place.put(jax.tree.map(jnp.asarray, frozen))
    opt = _testing.init_opt_state(pj)
    w = np.ones(B, np.float32)
    runs = [rng.permutation(n)[:B].astype(np.int32) for _ in range(RUN_STEPS)]
    n_slices = _testing.bucket_slices(B, data["X"].shape[1])

    def run():
        return consecutive_steps(_testing.train_steps, pj, opt, fj, data, runs, w, np.float32(0.01), n_slices)

    run()
    t = min(run() for _ in range(reps))
    p = samples[0].shape[0]
    return t, B * diagatt_flops(p, d) / t / 1e9


def ntk_forward_time(reps, m=2**18):
    rng = np.random.RandomState(0)
    B, L, d = 8, 128, 64
    X = jnp.asarray(rng.standard_normal((B, L, d)).astype(np.float32))
    where = jnp.ones((B, L), bool)
    W = {k: jnp.asarray((np.sqrt(0.25 / d) * rng.standard_normal((1, d, d))).astype(np.float32))
         for k in ("W_Q", "W_K", "W_V")}
    P = jnp.asarray(rng.standard_normal((m, d)).astype(np.float32))
    Z, k = prefix_to_state(P, W["W_K"], W["W_V"], "taylor", 2)
    call = lambda: ntk_attention(X, where, Z, k, W["W_Q"], W["W_K"], W["W_V"],
                                 feature_map="taylor", degree=2)
    call()
    return best_of(call, reps)


def bit_identical(a, b):
    """True if two fitted estimators hold bit-identical parameters."""
    return all(np.array_equal(np.asarray(a.params_[k]), np.asarray(b.params_[k]), equal_nan=True)
               for k in a.params_)


def reproducible(quick):
    Xs, ys, _, _ = make_individualized_regression(400 if quick else 2000, n_rows=(4, 40),
                                                  n_features=8, random_state=3)
    kw = dict(random_state=0, max_iter=3 if quick else 10)
    same_diag = bit_identical(DiagAttRegressor(**kw).fit(Xs, ys), DiagAttRegressor(**kw).fit(Xs, ys))
    kw_ntk = dict(random_state=0, max_iter=2 if quick else 5, prefix_length=64)
    same_ntk = bit_identical(NTKPrefixRegressor(**kw_ntk).fit(Xs, ys), NTKPrefixRegressor(**kw_ntk).fit(Xs, ys))
    return same_diag, same_ntk


_CHILD = """
import hashlib, numpy as np
from skdiagatt import DiagAttRegressor
from skdiagatt.datasets import make_individualized_regression
X, y, _, _ = make_individualized_regression(1000, n_rows=(4, 40), n_features=8, random_state=3)
est = DiagAttRegressor(random_state=0, max_iter=5).fit(X, y)
h = hashlib.sha256(est.predict(X).tobytes())
for k in sorted(est.params_):
    h.update(np.asarray(est.params_[k]).tobytes())
print(h.hexdigest())
"""
DETERMINISTIC = "--xla_gpu_deterministic_ops=true"


def across_processes(backend, flags=""):
    """True if two fresh processes on ``backend``, started together, fit bit-identical models."""
    env = {**os.environ, "JAX_PLATFORMS": {"gpu": "cuda"}.get(backend, backend),
           "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    digests = [proc.communicate()[0].split()[-1] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"a child process on {backend} failed")
    return digests[0] == digests[1]


def ntk_log2_m(quick):
    return 15 if quick else 18


def run_backend(dev, X, y, Xp, reps, quick):
    out = {}
    with jax.default_device(dev), _testing.use_devices([dev]):
        out["step"], out["step_gflops"] = step_time(X, y, reps)
        kw = dict(random_state=0, max_iter=4 if quick else 20, calibration_iter=1 if quick else 5)
        t = time.perf_counter()
        est = DiagAttRegressor(**kw).fit(X, y)
        out["fit1"] = time.perf_counter() - t
        t = time.perf_counter()
        DiagAttRegressor(**kw).fit(X, y)
        out["fit2"] = time.perf_counter() - t
        est.predict(Xp)
        out["predict"] = best_of(lambda: est.predict(Xp), reps)
        out["ntk"] = ntk_forward_time(reps, 2 ** ntk_log2_m(quick))
        out["same_diag"], out["same_ntk"] = reproducible(quick)
    out["processes"] = across_processes(dev.platform)
    if dev.platform == "gpu":
        out["processes_det"] = across_processes(dev.platform, DETERMINISTIC)
    return out, est


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "devices.md"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    n = 2000 if args.quick else 9000
    reps = 2 if args.quick else 5
    X, y, _, _ = make_individualized_regression(n, n_rows=100, n_features=70, random_state=0)
    Xp, _, _, _ = make_individualized_regression(2000 if args.quick else 10000, n_rows=100,
                                                 n_features=70, random_state=2)
    found = backends()
    results, models = {}, {}
    for name, dev in found:
        print(f"{name}: {dev.device_kind} ...", flush=True)
        results[name], models[name] = run_backend(dev, X, y, Xp, reps, args.quick)
    # Agreement: the first backend's model (the arithmetic alone) and each one's own fit.
    first = found[0][0]
    ref = models[first].predict(Xp)
    scale = float(np.std(ref))
    for name, dev in found:
        with jax.default_device(dev):
            results[name]["same_model"] = float(np.max(np.abs(models[first].predict(Xp) - ref))) / scale
        results[name]["own_fit"] = float(np.max(np.abs(models[name].predict(Xp) - ref))) / scale
        results[name]["finite"] = bool(np.all(np.isfinite(models[name].predict(Xp))))
    write(args, found, results, time.perf_counter() - start, n, len(Xp))
    return 0


def write(args, found, results, wall, n, n_pred):
    rows = [
        ("device", lambda r, dev: dev.device_kind),
        (f"DiagAtt training step (n = {n}, p = 100, d = 70, batch 256)",
         lambda r, dev: f"{1e3 * r['step']:.2f} ms, {r['step_gflops']:.0f} GFLOP/s"),
        ("DiagAttRegressor.fit, first (compiles) / second", lambda r, dev: f"{r['fit1']:.1f} s / {r['fit2']:.1f} s"),
        (f"predict, {n_pred:,} samples", lambda r, dev: f"{r['predict']:.3f} s"),
        (f"NTK-Attention forward, m = 2^{ntk_log2_m(args.quick)} (B = 8, L = 128, d = 64)",
         lambda r, dev: f"{1e3 * r['ntk']:.2f} ms"),
        ("two fits with one random_state bit-identical (DiagAtt, NTK)",
         lambda r, dev: f"{'yes' if r['same_diag'] else 'NO'}, {'yes' if r['same_ntk'] else 'NO'}"),
        ("two fresh processes fit bit-identical models (DiagAtt)",
         lambda r, dev: ("yes" if r["processes"] else "NO") + (
             f"; with `{DETERMINISTIC}`: " + ("yes" if r["processes_det"] else "NO")
             if "processes_det" in r else "")),
        (f"same fitted model ({found[0][0]}) predicting here: max diff / std",
         lambda r, dev: f"{r['same_model']:.1e}"),
        (f"own fit's predictions against {found[0][0]}'s: max diff / std",
         lambda r, dev: f"{r['own_fit']:.1e}"),
        ("predictions finite", lambda r, dev: "yes" if r["finite"] else "NO"),
    ]
    names = [name for name, _ in found]
    lines = [
        "# The same workloads on each JAX backend",
        "",
        f"Written by `python benchmarks/bench_devices.py{' --quick' if args.quick else ''}` "
        f"(JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!s}) in {wall:.0f} s; "
        f"skdiagatt {skdiagatt.__version__}, jax {jax.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPU cores. Every figure was measured in this one run; times are the best "
        "of repeated calls after a warm-up call.",
        "",
        "| | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, fn in rows:
        lines.append(f"| {label} | " + " | ".join(fn(results[nm], dev) for nm, dev in found) + " |")
    if len(found) > 1:
        base = results[found[-1][0]]
        lines += ["", f"Speed-up of {found[0][0]} over {found[-1][0]}: training step "
                  f"{base['step'] / results[found[0][0]]['step']:.1f}x, second fit "
                  f"{base['fit2'] / results[found[0][0]]['fit2']:.1f}x, predict "
                  f"{base['predict'] / results[found[0][0]]['predict']:.1f}x, NTK forward "
                  f"{base['ntk'] / results[found[0][0]]['ntk']:.1f}x."]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
