"""``TokenEmbedder`` and the text helpers of :mod:`skdiagatt.text`: encoder, lexicon, precision."""

import importlib.util
import math
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import Bunch

from .._shared.params import Anything, Boolean, Either, Integer, Options, validate_parameters
from ._model import _jitted_forward, load_encoder

# ------------------------------------------------------------------ embedder
_STORE = {}  # process-wide embedding cache: settings key -> {text: (rows, hidden)}


def _pad_length(L):
    # 8-aligned lengths up to 64, then a geometric grid: few compiled shapes.
    if L <= 64:
        return 8 * math.ceil(L / 8)
    x = 64.0
    while x < L:
        x *= 1.25
    return 16 * math.ceil(x / 16)


def _layer_count(layer, n_layers):
    """Encoder layers to run for ``TokenEmbedder(layer=...)``: 0 .. n_layers."""
    n = layer + n_layers + 1 if layer < 0 else layer
    if not 0 <= n <= n_layers:
        raise ValueError(f"layer={layer} is out of range for an encoder of {n_layers} layers: "
                         f"use {-n_layers - 1} .. {n_layers}")
    return n


def _check_texts(X):
    if isinstance(X, (str, bytes)):
        raise TypeError("X must be a list of strings, got a single string; wrap it in a list")
    try:
        texts = list(X)
    except TypeError:
        raise TypeError(f"X must be a list of strings, got {type(X).__name__}") from None
    for i, t in enumerate(texts):
        if isinstance(t, np.str_):
            texts[i] = str(t)
        elif not isinstance(t, str):
            raise TypeError(f"X[{i}] is a {type(t).__name__}, expected a string")
    if not texts:
        raise ValueError("X has no texts")
    return texts


class TokenEmbedder(TransformerMixin, BaseEstimator):
    """Strings -> per-token embedding matrices from a pretrained encoder (JAX, offline).

    Each text is tokenized (WordPiece for BERT models), run through the
    encoder with its special tokens, and returned as the matrix of last-layer
    hidden states of its tokens, shape ``(n_tokens_i, hidden)``: exactly the
    ragged input of :class:`~skdiagatt.DiagAttClassifier`.  The encoder is
    frozen; ``fit`` learns nothing.

    Parameters
    ----------
    model : str or Path, default="all-MiniLM-L6-v2"
        A name from :data:`MODEL_PACKAGES` (read from the installed package
        that bundles it) or a directory with ``config.json``,
        ``model.safetensors`` and ``tokenizer.json`` of a BERT-style encoder.
    special_tokens : {"drop", "keep"}, default="drop"
        The encoder always sees ``[CLS] ... [SEP]``; "drop" removes their rows
        from the output (they summarise the whole text, so a localizer that may
        pick them says nothing about words), "keep" returns them.
    pooling : {"token", "word"}, default="token"
        "token": one row per (sub-word) token, as in the paper.  "word": the
        rows of the sub-word pieces of each word are averaged, one row per
        word.
    max_length : int or None, default=None
        Texts are truncated to this many tokens, special tokens included.
        None: the encoder's limit (``max_position_embeddings``, 512 for
        MiniLM; sentence-transformers truncates it at 256).
    batch_size : int, default=64
        Texts per forward pass.  Texts are sorted by length and each batch is
        padded to a length of a fixed grid, so few shapes are compiled and
        little is wasted on padding.
    cache : bool, default=False
        Keep each text's matrix in a process-wide store shared by every
        embedder with the same settings, so that clones (``GridSearchCV``) and
        repeated calls embed a text once.  :meth:`clear_cache` empties it.
    verbose : int, default=0
        > 0: progress lines (texts done, rate) while embedding.
    layer : int, default=-1
        Which hidden states to return: those after ``layer`` encoder layers,
        counted from the end when negative.  -1 is the last layer's output,
        -2 the input of the last layer (to train a replacement of, or an
        addition to, that layer: see :func:`attention_projections`), 0 the
        embedding layer's output (no context mixed in).

    Attributes
    ----------
    n_features_out_ : int
        Columns of every output matrix (the encoder's hidden size), set by ``fit``.
    model_path_ : Path
        Directory the encoder was read from, set by ``fit``.

    Notes
    -----
    The forward pass is :func:`skdiagatt.kernels.transformer.encoder_forward`;
    for all-MiniLM-L6-v2 its per-token outputs are those of the reference
    ``BertModel`` up to float32 rounding.  Padded positions never change a
    text's output.

    Examples
    --------
    Needs the ``text`` extra and the model package (the doctest is skipped
    where they are missing):

    >>> from skdiagatt.text import TokenEmbedder
    >>> emb = TokenEmbedder()
    >>> X = emb.fit_transform(["A gripping, beautiful film."])
    >>> X[0].shape, emb.get_tokens(["A gripping, beautiful film."])
    ((6, 384), [['a', 'gripping', ',', 'beautiful', 'film', '.']])
    """

    _parameter_rules = {
        "model": Anything(),  # a name or a path, resolved by load_encoder
        "special_tokens": Options("drop", "keep"),
        "pooling": Options("token", "word"),
        # Two special tokens and at least one word.
        "max_length": Either(Options(None), Integer(3)),
        "batch_size": Integer(1),
        "cache": Boolean(),
        "verbose": Either(Boolean(), Integer(0)),
        "layer": Integer(None),
    }

    def __init__(
        self,
        model="all-MiniLM-L6-v2",
        *,
        special_tokens="drop",
        pooling="token",
        max_length=None,
        batch_size=64,
        cache=False,
        verbose=0,
        layer=-1,
    ):
        self.model = model
        self.special_tokens = special_tokens
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache = cache
        self.verbose = verbose
        self.layer = layer

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.requires_fit = False
        return tags

    # ------------------------------------------------------------- helpers
    def _encoder(self):
        validate_parameters(self)
        enc = load_encoder(self.model)
        if self.max_length is not None and self.max_length > enc.max_positions:
            raise ValueError(
                f"max_length={self.max_length} exceeds the encoder's {enc.max_positions} positions"
            )
        _layer_count(self.layer, len(enc.params["layers"]))
        return enc

    def _encode(self, enc, texts):
        """tokenizers Encodings, truncated to ``max_length``."""
        tok = enc.tokenizer
        tok.enable_truncation(self._max_length(enc))
        try:
            return tok.encode_batch(texts)
        finally:
            tok.no_truncation()

    def _layout(self, encoding, text, index):
        """Which encoder positions make the output rows, and their surface form.

        Returns ``groups`` (a list of arrays of positions, one per output row),
        the row ``tokens``, ``offsets`` (rows, 2) and ``words`` (the whole word
        each row belongs to, lower-cased as the tokenizer sees it).
        """
        special = np.asarray(encoding.special_tokens_mask, bool)
        keep = ~special if self.special_tokens == "drop" else np.ones_like(special)
        positions = np.flatnonzero(keep)
        if positions.size == 0:
            raise ValueError(
                f"X[{index}] has no tokens (empty or whitespace-only text {text!r}); "
                "remove it or use special_tokens='keep'"
            )
        tokens, offsets, word_ids = encoding.tokens, encoding.offsets, encoding.word_ids
        # Span of each word = from its first piece's start to its last piece's end.
        spans = {}
        for t, w in enumerate(word_ids):
            if w is None or special[t]:
                continue
            s, e = offsets[t]
            a, b = spans.get(w, (s, e))
            spans[w] = (min(a, s), max(b, e))

        def word_of(t):
            w = word_ids[t]
            if w is None or special[t]:
                return tokens[t]
            s, e = spans[w]
            return text[s:e].lower()

        if self.pooling == "token":
            groups = [np.array([t]) for t in positions]
            row_tokens = [tokens[t] for t in positions]
            row_offsets = [offsets[t] for t in positions]
            row_words = [word_of(t) for t in positions]
        else:
            groups, row_tokens, row_offsets, row_words = [], [], [], []
            last = object()
            for t in positions:
                w = word_ids[t] if not special[t] else ("special", t)
                if w == last:
                    groups[-1] = np.append(groups[-1], t)
                    continue
                last = w
                groups.append(np.array([t]))
                row_words.append(word_of(t))
                row_tokens.append(row_words[-1])
                row_offsets.append(spans[w] if not special[t] else offsets[t])
        return groups, row_tokens, np.asarray(row_offsets, dtype=np.int64).reshape(-1, 2), row_words

    def _max_length(self, enc):
        return enc.max_positions if self.max_length is None else int(self.max_length)

    def _settings_key(self, enc):
        n = _layer_count(self.layer, len(enc.params["layers"]))
        return (str(enc.path), self.special_tokens, self.pooling, self._max_length(enc), n)

    # --------------------------------------------------------------- API
    def fit(self, X, y=None):
        """Check the texts and load the encoder; nothing is learnt.

        Parameters
        ----------
        X : list of str
        y : ignored

        Returns
        -------
        self
        """
        _check_texts(X)
        enc = self._encoder()
        self.n_features_out_ = enc.hidden
        self.model_path_ = enc.path
        return self

    def tokenize(self, X):
        """Tokens of each text, aligned with the rows :meth:`transform` returns.

        Parameters
        ----------
        X : list of str

        Returns
        -------
        list of Bunch
            Per text: ``tokens`` (list of str: word pieces such as
            ``'##ly'``, or whole words with ``pooling="word"``), ``words``
            (the lower-cased whole word each row belongs to), ``offsets``
            (int array (rows, 2): character span of each row in the text;
            ``(0, 0)`` for special tokens).
        """
        texts = _check_texts(X)
        enc = self._encoder()
        out = []
        for i, (text, e) in enumerate(zip(texts, self._encode(enc, texts))):
            _, tokens, offsets, words = self._layout(e, text, i)
            out.append(Bunch(tokens=tokens, words=words, offsets=offsets))
        return out

    def get_tokens(self, X, *, words=False):
        """Row labels of each text: its tokens (or, with ``words=True``, their whole words).

        Parameters
        ----------
        X : list of str
        words : bool, default=False
            Label each row with the whole word it belongs to (``'##ly'`` of
            ``'unbelievably'`` becomes ``'unbelievably'``).

        Returns
        -------
        list of list of str
            ``get_tokens(X)[i][j]`` names row j of ``transform(X)[i]``.
        """
        key = "words" if words else "tokens"
        return [b[key] for b in self.tokenize(X)]

    def transform(self, X):
        """Embed each text.

        Parameters
        ----------
        X : list of str

        Returns
        -------
        list of ndarray of shape (n_rows_i, hidden), float32
        """
        texts = _check_texts(X)
        enc = self._encoder()
        store = _STORE.setdefault(self._settings_key(enc), {}) if self.cache else None
        out = [None] * len(texts)
        todo = []
        for i, t in enumerate(texts):
            if store is not None and t in store:
                out[i] = store[t]
            else:
                todo.append(i)
        if todo:
            fresh = self._embed(enc, [texts[i] for i in todo], todo)
            for i, m in zip(todo, fresh):
                out[i] = m
                if store is not None:
                    store[texts[i]] = m
        return [m.copy() for m in out] if store is not None else out

    def _embed(self, enc, texts, index):
        encodings = self._encode(enc, texts)
        layouts = [self._layout(e, t, i) for e, t, i in zip(encodings, texts, index)]
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(lengths, kind="stable")
        forward = _jitted_forward(enc.n_heads, enc.eps)
        n_layers = _layer_count(self.layer, len(enc.params["layers"]))
        params = {**enc.params, "layers": enc.params["layers"][:n_layers]}
        out = [None] * len(texts)
        start, done, last_print = time.perf_counter(), 0, 0.0
        B = int(self.batch_size)
        for b0 in range(0, len(texts), B):
            idx = order[b0 : b0 + B]
            L = _pad_length(int(lengths[idx].max()))
            # Batch count rounded to a power of two: few shapes to compile.
            nb = min(B, 1 << max(0, (idx.size - 1).bit_length()))
            ids = np.zeros((nb, L), np.int32)
            types = np.zeros((nb, L), np.int32)
            where = np.zeros((nb, L), bool)
            for k, j in enumerate(idx):
                e = encodings[j]
                ids[k, : len(e.ids)] = e.ids
                types[k, : len(e.ids)] = e.type_ids
                where[k, : len(e.ids)] = True
            where[idx.size :, 0] = True  # filler rows: one valid position, results dropped
            H = np.asarray(forward(params, ids, where, type_ids=types))  # numpy in: no program per shape
            for k, j in enumerate(idx):
                groups = layouts[j][0]
                if self.pooling == "token":
                    rows = H[k, np.concatenate(groups)]
                else:
                    rows = np.stack([H[k, g].mean(axis=0) for g in groups])
                out[j] = np.ascontiguousarray(rows, dtype=np.float32)
            done += idx.size
            now = time.perf_counter() - start
            if self.verbose and (now - last_print > 5.0 or done == len(texts)):
                last_print = now
                print(
                    f"[TokenEmbedder] {done}/{len(texts)} texts, {now:.1f}s "
                    f"({done / max(now, 1e-9):.0f} texts/s)",
                    file=sys.stderr,
                    flush=True,
                )
        return out

    @staticmethod
    def clear_cache():
        """Empty the process-wide embedding store used with ``cache=True``."""
        _STORE.clear()


def attention_projections(model="all-MiniLM-L6-v2", layer=-1):
    """The frozen query, key and value projections of one self-attention layer of an encoder.

    Laid out as the ``attention_weights`` of
    :class:`skdiagatt.NTKPrefixRegressor` (and of its baselines) for rows that
    end in a constant 1: each matrix is ``(hidden + 1, hidden)``, the
    checkpoint's weight transposed with its bias as the last row, so that
    ``[x, 1] W = x W_ckpt^T + b`` is exactly the layer's projection.  Feed it
    :meth:`TokenEmbedder.transform` output of the same model with
    ``layer=layer - 1`` (the layer's input; ``special_tokens="keep"`` to give
    it the rows it saw in pretraining), each matrix with a column of ones
    appended.

    Parameters
    ----------
    model : str or Path, default="all-MiniLM-L6-v2"
        As in :class:`TokenEmbedder`.
    layer : int, default=-1
        Which encoder layer, counted from the end when negative (-1: the last).

    Returns
    -------
    Bunch
        ``attention_weights`` (dict ``W_Q``, ``W_K``, ``W_V`` of float32
        arrays (hidden + 1, hidden)) and ``n_heads`` (int): pass both to the
        estimator.

    Examples
    --------
    Needs the ``text`` extra and the model package (the doctest is skipped
    where they are missing):

    >>> from skdiagatt.text import attention_projections
    >>> layer = attention_projections("all-MiniLM-L6-v2")
    >>> layer.n_heads, layer.attention_weights["W_Q"].shape
    (12, (385, 384))
    """
    enc = load_encoder(model)
    n = len(enc.params["layers"])
    index = _layer_count(layer, n) - 1
    if index < 0:
        raise ValueError(f"layer={layer} names the embedding layer, which has no attention: use 1 .. {n} or -1 .. -{n}")
    weights = {}
    for key, name in (("W_Q", "query"), ("W_K", "key"), ("W_V", "value")):
        dense = enc.params["layers"][index][name]
        W, b = np.asarray(dense["weight"], np.float32), np.asarray(dense["bias"], np.float32)
        weights[key] = np.vstack([W.T, b[None]])
    return Bunch(attention_weights=weights, n_heads=enc.n_heads)


# ------------------------------------------------------------------ lexicon
def load_vader_lexicon(path=None):
    r"""Valence of each entry of the VADER sentiment lexicon (Hutto & Gilbert, 2014).

    Read from the ``vader_lexicon.txt`` bundled in the ``vadersentiment``
    package (found by path, the package is not imported) unless ``path`` is
    given.  Lines are ``token<TAB>mean valence<TAB>...``; valence runs from
    -4 (most negative) to +4.

    Parameters
    ----------
    path : str or Path, optional
        A file in the same format; default: the bundled lexicon.

    Returns
    -------
    dict of str -> float
        Lower-cased token -> mean valence; malformed lines are skipped.

    Raises
    ------
    ImportError
        If ``path`` is None and ``vadersentiment`` is not installed.

    Examples
    --------
    A two-entry file in the lexicon's format (with ``vadersentiment``
    installed, ``load_vader_lexicon()`` reads the bundled one, about 7,500
    entries):

    >>> import tempfile
    >>> from pathlib import Path
    >>> from skdiagatt.text import load_vader_lexicon
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "lexicon.txt"
    ...     _ = path.write_text("good\t1.9\t0.9\t[2, 2]\nBad\t-2.5\t0.7\t[-3, -2]\nbroken line\n",
    ...                         encoding="utf-8")
    ...     lexicon = load_vader_lexicon(path)
    >>> lexicon
    {'good': 1.9, 'bad': -2.5}
    """
    if path is None:
        spec = importlib.util.find_spec("vaderSentiment")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(
                "load_vader_lexicon needs the package 'vadersentiment', which is not installed. "
                "Install it with `pip install --no-deps vadersentiment==3.3.2` or pass `path`."
            )
        path = Path(list(spec.submodule_search_locations)[0]) / "vader_lexicon.txt"
    lexicon = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            try:
                lexicon[parts[0].strip().lower()] = float(parts[1])
            except ValueError:
                continue
    return lexicon


def lexicon_precision(selected_words, labels, lexicon, *, positive_label=1):
    """Share of selected tokens whose lexicon polarity matches their sample's label.

    A selected word counts as a hit when it is in ``lexicon`` with a valence
    of the sign of the sample's label (> 0 for ``positive_label``, < 0 for
    any other label); words outside the lexicon count as misses.

    Parameters
    ----------
    selected_words : sequence of n sequences of str
        The words selected in each sample (e.g. the tokens at ``localize``).
    labels : array-like of shape (n,)
    lexicon : dict of str -> float
        From :func:`load_vader_lexicon`.
    positive_label : default=1

    Returns
    -------
    float in [0, 1] (NaN if nothing was selected)

    Examples
    --------
    >>> lexicon_precision([["great", "the"], ["awful"]], [1, 0], {"great": 3.1, "awful": -3.4})
    0.6666666666666666
    """
    if len(selected_words) != len(labels):
        raise ValueError(
            f"selected_words has {len(selected_words)} samples, labels has {len(labels)}"
        )
    hits = total = 0
    for words, label in zip(selected_words, labels):
        sign = 1.0 if label == positive_label else -1.0
        for w in words:
            total += 1
            v = lexicon.get(str(w).lower())
            hits += v is not None and v * sign > 0
    return hits / total if total else float("nan")
