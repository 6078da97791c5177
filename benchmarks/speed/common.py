"""What the speed measurements share: timing in settled rounds, the compile counter, peaks, data.

Also the JSON the measurement scripts write and the renderer reads
(:func:`save`, :func:`load_report`): tuples and dictionaries with
non-string keys survive the round trip.
"""

import json
import math
import os
import platform
import resource
import time

import jax
import numpy as np
from jax import monitoring

import skdiagatt
from skdiagatt._testing import Minibatch, current_layout, stacked

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "results")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# The layout fit runs with: sizes of runs, slices and prediction groups.
LAYOUT = current_layout()

# ----------------------------------------------------------------- utilities
_COMPILES = []
monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: _COMPILES.append(duration)
    if event == "/jax/core/compile/backend_compile_duration"
    else None
)


class CompileCounter:
    """Backend compilations (count, seconds) inside a ``with`` block."""

    def __enter__(self):
        self.start = len(_COMPILES)
        return self

    def __exit__(self, *exc):
        got = _COMPILES[self.start :]
        self.count, self.seconds = len(got), float(sum(got))


def load():
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


# After a call, OpenBLAS keeps its worker threads spinning for a while (on the
# order of 0.1 s), and so may XLA's pool: on 2 cores whatever runs next then
# competes with them (measured: our DiagAtt step 5.9 ms right after a jitted
# matmul, 11.6 ms right after a NumPy one).  A pause lets them stop, but on this
# virtual machine the first milliseconds after an idle pause run slowly too
# (the same step: 9.0 ms right after a 0.3 s sleep, 6.6 ms once warmed up).
# So every timed group of the interleaved rounds, NumPy's and ours alike,
# starts with the pause and then runs untimed for WARM_S.
SETTLE_S, WARM_S = 0.3, 0.03
# Consecutive training steps timed together for the step's throughput: one
# call of the run program, as fit makes it.
RUN_STEPS = LAYOUT.run_steps
# XLA:CPU's YNN fusions off (what XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=
# does for a whole process), timed beside the default for section 2.
YNN_OFF = {"xla_cpu_experimental_ynn_fusion_type": ""}


def settle(fn):
    """Pause, then call ``fn`` untimed for ``WARM_S`` seconds."""
    time.sleep(SETTLE_S)
    start = time.perf_counter()
    while time.perf_counter() - start < WARM_S:
        jax.block_until_ready(fn())


def blas_threads(n):
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n, user_api="blas")


def timed(fn, reps=1):
    """Median wall time of ``reps`` calls (each call is blocked until done)."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def slope(x, y):
    """Least-squares slope of log(y) on log(x)."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def curve_slope(pts, estimate="epoch"):
    """Slope of a scaling curve's points ``(x, result)``, on the time per epoch ``estimate``."""
    return slope([x for x, _ in pts], [r[estimate] for _, r in pts])


def fmt_bytes(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.1f} {unit}"
        b /= 1024


def check(ok):
    return "PASS" if ok else "FAIL"


# ------------------------------------------------------------------- peak
def l2_cache():
    """The L2 cache of CPU 0 as Linux reports it (e.g. ``2048K``), or None."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            return f.read().strip()
    except OSError:
        return None



def minor_faults():
    """Minor page faults of this process so far (pages the kernel mapped on first touch)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def cpu_model():
    """The processor's name and its widest vector instructions, from /proc/cpuinfo (Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return platform.processor() or "processor unknown"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{name}, {vector}"


def peak_round(A, Aj, mm):
    settle(lambda: A @ A)
    t_np = timed(lambda: A @ A)
    settle(lambda: mm(Aj, Aj))
    t_jax = timed(lambda: mm(Aj, Aj))
    flops = 2.0 * A.shape[0] ** 3
    return flops / t_np / 1e9, flops / t_jax / 1e9


def product_seconds(products):
    """Seconds of a DiagAtt step's two row-sized products, jitted, each timed alone by :func:`step_products`."""
    return products["jax_fwd"] + products["jax_bwd"]


def step_floor(products):
    """Seconds of what a DiagAtt step cannot leave out, each part timed alone by :func:`step_products`.

    Its two row-sized products, the gather of its minibatch and one pass over
    the rows (forming ``G``, the backward product's right-hand side, reads
    the rows and writes as many bytes).
    """
    return product_seconds(products) + products["jax_gather"] + products["jax_pass"]



def lognormal_lengths(n, median, rng, p99_over_median=10.0):
    sigma = math.log(p99_over_median) / 2.3263478740408408
    return np.maximum(1, np.round(np.exp(math.log(median) + sigma * rng.standard_normal(n)))).astype(int)


def ragged_samples(n, median, d, rng, cap=40):
    """``n`` float64 samples of ``d`` standard normal columns, log-normal lengths of at most ``cap x median``."""
    return [rng.standard_normal((int(p), d)) for p in np.minimum(lognormal_lengths(n, median, rng), cap * median)]



def run_steps(steps, params, opt_state, frozen, data, batches, w, lr, loss_fn, config, n_slices=1):
    """The minibatches ``batches`` (at most ``RUN_STEPS``) as one call of ``steps``, as ``fit_loop`` makes it.

    ``steps`` is ``train_steps`` or a variant of it; every
    minibatch has the weights ``w`` and the step size ``lr``.  Returns what
    ``steps`` returns.
    """
    idx, ws = stacked([Minibatch(data, i, w, n_slices) for i in batches], RUN_STEPS)
    return steps(params, opt_state, frozen, data, idx, ws, np.full(RUN_STEPS, lr, np.float32),
                 np.int32(len(batches)), loss_fn, config, n_slices)


def machine():
    """The machine, the libraries and this process's peak memory, for the page's header."""
    return dict(
        platform=platform.platform(), arch=platform.machine(), cpus=os.cpu_count(), cpu=cpu_model(),
        python=platform.python_version(), jax=jax.__version__, backend=jax.default_backend(),
        devices=len(jax.devices()), skdiagatt=skdiagatt.__version__,
        max_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    )


def _encode(obj):
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: _encode(v) for k, v in obj.items()}
        return {"__items__": [[_encode(k), _encode(v)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return _encode(obj.tolist())
    return obj


def _decode(obj):
    if "__tuple__" in obj:
        return tuple(obj["__tuple__"])
    if "__items__" in obj:
        return {(tuple(k) if isinstance(k, list) else k): v for k, v in obj["__items__"]}
    return obj


def save(report, path):
    """Write a measurement's ``report`` (a dict) as JSON."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(_encode(report), f, indent=1)
    print(f"wrote {path}")


def load_report(path):
    """A report written by :func:`save`."""
    with open(path) as f:
        return json.load(f, object_hook=_decode)


def measurement_main(description, name, measure):
    """A measurement script's command line: run ``measure(report, peaks, args)`` and save its JSON.

    ``--quick`` (smaller sizes, fewer rounds), ``--rounds`` and ``--out``
    (default ``benchmarks/speed/data/<name>.json``); the peak rounds the
    measurement took go into the report as ``peaks``.
    """
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds (smoke test)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--out", default=os.path.join(DATA, f"{name}.json"))
    args = parser.parse_args()
    args.rounds = args.rounds or (4 if args.quick else 12)
    report, peaks = {}, []
    measure(report, peaks, args)
    if peaks:
        report["peaks"] = peaks
    save(report, args.out)
