"""One DiagAtt fit in one process against the same fit data-parallel across two; writes its section of docs/results/scaling.md.

    python benchmarks/bench_distributed.py            # the section (a few minutes on 2 cores)
    python benchmarks/bench_distributed.py --quick    # smaller data, fewer epochs (smoke test)

Every fit runs in a fresh process started by this script, on the same data
(``DiagAttRegressor``, batches of 512, main phase only):

- **one process, every core**: ``fit`` on all the samples, JAX's thread pool
  as large as the machine;
- **one process, one core**: the same, the process restricted to one core;
- **two processes, one core each**: ``jax.distributed`` on loopback (CPU
  collectives by gloo), each process on its own core, ``fit`` on its half
  of the samples inside ``skdiagatt.cluster.use_processes``.

From each it records the fit's wall time and every epoch's time (the
``callback``'s ``EpochInfo.seconds``; an epoch's time is the median of the
epochs after the first, which compiles).  The two processes then time the
collective their steps add: a sum across the processes of one float32
vector as long as the parameters and two more (what every step sums: the
gradient, the loss and the weight), median of 200 calls.  The section gives the times, their ratios
within this one run, and that communication.
"""

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # this checkout's skdiagatt, in the workers too
RESULTS = os.path.join(HERE, "..", "docs", "results")
ROWS, FEATURES = 100, 32
BEGIN, END = "<!-- bench_distributed -->", "<!-- /bench_distributed -->"


def _data(quick):
    from skdiagatt.datasets import make_individualized_regression

    n = 2048 if quick else 8192
    X, y, _, _ = make_individualized_regression(n, n_rows=ROWS, n_features=FEATURES, random_state=0)
    return X, y


def _settings(quick):
    return dict(max_iter=3 if quick else 6, calibration_iter=0, batch_size=512, random_state=0)


def _allreduce_seconds(size, calls=200):
    """Median seconds of one sum across the processes of a float32 vector of ``size`` entries."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    first = {}
    for dev in jax.devices():  # one device per process, as the fit's mesh
        first.setdefault(dev.process_index, dev)
    mesh = Mesh(np.array([first[k] for k in sorted(first)]), ("p",))
    total = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "p"), mesh=mesh, in_specs=P(), out_specs=P()))
    vector = jax.make_array_from_process_local_data(NamedSharding(mesh, P()), np.ones(size, np.float32))
    jax.block_until_ready(total(vector))
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        jax.block_until_ready(total(vector))
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def worker(args):
    """One process of a measurement: pin, start JAX (and jax.distributed), fit, report JSON on stdout."""
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})  # before JAX starts: its thread pool follows the affinity
    import jax
    import numpy as np

    if args.processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        address = f"127.0.0.1:{args.port}"
        jax.distributed.initialize(coordinator_address=address, coordinator_bind_address=address,
                                   num_processes=args.processes, process_id=args.rank)
    from skdiagatt import DiagAttRegressor
    from skdiagatt.cluster import use_processes

    X, y = _data(args.quick)
    half = len(X) // args.processes
    part = slice(args.rank * half, len(X) if args.rank == args.processes - 1 else (args.rank + 1) * half)
    epochs = []
    est = DiagAttRegressor(**_settings(args.quick), callback=lambda info: epochs.append(info.seconds))
    start = time.perf_counter()
    if args.processes > 1:
        with use_processes():
            est.fit(X[part], y[part])
    else:
        est.fit(X, y)
    out = {"wall": time.perf_counter() - start, "epochs": epochs, "loss": est.loss_curve_[-1],
           "threads": len(os.sched_getaffinity(0)), "steps": -(-len(X) // 512)}
    if args.processes > 1:
        out["parameters"] = int(sum(np.size(v) for v in est.params_.values()))
        out["allreduce"] = _allreduce_seconds(out["parameters"] + 2)
        jax.distributed.shutdown()
    print("RESULT " + json.dumps(out))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(quick, processes, cores):
    """Run ``processes`` workers side by side (``cores[k]``: the core of worker k, None: all); their results."""
    port = str(_free_port())
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--processes", str(processes), "--port", port]
    procs = []
    try:
        for rank in range(processes):
            extra = ["--rank", str(rank)] + ([] if cores[rank] is None else ["--core", str(cores[rank])])
            procs.append(subprocess.Popen(cmd + extra + (["--quick"] if quick else []), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        logs = [p.communicate(timeout=1800)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results = []
    for p, log in zip(procs, logs):
        lines = [line for line in log.splitlines() if line.startswith("RESULT ")]
        if p.returncode != 0 or not lines:
            raise RuntimeError(f"a worker failed:\n{log[-3000:]}")
        results.append(json.loads(lines[-1][len("RESULT "):]))
    return results


def _epoch(result):
    later = sorted(result["epochs"][1:])
    return later[len(later) // 2]


def section(args, runs, wall):
    import skdiagatt

    command = "python benchmarks/bench_distributed.py" + (" --quick" if args.quick else "")
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    settings = _settings(args.quick)
    n = 2048 if args.quick else 8192
    one_all, one_core, (two, two_b) = runs["all"][0], runs["core"][0], runs["two"]
    steps = two["steps"]

    def row(name, cells):
        return f"| {name} | " + " | ".join(cells) + " |"

    fits = {"one process, every core": one_all, "one process, one core": one_core,
            "two processes, one core each": two}
    table = "\n".join([
        row("", list(fits)),
        row("---", ["---"] * len(fits)),
        row("fit, wall", [f"{r['wall']:.2f} s" for r in fits.values()]),
        row("epoch (median after the first)", [f"{_epoch(r) * 1e3:.0f} ms" for r in fits.values()]),
        row("epoch, one process on every core over this", [f"{_epoch(one_all) / _epoch(r):.2f}x"
                                                          for r in fits.values()]),
        row("step (epoch / steps per epoch)", [f"{_epoch(r) / steps * 1e3:.1f} ms" for r in fits.values()]),
        row("final training loss", [f"{r['loss']:.4f}" for r in fits.values()]),
    ])
    return f"""{BEGIN}
## One model across processes

Written by `{command}` in {wall:.0f} s; skdiagatt {skdiagatt.__version__}, Python
{platform.python_version()}, {os.cpu_count()} CPU cores (load average {load} at the end of the
run: the machine is shared).  Every figure was measured in this one run.

`DiagAttRegressor({", ".join(f"{k}={v}" for k, v in settings.items())})`
on {n:,} samples of {ROWS} rows and {FEATURES} features ({steps} steps per epoch), each fit in a
fresh process started by the script: in one process on every core, in one process restricted
to one core, and data-parallel in two processes of one core each (`jax.distributed` on
loopback, CPU collectives by gloo), each fitting its half of the samples inside
`skdiagatt.cluster.use_processes`.  The fit's wall time includes compiling and the start of
the score parameters, which every process computes.

{table}

Every step of the two-process fit sums one vector across the processes: the gradient of
the model's {two['parameters']:,} parameters, the loss and the weight.  That sum alone takes
{two['allreduce'] * 1e3:.2f} ms in process 0 and {two_b['allreduce'] * 1e3:.2f} ms in process 1
(median of 200 calls), {two['allreduce'] / (_epoch(two) / steps):.0%} of the two-process step.
Each epoch adds one exchange of a few integers (the processes agree on the minibatch shapes)
and one of the step weights.  The final losses differ because the two processes draw other
minibatches than one process does (with `batch_size >= n` the fits are the same, as
`tests/test_processes.py` checks).  The recipe is in `docs/scaling_out.md`.
{END}
"""


def write_section(path, text):
    """Replace this script's section of ``path`` (between its markers), or append it."""
    page = open(path).read() if os.path.exists(path) else ""
    if BEGIN in page:
        head, rest = page.split(BEGIN, 1)
        page = head + text.rstrip("\n") + rest.split(END, 1)[1]
    else:
        page = page.rstrip("\n") + "\n\n" + text
    with open(path, "w") as f:
        f.write(page)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller data, fewer epochs (smoke test)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "scaling.md"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--port", default="0", help=argparse.SUPPRESS)
    parser.add_argument("--core", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    start = time.perf_counter()
    cores = sorted(os.sched_getaffinity(0))
    runs = {
        "all": launch(args.quick, 1, [None]),
        "core": launch(args.quick, 1, [cores[0]]),
        "two": launch(args.quick, 2, [cores[0], cores[1 % len(cores)]]),
    }
    text = section(args, runs, time.perf_counter() - start)
    write_section(args.out, text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
