"""NTK-Attention vs exact prefix attention as the prefix grows (the NTK-Attention paper, Fig. 1).

Done as the paper describes it, not as the authors' script ran it: the
reference is exact softmax attention of the L queries of X over the keys
[P; X]; the approximation is NTK-Attention on X alone, with the prefix P
folded into (Z, k) by Eq. 4. d = 64, L = 128, one head (d_h = d_v = d),
m = 2^1 ... 2^18, X and P rows N(0, I), entries of W_Q, W_K, W_V
N(0, 0.25 / d) so that q . k / sqrt(d) has standard deviation ~0.25.

Besides the output-level error (Eq. 6) it measures, in the same run, what the
Taylor-remainder bound is a statement about: the kernel-level errors of the
prefix mass phi(q) k and numerator phi(q) Z against the exact sums, and the
per-entry kernel error, each beside its term-wise Lagrange bound; and, to test
why the output error is not monotone in the degree, the output error for
prefixes of Rademacher rows and of shifted rows N(0.5, I).

Writes docs/results/ntk_prefix_length.md (tables, PASS/FAIL lines) and
docs/results/ntk_prefix_length.png. Everything in those files comes from this script.

Usage::

    python benchmarks/ntk_prefix_length.py            # full run, writes docs/results/
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
    taylor_features,
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


def _remainder_rel(t, degree, n_terms=20):
    """Signed relative Taylor remainder ``(exp(t) - S_g(t)) / exp(t)``, ``S_g`` the degree-g sum.

    ``phi(q) . phi(k) == S_g(q . k / sqrt(d_h))`` exactly (tested in
    tests/kernels), so this is the per-entry relative error of the Taylor
    kernel in exact arithmetic. Below |t| = 1 the difference is summed as a
    series: there it can be far below ``eps * exp(t)`` (t^4/24 ~ 4e-18 at
    t = 1e-4), where ``exp(t) - S_g(t)`` would be pure rounding.
    """
    term = t ** (degree + 1) / math.factorial(degree + 1)
    series = term
    for j in range(degree + 2, degree + 1 + n_terms):
        term = term * t / j
        series = series + term
    direct = jnp.exp(t) - sum(t**j / math.factorial(j) for j in range(degree + 1))
    return jnp.where(jnp.abs(t) < 1.0, series, direct) * jnp.exp(-t)


@jax.jit
def _bound_pass(X, P, W_Q, W_K, W_V, lse, T_ref):
    """Second, exact pass over the prefix: error bounds, kernel-level errors, Eq. 6 scale.

    Output level. With ``w_r = exp(s_r - lse)`` the exact weight of prefix
    key r and ``rho_r`` the relative Lagrange bound of the degree-g Taylor
    remainder at ``s_r``, NTK-Attention replaces ``e_r`` by some ``e~_r`` with
    ``|e~_r - e_r| <= rho_r e_r`` (the X block is exact), hence entrywise::

        |T~ - T| <= (sum_r rho_r w_r |v_r| + |T| sum_r rho_r w_r) / (1 - sum_r rho_r w_r)

    ``rho_r = eps`` (uniform bound at T_max) gives the uniform version.

    Kernel level. The same term-wise bound applies before the division: with
    ``r_r = (e_r - e~_r) / e_r`` the per-entry relative error,
    ``|sum_r w_r r_r| <= sum_r w_r |r_r| <= sum_r w_r rho_r`` (denominator,
    ``phi(q) k`` vs ``sum_r e_r``) and ``|sum_r w_r r_r v_r| <= sum_r w_r rho_r |v_r|``
    entrywise (numerator, ``phi(q) Z`` vs ``sum_r e_r v_r``). All sums are in
    units of ``exp(lse)``; ratios do not depend on it.

    Returns a dict of arrays; leading axis ``n_deg`` = 1 + len(DEGREES)
    (index 0: rho = 1) for ``s0``, ``s1`` and len(DEGREES) for the
    per-degree kernel sums.
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
        s0, s1, tmax, sv, abs_r, ent = carry
        rows, ok = blk
        s = jnp.einsum("bhle,hne->bhln", Q, jnp.einsum("nd,hde->hne", rows, W_K)) / math.sqrt(dh)
        w = jnp.where(ok, jnp.exp(s - lse[..., None]), 0.0)
        v = jnp.einsum("nd,hde->hne", rows, W_V)
        rhos = [jnp.ones_like(s)] + [taylor_remainder_pointwise(s, g) for g in DEGREES]
        s0 = s0 + jnp.stack([jnp.sum(r * w, -1) for r in rhos])
        s1 = s1 + jnp.einsum("kbhln,hne->kbhle", jnp.stack([r * w for r in rhos]), jnp.abs(v))
        tmax = jnp.maximum(tmax, jnp.max(jnp.where(ok, jnp.abs(s), 0.0), axis=(1, 2, 3)))
        rel = [jnp.where(ok, _remainder_rel(s, g), 0.0) for g in DEGREES]
        # Index 0: sum w v (the exact prefix numerator); then sum w r_g v.
        sv = sv + jnp.einsum("kbhln,hne->kbhle", jnp.stack([w] + [w * r for r in rel]), v)
        abs_r = abs_r + jnp.stack([jnp.sum(w * r, -1) for r in rel] + [jnp.sum(w * jnp.abs(r), -1) for r in rel])
        okb = jnp.broadcast_to(ok, s.shape)
        stats = []
        for r, rho in zip(rel, rhos[1:]):
            a = jnp.abs(r)
            ratio = jnp.where(okb & (rho > 0), a / jnp.where(rho > 0, rho, 1.0), 0.0)
            stats.append(jnp.stack([jnp.sum(a), jnp.max(a), jnp.sum(jnp.where(okb, rho, 0.0)),
                                    jnp.max(jnp.where(okb, rho, 0.0)), jnp.max(ratio)]))
        stats = jnp.stack(stats)  # (n_g, 5): sum|r|, max|r|, sum rho, max rho, max |r|/rho
        ent = jnp.concatenate([ent[:, :1] + stats[:, :1], jnp.maximum(ent[:, 1:2], stats[:, 1:2]),
                               ent[:, 2:3] + stats[:, 2:3], jnp.maximum(ent[:, 3:], stats[:, 3:])], axis=1)
        return (s0, s1, tmax, sv, abs_r, ent), None

    B, H, Lq, _ = Q.shape
    dv = W_V.shape[-1]
    n_g = len(DEGREES)
    init = (
        jnp.zeros((n_deg, B, H, Lq), X.dtype),
        jnp.zeros((n_deg, B, H, Lq, dv), X.dtype),
        jnp.zeros((B,), X.dtype),
        jnp.zeros((n_deg, B, H, Lq, dv), X.dtype),
        jnp.zeros((2 * n_g, B, H, Lq), X.dtype),
        jnp.zeros((n_g, 5), X.dtype),
    )
    (s0, s1, tmax_prefix, sv, abs_r, ent), _ = lax.scan(step, init, (Pb, valid))
    absT = jnp.abs(jnp.transpose(T_ref, (0, 2, 1, 3)))  # (B, H, L, dv)
    score_absmax = jnp.maximum(tmax_prefix, jnp.max(jnp.abs(s_x), axis=(1, 2, 3)))
    # The X block in the same units, for NTK-Attention evaluated in exact arithmetic.
    w_x = jnp.exp(s_x - lse[..., None])
    x_den = jnp.sum(w_x, -1)
    x_num = jnp.einsum("bhln,bhne->bhle", w_x, jnp.einsum("bld,hde->bhle", X, W_V))
    return dict(
        s0=s0, s1=s1, absT=absT, tmax_prefix=tmax_prefix, score_absmax=score_absmax,
        num=sv[0], dnum=sv[1:], dden=abs_r[:n_g], aden=abs_r[n_g:], entry=ent,
        x_den=x_den, x_num=x_num, lse=lse,
    )


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


def stein_kernel_limits(X, W, degree):
    """Long-prefix limits of the kernel-level relative errors for N(0, I) prefix rows.

    Per query, t ~ N(0, sigma^2) and, by Stein's lemma, E[f(t) v] = Cov(t, v) E[f'(t)]:
    the denominator error tends to |E[e^t - S_g(t)]| / E[e^t] and the
    numerator error to |E[e^t - S_(g-1)(t)]| / E[e^t] (the numerator is
    Cov(t, v) times the expectation of a derivative, and S_g' = S_(g-1)).
    Odd moments vanish, so the denominator limits of g = 2 and 3 coincide,
    and so do the numerator limits of g = 1 and 2. Returns the means over
    the queries of X.
    """
    W_Q, W_K = W[0], W[1]
    Q = np.einsum("bld,hde->blhe", X, W_Q)
    var = np.sum(np.einsum("hde,blhe->blhd", W_K, Q) ** 2, axis=-1) / W_K.shape[-1]
    moment = lambda j: 0.0 if j % 2 else math.prod(range(j - 1, 0, -2)) * var ** (j // 2)  # noqa: E731
    mean_s = lambda g: sum(moment(j) / math.factorial(j) for j in range(g + 1))  # noqa: E731
    e = np.exp(var / 2)
    return float(np.mean(np.abs(1 - mean_s(degree) / e))), float(np.mean(np.abs(1 - mean_s(degree - 1) / e)))


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


@functools.partial(jax.jit, static_argnames=("degree",))
def _library_prefix_sums(X, Z, k, W_Q, degree):
    """``phi(Q) k`` and ``phi(Q) Z``: the prefix mass and prefix numerator NTK-Attention uses.

    Same features and state as ``ntk_attention`` (which also rescales phi by
    its largest entry before the products, a change of units only).
    """
    phi = taylor_features(jnp.einsum("bld,hde->bhle", X, W_Q), degree)
    return jnp.einsum("bhlr,hr->bhl", phi, k), jnp.einsum("bhlr,hrv->bhlv", phi, Z)


def kernel_metrics(bp, i, g, m, kt=None, Zt=None, T_ref_bhld=None):
    """Kernel-level relative errors of degree ``g`` (index ``i``) and their term-wise bounds.

    Per query: ``den`` = |phi(q) k - sum_r e_r| / sum_r e_r, ``num`` =
    ||phi(q) Z - sum_r e_r v_r|| / ||sum_r e_r v_r|| in exact arithmetic (from
    the exact pass; the truncation error the bound is about), ``*_lib`` the same
    with the library's float32 features and state (``kt``, ``Zt``; skipped when
    None), which adds float32 rounding; ``abs`` = sum_r |e~_r - e_r| / sum_r e_r
    (no cancellation), bounds ``den_b`` = sum_r rho_r e_r / sum_r e_r (bounds
    den and abs) and ``num_b`` = ||sum_r rho_r e_r |v_r| || / ||sum_r e_r v_r||.
    Reported as means over the B H L queries, with the largest error/bound
    ratio over queries. Per entry: mean and max of |r| over all B H L m query-key
    pairs beside the mean and max of rho. ``rel_ex``: the output relative
    error of NTK-Attention evaluated in exact arithmetic.
    """
    den0 = bp["s0"][0]
    num0 = np.linalg.norm(bp["num"], axis=-1)
    den_b = bp["s0"][i + 1] / den0
    num_b = np.linalg.norm(bp["s1"][i + 1], axis=-1) / num0
    den_ex = np.abs(bp["dden"][i]) / den0
    num_ex = np.linalg.norm(bp["dnum"][i], axis=-1) / num0
    n_entries = den0.size * m
    ent = bp["entry"][i]
    out = {
        f"den_g{g}": float(den_ex.mean()),
        f"num_g{g}": float(num_ex.mean()),
        f"den_ratio_g{g}": float((den_ex / den_b).max()),
        f"num_ratio_g{g}": float((num_ex / num_b).max()),
        f"den_b_g{g}": float(den_b.mean()),
        f"num_b_g{g}": float(num_b.mean()),
        f"abs_g{g}": float((bp["aden"][i] / den0).mean()),
        f"abs_ratio_g{g}": float((bp["aden"][i] / den0 / den_b).max()),
        f"ent_mean_g{g}": float(ent[0] / n_entries),
        f"ent_max_g{g}": float(ent[1]),
        f"ent_rho_mean_g{g}": float(ent[2] / n_entries),
        f"ent_rho_max_g{g}": float(ent[3]),
        f"ent_ratio_g{g}": float(ent[4]),
    }
    if kt is not None:
        scale = np.exp(bp["lse"])  # the pass works in units of exp(lse)
        den = np.abs(kt - den0 * scale) / (den0 * scale)
        num = np.linalg.norm(Zt - bp["num"] * scale[..., None], axis=-1) / (num0 * scale)
        out.update({
            f"den_lib_g{g}": float(den.mean()),
            f"num_lib_g{g}": float(num.mean()),
            # Where float32 rounding, not truncation, decides: queries whose
            # truncation error is below float32 resolution.
            f"lib_over_g{g}": float(np.mean((den > den_b) | (num > num_b))),
            f"den_f32_g{g}": float(np.max(np.abs(kt - (den0 - bp["dden"][i]) * scale) / (den0 * scale))),
            f"num_f32_g{g}": float(np.max(np.linalg.norm(Zt - (bp["num"] - bp["dnum"][i]) * scale[..., None], axis=-1)
                                          / (num0 * scale))),
        })
    if T_ref_bhld is not None:
        T_ex = (bp["x_num"] + bp["num"] - bp["dnum"][i]) / (
            bp["x_den"] + np.maximum(den0 - bp["dden"][i], 0.0)
        )[..., None]
        out[f"rel_ex_g{g}"] = float(np.linalg.norm(T_ex - T_ref_bhld) / np.linalg.norm(T_ref_bhld))
    return out


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
        bp = {key: np.asarray(a) for key, a in _bound_pass(X64, P64, *W64, lse, T_ref).items()}
        s0, s1, absT, score_absmax = bp["s0"], bp["s1"], bp["absT"], bp["score_absmax"]
        T_ref = np.asarray(T_ref)
        T_ref_bhld = np.transpose(T_ref, (0, 2, 1, 3))
        t_max = float(bp["tmax_prefix"].max())

        row = {"m": m, "log2m": log2m, "t_max": t_max}
        for g in DEGREES:
            row[f"stein_g{g}"] = stein_limit(X, W, T_ref, g)
            row[f"stein_den_g{g}"], row[f"stein_num_g{g}"] = stein_kernel_limits(X, W, g)
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
            kt, Zt = (np.asarray(a, np.float64) for a in _library_prefix_sums(X32, Z, k, W32[0], degree=g))
            row.update(kernel_metrics(bp, i - 1, g, m, kt, Zt, T_ref_bhld))
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
    alt = other_prefixes(X64, where, W64, max_log2m, seed)
    return rows, alt


ALT_KINDS = {
    # Mean zero and symmetric like N(0, I), but not Gaussian.
    "Rademacher rows (entries +-1)": lambda rng, n: rng.choice([-1.0, 1.0], size=(n, D)),
    # Gaussian, but with a nonzero mean: the logit t and value v are no longer centred.
    "shifted rows N(0.5, I)": lambda rng, n: rng.normal(size=(n, D)) + 0.5,
}


def other_prefixes(X64, where, W64, max_log2m, seed):
    """Output and kernel errors for prefixes that are not N(0, I): tests the cancellation explanation.

    NTK-Attention is evaluated in exact arithmetic from the exact pass
    (``phi(q) . phi(k) == S_g(t)``), which for N(0, I) rows reproduces the
    library's float32 outputs (checked on the main run), so no (Z, k) state,
    whose cost grows as C(d + 3, 3) at g = 3, has to be built.
    """
    rng = np.random.default_rng(seed + 1)
    log2ms = sorted({lm for lm in (2, 6, 10, 14, 18) if lm <= max_log2m} | {max_log2m})
    out = {}
    for kind, draw in ALT_KINDS.items():
        P = jnp.asarray(draw(rng, 2**max_log2m), jnp.float64)
        out[kind] = []
        for log2m in log2ms:
            m = 2**log2m
            T_ref, lse = prefix_attention_streaming(
                X64, where, P[:m], *W64, block_size=STREAM_BLOCK, return_lse=True
            )
            bp = {key: np.asarray(a) for key, a in _bound_pass(X64, P[:m], *W64, lse, T_ref).items()}
            T_ref_bhld = np.transpose(np.asarray(T_ref), (0, 2, 1, 3))
            row = {"m": m, "log2m": log2m, "t_max": float(bp["tmax_prefix"].max())}
            for i, g in enumerate(DEGREES):
                row.update(kernel_metrics(bp, i, g, m, T_ref_bhld=T_ref_bhld))
            out[kind].append(row)
            print(
                f"{kind}, m=2^{log2m}: "
                + "  ".join(f"g{g}: rel={row[f'rel_ex_g{g}']:.2e} den={row[f'den_g{g}']:.2e} "
                            f"num={row[f'num_g{g}']:.2e}" for g in DEGREES),
                flush=True,
            )
    return out


# --------------------------------------------------------------------------
# verdicts, report, figure
# --------------------------------------------------------------------------
def pointwise_falls_above(g):
    """Most negative t down to which |R_(g+1)(t)| < |R_g(t)| (for t > 0 it always holds)."""
    t = -np.linspace(1e-3, 10.0, 1_000_001)
    rem = lambda k: np.abs(np.exp(t) - sum(t**j / math.factorial(j) for j in range(k + 1)))  # noqa: E731
    bad = rem(g + 1) >= rem(g)
    return float(t[bad][0]) if bad.any() else -10.0


def _not_falling(rows, key):
    """The m (as 'm=2^k (g1<=g2)') at which ``key`` does not fall strictly g = 1 > 2 > 3."""
    bad = []
    for r in rows:
        v = [r[f"{key}_g{g}"] for g in DEGREES]
        pairs = [f"g{a}<=g{b}" for (a, x), (b, y) in zip(zip(DEGREES, v), zip(DEGREES[1:], v[1:])) if not x > y]
        if pairs:
            bad.append(f"2^{r['log2m']} ({', '.join(pairs)})")
    return bad


def _falls_line(rows, key, what):
    bad = _not_falling(rows, key)
    return (not bad, f"{what} falls as the degree rises, g = 1 > 2 > 3, at every m"
            + (f" -- not at m = {'; '.join(bad)}" if bad else ""))


def verdicts(rows, alt):
    """PASS/FAIL lines for the bars of the brief, plus context lines.

    Returns ``(checks, bar)``: the lines, and the subset that judges the bar
    "relative error below the Taylor-remainder bound and falling with g",
    keyed for the verdict table of the report.
    """
    out = []
    bar = {}
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
    def largest(key, ref):
        return max(r[f"{key}_g{g}"] / (r[f"{ref}_g{g}"] if ref else 1.0) for r in rows for g in DEGREES)

    # --- below the bound
    worst = largest("rel", "bound")
    bar["output_below"] = (worst <= 1, f"largest error/bound {worst:.2f}")
    out.append((worst <= 1, f"output level: relative error <= term-wise Lagrange bound at every m and g (largest error/bound {worst:.2f})"))
    below_u = all(r[f"rel_g{g}"] <= r[f"ubound_g{g}"] for r in rows for g in DEGREES)
    out.append((below_u, "output level: relative error <= uniform bound eps_g(T_max) at every m and g (inf = vacuous)"))
    k_den, k_num, k_abs, k_ent = (largest(key, None) for key in ("den_ratio", "num_ratio", "abs_ratio", "ent_ratio"))
    for key, worst_k, what in (
        ("den_below", k_den, "kernel level: |phi(q) k - sum_r e_r| / sum_r e_r <= its term-wise bound for every query"),
        ("num_below", k_num, "kernel level: ||phi(q) Z - sum_r e_r v_r|| / ||sum_r e_r v_r|| <= its term-wise bound for every query"),
        ("abs_below", k_abs, "kernel level: sum_r |e~_r - e_r| / sum_r e_r <= the same bound for every query"),
        ("ent_below", k_ent, "per entry: |phi(q).phi(k) - e^t| / e^t <= rho_g(t) for every query-key pair"),
    ):
        # 1e-9: the bound is tight as t -> 0, where the ratio is 1 up to float64 rounding.
        ok = worst_k <= 1 + 1e-9
        bar[key] = (ok, f"largest error/bound {worst_k:.2f}")
        out.append((ok, f"{what}, at every m and g (largest error/bound {worst_k:.2f})"))

    # --- falls with the degree
    lim = min(-pointwise_falls_above(g) for g in DEGREES[:-1])
    t_all = max(r["t_max"] for r in rows)
    out.append((t_all < lim, f"per entry, pointwise: |R_(g+1)(t)| < |R_g(t)| for g = 1, 2 at every t > -{lim:.3f}; "
                             f"every prefix logit here has |t| <= {t_all:.3f}"))
    for key, what in (
        ("ent_mean", "kernel level, per entry: mean of |phi(q).phi(k) - e^t| / e^t over all query-key pairs"),
        ("ent_max", "kernel level, per entry: max of |phi(q).phi(k) - e^t| / e^t"),
        ("abs", "kernel level: sum_r |e~_r - e_r| / sum_r e_r (mean over queries)"),
        ("den", "kernel level: |phi(q) k - sum_r e_r| / sum_r e_r (mean over queries)"),
        ("num", "kernel level: ||phi(q) Z - sum_r e_r v_r|| / ||sum_r e_r v_r|| (mean over queries)"),
        ("den_b", "the term-wise bound (kernel level)"),
        ("bound", "the term-wise bound (output level)"),
        ("rel", "output level: relative error ||T - Attn||_F / ||Attn||_F"),
    ):
        ok, msg = _falls_line(rows, key, what)
        bar[f"{key}_falls"] = (ok, msg.split(" -- ")[1] if " -- " in msg else "every m")
        out.append((ok, msg))
    best3 = all(r["rel_g3"] < min(r["rel_g1"], r["rel_g2"]) for r in rows)
    out.append((best3, "output level: g=3 has the smallest relative error at every m"))

    # --- consistency of the measurements
    lib = max(abs(r[f"{key}_lib_g{g}"] / r[f"{key}_g{g}"] - 1) for r in rows for g in DEGREES for key in ("den", "num"))
    f32 = max(max(r[f"den_f32_g{g}"], r[f"num_f32_g{g}"]) for r in rows for g in DEGREES)
    over = max(r[f"lib_over_g{g}"] for r in rows for g in DEGREES)
    out.append((lib < 0.05,
                f"the library's float32 phi(Q) k and phi(Q) Z give the same mean kernel-level errors as exact arithmetic "
                f"within {lib:.1%} at every m and g (bar < 5%); their float32 rounding is at most {f32:.1e} relative "
                f"per query, which puts up to {over:.1%} of the queries (those whose truncation error is below float32 "
                "resolution) above the exact-arithmetic bound"))
    agree = max(abs(r[f"rel_g{g}"] / r[f"rel_ex_g{g}"] - 1) for r in rows for g in DEGREES)
    out.append((agree < 0.02,
                f"NTK-Attention in exact arithmetic (from the exact pass) reproduces the library's output error: "
                f"largest relative difference {agree:.1e} (bar < 2e-2); used for the other prefixes below"))

    # --- the explanation, tested on other prefixes
    for kind, arows in alt.items():
        if "shifted" in kind:
            ok, msg = _falls_line(arows, "rel_ex", f"{kind}: output-level relative error")
            out.append((ok, "explanation check: " + msg.replace("at every m", "at every m checked")))
        elif arows[-1]["log2m"] >= 12:  # the crossover is near m = 2^11
            last = arows[-1]
            ok = last["rel_ex_g1"] < last["rel_ex_g2"]
            out.append((ok, f"explanation check: {kind}, mean zero and symmetric, keep the cancellation: at m = "
                            f"2^{last['log2m']} g=1 is below g=2 ({last['rel_ex_g1']:.2e} vs {last['rel_ex_g2']:.2e})"))
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
    return out, bar


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _fmt(x, spec=".2e"):
    return "inf" if not np.isfinite(x) else format(x, spec)


def _row_cells(r, keys, spec=".2e"):
    return " | ".join(_fmt(r[f"{key}_g{g}"], spec) for key in keys for g in DEGREES)


def kernel_section(rows, alt):
    """Markdown for the kernel-level errors, the Stein limits and the other prefixes."""
    gs = lambda name: " | ".join(f"{name} g={g}" for g in DEGREES)  # noqa: E731
    head = lambda cols: ["| m | " + " | ".join(cols) + " |", "|" + "---:|" * (1 + len(cols) * len(DEGREES))]  # noqa: E731
    last = rows[-1]
    lines = [
        "## Kernel-level error: what the Taylor-remainder bound bounds",
        "",
        "The Lagrange bound is a statement about one kernel entry: |phi(q).phi(k) - e^t| / e^t = |R_g(t)| / e^t "
        "<= rho_g(t) = exp(max(-t, 0)) |t|^(g+1)/(g+1)!. NTK-Attention uses the entries only through two sums "
        "per query, the prefix mass phi(q) k = sum_r e~_r (approximating sum_r e_r, e_r = exp(t_r)) and "
        "phi(q) Z = sum_r e~_r v_r (approximating sum_r e_r v_r). Summing the entry bound term by term:",
        "",
        "    |phi(q) k - sum_r e_r|  <=  sum_r |e~_r - e_r|  <=  sum_r rho_g(t_r) e_r",
        "    ||phi(q) Z - sum_r e_r v_r||  <=  || sum_r rho_g(t_r) e_r |v_r| ||   (entrywise, then the norm)",
        "",
        "All three are divided by the exact sum (sum_r e_r, resp. ||sum_r e_r v_r||) to make them relative. The "
        "middle quantity, an attention-weighted mean of the per-entry errors, is what the bound controls term by "
        "term; the signed sums can only be smaller, because their terms may cancel. Measured on the same "
        "prefixes and queries as above, mean over the B L queries: `den`, `num` in exact arithmetic, through "
        "the tested identity phi(q).phi(k) = sum_{j<=g} t^j/j! (float64, summed as a series where the remainder "
        "is below float64 resolution) -- the truncation error, which is what the bound is about; `den f32`, "
        "`num f32` the same errors of the library's float32 phi(Q) k and phi(Q) Z (`taylor_features` and the "
        "(Z, k) of `prefix_to_state` used above) against float64 sums, which adds float32 rounding; `sum|.|` "
        "and the per-entry errors over all B L m query-key pairs, in exact arithmetic.",
        "",
        "### Denominator: prefix mass phi(q) k",
        "",
        *head([gs("den"), gs("den f32"), gs("sum|.|"), gs("bound")]),
        *[f"| 2^{r['log2m']} | {_row_cells(r, ('den', 'den_lib', 'abs', 'den_b'))} |" for r in rows],
        "",
        "### Numerator: phi(q) Z",
        "",
        *head([gs("num"), gs("num f32"), gs("bound")]),
        *[f"| 2^{r['log2m']} | {_row_cells(r, ('num', 'num_lib', 'num_b'))} |" for r in rows],
        "",
        "### Per entry: |phi(q).phi(k) - e^t| / e^t over all query-key pairs",
        "",
        *head([gs("mean"), gs("mean rho"), gs("max"), gs("max rho")]),
        *[f"| 2^{r['log2m']} | {_row_cells(r, ('ent_mean', 'ent_rho_mean', 'ent_max', 'ent_rho_max'))} |" for r in rows],
        "",
        "Long-prefix limits predicted for N(0, I) rows (Stein's lemma, see Notes; mean over queries) next to the "
        f"measurement at m = 2^{last['log2m']}:",
        "",
        "| | " + " | ".join(f"g={g}" for g in DEGREES) + " |",
        "|---|" + "---:|" * len(DEGREES),
        "| den, predicted limit | " + _row_cells(last, ("stein_den",)) + " |",
        f"| den, measured at 2^{last['log2m']} | " + _row_cells(last, ("den",)) + " |",
        "| num, predicted limit | " + _row_cells(last, ("stein_num",)) + " |",
        f"| num, measured at 2^{last['log2m']} | " + _row_cells(last, ("num",)) + " |",
        "",
        "## Other prefixes: testing the explanation",
        "",
        "Same X, W and queries; prefix rows drawn otherwise. NTK-Attention evaluated in exact arithmetic from the "
        "exact pass (it reproduces the library's output error on the main run, see Checks), so no degree-3 "
        "state has to be built. `rel` = output-level ||T - Attn||_F / ||Attn||_F, `den`, `num` as above "
        "(exact arithmetic).",
        "",
        "| prefix rows | m | T_max | " + " | ".join([gs("rel"), gs("den"), gs("num")]) + " |",
        "|---|" + "---:|" * (2 + 3 * len(DEGREES)),
    ]
    for kind, arows in alt.items():
        for r in arows:
            lines.append(f"| {kind} | 2^{r['log2m']} | {r['t_max']:.3f} | {_row_cells(r, ('rel_ex', 'den', 'num'))} |")
    return lines + [""]


def verdict_section(bar):
    cell = lambda key: f"{'PASS' if bar[key][0] else 'FAIL'} ({bar[key][1]})"  # noqa: E731
    table = [
        (r"per entry, \|phi(q).phi(k) - e^t\| / e^t, mean over pairs", "ent_below", "ent_mean_falls"),
        ("per entry, max over pairs", "ent_below", "ent_max_falls"),
        (r"sum_r \|e~_r - e_r\| / sum_r e_r (no cancellation)", "abs_below", "abs_falls"),
        ("denominator phi(q) k vs sum_r e_r", "den_below", "den_falls"),
        ("numerator phi(q) Z vs sum_r e_r v_r", "num_below", "num_falls"),
        ("output T vs exact prefix attention", "output_below", "rel_falls"),
    ]
    termwise = all(bar[k][0] for k in ("ent_below", "abs_below", "ent_mean_falls", "ent_max_falls", "abs_falls"))
    below_all = all(bar[k][0] for _, k, _ in table)
    signed = [name for name, _, f in table[3:] if not bar[f][0]]
    lines = [
        "## Verdict on the bar",
        "",
        "Bar: *the relative error stays below the Taylor-remainder bound derived and printed beside it, and falls "
        "as the degree rises (g = 1, 2, 3)*. Judged by the script from the measurements above, for each quantity "
        "the bound applies to:",
        "",
        "| quantity | <= term-wise bound, every m and g | falls g = 1 > 2 > 3, every m |",
        "|---|---|---|",
        *[f"| {name} | {cell(b)} | {cell(f)} |" for name, b, f in table],
        "",
        f"- Below the bound: {'every quantity, at every m and g' if below_all else 'NOT for every quantity (see table)'}.",
        "- Falls with the degree where the bound applies term by term (per entry, sum of absolute per-term errors): "
        + ("yes, at every m." if termwise else "NO (see table)."),
        "- Falls with the degree for the signed sums and the output: "
        + (f"no for the {' and the '.join(signed)} (the table names the m where it fails). Their terms cancel "
           "(Notes); the bound, being term-wise, cannot see that, so it falls with g while these errors need not."
           if signed else "yes, at every m."),
        "",
    ]
    return lines


def write_report(rows, checks, args, wall, out_dir, command, load, alt=None, bar=None):
    bounds_fall = all(r["bound_g1"] > r["bound_g2"] > r["bound_g3"] for r in rows)
    last = rows[-1]
    parts = []
    for kind, arows in alt.items():
        a = arows[-1]
        bad = _not_falling(arows, "rel_ex")
        parts.append(
            f"{kind}: at m = 2^{a['log2m']} the output errors for g = 1, 2, 3 are "
            f"{a['rel_ex_g1']:.2e}, {a['rel_ex_g2']:.2e}, {a['rel_ex_g3']:.2e}; they fall with g at "
            + ("every m checked" if not bad else f"every m checked except {'; '.join(bad)}")
        )
    alt_note = "; ".join(parts) + ". Rademacher rows are centred and symmetric (and t, a sum of 64 terms, nearly " \
        "Gaussian), so the cancellation is expected to persist there; rows with a nonzero mean make t and v " \
        "non-centred and it is expected to go."
    lines = [
        "# NTK-Attention vs exact prefix attention as the prefix grows",
        "",
        "The NTK-Attention paper, Fig. 1, redone. Written by `benchmarks/ntk_prefix_length.py`; do not edit by hand.",
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
        "- X and prefix rows ~ N(0, I_d); W_Q, W_K, W_V entries ~ N(0, 0.25/d), so q . k / sqrt(d) has "
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
    lines += [""] + kernel_section(rows, alt)
    lines += [
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
    lines += verdict_section(bar)
    lines += ["## Checks", "", "```"] + [f"{'PASS' if ok else 'FAIL'}  {msg}" for ok, msg in checks] + ["```", ""]
    lines += [
        "## Notes",
        "",
        "- Why the kernel-level errors that the bound controls term by term fall with g. For t > 0, "
        "R_g(t) = R_(g+1)(t) + t^(g+1)/(g+1)! with every term positive, so |R_(g+1)(t)| < |R_g(t)|; for t < 0 the "
        "series alternates and the same holds down to t = "
        + ", ".join(f"{pointwise_falls_above(g):.2f} (g = {g} to {g + 1})" for g in DEGREES[:-1])
        + f", below every logit here (|t| <= {max(r['t_max'] for r in rows):.2f}). Hence every per-entry error, any "
        "sum of their absolute values, and the term-wise bound fall with g.",
        "- Why the signed sums need not (Stein's lemma). For a query q, the logit t and the value v of a prefix "
        "row p ~ N(0, I) are jointly Gaussian with mean 0, so E[f(t) v] = Cov(t, v) E[f'(t)], and odd moments of t "
        "vanish. The denominator error tends to E[e^t - S_g(t)] / E[e^t], S_g the degree-g partial sum; since "
        "e^t - S_2 = t^3/6 + (e^t - S_3) and E[t^3] = 0, g = 2 and g = 3 have the same limit "
        f"({last['stein_den_g2']:.2e} and {last['stein_den_g3']:.2e} for these queries). The numerator error tends "
        "to |E[e^t - S_(g-1)(t)]| / E[e^t] (S_g' = S_(g-1)), the same for g = 1 and g = 2 "
        f"({last['stein_num_g1']:.2e}). For a long N(0, I) prefix the signed kernel errors therefore tie in pairs, "
        "and which member of a pair is lower at a given m is finite-m fluctuation.",
        "- Why the output error is not monotone in g. Exact attention over a long prefix tends to "
        "E[e^t v] / E[e^t] = Cov(t, v) and degree-g NTK-Attention to Cov(t, v) E[S_(g-1)(t)] / E[S_g(t)]. For odd g "
        "the extra term t^g/g! has mean 0, so E[S_g] = E[S_(g-1)]: the numerator and denominator errors cancel in "
        "the ratio and the limit is exact. The odd-degree output errors are pure finite-m fluctuation and keep "
        "falling (Eq. 6 ~ 1/m), which is why g = 1 beats g = 2 for long prefixes here although its kernel is "
        "worse. For g = 2 the limit is off by the factor 1 / (1 + sigma^2/2), sigma^2 = Var(t) = |W_K q|^2 / d, a "
        "bias that no prefix length removes: that is the plateau of Fig. 1. Predicted limit of the g = 2 relative "
        f"error for these queries: {last['stein_g2']:.4f}; measured at m = 2^{last['log2m']}: {last['rel_g2']:.4f}.",
        "- The test of that explanation (section *Other prefixes*): " + alt_note + " So for the paper's N(0, I) "
        "prefix the output-level error does not fall monotonically with g, and this is a property of a centred, "
        "symmetric prefix (an unbiased odd-degree ratio), not evidence that a lower degree approximates the kernel "
        f"better; the Lagrange bounds, which cannot see the cancellation, {'fall' if bounds_fall else 'do not always fall'} with g.",
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
    fig, axes = plt.subplots(2, 3, figsize=(16, 9.2))
    ax, kx = axes[0], axes[1]
    for g, c in zip(DEGREES, ("C0", "C1", "C2")):
        kx[0].loglog(m, [r[f"den_g{g}"] for r in rows], "o-", color=c, label=f"g={g} |phi(q)k - sum e| / sum e")
        kx[0].loglog(m, [r[f"abs_g{g}"] for r in rows], ":", color=c, label=f"g={g} sum |e~ - e| / sum e")
        kx[0].loglog(m, [r[f"den_b_g{g}"] for r in rows], "--", color=c, label=f"g={g} term-wise bound")
        kx[1].loglog(m, [r[f"num_g{g}"] for r in rows], "o-", color=c, label=f"g={g} phi(q)Z vs sum e v")
        kx[1].loglog(m, [r[f"num_b_g{g}"] for r in rows], "--", color=c, label=f"g={g} term-wise bound")
        kx[2].loglog(m, [r[f"ent_mean_g{g}"] for r in rows], "o-", color=c, label=f"g={g} mean")
        kx[2].loglog(m, [r[f"ent_rho_mean_g{g}"] for r in rows], "--", color=c, label=f"g={g} mean rho_g(t)")
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
    kx[0].set(xlabel="prefix length m", ylabel="relative error (mean over queries)", title="Kernel level: denominator phi(q) k")
    kx[1].set(xlabel="prefix length m", ylabel="relative error (mean over queries)", title="Kernel level: numerator phi(q) Z")
    kx[2].set(xlabel="prefix length m", ylabel="|phi(q).phi(k) - e^t| / e^t", title="Kernel level: per entry")
    from matplotlib.ticker import LogLocator, NullFormatter

    for a in axes.ravel():
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
    parser.add_argument("--out", type=Path, default=None, help="output directory (default docs/results/, quick: a temp dir)")
    args = parser.parse_args(argv)
    if args.max_log2m is None:
        args.max_log2m = 12 if args.quick else 18
    out_dir = args.out or (Path(tempfile.mkdtemp(prefix="ntk_prefix_")) if args.quick else Path(__file__).resolve().parents[1] / "docs" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/ntk_prefix_length.py" + ("" if argv is None and len(sys.argv) == 1 else " " + " ".join(sys.argv[1:] if argv is None else argv))

    t0 = time.perf_counter()
    load_start = os.getloadavg()[0]
    rows, alt = run(args.max_log2m, args.n_samples, args.repeats, args.seed, args.dense_max_log2m)
    checks, bar = verdicts(rows, alt)
    wall = time.perf_counter() - t0
    write_report(rows, checks, args, wall, out_dir, command.strip(), (load_start, os.getloadavg()[0]), alt, bar)
    write_figure(rows, out_dir)
    print()
    for ok, msg in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {msg}")
    print(f"\nwrote {out_dir / 'ntk_prefix_length.md'} and {out_dir / 'ntk_prefix_length.png'} ({wall:.0f} s)")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
