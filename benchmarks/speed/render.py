"""Render docs/results/performance.md and its figure from the JSON the measurement scripts wrote.

    python benchmarks/speed/render.py [--data DIR] [--out docs/results/performance.md]

Reads ``diagatt.json``, ``ntk.json``, ``scaling.json``, ``fresh.json`` and
``run.json`` (the peak rounds, the load and the machine, from
``benchmarks/bench_speed.py``) from ``--data``, computes the bars and writes
the page; nothing is measured here.
"""

import argparse
import math
import os
import sys

import numpy as np
from common import (
    DATA,
    LAYOUT,
    RESULTS,
    RUN_STEPS,
    SETTLE_S,
    WARM_S,
    check,
    curve_slope,
    fmt_bytes,
    load_report,
    product_seconds,
    slope,
    step_floor,
)
from measure_diagatt import RAGGED_PREDICT
from measure_fresh import FRESH
from measure_scaling import LONG_FIT, SHORT_FIT

from skdiagatt._testing import COARSE, FINE

PARTS = ("diagatt", "ntk", "scaling", "fresh", "run")


def load_parts(data):
    """One report from the JSON files of ``data``; the peak rounds of all of them together."""
    report = {}
    for name in PARTS:
        part = load_report(os.path.join(data, f"{name}.json"))
        peaks = part.pop("peaks", [])
        report.update(part)
        report["peaks"] = report.get("peaks", []) + list(peaks)
    return report


def derive(report):
    """The peak over all rounds, the step's fraction of it, and the bars: ``(name, value, ok)``."""
    pn, pj = zip(*report["peaks"])
    report["peak"] = dict(numpy=max(pn), jax=max(pj), peak=max(max(pn), max(pj)),
                          median=float(np.median([max(a, b) for a, b in report["peaks"]])))
    # Fractions of peak against the best peak of the whole run (conservative).
    peak = report["peak"]["peak"]
    report["step"]["frac"] = report["step"]["gflops"] / peak
    st, fit, pre, sc, pad = (report[k] for k in ("step", "fit", "prefix", "scaling", "padding"))
    s_n, s_p, s_r, s_d = (curve_slope(sc[key]) for key in ("n", "p", "ragged", "d"))
    cross = {key: f"{curve_slope(sc[key]):.2f} (per-round differences: {curve_slope(sc[key], 'epoch_rounds'):.2f})"
             for key in ("n", "p", "ragged", "d")}
    m_last = pre["ms"][-1]
    ntk_ts = [pre["ntk"][m] for m in pre["ms"]]
    flat = max(ntk_ts) / min(ntk_ts)
    speedup = pre["exact"][m_last] / pre["ntk"][m_last]
    report["bars"] = [
        ("DiagAtt training step (n = 9000, p = 100, d = 70): useful throughput >= 40% of the float32 matmul peak",
         f"{st['gflops']:.1f} GFLOP/s = {st['frac']:.0%} of {peak:.1f} (per-round ratio {st['frac_rounds']:.0%}; "
         f"its two row-sized products alone: {st['useful'] / product_seconds(st['products']) / 1e9 / peak:.0%}; with the gather and "
         f"forming `G`, each timed alone: {st['useful'] / step_floor(st['products']) / 1e9 / peak:.0%})",
         st["frac"] >= 0.40),
        ("... and >= 3x faster than the NumPy reference (per-sample loop)",
         f"{st['ratio_loop']:.1f}x (vectorised NumPy: {st['ratio_vec']:.1f}x)", st["ratio_loop"] >= 3.0),
        ("fit time per epoch linear in n (log-log slope 0.9-1.1)", cross["n"], 0.9 <= s_n <= 1.1),
        ("... linear in p (slope 0.9-1.1), grid-aligned p", cross["p"], 0.9 <= s_p <= 1.1),
        ("... linear in p, ragged long-tailed p (slope 0.9-1.1, against the mean length)", cross["ragged"],
         0.9 <= s_r <= 1.1),
        ("... at most quadratic in d (slope <= 2)", cross["d"], s_d <= 2.0),
        ("bucketing wastes <= 25% padded rows (log-normal, median 30, p99 300)",
         f"{pad['waste']:.1%} (stored incl. count rounding {pad['stored']:.1%}); the attention estimators' "
         f"coarser grid {pad['coarse']['waste']:.1%}", max(pad["waste"], pad["coarse"]["waste"]) <= 0.25),
        (f"NTK-Attention forward independent of m (max/min time over m = 2^{int(math.log2(pre['ms'][0]))}...2^{int(math.log2(m_last))} < 1.5)",
         f"{flat:.2f}", flat < 1.5),
        (f"NTK-Attention forward at m = 2^{int(math.log2(m_last))} >= 100x faster than exact prefix attention",
         f"{speedup:.0f}x", speedup >= 100),
        ("predict on 10,000 samples (p = 100, d = 70) <= 2 s",
         f"{fit['pred_warm']:.2f} s (float64 list; float32 array {fit['pred_warm32']:.2f} s; first call incl. compile {fit['pred_cold']:.2f} s)",
         fit["pred_warm"] <= 2.0),
        ("second fit on same-bucket data compiles nothing", f"{fit['compiles2']} compilations", fit["compiles2"] == 0),
    ]
    return report


def ragged_cost_model(pts):
    """One sentence: the ragged curve as a fixed cost per step plus a cost per computed row."""
    rows = np.array([r["computed_rows"] for _, r in pts], float)
    steps = np.array([r["steps"] for _, r in pts], float)
    t = np.array([r["epoch"] for _, r in pts])
    (per_step, per_row), *_ = np.linalg.lstsq(np.stack([steps, rows], 1), t, rcond=None)
    x = [m for m, _ in pts]
    return (f"Least squares over these points, seconds per epoch = steps x {1e3 * per_step:.2f} ms + "
            f"computed rows x {1e6 * per_row:.3f} us: the fixed cost is {per_step * steps[0] / t[0]:.0%} of "
            f"the shortest set's epoch and {per_step * steps[-1] / t[-1]:.0%} of the longest's. The per-row "
            f"part alone has slope {slope(x, rows * per_row):.2f} against the mean length (computed rows "
            "include each sample's last, partly filled block); the time per epoch "
            f"{slope(x, t):.2f}.")


def write(report, path):
    L = []
    w = L.append
    for section in (_header, _bars, _peak, _step, _fit, _ntk, _scaling, _padding):
        section(w, report)
    write_fresh(w, report["fresh"])
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DATA, help="the folder of the measurements' JSON files")
    parser.add_argument("--out", default=os.path.join(RESULTS, "performance.md"))
    args = parser.parse_args(argv)
    report = derive(load_parts(args.data))
    png = os.path.splitext(args.out)[0] + ".png"
    plot(report, png)
    write(report, args.out)
    for name, value, ok in report["bars"]:
        print(f"{check(ok)}  {name}: {value}")
    print(f"wrote {args.out} and {png}")



def plot(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sc = report["scaling"]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    panels = [
        ("n", "samples n (p = 104, d = 70)", [("grid p", sc["n"])]),
        ("p", "rows per sample (mean for ragged), n = %d, d = 70" % sc["n0"],
         [("grid-aligned p", sc["p"]), ("log-normal p (p99 = 10 x median), packed", sc["ragged"]),
          ("the same in buckets", sc["ragged_buckets"])]),
        ("d", "features d (n = %d, p = 48)" % sc["n0"], [("", sc["d"])]),
    ]
    for col, (key, label, series) in enumerate(panels):
        ax, axm = axes[0, col], axes[1, col]
        for name, pts in series:
            x = [v for v, _ in pts]
            t = [r["epoch"] for _, r in pts]
            mem = [r["mem"] / 2**20 for _, r in pts]
            s = slope(x, t)
            ax.loglog(x, t, "o-", label=f"{name} slope {s:.2f}".strip())
            axm.loglog(x, mem, "s-", label=name or None)
        ax.set_xlabel(label)
        ax.set_ylabel("seconds per epoch")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        axm.set_xlabel(label)
        axm.set_ylabel("MiB planned for one step (+ data)")
        axm.grid(True, which="both", alpha=0.3)
    fig.suptitle("DiagAtt training: time per epoch (top) and memory (bottom); batch 256, latent-row objective")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _header(w, report):
    """The page's title and how it was measured."""
    m = report["machine"]
    w("# Performance and scale")
    w("")
    w("Written by `benchmarks/speed/render.py` from the data of the measurement scripts; do not edit by hand.")
    w("")
    w(f"- command: `{report['command']}`")
    w(f"- machine: {m['platform']}, {m['arch']}, {m['cpus']} CPUs ({m['cpu']}), Python "
      f"{m['python']}, jax {m['jax']} ({m['backend']}, "
      f"{m['devices']} device(s)), skdiagatt {m['skdiagatt']}")
    w(f"- wall time {report['wall']:.0f} s; 1-minute load average {report['load'][0]:.2f} at the start, "
      f"{report['load'][1]:.2f} at the end (min {min(report['loads']):.2f}, max {max(report['loads']):.2f} "
      f"over the sections). The machine is shared: absolute times move with the load, the ratios "
      f"below compare figures measured in interleaved rounds of this run.")
    w(f"- peak resident memory of the process: {fmt_bytes(m['max_rss'])}")
    w("")


def _bars(w, report):
    w("## Bars")
    w("")
    w("| bar | measured | |")
    w("|---|---|---|")
    bars = report["bars"]
    for name, value, ok in bars:
        w(f"| {name} | {value} | {check(ok)} |")
    w("")


def _peak(w, report):
    peak = report["peak"]
    w("## 1. Peak")
    w("")
    w(f"float32 dense matmul 2048 x 2048 x 2048, best over {len(report['peaks'])} rounds spread over the run: "
      f"jax.jit {peak['jax']:.1f} GFLOP/s, NumPy {peak['numpy']:.1f} GFLOP/s; **peak = {peak['peak']:.1f} GFLOP/s** "
      f"(the larger; the median round gave {peak['median']:.1f}). The processor of this run is named in "
      "the header.")
    w("")


def _step(w, report):
    st, fit, peak = (report[k] for k in ("step", "fit", "peak"))
    w("## 2. DiagAtt training step (n = 9000, p = 100, d = 70, batch 256, one head)")
    w("")
    w("One minibatch step as `fit` runs it: gather of the batch from the bucket on the device, the "
      "latent-row objective and its gradient, Adam. *Useful* FLOPs count the matmuls and the "
      "row-wise score dot on the real rows only (no padding): forward `X W` 2pd^2, score 2pd, values "
      "2pd; backward `X^T (g x)` 2pd^2 and `X^T g` 2pd; that is "
      f"{st['useful'] / 1e9:.3f} GFLOP per step ({st['real_rows']} real rows, {st['padded_rows']} computed).")
    w("")
    w("| implementation | time per step (median of rounds) | useful GFLOP/s | fraction of peak | ours faster by |")
    w("|---|---:|---:|---:|---:|")
    w(f"| skdiagatt (`train_steps`, jitted), {RUN_STEPS} consecutive steps in one call, as `fit` runs them | "
      f"{st['t_run'] * 1e3:.2f} ms (best {st['best_run'] * 1e3:.2f}) | "
      f"{st['gflops']:.1f} (best {st['best_gflops']:.1f}) | {st['frac']:.0%} (per round {st['frac_rounds']:.0%}) | |")
    w(f"| the same, one isolated step (a call of one step: dispatch, run, wait) | {st['t_ours'] * 1e3:.2f} ms "
      f"(best {st['best_ours'] * 1e3:.2f}) | {st['latency_gflops']:.1f} | "
      f"{st['latency_gflops'] / peak['peak']:.0%} | |")
    if st["t_ynn"] is not None:
        w(f"| the same with XLA:CPU's YNN fusions off (`XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`) | "
          f"{st['t_ynn'] * 1e3:.2f} ms | {st['useful'] / st['t_ynn'] / 1e9:.1f} | "
          f"{st['useful'] / st['t_ynn'] / 1e9 / peak['peak']:.0%} | default / off: {st['ratio_ynn']:.2f} |")
    w(f"| NumPy reference, per-sample loop ({st['threads']['loop']} BLAS thread(s)) | {st['t_loop'] * 1e3:.1f} ms | "
      f"{st['useful'] / st['t_loop'] / 1e9:.1f} | {st['useful'] / st['t_loop'] / 1e9 / peak['peak']:.0%} | "
      f"**{st['ratio_loop']:.1f}x** (isolated step: {st['ratio_loop_latency']:.1f}x) |")
    w(f"| NumPy, vectorised on the padded batch ({st['threads']['vec']} BLAS thread(s)) | {st['t_vec'] * 1e3:.1f} ms | "
      f"{st['useful'] / st['t_vec'] / 1e9:.1f} | {st['useful'] / st['t_vec'] / 1e9 / peak['peak']:.0%} | "
      f"{st['ratio_vec']:.1f}x |")
    pr = st["products"]
    rest = st["t_run"] - product_seconds(pr)
    for label, a, b in (
        ("the step's two row-sized products alone, jitted (`X W` fused with the score dot; `X^T G`), nothing else",
         pr["jax_fwd"], pr["jax_bwd"]),
        ("the same two products in NumPy (`X @ W`, `X.T @ G`; BLAS threads as the vectorised row)",
         pr["numpy_fwd"], pr["numpy_bwd"]),
    ):
        w(f"| {label} | {(a + b) * 1e3:.2f} ms ({a * 1e3:.2f} + {b * 1e3:.2f}) | {st['useful'] / (a + b) / 1e9:.1f} | "
          f"{st['useful'] / (a + b) / 1e9 / peak['peak']:.0%} | |")
    pass_bytes = 2 * st["padded_rows"] * st["d"] * 4
    floor = step_floor(pr)
    for label, key in (
        ("one pass over the minibatch's rows alone, jitted (`2 * X`: read the rows, write as many bytes)", "jax_pass"),
        ("the same pass in NumPy (`np.multiply(X, 2, out=...)`, one thread)", "numpy_pass"),
    ):
        w(f"| {label} | {pr[key] * 1e3:.2f} ms ({pass_bytes / pr[key] / 1e9:.0f} GB/s) | | | |")
    w(f"| the gather of the minibatch from the bucket alone, jitted (`_testing.gather`) | "
      f"{pr['jax_gather'] * 1e3:.2f} ms | | | |")
    w("")
    w(f"The bar is on throughput: the time per step of {RUN_STEPS} consecutive steps on distinct "
      "minibatches of the bucket, each on the parameters the one before returned, in one call "
      f"(`_testing.train_steps`), which is how `fit` runs them: up to {RUN_STEPS} consecutive minibatches "
      "of a bucket per call (section 3 times whole epochs of it). An isolated step also waits for its "
      "dispatch and for the worker threads to wake, once per step; its time is the second row.")
    w("")
    w("The two *products* rows time what no step can do without, on the step's own minibatch (all "
      f"{st['padded_rows']} computed rows): the forward product with the row-wise score dot fused in, as "
      f"XLA fuses it in the step, and the backward product with the (rows, d + {st['value_columns']}) "
      "right-hand side `G` (the "
      "score's row weights times the rows, the value and linear-score columns) that the step forms; "
      "their useful GFLOP/s divide the step's useful FLOPs by their time alone. They bound the step on "
      "this machine with these kernels: the rest of it (the gather of the minibatch, the value product, "
      "the softmax and the other per-row work, forming `G`, Adam) took "
      f"{rest * 1e3:.2f} ms of the {st['t_run'] * 1e3:.2f}.")
    w("")
    l2 = f" ({st['l2_cache']} per core here)" if st["l2_cache"] else ""
    w(f"That rest moves the rows more than it computes on them. The minibatch's rows "
      f"({pass_bytes / 2 / 2**20:.1f} MiB) do not fit in a core's L2 cache{l2}, and the last three rows of the "
      "table time what moving them costs here: one pass that reads the rows and writes as many bytes took "
      f"{pr['jax_pass'] * 1e3:.2f} ms jitted and {pr['numpy_pass'] * 1e3:.2f} ms in NumPy "
      f"({pass_bytes / pr['jax_pass'] / 1e9:.0f} and {pass_bytes / pr['numpy_pass'] / 1e9:.0f} GB/s), and the "
      f"gather alone {pr['jax_gather'] * 1e3:.2f} ms. The rest took as long as {rest / pr['jax_pass']:.1f} "
      "jitted passes. Besides the products, the step passes over the rows at least three times (the gather "
      "writes them, forming `G` reads them and writes as many bytes, the value product reads them), and "
      f"its other per-row work runs on the (256, rows) scores, {st['d']} times smaller. At 40% of the peak a step "
      f"would take at most {st['useful'] / (0.4 * peak['peak'] * 1e9) * 1e3:.2f} ms; its two products alone "
      f"took {product_seconds(pr) * 1e3:.2f}, and with the gather and one pass (forming `G`) "
      f"{floor * 1e3:.2f}: {st['useful'] / floor / 1e9 / peak['peak']:.0%} of the peak for a "
      "step that did nothing else, each part timed alone.")
    if st["t_ynn"] is not None:
        w("")
        w("The YNN row times the same step compiled with XLA:CPU's YNN fusions (an experimental default "
          "of recent jaxlib versions) off, as `XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=` does for "
          "a whole process, in the same rounds. skdiagatt keeps XLA's default: this is one machine; the "
          "ratio says what the flag did here.")
    w("")
    w(f"The references compute the same loss and gradient (max relative gradient difference to JAX: "
      f"loop {st['err_loop']:.1e}, vectorised {st['err_vec']:.1e}; losses {st['loss'][0]:.6f} / "
      f"{st['loss'][1]:.6f} / {st['loss'][2]:.6f}) and the same Adam step. The per-sample loop is the "
      "plain NumPy way to handle ragged samples and is the reference of the bar; the vectorised version "
      "needs the bucketing machinery and is shown for completeness. Ratios are medians of per-round "
      f"ratios over {st['rounds']} interleaved rounds; NumPy ran with the BLAS thread count that was "
      f"faster for it in this run. Each timed group (ours, each reference, the peak matmuls) starts with "
      f"a {SETTLE_S} s pause, so that the worker threads the previous library leaves spinning do not "
      f"compete with it for the 2 cores, and then {1000 * WARM_S:.0f} ms of untimed calls of its own "
      "(this virtual machine runs slowly for a few milliseconds after an idle pause).")
    w("")


def _fit(w, report):
    fit, peak = (report[k] for k in ("fit", "peak"))
    w("## 3. DiagAtt fit and predict")
    w("")
    w("| | |")
    w("|---|---|")
    w(f"| first `DiagAttRegressor().fit` on n = 9000 ({fit['epochs'][0]} + {fit['epochs'][1]} epochs) | "
      f"{fit['fit1']:.1f} s, of which {fit['compiles1']} compilations took {fit['compile_s1']:.1f} s |")
    w(f"| second fit, new data of the same buckets | {fit['fit2']:.1f} s, **{fit['compiles2']} compilations** "
      f"({fit['compile_s2']:.2f} s) |")
    w(f"| time per epoch of the compiled loop (36 steps) | {fit['epoch']:.2f} s = {fit['epoch_gflops']:.1f} useful GFLOP/s "
      f"({fit['epoch_gflops'] / peak['peak']:.0%} of peak) |")
    w(f"| whole first fit, useful work / wall time | {fit['fit_gflops']:.1f} GFLOP/s |")
    w(f"| predict, 10,000 samples (p = 100, d = 70), float64 list in, after a first call | "
      f"{fit['pred_warm']:.2f} s ({fit['pred_gflops']:.1f} useful GFLOP/s of forward) |")
    w(f"| the same, float32 3-D array in | {fit['pred_warm32']:.2f} s |")
    w(f"| the first predict call of that size (compiles {fit['pred_compiles']} shape(s)) | {fit['pred_cold']:.2f} s |")
    w(f"| NumPy per-sample forward, same 10,000 samples (from 2,000) | {fit['ref_pred']:.2f} s "
      f"({fit['ref_pred'] / fit['pred_warm']:.1f}x ours; max difference {fit['pred_err']:.1e} of sd) |")
    w("")
    w("Validation and bucketing of the input (`check_ragged`, `make_buckets`) are part of the predict "
      "time; a float64 list costs its conversion to float32.")
    w("")
    rp, cfg = fit["ragged"], RAGGED_PREDICT
    w(f"**Ragged samples.** The same fitted model predicts {len(rp['packed']['calls'])} new data sets one after the "
      f"other, each of {cfg['n']:,} samples (float64 lists) with log-normal lengths (median {cfg['median']}, "
      f"p99 = 10 x median, mean {rp['mean_length']:.1f} rows; {'/'.join(map(str, rp['buckets_per_set']))} bucket "
      "lengths): packed, as `predict` does, and in buckets (`_pack = False`, the way of NTK-Attention and the "
      "baselines), each layout on the same sets in the same order.")
    w("")
    w("| layout | " + " | ".join(f"set {k + 1}: s (compilations)" for k in range(len(rp["packed"]["calls"])))
      + " | set " + str(len(rp["packed"]["calls"])) + " again |")
    w("|---|" + "---:|" * (len(rp["packed"]["calls"]) + 1))
    for name in ("packed", "buckets"):
        cells = [f"{t:.2f} ({c}: {cs:.2f} s)" for t, c, cs in rp[name]["calls"]]
        w(f"| {name} | " + " | ".join(cells) + f" | {rp[name]['warm']:.3f} |")
    w("")
    w(f"Predictions of the two layouts differ by at most {rp['err']:.1e} sd (float rounding). Packed, a data set "
      "compiles a program per power of two of its blocks of 4 rows, and data sets of a similar size share it; in "
      "buckets every bucket length is a program of its own, and a bucket of more than 2^12 rows one per power of "
      "two of its sample count.")
    w("")


def _ntk(w, report):
    ntk, pre, peak = (report[k] for k in ("ntk", "prefix", "peak"))
    w(f"## 4. NTK-Attention (B = {ntk['B']}, L = {ntk['L']}, d = d_h = {ntk['d']}, one head, Taylor g = 2, r = {ntk['r']})")
    w("")
    w("Training step of `NTKPrefixRegressor` (mean pooling, trainable Z, k, read-out; frozen projections). "
      "Useful FLOPs: projections, `Q K^T`, `A V`, `phi(Q) Z`, `phi(Q) k` forward and the gradients of Z and k.")
    w("")
    w("| | time | useful GFLOP/s | fraction of peak |")
    w("|---|---:|---:|---:|")
    w(f"| forward + backward + Adam (jitted step) | {ntk['t_ours'] * 1e3:.1f} ms | {ntk['gflops']:.1f} | {ntk['gflops'] / peak['peak']:.0%} |")
    w(f"| forward only (predict) | {ntk['t_fwd'] * 1e3:.1f} ms | {ntk['gflops_fwd']:.1f} | {ntk['gflops_fwd'] / peak['peak']:.0%} |")
    gf_whole = ntk["gflops_fwd"] * ntk["t_fwd"] / ntk["t_whole"]
    w(f"| the same forward with the Taylor monomials of all {ntk['B'] * ntk['L']} rows formed at once (untiled) | "
      f"{ntk['t_whole'] * 1e3:.1f} ms | {gf_whole:.1f} | {gf_whole / peak['peak']:.0%} |")
    w(f"| NumPy reference, per-sample loop, forward + backward ({ntk['threads']} BLAS thread(s)) | {ntk['t_ref'] * 1e3:.1f} ms | "
      f"{ntk['gflops'] * ntk['t_ours'] / ntk['t_ref']:.1f} | ours **{ntk['ratio']:.1f}x** faster |")
    w("")
    w(f"NumPy and JAX gradients agree to {ntk['err']:.1e} (relative); losses {ntk['loss'][0]:.6f} / {ntk['loss'][1]:.6f}.")
    w("")
    w(f"The forward forms the Taylor monomials of its queries in tiles of {ntk['tile_rows']} rows "
      "(`kernels.features.taylor_products`); formed at once, the untiled row, they are a "
      f"({ntk['B'] * ntk['L']}, r) buffer of {ntk['B'] * ntk['L'] * ntk['r'] * 4 / 2**20:.0f} MiB. The temporaries "
      "XLA plans for the forward, tiled / untiled: "
      + "; ".join(f"{Bt} samples ({Bt * ntk['L']} rows) {ntk['temps'][(Bt, True)] / 2**20:.0f} / "
                  f"{ntk['temps'][(Bt, False)] / 2**20:.0f} MiB" for Bt in sorted({b for b, _ in ntk['temps']}))
      + f" (the larger: a prediction group of `predict`). In the same rounds the tiled forward was {ntk['ratio_whole']:.2f}x "
      f"as fast (median of per-round ratios), with {ntk['faults_fwd']:.0f} minor page faults per call against "
      f"{ntk['faults_whole']:.0f} (`getrusage`): the untiled temporaries are mapped afresh at every call and "
      "their pages faulted in again. The outputs of the two forms differ by at most "
      f"{ntk['tile_diff']:.1e}. The training step takes the rows whole, as before.")
    w("")
    w("Prefix length (the NTK-Attention paper, Fig. 1 setting: d = 64, L = 128, 8 inputs, g = 2). NTK-Attention is given "
      "(Z, k) built from the prefix; the exact reference attends over [P; X], streamed in blocks:")
    w("")
    w("| m | NTK forward | exact prefix attention | speed-up |")
    w("|---:|---:|---:|---:|")
    for m in pre["ms"]:
        ex = pre["exact"].get(m)
        w(f"| 2^{int(math.log2(m))} | {pre['ntk'][m] * 1e3:.1f} ms | "
          + (f"{ex * 1e3:.0f} ms | {ex / pre['ntk'][m]:.0f}x |" if ex else "| |"))
    w("")
    w("The full sweep m = 2^1 ... 2^18 with errors and memory is in [ntk_prefix_length.md](ntk_prefix_length.md), "
      "written by `benchmarks/ntk_prefix_length.py`.")
    w("")


def _scaling(w, report):
    fit, sc = (report[k] for k in ("fit", "scaling"))
    w("## 5. Scaling of the time per epoch")
    w("")
    setup = min(r["setup"] for _, r in sc["p"]), max(r["setup"] for _, r in sc["p"])
    w("![scaling](performance.png)")
    w("")
    w("Seconds per epoch of the compiled training loop (latent-row objective, batch 256, one head), "
      f"after a warm-up epoch: the difference between the best of 8 fits of {LONG_FIT} epochs and the best "
      f"of 8 fits of {SHORT_FIT}, divided by {LONG_FIT - SHORT_FIT}, so that the once-per-fit work (uploading "
      "the parameters and the optimizer state, the first dispatch) is left out, as a real fit spreads it "
      f"over max_iter epochs. Estimated as the best {SHORT_FIT}-epoch fit minus {SHORT_FIT} epoch(s), that "
      f"work came out at {1e3 * setup[0]:.1f} to {1e3 * setup[1]:.1f} ms on the p curve"
      f"{' (below zero: the difference of two noisy minima)' if setup[0] < 0 else ''}; the median "
      f"{SHORT_FIT}-epoch fit took {1e3 * min(r['short_spread'] for _, r in sc['p']):.1f} to "
      f"{1e3 * max(r['short_spread'] for _, r in sc['p']):.1f} ms longer than the best. The slopes in "
      "parentheses (and beside the bars) estimate each point's epoch otherwise, as a cross-check: the median "
      f"over rounds of the difference between the round's {LONG_FIT}-epoch and {SHORT_FIT}-epoch fits, two "
      "fits that ran on the machine of one moment; the bars keep the difference of the minima. "
      "The fits are timed in rounds "
      "that visit every point of every curve once (a burst of load then slows one point of each curve, "
      "not one curve). Memory = bytes XLA plans for the largest step "
      "(arguments with its bucket's data, outputs, temporaries) plus the rest of the data on the device. "
      "*Stored / real rows*: the padding of the data on the device (the bucket grid's, or for packed data "
      "each sample's last block of "
      f"{LAYOUT.block_rows} rows); *computed / real rows*: what one epoch's steps "
      "compute, with the filler that completes each minibatch to its rounded size (the last minibatch "
      "of a bucket and a small bucket's only one hold fewer than 256 samples; a packed minibatch's blocks "
      "are padded to the epoch's largest count rounded up to 5 significant bits).")
    w("")
    w("Samples of one length (the n, p and d curves) train in their bucket. Samples whose lengths span "
      "several buckets (the ragged curve) are packed, as `DiagAttRegressor.fit` does: every minibatch "
      "holds 256 samples drawn across all lengths (stratified by length), stored in blocks of "
      f"{LAYOUT.block_rows} rows, and the softmax and log-sum-exp of each sample run over its blocks "
      "(`skdiagatt.kernels.rows`). In buckets, every bucket needs its own minibatches: short data sets take "
      "many more steps than n / 256, each with a fixed cost. The table after the packed one times the same "
      "samples in buckets (`pack=False`), in the same rounds.")
    w("")
    for key, title, xname in (("n", "in n (p = 104, d = 70)", "n"),
                              ("p", f"in p (n = {sc['n0']}, d = 70, p on the bucket grid)", "p"),
                              ("ragged", f"in ragged p, log-normal lengths, p99 = 10 x median (n = {sc['n0']}, d = 70), packed", "mean p"),
                              ("ragged_buckets", "the same ragged samples in buckets (`pack=False`)", "mean p"),
                              ("d", f"in d (n = {sc['n0']}, p = 48)", "d")):
        pts = sc[key]
        w(f"**{title}**: log-log slope {curve_slope(pts):.2f} "
          f"(per-round differences: {curve_slope(pts, 'epoch_rounds'):.2f})")
        w("")
        w(f"| {xname} | s / epoch | steps / epoch | useful GFLOP/s | stored / real rows | computed / real rows | step temporaries | memory |")
        w("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for x, r in pts:
            xs = f"{x:.1f}" if isinstance(x, float) else str(x)
            w(f"| {xs} | {r['epoch']:.3f} | {r['steps']} | {r['gflops']:.1f} | {r['padded_rows'] / r['real_rows']:.3f} | "
              f"{r['computed_rows'] / r['real_rows']:.3f} | "
              f"{fmt_bytes(r['temp'])} | {fmt_bytes(r['mem'])} |")
        w("")
        if key == "ragged":
            w(ragged_cost_model(pts))
            w("")
    w(f"Minibatches of more than {LAYOUT.slice_rows:,} rows are differentiated in interleaved slices "
      "of at most that many rows, one after the other, and the gradients summed (`_training.step.train_step`): "
      "the same gradient up to rounding, with a working set that stays in cache. The same epochs "
      "with whole minibatches, timed in the same interleaved rounds:")
    w("")
    w("| p | rows per minibatch | s / epoch, sliced | s / epoch, whole | whole / sliced |")
    w("|---:|---:|---:|---:|---:|")
    for p, sliced, whole in sc["unsliced"]:
        w(f"| {p} | {256 * p:,} | {sliced:.3f} | {whole:.3f} | {whole / sliced:.2f} |")
    w("")
    if sc.get("ragged_unsliced"):
        w(f"Packed minibatches (the ragged curve) are sliced above {LAYOUT.packed_slice_rows:,} rows: "
          "each slice takes whole samples, chosen so that the slices hold nearly equal numbers of blocks "
          "(`_training.batches`). The same epochs with whole packed minibatches, in the same rounds:")
        w("")
        w("| mean p | s / epoch, sliced | s / epoch, whole | whole / sliced |")
        w("|---:|---:|---:|---:|")
        for p, sliced, whole in sc["ragged_unsliced"]:
            w(f"| {p:.1f} | {sliced:.3f} | {whole:.3f} | {whole / sliced:.2f} |")
        w("")


def _padding(w, report):
    pad = report["padding"]
    w("## 6. Padding waste of the bucket grid")
    w("")
    w(f"{pad['n']:,} log-normal lengths, median {pad['median']:.0f}, p99 {pad['p99']:.0f}, mean {pad['mean']:.1f}: "
      f"{pad['buckets']} buckets; padded rows / real rows - 1 = **{pad['waste']:.1%}** (what training and "
      f"inference compute); with the sample counts rounded up for stable shapes (filler never drawn, "
      f"only stored) {pad['stored']:.1%}. The coarser grid of the attention estimators (NTK-Attention and "
      f"the attention baselines, growth {COARSE}; section 7): {pad['coarse']['buckets']} buckets, "
      f"{pad['coarse']['waste']:.1%} ({pad['coarse']['stored']:.1%}).")
    w("")


def write_fresh(w, fresh):
    cfg = FRESH
    runs = fresh["runs"]
    buckets = runs["NTKPrefixRegressor"]["first"]["buckets"]
    w("## 7. First fit and predict in a fresh process, on ragged data")
    w("")
    w(f"Each estimator with `max_iter={cfg['max_iter']}`, on {fresh['n']:,} samples with log-normal lengths (median "
      f"{cfg['median']}, p99 = 10 x median, at most {10 * cfg['median']} rows; d = {cfg['d']}; {buckets} bucket lengths "
      "on the grid of the attention estimators): "
      "`fit`, then `predict` on as many new samples of the same distribution, then `fit` again on the first data, "
      "all in a new Python process, so that nothing is compiled yet. *Programs*: XLA programs built (compiled, or "
      "read from the persistent cache); *compile*: their seconds; *trace + lower*: JAX's seconds turning the "
      "Python functions into programs, which the cache does not save. The second process of each estimator "
      "runs the same script with JAX's persistent compilation cache filled by the first one: "
      f"`JAX_COMPILATION_CACHE_DIR` set for both, and `JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0` (JAX keeps "
      "only programs that took a second or more to compile by default). skdiagatt sets neither.")
    w("")
    w("| estimator | process | fit: s | programs | compile s | trace + lower s | predict: s | programs | "
      "compile s | fit again: s | programs |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, by_label in runs.items():
        for label, r in by_label.items():
            f, p, g = r["fit"], r["predict"], r["refit"]
            process = {"first": "first", "cached": "second, cache filled by the first",
                       "fine": f"first, on the fine grid (growth {FINE}) instead"}[label]
            w(f"| {name} | {process} | {f['wall']:.1f} | {f['compile'][0]} | {f['compile'][1]:.1f} | "
              f"{f['trace'][1] + f['lower'][1]:.1f} | {p['wall']:.1f} | {p['compile'][0]} | {p['compile'][1]:.1f} | "
              f"{g['wall']:.1f} | {g['compile'][0]} |")
    w("")
    w("DiagAtt packs ragged samples (section 5): a handful of programs whatever the lengths. NTK-Attention and "
      "the attention baselines train and predict in buckets: a program per bucket length, each of which XLA "
      "compiles anew in every process, so they use the coarser grid of section 6 (the rows marked *fine grid* "
      "run the same process on the other one). Within a process, a second fit of the same shapes compiles "
      "nothing.")
    w("")


if __name__ == "__main__":
    sys.exit(main())
