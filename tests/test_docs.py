"""The documentation site: its sources list the whole public API and every page.

These tests read ``docs/*.rst`` as text; they need neither Sphinx nor any of
its extensions (building the site is ``sphinx-build -b html docs
docs/_build/html`` with the ``docs`` extra).
"""

import importlib
import importlib.util
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import skdiagatt

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
API = DOCS / "api.rst"
API_PAGES = [API, DOCS / "api_advanced.rst"]  # estimators and helpers; the kernels
REQUIRED_PAGES = [
    "getting_started", "user_guide", "theory", "performance_guide", "results", "robustness", "api",
    "api_advanced",
]

pytestmark = pytest.mark.skipif(not API.exists(), reason="docs/api.rst is not in this checkout")


# ------------------------------------------------------------------ parsing
def documented_names(text):
    """Fully qualified names that an rst page documents.

    Understands ``.. currentmodule::``, ``.. autosummary::`` blocks (one name
    per indented line, options skipped) and ``.. autoclass:: / autofunction:: /
    autodata:: / automethod::`` directives.
    """
    names, module, in_summary = [], None, False

    def qualify(name):
        name = name.lstrip("~")
        if module and not name.startswith("skdiagatt"):
            return f"{module}.{name}"
        return name

    for line in text.splitlines():
        stripped = line.strip()
        m = re.match(r"\.\. (?:py:)?currentmodule:: *(\S+)", stripped)
        if m:
            module, in_summary = (None if m.group(1) == "None" else m.group(1)), False
            continue
        if re.match(r"\.\. autosummary::", stripped):
            in_summary = True
            continue
        m = re.match(r"\.\. auto(?:class|function|data|method|attribute):: *(\S+)", stripped)
        if m:
            names.append(qualify(m.group(1)))
            in_summary = False
            continue
        if in_summary:
            if not stripped or stripped.startswith(":"):
                continue
            if line[:1].isspace():
                names.append(qualify(stripped.split()[0]))
                continue
            in_summary = False
    return names


def resolve(qualname):
    """The object a dotted name refers to (longest importable module prefix)."""
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(qualname)


def public_modules():
    """skdiagatt and every sub-module without a leading underscore, imported."""
    mods = {"skdiagatt": skdiagatt}
    for info in pkgutil.walk_packages(skdiagatt.__path__, "skdiagatt.",
                                      onerror=lambda name: None):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        try:
            mods[info.name] = importlib.import_module(info.name)
        except ImportError:  # an optional dependency missing: nothing to list
            continue
    return mods


def public_objects():
    """(qualified name, object) of every public class and function.

    Public = named in a public module's ``__all__``; each object once, under
    the public module closest to the one that defines it (a package that
    re-exports a class of its private module, ``skdiagatt.diagatt`` for
    ``skdiagatt.diagatt._estimators``).
    """
    mods = public_modules()
    found = {}
    for modname, mod in sorted(mods.items()):
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if not (inspect.isclass(obj) or inspect.isroutine(obj)):
                continue  # constants (PAPER_SIGNALS, ...) are not required
            home = getattr(obj, "__module__", "") or ""
            if not home.startswith("skdiagatt"):
                continue
            parts = home.split(".")
            public_home = ".".join(parts[:next((k for k, p in enumerate(parts) if p.startswith("_")), len(parts))])
            qual = f"{public_home}.{obj.__name__}" if public_home in mods else f"{modname}.{name}"
            found.setdefault(id(obj), (qual, obj))
    return sorted(found.values(), key=lambda item: item[0])


_PUBLIC = public_objects()
_DOCUMENTED = [n for page in API_PAGES if page.exists() for n in documented_names(page.read_text())]


def _resolved_documented():
    objs = {}
    for name in _DOCUMENTED:
        try:
            objs[id(resolve(name))] = name
        except (ImportError, AttributeError):
            pass
    return objs


# -------------------------------------------------------------------- tests
def test_parser_understands_the_directives():
    text = """
.. currentmodule:: skdiagatt

.. autosummary::
   :toctree: generated/
   :nosignatures:

   DiagAttRegressor
   ~DiagAttClassifier

Text
====

.. autofunction:: skdiagatt.metrics.crlr
.. currentmodule:: skdiagatt.datasets
.. autodata:: PAPER_SIGNALS
"""
    assert documented_names(text) == [
        "skdiagatt.DiagAttRegressor",
        "skdiagatt.DiagAttClassifier",
        "skdiagatt.metrics.crlr",
        "skdiagatt.datasets.PAPER_SIGNALS",
    ]


def test_public_api_is_found():
    names = {name for name, _ in _PUBLIC}
    assert {"skdiagatt.diagatt.DiagAttRegressor", "skdiagatt.ntk.NTKPrefixRegressor",
            "skdiagatt.metrics.crlr"} <= names


@pytest.mark.parametrize("qualname, obj", _PUBLIC, ids=[n for n, _ in _PUBLIC])
def test_api_reference_lists_every_public_class_and_function(qualname, obj):
    """Listed under any name that resolves to the same object (e.g. the package
    re-export ``skdiagatt.DiagAttRegressor`` of ``skdiagatt.diagatt.DiagAttRegressor``)."""
    assert id(obj) in _resolved_documented(), (
        f"{qualname} is public (in __all__) but neither docs/api.rst nor docs/api_advanced.rst lists it"
    )


@pytest.mark.parametrize("name", _DOCUMENTED)
def test_api_reference_names_exist(name):
    module = name.rsplit(".", 1)[0]
    try:
        obj = resolve(name)
    except ImportError:
        pytest.skip(f"{module} cannot be imported here (optional dependency)")
    except AttributeError:
        pytest.fail(f"docs/api.rst lists {name}, which does not exist")
    assert obj is not None


def test_api_reference_lists_no_name_twice():
    dupes = {n for n in _DOCUMENTED if _DOCUMENTED.count(n) > 1}
    assert not dupes


def _toctree_entries(text):
    entries, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith(".. toctree::"):
            inside = True
            continue
        if inside:
            if not line.strip() or line.strip().startswith(":"):
                continue
            if line[:1].isspace():
                entries.append(line.strip())
                continue
            inside = False
    return entries


def test_index_links_every_page_and_the_pages_exist():
    entries = _toctree_entries((DOCS / "index.rst").read_text())
    for page in REQUIRED_PAGES:
        assert page in entries, f"index.rst does not link {page}"
    for entry in entries:
        if entry.startswith("auto_examples/"):  # generated by sphinx-gallery
            continue
        assert any((DOCS / f"{entry}{ext}").exists() for ext in (".rst", ".md")), entry


def test_every_toctree_entry_exists():
    for page in DOCS.glob("*.rst"):
        for entry in _toctree_entries(page.read_text()):
            if entry.startswith("auto_examples/") or "*" in entry:
                continue
            assert any((DOCS / f"{entry}{ext}").exists() for ext in (".rst", ".md")), (
                f"{page.name} links {entry}, which does not exist"
            )


def test_build_command_is_documented():
    text = (DOCS / "index.rst").read_text()
    assert 'pip install -e ".[docs]"' in text
    assert "sphinx-build -b html docs docs/_build/html" in text
    conf = (DOCS / "conf.py").read_text()
    assert 'html_theme = "pydata_sphinx_theme"' in conf


def _gallery_pattern():
    conf = (DOCS / "conf.py").read_text()
    return re.search(r'"filename_pattern": r"([^"]+)"', conf).group(1)


def _gallery_setup():
    spec = importlib.util.spec_from_file_location("gallery_setup", DOCS / "gallery_setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gallery_runs_every_example_one_process_can_run():
    examples = {p.name: p for p in (ROOT / "examples").glob("*.py")}
    run = {name for name, p in examples.items() if re.search(_gallery_pattern(), p.as_posix())}
    assert {"plot_your_own_matrices.py", "plot_image_patches.py", "plot_cluttered_digits.py",
            "plot_sentiment.py"} <= run
    for name in set(examples) - run:  # shown as code only: the example says why
        assert "does not run it" in examples[name].read_text(), name
    setup = _gallery_setup()
    for name in ("plot_cluttered_digits.py", "plot_sentiment.py"):  # the studies: small version
        assert setup.gallery_argv({}, {"src_file": str(examples[name])}) == ["--gallery"]
        assert '"--gallery"' in examples[name].read_text()
    assert setup.gallery_argv({}, {"src_file": str(examples["plot_image_patches.py"])}) == []
    order = sorted(examples.values(), key=setup.GalleryOrder(str(ROOT / "examples")))
    assert [p.name for p in order] == setup.ORDER  # every example placed, own matrices first
    conf = (DOCS / "conf.py").read_text()
    assert '"gallery_setup.GalleryOrder"' in conf and '"gallery_setup.gallery_argv"' in conf


def test_the_readme_opens_with_the_two_quick_start_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    block = lines.index("```bash")
    first, second = lines[block + 1 : block + 3]
    assert lines[block + 3] == "```" and all(not x.startswith("```") for x in lines[1:block])
    assert first.endswith("pip install -e . && python -m skdiagatt")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert second in ci  # CI runs the second line verbatim, then the scale-out tests
    assert ci[-1] == "python -m pytest -q -n 2 --dist loadfile -m scale_out" and ci.index(second) < len(ci) - 1


def _user_pages():
    pages = [ROOT / "README.md", *DOCS.glob("*.rst"), *DOCS.glob("*.md"), *DOCS.glob("results/*.md")]
    return sorted(pages)


# How a page says that a script wrote it: the notice anywhere, or a header line (under
# the title) naming the command; a guide quotes commands further down.
HEADER = re.compile(
    r"Written by `(?:python )?(?:benchmarks|examples)/"
    r"|^Commands?(?: \([^)]*\))?: `python (?:benchmarks|examples)/"
    r"|^- Runs that filled this table",
    re.M,
)


def _says_generated(page):
    text = page.read_text()
    head = "\n".join(text.splitlines()[:8])
    return "do not edit by hand" in text.lower() or bool(HEADER.search(head))


def test_generated_pages_are_in_docs_results_and_guides_at_the_top():
    at_top = [p.name for p in sorted(DOCS.glob("*.md")) if _says_generated(p)]
    assert not at_top, f"generated by a script, so they belong in docs/results/: {at_top}"
    # The pattern knows the result pages (competitors.md has no header line of its own).
    unmarked = [p.name for p in sorted((DOCS / "results").glob("*.md")) if not _says_generated(p)]
    assert unmarked == ["competitors.md"]


def test_benchmarks_write_into_docs_results():
    """No script builds a path at the top of docs/ or names a result page there."""
    results = {p.name for p in (DOCS / "results").iterdir() if p.is_file()}
    top_path = re.compile(r'"docs"\s*\)|/ "docs"(?!\s*/\s*"results")')
    for script in sorted((ROOT / "benchmarks").rglob("*.py")):
        text, name = script.read_text(), script.relative_to(ROOT)
        assert not top_path.search(text), f"{name} builds a path at the top of docs/"
        named = set(re.findall(r"docs/([\w.]+)", text)) & results
        assert not named, f"{name} names docs/{sorted(named)[0]}, which is in docs/results/"


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: p.name)
def test_pages_name_papers_and_speak_of_no_issue_numbers(page):
    text = page.read_text()
    assert not re.search(r"\bissue\s*#?\d", text, re.I), f"{page.name} speaks of an issue number"
    assert not re.search(r"\bpaper\s+00\d", text, re.I), f"{page.name}: name the paper"


def test_the_landing_pages_place_the_library():
    for page in (ROOT / "README.md", DOCS / "index.rst"):
        text = " ".join(page.read_text().split())
        assert "multiple instance learning" in text.lower()
        assert "arXiv:2609.21320" in text and "arXiv:2406.14036" in text
    # What it does and how to install it, then a localization picture, before anything else
    blocks = (DOCS / "index.rst").read_text().split("\n\n")
    assert "which rows drove each prediction" in " ".join(blocks[1].split())
    assert "pip install -e ." in blocks[2] and 'pip install -e ".[plot]"' in blocks[2]
    assert blocks[3].startswith(".. figure:: images/")


@pytest.mark.parametrize("qualname, obj", _PUBLIC, ids=[name for name, _ in _PUBLIC])
def test_public_docstring_has_examples(qualname, obj):
    """numpydoc docstring with an Examples section (run by ``pytest --doctest-modules``)."""
    doc = inspect.getdoc(obj) or ""
    assert doc, f"{qualname} has no docstring"
    assert re.search(r"^Examples\n-{3,}", doc, re.M), f"{qualname}: no Examples section"
    assert ">>>" in doc
