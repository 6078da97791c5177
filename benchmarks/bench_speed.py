"""Speed and scale of the JAX kernels: every measurement in one process, then docs/results/performance.md.

    python benchmarks/bench_speed.py            # about 5-10 minutes on 2 CPU cores
    python benchmarks/bench_speed.py --quick --data /tmp/perf --out /tmp/perf.md   # smoke test

Runs the measurement scripts of ``benchmarks/speed/`` in one process, so that
every ratio compares figures taken side by side (the machine may be shared:
the load average is recorded, and the timed sections interleave ours, the
NumPy reference and the matmul peak so that a burst of load hits all of them
alike), writes their JSON to ``--data`` and renders the page with
``benchmarks/speed/render.py``:

1. the machine's float32 matmul peak (2048^3, jax.jit and NumPy, the larger),
   in rounds spread over the run (``run.json``);
2-3. the DiagAtt training step, fit and predict (``measure_diagatt.py``);
4. NTK-Attention's step and forward, and the prefix length (``measure_ntk.py``);
5-6. the scaling of an epoch in n, p and d, and the padding of the bucket
   grids (``measure_scaling.py``);
7. first fits in fresh processes, with and without JAX's persistent
   compilation cache (``measure_fresh.py``).

Each measurement script also runs alone and writes its own JSON; render the
page again with ``python benchmarks/speed/render.py --data DIR``.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "speed"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import measure_diagatt  # noqa: E402
import measure_fresh  # noqa: E402
import measure_ntk  # noqa: E402
import measure_scaling  # noqa: E402
import numpy as np  # noqa: E402
import render  # noqa: E402
from common import DATA, RESULTS, load, machine, peak_round, save  # noqa: E402


def measure(args):
    """Every section in order, each part's JSON written to ``args.data`` as soon as it is measured."""
    rounds = args.rounds or (4 if args.quick else 12)
    start, loads = time.perf_counter(), [load()]
    peaks = []
    sections = [
        ("diagatt", "DiagAtt step, fit and predict", lambda r: measure_diagatt.measure(r, peaks, rounds, args.quick)),
        ("ntk", "NTK", lambda r: measure_ntk.section_ntk(r, peaks, rounds, args.quick)),
        ("scaling", "scaling", lambda r: measure_scaling.measure(r, args.quick)),
        ("fresh", "fresh processes", lambda r: measure_fresh.section_fresh_processes(r, args.quick)),
    ]
    for name, title, run in sections:
        print(f"load {load():.2f}; {title} ...", flush=True)
        report = {}
        run(report)
        save(report, os.path.join(args.data, f"{name}.json"))
        loads.append(load())
    A = np.random.RandomState(1).standard_normal((2048, 2048)).astype(np.float32)
    Aj = jnp.asarray(A)
    mm = jax.jit(lambda a, b: a @ b)
    mm(Aj, Aj).block_until_ready()
    # (NumPy, jax.jit) GFLOP/s of each round: sections 2 and 4, and 3 more here.
    peaks += [peak_round(A, Aj, mm) for _ in range(3)]
    loads.append(load())
    command = "python benchmarks/bench_speed.py" + (" --quick" if args.quick else "")
    run_info = dict(peaks=peaks, load=[loads[0], load()], loads=loads, wall=time.perf_counter() - start,
                    machine=machine(), command=command)
    save(run_info, os.path.join(args.data, "run.json"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds (smoke test)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--data", default=DATA, help="where the measurements' JSON files go")
    parser.add_argument("--out", default=os.path.join(RESULTS, "performance.md"))
    args = parser.parse_args(argv)
    measure(args)
    return render.main(["--data", args.data, "--out", args.out])


if __name__ == "__main__":
    sys.exit(main())
