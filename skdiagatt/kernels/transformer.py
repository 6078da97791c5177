"""A BERT-style transformer encoder forward pass in pure JAX (inference only).

Enough to run small pretrained sentence encoders such as all-MiniLM-L6-v2
(6 layers, 12 heads, hidden size 384) without torch: post-layer-norm blocks,
absolute position embeddings, exact (erf) GELU.  Parameters are a plain pytree
of arrays (see :func:`init_encoder_params` for the layout); turning a
checkpoint's named tensors into that pytree is the caller's business.

The attention mask is a boolean array; padded key positions get exactly zero
attention weight and padded query positions are computed but meaningless, so
a sample's valid outputs do not depend on how much it was padded.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._matmul import einsum, matmul

__all__ = ["encoder_forward", "init_encoder_params", "layer_norm"]


def layer_norm(x, gamma, beta, eps):
    """Layer normalisation over the last axis (biased variance, as in BERT).

    Parameters
    ----------
    x : array, shape (..., D)
    gamma, beta : array, shape (D,)
        Scale and shift applied after normalising.
    eps : float
        Added to the variance.

    Returns
    -------
    array, shape (..., D)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.transformer import layer_norm
    >>> x = jnp.array([[1.0, 2.0, 3.0, 6.0], [10.0, 10.0, 10.0, 14.0]])
    >>> out = layer_norm(x, jnp.ones(4), jnp.zeros(4), 1e-12)
    >>> np.round(np.asarray(out.mean(-1)), 4).tolist(), np.round(np.asarray(out.var(-1)), 4).tolist()
    ([0.0, 0.0], [1.0, 1.0])
    >>> shifted = layer_norm(x, 2 * jnp.ones(4), jnp.ones(4), 1e-12)
    >>> bool(np.allclose(shifted, 2 * out + 1, atol=1e-5))
    True
    """
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * gamma + beta


def _dense(x, p):
    # Checkpoint convention: weight is (out, in).
    return matmul(x, p["weight"].T) + p["bias"]


def _self_attention(x, p, where, n_heads):
    B, L, D = x.shape
    dh = D // n_heads

    def split(t):
        return t.reshape(B, L, n_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(_dense(x, p["query"])), split(_dense(x, p["key"])), split(_dense(x, p["value"]))
    scores = einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    keys = where[:, None, None, :]
    scores = jnp.where(keys, scores, -jnp.inf)
    m = jnp.max(scores, axis=-1, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.where(keys, jnp.exp(scores - m), 0.0)
    a = e / jnp.maximum(jnp.sum(e, axis=-1, keepdims=True), jnp.finfo(e.dtype).tiny)
    out = einsum("bhqk,bhkd->bhqd", a, v)
    return out.transpose(0, 2, 1, 3).reshape(B, L, D)


def encoder_forward(params, ids, where, *, n_heads, eps=1e-12, type_ids=None):
    """Hidden states of the last layer, shape (B, L, hidden).

    Parameters
    ----------
    params : dict
        ``embeddings``: ``word`` (V, D), ``position`` (P, D), ``token_type`` (T, D),
        ``ln`` {``weight``, ``bias``}; ``layers``: a list of dicts with
        ``query``, ``key``, ``value``, ``attn_out``, ``intermediate``,
        ``output`` (each {``weight`` (out, in), ``bias`` (out,)}) and
        ``attn_ln``, ``out_ln`` (each {``weight``, ``bias``}).
    ids : int array of shape (B, L)
        Token ids, padded anywhere ``where`` is False.
    where : bool array of shape (B, L)
        True at real tokens.
    n_heads : int
        Attention heads per layer (static).
    eps : float
        Layer-norm epsilon.
    type_ids : int array of shape (B, L) or None
        Segment ids; None means all zeros.

    Returns
    -------
    array of shape (B, L, D)

    Examples
    --------
    A sample's valid outputs do not depend on its padding:

    >>> import jax
    >>> import jax.numpy as jnp
    >>> import numpy as np
    >>> from skdiagatt.kernels.transformer import encoder_forward, init_encoder_params
    >>> params = init_encoder_params(vocab_size=20, hidden=8, n_layers=1, intermediate=16)
    >>> forward = jax.jit(encoder_forward, static_argnames="n_heads")
    >>> ids = jnp.array([[2, 7, 5, 3], [2, 9, 3, 0]])     # the second sample is padded
    >>> where = ids != 0
    >>> h = forward(params, ids, where, n_heads=2)
    >>> h.shape
    (2, 4, 8)
    >>> alone = forward(params, ids[1:, :3], where[1:, :3], n_heads=2)
    >>> bool(np.allclose(h[1, :3], alone[0], atol=1e-5))
    True
    """
    emb = params["embeddings"]
    L = ids.shape[1]
    if type_ids is None:
        type_ids = jnp.zeros_like(ids)
    x = emb["word"][ids] + emb["position"][:L][None] + emb["token_type"][type_ids]
    x = layer_norm(x, emb["ln"]["weight"], emb["ln"]["bias"], eps)
    for layer in params["layers"]:
        h = _dense(_self_attention(x, layer, where, n_heads), layer["attn_out"])
        x = layer_norm(x + h, layer["attn_ln"]["weight"], layer["attn_ln"]["bias"], eps)
        h = jax.nn.gelu(_dense(x, layer["intermediate"]), approximate=False)
        h = _dense(h, layer["output"])
        x = layer_norm(x + h, layer["out_ln"]["weight"], layer["out_ln"]["bias"], eps)
    return x


def init_encoder_params(
    vocab_size, hidden, n_layers, intermediate, *, max_positions=64, n_types=2, seed=0
):
    """Random parameters in the layout of :func:`encoder_forward` (tests, toy models).

    Dense weights are ``N(0, 1 / n_in)``, layer-norm scales near 1, biases
    and shifts near 0, all float32.

    Parameters
    ----------
    vocab_size : int
        V, rows of the word embedding table.
    hidden : int
        D, the hidden size.
    n_layers : int
    intermediate : int
        Width of the feed-forward layer.
    max_positions : int, default=64
        Rows of the position embedding table (the longest input).
    n_types : int, default=2
        Rows of the token-type embedding table.
    seed : int, default=0

    Returns
    -------
    dict
        ``embeddings`` and ``layers`` as described in :func:`encoder_forward`;
        each dense layer's ``weight`` has shape (out, in).

    Examples
    --------
    >>> from skdiagatt.kernels.transformer import init_encoder_params
    >>> p = init_encoder_params(50, 8, 2, 16)
    >>> p["embeddings"]["word"].shape, len(p["layers"])
    ((50, 8), 2)
    >>> p["layers"][0]["intermediate"]["weight"].shape   # (out, in)
    (16, 8)
    """
    rng = np.random.default_rng(seed)

    def dense(n_out, n_in):
        return {
            "weight": (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32),
            "bias": (0.1 * rng.standard_normal(n_out)).astype(np.float32),
        }

    def ln():
        return {
            "weight": (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32),
            "bias": (0.1 * rng.standard_normal(hidden)).astype(np.float32),
        }

    def table(n):
        return rng.standard_normal((n, hidden)).astype(np.float32)

    return {
        "embeddings": {
            "word": table(vocab_size),
            "position": table(max_positions),
            "token_type": table(n_types),
            "ln": ln(),
        },
        "layers": [
            {
                "query": dense(hidden, hidden),
                "key": dense(hidden, hidden),
                "value": dense(hidden, hidden),
                "attn_out": dense(hidden, hidden),
                "attn_ln": ln(),
                "intermediate": dense(intermediate, hidden),
                "output": dense(hidden, intermediate),
                "out_ln": ln(),
            }
            for _ in range(n_layers)
        ],
    }
