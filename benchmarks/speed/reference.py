"""NumPy references of the DiagAtt and NTK-Attention training steps, and their useful FLOPs.

Written here from the papers' formulas, independently of the kernels, so that
the speed bars compare the jitted step with a plain implementation of the
same forward and backward (their gradients are checked against JAX's).
"""

import math

import numpy as np

from skdiagatt._testing import taylor_tables


def diagatt_flops(p, d, t=1, R=1, train=True, calibration=False):
    """Useful FLOPs per sample of p real rows (matmuls and the row-wise score dot).

    forward: X W (2 p d^2 R), the score dot (2 p d R), the values X V (2 p d t R);
    backward of the main phase: X^T (g x) for W (2 p d^2 R) and X^T g for V
    (2 p d t R); the calibration phase has W fixed (no 2 p d^2 backward).
    """
    fwd = R * (2 * p * d * d + 2 * p * d + 2 * p * d * t)
    if not train:
        return fwd
    bwd = R * 2 * p * d * t + (0 if calibration else R * 2 * p * d * d)
    return fwd + bwd


def _effective_np(params, frozen):
    S, c = frozen["S"].astype(np.float32), np.float32(frozen["x_scale"])
    s = np.float32(frozen["inv_tau"] * np.exp(frozen["log_scale"][0]))
    W_eff = (c * s) * (S @ params["W"][0] @ S)
    V_eff = c * (S @ params["V"][0])
    return S, c, s, W_eff.astype(np.float32), V_eff.astype(np.float32)


def _linear_score_np(params, S, c, s):
    """The linear score term of ``score_form="affine"`` (the default) in input coordinates, as ``linear_score_``."""
    if "U" not in params:
        return np.zeros(S.shape[0], np.float32)
    return ((c * s) * (params["U"][0] @ S)).astype(np.float32)


def _penalty_np(params, frozen):
    """``alpha (||W||^2 + ||U||^2) + alpha_value ||V||^2``, as the kernels' ``penalty``."""
    score = sum(float(np.sum(params[k] ** 2)) for k in ("W", "U") if k in params)
    return frozen["alpha"] * score + frozen["alpha_value"] * float(np.sum(params["V"] ** 2))


def _adam_np(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8, clip=10.0):
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
    f = min(1.0, clip / max(norm, 1e-30))
    state["count"] += 1
    t = state["count"]
    out = {}
    for k, g in grads.items():
        g = g * f
        state["mu"][k] = b1 * state["mu"][k] + (1 - b1) * g
        state["nu"][k] = b2 * state["nu"][k] + (1 - b2) * g * g
        mh = state["mu"][k] / (1 - b1**t)
        nh = state["nu"][k] / (1 - b2**t)
        out[k] = (params[k] - lr * mh / (np.sqrt(nh) + eps)).astype(np.float32)
    return out


def _chain_np(gW_eff, gV_eff, gu, params, frozen, S, c, s):
    """Gradients of the parameters from those of W_eff, V_eff and the linear score term."""
    g = {
        "W": (c * s * (S @ gW_eff @ S))[None] + 2 * frozen["alpha"] * params["W"],
        "V": (c * (S @ gV_eff))[None] + 2 * frozen["alpha_value"] * params["V"],
    }
    if "U" in params:
        g["U"] = (c * s * (S @ gu))[None] + 2 * frozen["alpha"] * params["U"]
    return g


def numpy_diagatt_step(samples, Y, w, params, frozen, state, lr):
    """Plain NumPy reference: latent-row loss, its gradient and an Adam step.

    A per-sample loop over the unpadded samples (the natural NumPy code for
    ragged data), float32, BLAS matmuls; one head, Gaussian family.
    """
    S, c, s, W_eff, V_eff = _effective_np(params, frozen)
    u_eff = _linear_score_np(params, S, c, s)
    b, log_sigma = params["b"], params["log_sigma"]
    inv_var = np.exp(-2.0 * log_sigma).astype(np.float32)
    d = W_eff.shape[0]
    gW = np.zeros((d, d), np.float32)
    gu = np.zeros(d, np.float32)
    gV = np.zeros((d, 1), np.float32)
    gb = np.zeros(1, np.float32)
    gls = np.zeros(1, np.float32)
    total, wsum = 0.0, float(np.sum(w))
    for X, y, wi in zip(samples, Y, w):
        if wi == 0:
            continue
        P = X @ W_eff
        psi = c * np.einsum("pd,pd->p", P, X) + X @ u_eff
        m = psi.max()
        e = np.exp(psi - m)
        Zs = e.sum()
        kappa = e / Zs
        logk = psi - m - np.log(Zs)
        vals = X @ V_eff
        r = y - (b + vals)  # (p, 1)
        ll = -0.5 * (r * r * inv_var).sum(axis=1) - log_sigma.sum()
        a = logk + ll
        am = a.max()
        ea = np.exp(a - am)
        resp = ea / ea.sum()
        total += wi * -(am + np.log(ea.sum()))
        dpsi = (kappa - resp) * (wi * c)
        dz = (-resp[:, None] * r * inv_var) * wi
        gW += X.T @ (dpsi[:, None] * X)
        gu += X.T @ dpsi
        gV += X.T @ dz
        gb += dz.sum(axis=0)
        gls += -wi * (resp[:, None] * (r * r * inv_var - 1.0)).sum(axis=0)
    grads = _chain_np(gW / wsum, gV / wsum, gu / (c * wsum), params, frozen, S, c, s)
    grads["b"], grads["log_sigma"] = gb / wsum, gls / wsum
    loss = total / wsum + _penalty_np(params, frozen)
    return _adam_np(params, grads, state, lr), loss, grads


def numpy_diagatt_step_vectorized(Xb, where, Y, w, params, frozen, state, lr):
    """The same step in NumPy on the padded batch (B, L, d): a few large BLAS calls."""
    S, c, s, W_eff, V_eff = _effective_np(params, frozen)
    u_eff = _linear_score_np(params, S, c, s)
    b, log_sigma = params["b"], params["log_sigma"]
    inv_var = np.float32(np.exp(-2.0 * log_sigma[0]))
    B, L, d = Xb.shape
    X2 = Xb.reshape(B * L, d)
    P = X2 @ W_eff
    psi = (c * np.einsum("nd,nd->n", P, X2) + X2 @ u_eff).reshape(B, L)
    psi = np.where(where, psi, -np.inf)
    m = psi.max(axis=1, keepdims=True)
    e = np.exp(psi - m)
    Zs = e.sum(axis=1, keepdims=True)
    kappa = e / Zs
    logk = psi - m - np.log(Zs)
    vals = (X2 @ V_eff).reshape(B, L)
    r = Y[:, :1] - (b[0] + vals)
    a = np.where(where, logk - 0.5 * r * r * inv_var - log_sigma[0], -np.inf)
    am = a.max(axis=1, keepdims=True)
    ea = np.exp(a - am)
    resp = ea / ea.sum(axis=1, keepdims=True)
    wsum = float(w.sum())
    loss = float(np.sum(w * -(am[:, 0] + np.log(ea.sum(axis=1))))) / wsum
    wc = (w / wsum)[:, None]
    dpsi = ((kappa - resp) * wc * c).reshape(-1)
    dz = -resp * r * inv_var * wc
    gW = X2.T @ (dpsi[:, None] * X2)
    gV = X2.T @ dz.reshape(-1, 1)
    grads = _chain_np(gW, gV, X2.T @ dpsi / c, params, frozen, S, c, s)
    grads["b"] = np.array([dz.sum()], np.float32)
    grads["log_sigma"] = np.array([-(resp * (r * r * inv_var - 1.0) * wc).sum()], np.float32)
    loss += _penalty_np(params, frozen)
    return _adam_np(params, grads, state, lr), loss, grads


def numpy_diagatt_predict(samples, params, frozen):
    """Plain NumPy forward (per-sample loop): the attention prediction z."""
    S, c, s, W_eff, V_eff = _effective_np(params, frozen)
    u_eff = _linear_score_np(params, S, c, s)
    out = np.empty(len(samples), np.float32)
    for i, X in enumerate(samples):
        psi = c * np.einsum("pd,pd->p", X @ W_eff, X) + X @ u_eff
        e = np.exp(psi - psi.max())
        out[i] = params["b"][0] + (e / e.sum()) @ (X @ V_eff)[:, 0]
    return out


def adam_state(params):
    return {"count": 0, "mu": {k: np.zeros_like(v) for k, v in params.items()},
            "nu": {k: np.zeros_like(v) for k, v in params.items()}}


# --------------------------------------------------------- NTK: reference
def ntk_flops(L, d, dh, dv, r, train=True):
    """Useful FLOPs per sample: projections, scores, A V, phi(Q) Z, phi(Q) k (+ backward of Z, k)."""
    fwd = 2 * L * d * (2 * dh + dv) + 2 * L * L * (dh + dv) + 2 * L * r * (dv + 1)
    return fwd + (2 * L * r * (dv + 1) if train else 0)


def _taylor_np(x, degree):
    d = x.shape[-1]
    gathers, weights = taylor_tables(d, degree)
    xs = x * np.float32(math.sqrt(1.0 / math.sqrt(d)))
    blocks = [np.ones(x.shape[:-1] + (1,), x.dtype)]
    for parent, last in gathers:
        blocks.append(blocks[-1][..., parent] * xs[..., last])
    return np.concatenate(blocks, axis=-1) * weights.astype(np.float32)


def numpy_ntk_step(Xb, Y, params, frozen, degree=2):
    """Plain NumPy NTK-Attention read-out: loss and the gradients of Z, k, W_out, b.

    Per-sample loop, one head, mean pooling, all rows valid.
    """
    Wq, Wk, Wv = frozen["W_Q"][0], frozen["W_K"][0], frozen["W_V"][0]
    Z, k, Wo, b = params["Z"][0], params["k"][0], params["W_out"], params["b"]
    dh = Wq.shape[1]
    gZ, gk, gWo, gb = np.zeros_like(Z), np.zeros_like(k), np.zeros_like(Wo), np.zeros_like(b)
    total, B = 0.0, Xb.shape[0]
    for X, y in zip(Xb, Y):
        Q, K, V = X @ Wq, X @ Wk, X @ Wv
        Sc = (Q @ K.T) / np.float32(math.sqrt(dh))
        m = Sc.max(axis=1, keepdims=True)
        A = np.exp(Sc - m)
        phi = _taylor_np(Q, degree)
        ex = np.exp(-m)
        pk = phi @ k
        num = A @ V + ex * (phi @ Z)
        den = A.sum(axis=1, keepdims=True) + ex * np.maximum(pk, 0)[:, None]
        T = num / den
        pooled = T.mean(axis=0)
        z = pooled @ Wo + b
        res = z - y
        total += 0.5 * float(res @ res)
        dz = res / B
        gWo += np.outer(pooled, dz)
        gb += dz
        dT = np.broadcast_to((Wo @ dz) / T.shape[0], T.shape)
        dnum = dT / den
        dden = -(dT * T).sum(axis=1, keepdims=True) / den
        gZ += (ex * phi).T @ dnum
        gk += ((ex * (pk > 0)[:, None]) * phi).T @ dden[:, 0]
    gWo += 2 * frozen["alpha_value"] * Wo
    return total / B + frozen["alpha_value"] * float(np.sum(Wo**2)), {
        "Z": gZ[None], "k": gk[None], "W_out": gWo, "b": gb
    }


