"""The package's import graph: no cycle, no import hidden in a function, owners in folders.

The graph is read from the source (``ast``), not by importing: an edge
``a -> b`` is a module-level ``import`` or ``from ... import`` in ``a`` that
names the package's module ``b`` (or a name defined in it).  A cycle would
make the order of imports matter; an import of the package's own modules
inside a function is how such a cycle is usually hidden, so there is none.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "skdiagatt"


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(importer, node):
    """The package's modules an import statement ``node`` in module ``importer`` names."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if node.level:
        base = importer.split(".")
        if MODULES[importer].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target not in MODULES:
        return set()
    # ``from package import submodule`` names the submodule.
    subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES}
    return subs or {target}


def imports(module, *, in_functions):
    """The package's modules that ``module`` imports at module level, or inside functions."""
    tree = ast.parse(MODULES[module].read_text())
    found = set()

    def visit(node, inside):
        for child in ast.iter_child_nodes(node):
            nested = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and nested == in_functions:
                found.update(resolve(module, child))
            visit(child, nested)

    visit(tree, False)
    return found


def test_the_graph_is_read():
    edges = imports("skdiagatt.diagatt._estimators", in_functions=False)
    assert "skdiagatt._shared.two_phase" in edges and "skdiagatt.kernels.diagatt" in edges
    assert imports("skdiagatt._training.loop", in_functions=False) >= {"skdiagatt._training.step"}


def test_no_import_cycle():
    graph = {m: imports(m, in_functions=False) for m in MODULES}
    state = {}

    def walk(m, path):
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                cycle = path[path.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                walk(n, path + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            walk(m, [m])


def test_no_package_import_inside_a_function():
    hidden = {m: sorted(imports(m, in_functions=True)) for m in MODULES}
    assert {m: v for m, v in hidden.items() if v} == {}


def test_few_private_modules_at_the_top():
    # The others live in the folder of their owner: diagatt/, ntk/, datasets/,
    # text/, baselines/, or _shared/ and _training/ when every estimator uses them.
    private = sorted(p.name for p in PACKAGE.glob("_*.py") if not p.name.startswith("__"))
    assert len(private) <= 4, private
