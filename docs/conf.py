"""Sphinx configuration of the skdiagatt documentation.

Build (one command, from the repository root)::

    pip install -e ".[docs]" && sphinx-build -W -b html docs docs/_build/html

Nothing is downloaded at build time.  The gallery runs the examples of
``examples/`` (under a minute each; the studies in their ``--gallery``
version) and shows the multi-process ones as code; the result pages are the
Markdown files the benchmark scripts write into ``docs/results/``.
Optional extensions degrade gracefully: without numpydoc the docstrings are
read by ``sphinx.ext.napoleon``, without sphinx-gallery the gallery is left
out, without myst-parser the Markdown pages are left out.
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # the package, also when it is not installed
sys.path.insert(0, str(HERE))  # gallery_setup, which the gallery configuration names

import skdiagatt  # noqa: E402

# -- project -------------------------------------------------------------
project = "skdiagatt"
author = "skdiagatt developers"
copyright = "skdiagatt developers"
release = skdiagatt.__version__
version = release


def _have(module):
    return importlib.util.find_spec(module) is not None


# -- extensions ----------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]
extensions.append("numpydoc" if _have("numpydoc") else "sphinx.ext.napoleon")
HAVE_MYST = _have("myst_parser")
if HAVE_MYST:
    extensions.append("myst_parser")
HAVE_GALLERY = _have("sphinx_gallery")
if HAVE_GALLERY:
    extensions.append("sphinx_gallery.gen_gallery")

source_suffix = {".rst": "restructuredtext"}
if HAVE_MYST:
    source_suffix[".md"] = "markdown"
    myst_enable_extensions = ["dollarmath"]
    myst_heading_anchors = 3

templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "results/raw",
    "**/raw",
    "Thumbs.db",
    ".DS_Store",
]
if not HAVE_MYST:
    exclude_patterns.append("**.md")

# -- API reference -------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"
autodoc_member_order = "groupwise"
# Optional dependencies of skdiagatt.text and the examples: never needed to
# import the modules, mocked in case an import ever does need them.
autodoc_mock_imports = [m for m in ("tokenizers", "matplotlib") if not _have(m)]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- gallery -------------------------------------------------------------
# Every example runs during the build, each in under a minute, and its figures
# are shown: the two studies with ``--gallery``, their small version (see
# gallery_setup.py).  Not run: fit_across_processes.py, which needs several
# processes started together, and fit_npy_shards.py, which simulates its
# shards in a child process and reports this process's peak memory -- both
# say so in their text.  The order goes from one's own matrices to the
# studies (gallery_setup.ORDER).
if HAVE_GALLERY:
    sphinx_gallery_conf = {
        "examples_dirs": "../examples",
        "gallery_dirs": "auto_examples",
        "filename_pattern": r"/plot_\w+\.py$",
        "plot_gallery": "True",
        "download_all_examples": False,
        "remove_config_comments": True,
        "within_subsection_order": "gallery_setup.GalleryOrder",
        "reset_argv": "gallery_setup.gallery_argv",
        # Do not write sg_execution_times.rst into docs/.
        "write_computation_times": False,
    }

# -- HTML ----------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skdiagatt {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
# Figures that the Markdown result pages reference by relative path.
html_extra_path = []

suppress_warnings = ["myst.header", "myst.xref_missing"]
nitpicky = False
