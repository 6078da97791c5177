"""Every Python code block of the README and the documentation pages runs as written.

The blocks of one page run in order in one namespace, as a reader pasting them
into a session would, in an empty temporary working directory and with
matplotlib drawing off screen (Agg).  A block that cannot run here (a model
outside the ``test`` extra, several hosts) carries a visible marker on the line
before it -- ``<!-- skip-test: reason -->`` in Markdown, ``.. skip-test: reason``
(an rst comment) in reStructuredText -- and is reported as skipped with that
reason.  A default fit in a block must converge: a ``ConvergenceWarning`` fails
the page, unless the block's marker says why its fit is cut short
(``allow-convergence-warning: reason``, e.g. a ``max_iter=5`` that keeps an
example on a cluster short).
"""

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from sklearn.exceptions import ConvergenceWarning

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARKERS = "skip-test|allow-convergence-warning"
MARKER_MD = re.compile(rf"<!--\s*({MARKERS}):\s*(.+?)\s*-->")
MARKER_RST = re.compile(rf"\.\.\s+({MARKERS}):\s*(.+)")


@dataclass
class Block:
    line: int  # 1-based line of the block's first code line in its page
    code: str
    marker: tuple = (None, None)  # (kind, reason) of the marker line before the block

    @property
    def skip(self):
        return self.marker[1] if self.marker[0] == "skip-test" else None

    @property
    def allows_convergence_warning(self):
        return self.marker[0] == "allow-convergence-warning"


def _marker(lines, start, pattern):
    """(kind, reason) of the last non-blank line before ``lines[start]`` if it is a marker."""
    for line in reversed(lines[:start]):
        if line.strip():
            m = pattern.fullmatch(line.strip())
            return m.groups() if m else (None, None)
    return None, None


def markdown_blocks(text):
    """The ```python fenced blocks of a Markdown page."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append(Block(i + 2, "\n".join(lines[i + 1 : end]), _marker(lines, i, MARKER_MD)))
            i = end
        i += 1
    return blocks


def _indented_body(lines, start):
    """(first line, dedented text) of the indented body after ``lines[start]``; options skipped."""
    body, indent, first = [], None, None
    for j in range(start + 1, len(lines)):
        line = lines[j]
        if not line.strip():
            body.append("")
            continue
        lead = len(line) - len(line.lstrip())
        if indent is None:
            if lead == 0:
                break
            if line.strip().startswith(":"):  # a directive option (:caption: ...)
                continue
            indent, first = lead, j + 1
        if lead < indent:
            break
        body.append(line[indent:])
    return first, "\n".join(body).strip("\n")


def rst_blocks(text):
    """The ``.. code-block:: python`` blocks of an rst page, and its ``::`` literal
    blocks that are Python (they parse; shell lines and printed output do not)."""
    lines, blocks = text.splitlines(), []
    for i, line in enumerate(lines):
        stripped = line.strip()
        directive = re.fullmatch(r"\.\. (?:code-block|code|sourcecode):: *(\S*)", stripped)
        literal = stripped.endswith("::") and not stripped.startswith("..")
        if not (directive or literal):
            continue
        if directive and directive.group(1) not in ("python", "python3", "py"):
            continue
        first, code = _indented_body(lines, i)
        if first is None:
            continue
        if literal and not _parses(code):
            continue
        blocks.append(Block(first, code, _marker(lines, i, MARKER_RST)))
    return blocks


def _parses(code):
    try:
        compile(code, "<literal block>", "exec")
    except SyntaxError:
        return False
    return True


def page_blocks(page):
    text = page.read_text()
    return markdown_blocks(text) if page.suffix == ".md" else rst_blocks(text)


def _pages():
    pages = [ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("*.rst"), *DOCS.glob("results/*.md")]
    return [p for p in sorted(pages) if page_blocks(p)]


# ------------------------------------------------------------ the parsers
def test_markdown_blocks_and_markers():
    text = "x\n```python\na = 1\n```\n\n<!-- skip-test: needs a GPU -->\n\n```python\nb = 2\n```\n```bash\nls\n```\n"
    blocks = markdown_blocks(text)
    assert [(b.line, b.code, b.skip) for b in blocks] == [(3, "a = 1", None), (9, "b = 2", "needs a GPU")]


def test_rst_blocks_and_markers():
    text = """Intro::

    pip install -e .

Code::

    a = 1

.. skip-test: two hosts

.. code-block:: python
   :caption: c

   b = 2

     c = 3  # indented further: still the block

.. code-block:: bash

   ls
"""
    blocks = rst_blocks(text)
    assert [(b.line, b.code, b.skip) for b in blocks] == [
        (7, "a = 1", None), (14, "b = 2\n\n  c = 3  # indented further: still the block", "two hosts"),
    ]


def test_markers_allow_a_convergence_warning_only_where_they_say_so():
    text = "<!-- allow-convergence-warning: max_iter=5 -->\n```python\na = 1\n```\n```python\nb = 2\n```\n"
    first, second = markdown_blocks(text)
    assert first.allows_convergence_warning and first.skip is None
    assert not second.allows_convergence_warning


def test_a_convergence_warning_in_a_block_is_caught():
    code = "import warnings\nfrom sklearn.exceptions import ConvergenceWarning\nwarnings.warn('no', ConvergenceWarning)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a filter outside does not hide it from the check
        caught = _run(ROOT / "README.md", Block(1, code), {})
    assert [str(w.message) for w in caught] == ["no"]


def test_the_pages_have_blocks():
    names = {p.name for p in _pages()}
    assert {"README.md", "getting_started.rst", "user_guide.rst", "index.rst"} <= names


# ----------------------------------------------------------- running them
@pytest.fixture
def reader_session(tmp_path, monkeypatch):
    """An empty working directory and off-screen figures, closed afterwards."""
    import matplotlib  # in the test extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    yield
    plt.close("all")


def _run(page, block, namespace):
    code = compile("\n" * (block.line - 1) + block.code, str(page.relative_to(ROOT)), "exec")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(code, namespace)
    return [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def _marked():
    return [(page, block) for page in _pages() for block in page_blocks(page) if block.skip]


def _page_params():
    """The pages; the scaling-out page's blocks start clusters and processes (``scale_out``)."""
    return [pytest.param(page, marks=[pytest.mark.scale_out] if page.name == "scaling_out.md" else [])
            for page in _pages()]


@pytest.mark.parametrize("page", _page_params(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(page, reader_session):
    namespace = {"__name__": "__main__"}
    for block in page_blocks(page):
        if block.skip:  # reported by test_marked_block_is_skipped
            continue
        unconverged = _run(page, block, namespace)
        assert block.allows_convergence_warning or not unconverged, (
            f"{page.relative_to(ROOT)}:{block.line}: a fit did not converge: {unconverged[0].message}"
        )


@pytest.mark.parametrize("page, block", _marked(), ids=lambda x: x.name if isinstance(x, Path) else str(x.line))
def test_marked_block_is_skipped(page, block):
    compile(block.code, str(page.relative_to(ROOT)), "exec")  # not run, but valid Python
    pytest.skip(f"{page.relative_to(ROOT)}:{block.line} not run, as its page says: {block.skip}")
