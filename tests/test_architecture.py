"""The package's shape (issue 11, shared/DESIGN.md): layers, no import circles, no private
names imported across modules, modules and functions of a readable size.

Imports are read from the source with :mod:`ast` (lazy imports inside functions count), so
the test sees the whole graph without importing torch, LightGBM or Dask.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "genpqr"

# floor of each subpackage; a module may import only modules on its floor or below
FLOORS = {"core": 0, "models": 1, "structural": 1, "baselines": 2, "envs": 2, "experiments": 3, "app": 4}
MAX_MODULE_LINES = 520
MAX_FUNCTION_LINES = 65


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["genpqr", *parts])


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _floor(module: str) -> int:
    parts = module.split(".")
    return FLOORS.get(parts[1], 0) if len(parts) > 1 and parts[1] in FLOORS else 0


def _imports(module: str):
    """Yield ``(target_module, imported_name)`` for every genpqr import in ``module``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "genpqr":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub, None) if sub in MODULES else (target, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, None


def _graph():
    graph = {}
    for module, path in MODULES.items():
        own_package = path.name == "__init__.py"
        graph[module] = {t for t, _ in _imports(module)
                         if t in MODULES and t != module and not (own_package and t.startswith(module + "."))}
    return graph


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_layers_import_only_downward():
    upward = [(m, t) for m, targets in _graph().items() for t in targets
              if m != "genpqr.__main__" and _floor(t) > _floor(m)]
    assert upward == []


def test_no_private_names_imported_across_modules():
    private = [(m, f"{t}.{name}") for m in MODULES for t, name in _imports(m)
               if name and name.startswith("_") and not name.startswith("__") and t != m]
    assert private == []


def test_modules_are_of_readable_size():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_functions_are_short():
    long = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{module}.{node.name}"] = n
    assert long == {}


@pytest.mark.parametrize("cycle_graph, expected", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_cycle_finder_finds_cycles(cycle_graph, expected):
    assert _cycles(cycle_graph) == expected
