"""NTK-Attention vs exact prefix attention as the prefix grows (paper 001, Fig. 1).

Done as the paper describes it, not as the authors' script ran it: the
reference is exact softmax attention of the L queries of X over the keys
[P; X]; the approximation is NTK-Attention on X alone, with the prefix P
folded into (Z, k) by Eq. 4. d = 64, L = 128, one head (d_h = d_v = d),
m = 2^1 ... 2^18, X and P rows N(0, I), entries of W_Q, W_K, W_V
N(0, 0.25 / d) so that q . k / sqrt(d) has standard deviation ~0.25.

Writes docs/ntk_prefix_length.md (tables, PASS/FAIL lines) and
docs/ntk_prefix_length.png. Everything in those files comes from this script.

Usage::

    python benchmarks/ntk_prefix_length.py            # full run, writes docs/
    python benchmarks/ntk_prefix_length.py --quick    # m <= 2^12, writes to a temp dir
"""

import argparse
import functools
import math
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    import skdiagatt  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402

# The float64 reference needs x64; every kernel follows its inputs' dtype,
# so the timed methods are still run in float32.
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from skdiagatt.kernels.attention import (  # noqa: E402
    eq6_error,
    ntk_attention,
    prefix_attention,
    prefix_attention_streaming,
    prefix_to_state,
)
from skdiagatt.kernels.features import (  # noqa: E402
    feature_dim,
    taylor_remainder_bound,
    taylor_remainder_pointwise,
)

DEGREES = (1, 2, 3)
D, L = 64, 128
W_VAR = 0.25 / D
STREAM_BLOCK = 4096


# --------------------------------------------------------------------------
# measurement helpers
# --------------------------------------------------------------------------
def timed(fn, repeats):
    """Median wall time of ``repeats`` calls after one warm-up (compile) call."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timed_round_robin(fns, rounds):
    """Median wall time of each of ``fns``, timing one call of each per round.

    The ``fns`` share one compiled program, so one warm-up call suffices.
    """
    jax.block_until_ready(fns[0]())
    times = [[] for _ in fns]
    for _ in range(rounds):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def xla_bytes(jitted, *args, **static):
    """Bytes XLA's buffer assignment reserves: arguments + outputs + temporaries.

    This is the memory the compiled program needs at its peak (temporaries
    are the peak of the live intermediate buffers), read from
    ``compiled.memory_analysis()`` without running anything.
    """
    stats = jitted.lower(*args, **static).compile().memory_analysis()
    return stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes


@jax.jit
def _bound_pass(X, P, W_Q, W_K, W_V, lse, T_ref):
    """Second, exact pass over the prefix for the error bounds and Eq. 6 scale.

    With ``w_r = exp(s_r - lse)`` the exact weight of prefix key r and
    ``rho_r`` the relative Lagrange bound of the degree-g Taylor remainder at
    ``s_r``, NTK-Attention replaces ``e_r`` by some ``e~_r`` with
    ``|e~_r - e_r| <= rho_r e_r`` (the X block is exact), hence entrywise::

        |T~ - T| <= (sum_r rho_r w_r |v_r| + |T| sum_r rho_r w_r) / (1 - sum_r rho_r w_r)

    ``rho_r = eps`` (uniform bound at T_max) gives the uniform version.
    """
    Q = jnp.einsum("bld,hde->bhle", X, W_Q)
    dh = Q.shape[-1]
    s_x = jnp.einsum("bhle,bhne->bhln", Q, jnp.einsum("bld,hde->bhle", X, W_K)) / math.sqrt(dh)
    lse = jnp.transpose(lse, (0, 2, 1))  # (B, H, L)
    n_deg = len(DEGREES) + 1  # index 0: rho = 1 (plain weights), then each degree
    block = min(STREAM_BLOCK, P.shape[0])
    n_blocks = -(-P.shape[0] // block)
    Pb = jnp.concatenate([P, jnp.zeros((n_blocks * block - P.shape[0], P.shape[1]), P.dtype)])
    Pb = Pb.reshape(n_blocks, block, -1)
    valid = (jnp.arange(n_blocks * block) < P.shape[0]).reshape(n_blocks, block)

    def step(carry, blk):
        s0, s1, tmax = carry
        rows, ok = blk
        s = jnp.einsum("bhle,hne->bhln", Q, jnp.einsum("nd,hde->hne", rows, W_K)) / math.sqrt(dh)
        w = jnp.where(ok, jnp.exp(s - lse[..., None]), 0.0)
        absv = jnp.abs(jnp.einsum("nd,hde->hne", rows, W_V))
        rhos = [jnp.ones_like(s)] + [taylor_remainder_pointwise(s, g) for g in DEGREES]
        s0 = s0 + jnp.stack([jnp.sum(r * w, -1) for r in rhos])
        s1 = s1 + jnp.stack([jnp.einsum("bhln,hne->bhle", r * w, absv) for r in rhos])
        tmax = jnp.maximum(tmax, jnp.max(jnp.where(ok, jnp.abs(s), 0.0), axis=(1, 2, 3)))
        return (s0, s1, tmax), None

    B, H, Lq, _ = Q.shape
    dv = W_V.shape[-1]
    init = (
        jnp.zeros((n_deg, B, H, Lq), X.dtype),
        jnp.zeros((n_deg, B, H, Lq, dv), X.dtype),
        jnp.zeros((B,), X.dtype),
    )
    (s0, s1, tmax_prefix), _ = lax.scan(step, init, (Pb, valid))
    absT = jnp.abs(jnp.transpose(T_ref, (0, 2, 1, 3)))  # (B, H, L, dv)
    score_absmax = jnp.maximum(tmax_prefix, jnp.max(jnp.abs(s_x), axis=(1, 2, 3)))
    return s0, s1, absT, tmax_prefix, score_absmax


def stein_limit(X, W, T_ref, degree):
    """Relative error of degree-g NTK-Attention in the limit m -> infinity.

    For one query q, the logit t = p . (W_K q) / sqrt(d_h) and value
    v = W_V^T p of a prefix row p ~ N(0, I) are jointly Gaussian with mean 0,
    so by Stein's lemma E[f(t) v] = Cov(t, v) E[f'(t)]. Exact attention over
    an infinite prefix gives E[e^t v] / E[e^t] = Cov(t, v); the Taylor
    truncation S_g (with S_g' = S_{g-1}) gives Cov(t, v) E[S_{g-1}] / E[S_g]:
    the ratio is off by E[t^g / g!] / E[S_g], zero for odd g and
    (g-1)!! sigma^g / g! / E[S_g] for even g, sigma^2 = |W_K q|^2 / d_h.
    Returns ||T_ref * beta||_F / ||T_ref||_F with that per-query beta, which
    is the measured relative error once the prefix outweighs the L rows of X.
    """
    if degree % 2:
        return 0.0
    W_Q, W_K = W[0], W[1]
    Q = np.einsum("bld,hde->blhe", X, W_Q)
    var = np.sum(np.einsum("hde,blhe->blhd", W_K, Q) ** 2, axis=-1) / W_K.shape[-1]  # (B, L, H)
    moment = lambda j: 0.0 if j % 2 else math.prod(range(j - 1, 0, -2)) * var ** (j // 2)  # noqa: E731
    mean_s = sum(moment(j) / math.factorial(j) for j in range(degree + 1))
    beta = moment(degree) / math.factorial(degree) / mean_s
    return float(np.linalg.norm(T_ref * beta[..., None]) / np.linalg.norm(T_ref))


def _output_bound(s0, s1, absT, rho_scale=None):
    """Entrywise output bound from (sum rho w, sum rho w |v|); inf when vacuous."""
    if rho_scale is not None:
        s0, s1 = s0 * rho_scale, s1 * rho_scale
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (s1 + absT * s0[..., None]) / (1.0 - s0[..., None])
    return np.where(s0[..., None] < 1.0, b, np.inf)


def _frob_rel(b, T_ref_bhld):
    num = np.sqrt(np.sum(b**2)) if np.all(np.isfinite(b)) else np.inf
    return num / np.sqrt(np.sum(T_ref_bhld**2))


# --------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------
def run(max_log2m, n_samples, repeats, seed, dense_max_log2m):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_samples, L, D))
    where = jnp.ones((n_samples, L), bool)
    W = [rng.normal(scale=math.sqrt(W_VAR), size=(1, D, D)) for _ in range(3)]
    P = rng.normal(size=(2**max_log2m, D))

    f64 = lambda a: jnp.asarray(a, jnp.float64)  # noqa: E731
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    X64, W64 = f64(X), [f64(w) for w in W]
    X32, W32 = f32(X), [f32(w) for w in W]
    P32_all = f32(P)

    states = {g: None for g in DEGREES}
    ntk_bytes = {}
    kept = {g: [] for g in DEGREES}
    rows, m_prev = [], 0
    for log2m in range(1, max_log2m + 1):
        m = 2**log2m
        t_step = time.perf_counter()
        P64, P32 = f64(P[:m]), P32_all[:m]

        # Exact float64 reference, streamed over prefix blocks.
        T_ref, lse = prefix_attention_streaming(
            X64, where, P64, *W64, block_size=STREAM_BLOCK, return_lse=True
        )
        s0, s1, absT, tmax_prefix, score_absmax = (
            np.asarray(a) for a in _bound_pass(X64, P64, *W64, lse, T_ref)
        )
        T_ref = np.asarray(T_ref)
        T_ref_bhld = np.transpose(T_ref, (0, 2, 1, 3))
        t_max = float(tmax_prefix.max())

        row = {"m": m, "log2m": log2m, "t_max": t_max}
        for g in DEGREES:
            row[f"stein_g{g}"] = stein_limit(X, W, T_ref, g)
        for i, g in enumerate(DEGREES, start=1):
            # Eq. 4 is a sum over prefix rows, so the nested prefixes P[:m]
            # reuse the state of P[:m/2] and only fold in the new rows.
            new = prefix_to_state(P32[m_prev:], W32[1], W32[2], degree=g)
            states[g] = new if states[g] is None else tuple(a + b for a, b in zip(states[g], new))
            Z, k = states[g]
            T = np.asarray(ntk_attention(X32, where, Z, k, *W32, degree=g), np.float64)
            eps = taylor_remainder_bound(t_max, g)
            row[f"eq6_g{g}"] = float(eq6_error(T, T_ref, score_absmax))
            row[f"rel_g{g}"] = float(np.linalg.norm(T - T_ref) / np.linalg.norm(T_ref))
            row[f"bound_g{g}"] = _frob_rel(_output_bound(s0[i], s1[i], absT), T_ref_bhld)
            row[f"eps_g{g}"] = eps
            row[f"ubound_g{g}"] = _frob_rel(_output_bound(s0[0], s1[0], absT, eps), T_ref_bhld)
            kept[g].append((Z, k))
            if g not in ntk_bytes:
                # The forward program does not depend on m: one memory plan.
                ntk_bytes[g] = xla_bytes(ntk_attention, X32, where, Z, k, *W32, degree=g)
            row[f"mem_ntk_g{g}"] = ntk_bytes[g]

        # Building (Z, k) from scratch is a one-off O(m r d_v) cost, timed for g = 2.
        row["t_state_g2"] = timed(lambda: prefix_to_state(P32, W32[1], W32[2], degree=2), 1)
        row["mem_state_g2"] = xla_bytes(prefix_to_state, P32, W32[1], W32[2], degree=2)

        # Exact prefix attention in float32: streamed and naive (all scores).
        row["t_stream"] = timed(
            lambda: prefix_attention_streaming(X32, where, P32, *W32, block_size=STREAM_BLOCK), repeats
        )
        row["mem_stream"] = xla_bytes(
            prefix_attention_streaming, X32, where, P32, *W32, block_size=STREAM_BLOCK
        )
        row["mem_dense"] = xla_bytes(prefix_attention, X32, where, P32, *W32)
        row["scores_dense"] = n_samples * L * (m + L) * 4
        row["t_dense"] = (
            timed(lambda: prefix_attention(X32, where, P32, *W32), repeats)
            if log2m <= dense_max_log2m
            else float("nan")
        )
        rows.append(row)
        m_prev = m
        print(
            f"m=2^{log2m:<2d} T_max={t_max:.3f}  "
            + "  ".join(f"g{g}: eq6={row[f'eq6_g{g}']:.2e} rel={row[f'rel_g{g}']:.4f}" for g in DEGREES)
            + f"  exact={row['t_stream'] * 1e3:.1f} ms"
            + f"  [{time.perf_counter() - t_step:.1f} s]",
            flush=True,
        )

    # NTK forward times, measured round-robin over all m after the fact so
    # that load from other processes falls evenly on every m: whether the
    # time depends on m is the claim under test.
    for g in DEGREES:
        fns = [functools.partial(ntk_attention, X32, where, Z, k, *W32, degree=g) for Z, k in kept[g]]
        for r, t in zip(rows, timed_round_robin(fns, 5 * repeats if g < 3 else max(2, repeats - 1))):
            r[f"t_ntk_g{g}"] = t
        print(f"NTK forward g={g}: " + " ".join(f"{r[f't_ntk_g{g}'] * 1e3:.1f}" for r in rows) + " ms", flush=True)
    return rows


# --------------------------------------------------------------------------
# verdicts, report, figure
# --------------------------------------------------------------------------
def verdicts(rows):
    """PASS/FAIL lines for the bars of the brief, plus context lines."""
    out = []
    big = [r for r in rows if r["log2m"] >= 10]
    if len(big) >= 2:
        top = f"2^{big[-1]['log2m']}"
        for g in DEGREES:
            e = np.array([r[f"eq6_g{g}"] for r in big])
            ratio = e.max() / e.min()
            if g == 2:
                out.append((ratio < 2, f"g=2: Eq. 6 error for m = 2^10 ... {top} varies by {ratio:.2f}x (bar: < 2x)"))
            else:
                # Odd degrees keep improving with m (see Notes), so for them
                # the Fig. 1 claim is only that the error does not grow.
                grows = e.max() / e[0]
                out.append(
                    (
                        grows < 2,
                        f"g={g}: Eq. 6 error for m = 2^10 ... {top} never exceeds 2x its m=2^10 value "
                        f"(max/first {grows:.2f}; it falls, last/first {e[-1] / e[0]:.2e})",
                    )
                )
    worst = max(r[f"rel_g{g}"] / r[f"bound_g{g}"] for r in rows for g in DEGREES)
    out.append((worst <= 1, f"relative error <= term-wise Lagrange bound at every m and g (largest error/bound {worst:.2f})"))
    below_u = all(r[f"rel_g{g}"] <= r[f"ubound_g{g}"] for r in rows for g in DEGREES)
    out.append((below_u, "relative error <= uniform bound eps_g(T_max) at every m and g (inf = vacuous)"))
    falls = [r["log2m"] for r in rows if not (r["rel_g1"] > r["rel_g2"] > r["rel_g3"])]
    out.append(
        (
            not falls,
            "relative error falls as the degree rises g = 1 > 2 > 3 at every m"
            + (f" (not at m = 2^{falls}: g=1 beats g=2 there, see Notes)" if falls else ""),
        )
    )
    best3 = all(r["rel_g3"] < min(r["rel_g1"], r["rel_g2"]) for r in rows)
    out.append((best3, "g=3 has the smallest relative error at every m"))
    bound_falls = all(r["bound_g1"] > r["bound_g2"] > r["bound_g3"] for r in rows)
    out.append((bound_falls, "the term-wise bound falls as the degree rises at every m"))
    for g in DEGREES:
        t = [r[f"t_ntk_g{g}"] for r in rows]
        mem = {r[f"mem_ntk_g{g}"] for r in rows}
        out.append(
            (
                max(t) / min(t) < 2 and len(mem) == 1,
                f"g={g}: NTK forward flat in m: median time {min(t) * 1e3:.1f} ... {max(t) * 1e3:.1f} ms "
                f"(max/min {max(t) / min(t):.2f}, bar < 2), memory {_fmt_bytes(max(mem))} whatever m",
            )
        )
    last = rows[-1]
    exact = np.nanmin([last["t_stream"], last["t_dense"]])
    speed = exact / last["t_ntk_g2"]
    out.append(
        (
            speed >= 100,
            f"m=2^{last['log2m']}: NTK forward (g=2) {last['t_ntk_g2'] * 1e3:.1f} ms vs fastest exact "
            f"{exact * 1e3:.0f} ms: {speed:.0f}x faster (bar: >= 100x)",
        )
    )
    return out


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _fmt(x, spec=".2e"):
    return "inf" if not np.isfinite(x) else format(x, spec)


def write_report(rows, checks, args, wall, out_dir, command, load):
    bounds_fall = all(r["bound_g1"] > r["bound_g2"] > r["bound_g3"] for r in rows)
    lines = [
        "# NTK-Attention vs exact prefix attention as the prefix grows",
        "",
        "Paper 001, Fig. 1, redone. Written by `benchmarks/ntk_prefix_length.py`; do not edit by hand.",
        "",
        f"- command: `{command}`",
        f"- machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, jax {jax.__version__} "
        f"({jax.default_backend()})",
        f"- wall time: {wall:.0f} s; peak resident memory of the process: "
        f"{_fmt_bytes(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)}; 1-minute load average "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end (the machine may be shared: timings are "
        "comparable within this run, less so across runs)",
        "",
        "## Setup",
        "",
        f"- d = {D}, L = {L}, one head (d_h = d_v = d), {args.n_samples} test inputs X (B x L x d), "
        f"seed {args.seed}; m = 2^1 ... 2^{args.max_log2m}.",
        f"- X and prefix rows ~ N(0, I_d); W_Q, W_K, W_V entries ~ N(0, 0.25/d), so q . k / sqrt(d) has "
        "standard deviation ~0.25 (the paper's N(0, 1) weights give scores of size ~sqrt(d) = 8, far outside "
        "any Taylor regime).",
        "- Prefixes are nested: P[:m] of one 2^max x d draw, so the state (Z, k) of Eq. 4 is accumulated "
        "incrementally (it is a sum over prefix rows).",
        "- Reference: exact softmax attention of the L queries over the keys [P; X], float64, streamed over "
        f"prefix blocks of {STREAM_BLOCK} rows. Approximation: `ntk_attention` on X alone with "
        "(Z, k) = `prefix_to_state(P)`, Taylor features of degree g, float32.",
        "- Eq. 6: mean over inputs of ||T - Attn||_F^2 / (L d) / ||S||_inf, where S is the matrix of logits "
        "q . k / sqrt(d) over all keys [P; X] (the paper's Q K^T, whose A = exp(Q K^T) has no 1/sqrt(d)).",
        "- rel: ||T - Attn||_F / ||Attn||_F over the whole batch.",
        "- Bounds. Lagrange: |exp(t) - sum_{j<=g} t^j/j!| / exp(t) <= rho_g(t) = exp(max(-t, 0)) |t|^(g+1)/(g+1)!, "
        "so every prefix term is off by at most rho_g(t_r) relatively (the X block is exact), and entrywise "
        "|T - Attn| <= (sum_r rho_r w_r |v_r| + |Attn| sum_r rho_r w_r) / (1 - sum_r rho_r w_r) with w_r the exact "
        "weights. *term-wise*: rho_r = rho_g(t_r) of each prefix logit (computed in an exact second pass); "
        "*uniform*: rho_r = eps_g = exp(T_max) T_max^(g+1)/(g+1)!, T_max = max |t| over prefix logits "
        "(inf when eps_g sum_r w_r >= 1, i.e. vacuous). Both are reported as ||bound||_F / ||Attn||_F.",
        "- Time: median of several calls after a warm-up (compile) call, float32, the whole batch. "
        "`exact stream` = `prefix_attention_streaming`, `exact dense` = `prefix_attention` (all scores held; "
        f"timed up to m = 2^{args.dense_max_log2m}, memory at every m), "
        "`NTK` = `ntk_attention` given (Z, k), timed round-robin over all m at the end so that load from other processes falls evenly on every m, `state` = `prefix_to_state` from scratch (one-off, g = 2).",
        "- Memory: bytes XLA's buffer assignment reserves for the compiled call (arguments + outputs + peak "
        "temporaries, `compiled.memory_analysis()`); `scores` = the float32 score matrix a naive exact method "
        "materialises, B L (m + L) 4 bytes.",
        "",
        "## Error (Eq. 6) and relative error",
        "",
        "| m | T_max | " + " | ".join(f"Eq.6 g={g}" for g in DEGREES) + " | "
        + " | ".join(f"rel g={g} | term-wise bound | eps_{g}(T_max) | uniform bound" for g in DEGREES) + " |",
        "|" + "---:|" * (2 + len(DEGREES) + 4 * len(DEGREES)),
    ]
    for r in rows:
        lines.append(
            f"| 2^{r['log2m']} | {r['t_max']:.3f} | "
            + " | ".join(_fmt(r[f"eq6_g{g}"]) for g in DEGREES)
            + " | "
            + " | ".join(
                f"{_fmt(r[f'rel_g{g}'], '.4f')} | {_fmt(r[f'bound_g{g}'], '.4f')} | "
                f"{_fmt(r[f'eps_g{g}'], '.3g')} | {_fmt(r[f'ubound_g{g}'], '.3g')}"
                for g in DEGREES
            )
            + " |"
        )
    lines += [
        "",
        "## Time and memory",
        "",
        "| m | exact stream | exact dense | " + " | ".join(f"NTK g={g}" for g in DEGREES)
        + " | state g=2 | speed-up g=2 | mem exact stream | mem exact dense | scores | "
        + " | ".join(f"mem NTK g={g}" for g in DEGREES) + " | mem state g=2 |",
        "|" + "---:|" * (9 + 2 * len(DEGREES) + 1),
    ]
    ms = lambda t: "n/a" if not np.isfinite(t) else f"{t * 1e3:.1f} ms"  # noqa: E731
    for r in rows:
        exact = np.nanmin([r["t_stream"], r["t_dense"]])
        lines.append(
            f"| 2^{r['log2m']} | {ms(r['t_stream'])} | {ms(r['t_dense'])} | "
            + " | ".join(ms(r[f"t_ntk_g{g}"]) for g in DEGREES)
            + f" | {ms(r['t_state_g2'])} | {exact / r['t_ntk_g2']:.1f}x | {_fmt_bytes(r['mem_stream'])} | "
            f"{_fmt_bytes(r['mem_dense'])} | {_fmt_bytes(r['scores_dense'])} | "
            + " | ".join(_fmt_bytes(r[f"mem_ntk_g{g}"]) for g in DEGREES)
            + f" | {_fmt_bytes(r['mem_state_g2'])} |"
        )
    lines += ["", "Feature dimension r = C(d + g, g): " + ", ".join(f"g={g}: {feature_dim('taylor', D, g)}" for g in DEGREES) + ".", ""]
    lines += ["## Checks", "", "```"] + [f"{'PASS' if ok else 'FAIL'}  {msg}" for ok, msg in checks] + ["```", ""]
    lines += [
        "## Notes",
        "",
        "- Why the degrees behave differently (Stein's lemma). For a query q, the logit t and the value v of a "
        "prefix row p ~ N(0, I) are jointly Gaussian with mean 0, so E[f(t) v] = Cov(t, v) E[f'(t)]. With a long "
        "prefix, exact attention tends to E[e^t v] / E[e^t] = Cov(t, v), and the degree-g Taylor state to "
        "Cov(t, v) E[S_(g-1)(t)] / E[S_g(t)], S_g the truncated series. For odd g the extra term t^g/g! has mean "
        "0, so the limit is exact: the odd-degree errors are pure finite-m fluctuation and keep falling "
        "(Eq. 6 ~ 1/m), which is why g = 1 beats g = 2 for long prefixes here. For g = 2 the limit is off by the "
        "factor 1 / (1 + sigma^2/2), sigma^2 = Var(t) = |W_K q|^2 / d, a bias that no prefix length removes: "
        "that is the plateau of Fig. 1. Predicted limit of the g = 2 relative error for these queries: "
        f"{rows[-1]['stein_g2']:.4f}; measured at m = 2^{rows[-1]['log2m']}: {rows[-1]['rel_g2']:.4f}. "
        "This cancellation is a property of the symmetric Gaussian test, not of prefixes in general; the "
        f"Lagrange bounds, which ignore it, {'fall' if bounds_fall else 'do not always fall'} with g.",
        "- The uniform bound eps_g(T_max) is the textbook one (Lemma H.7 style); T_max grows with m (max over "
        "more logits), so it turns vacuous for long prefixes, while the term-wise bound uses every logit and "
        "stays informative.",
        "- NTK-Attention's forward cost does not depend on m; the O(m r d_v) cost of folding a given prefix "
        "into (Z, k) is paid once (column `state g=2`); in the method itself (Z, k) are trained parameters.",
        "",
        "![error and time vs prefix length](ntk_prefix_length.png)",
        "",
    ]
    (out_dir / "ntk_prefix_length.md").write_text("\n".join(lines))


def write_figure(rows, out_dir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = [r["m"] for r in rows]
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.6))
    for g, c in zip(DEGREES, ("C0", "C1", "C2")):
        ax[0].loglog(m, [r[f"eq6_g{g}"] for r in rows], "o-", color=c, label=f"Taylor g={g}")
        ax[1].loglog(m, [r[f"rel_g{g}"] for r in rows], "o-", color=c, label=f"g={g}")
        ax[1].loglog(m, [r[f"bound_g{g}"] for r in rows], "--", color=c, label=f"g={g} term-wise bound")
        ax[2].loglog(m, [r[f"t_ntk_g{g}"] for r in rows], "o-", color=c, label=f"NTK forward g={g}")
    ax[0].set(xlabel="prefix length m", ylabel="Eq. 6 error", title="Approximation error (Eq. 6)")
    ax[1].set(xlabel="prefix length m", ylabel="||T - Attn||_F / ||Attn||_F", title="Relative error and Lagrange bound")
    ax[2].loglog(m, [r["t_stream"] for r in rows], "s-", color="k", label="exact, streamed")
    ax[2].loglog(m, [r["t_dense"] for r in rows], "^-", color="0.5", label="exact, dense")
    ax[2].loglog(m, [r["t_state_g2"] for r in rows], ":", color="C1", label="build (Z, k), g=2 (one-off)")
    ax[2].set(xlabel="prefix length m", ylabel="seconds (median)", title="Wall time per batch")
    from matplotlib.ticker import LogLocator, NullFormatter

    for a in ax:
        # Powers of two on the m axis, every other one labelled.
        a.set_xscale("log", base=2)
        a.xaxis.set_major_locator(LogLocator(base=2, subs=(1.0,), numticks=10))
        a.xaxis.set_minor_formatter(NullFormatter())
        a.grid(True, which="major", alpha=0.3)
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "ntk_prefix_length.png", dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="m up to 2^12, write to a temp dir")
    parser.add_argument("--max-log2m", type=int, default=None, help="largest log2 m (default 18, quick 12)")
    parser.add_argument("--n-samples", type=int, default=8, help="test inputs X in the batch")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per measurement (median)")
    parser.add_argument("--dense-max-log2m", type=int, default=16, help="largest m at which the dense exact method is timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="output directory (default docs/, quick: a temp dir)")
    args = parser.parse_args(argv)
    if args.max_log2m is None:
        args.max_log2m = 12 if args.quick else 18
    out_dir = args.out or (Path(tempfile.mkdtemp(prefix="ntk_prefix_")) if args.quick else Path(__file__).resolve().parents[1] / "docs")
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/ntk_prefix_length.py" + ("" if argv is None and len(sys.argv) == 1 else " " + " ".join(sys.argv[1:] if argv is None else argv))

    t0 = time.perf_counter()
    load_start = os.getloadavg()[0]
    rows = run(args.max_log2m, args.n_samples, args.repeats, args.seed, args.dense_max_log2m)
    checks = verdicts(rows)
    wall = time.perf_counter() - t0
    write_report(rows, checks, args, wall, out_dir, command.strip(), (load_start, os.getloadavg()[0]))
    write_figure(rows, out_dir)
    print()
    for ok, msg in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {msg}")
    print(f"\nwrote {out_dir / 'ntk_prefix_length.md'} and {out_dir / 'ntk_prefix_length.png'} ({wall:.0f} s)")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
