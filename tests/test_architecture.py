"""The package's shape (issues 11 and 21, shared/DESIGN.md): wings on floors, no import circles,
no private names imported across modules, every core module in a wing, a public surface a reader
can hold (each wing's ``__all__``, its modules private), functions of a readable size.

Imports are read from the source with :mod:`ast` (lazy imports inside functions count), so
the test sees the whole graph without importing torch, LightGBM or Dask.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "genpqr"

# The wings and their floors: a module may import only from its own wing or from wings on lower
# floors. The order is the import graph's: the data (with the action spaces a Transitions holds,
# and the input validation every wing uses) at the ground; the integration machinery over actions;
# the normalizations (whose kernels are measures over actions); the two stages; the estimator that
# wires them and the evaluation metrics (which need only data, normalizations and stage 2); what
# uses a fitted estimator (counterfactuals, bootstrap-based inference included via evaluation)
# and the out-of-core/distributed fits; then the learners and structural estimation built on the
# core; baselines and benchmark environments; the experiments; the app on the top floor.
FLOORS = {
    "data": 0,
    "actions": 1,
    "normalization": 2,
    "stage1": 3, "stage2": 3,
    "estimator": 4, "evaluation": 4,
    "counterfactuals": 5, "scale": 5, "inference": 5,
    "models": 6, "structural": 6,
    "baselines": 7, "envs": 7, "datasets": 7,
    "experiments": 8,
    "app": 9,
}
CORE = {"data", "actions", "normalization", "stage1", "stage2", "estimator", "evaluation", "counterfactuals", "scale",
        "inference"}
# modules that belong to no wing: the package itself, its entry point, the exceptions every wing raises
OUTSIDE = {"genpqr": 10, "genpqr.__main__": 10, "genpqr.lazy": -1, "genpqr.exceptions": -1, "genpqr.messages": -1, "genpqr.registry": -1}

# Upward imports that are allowed, each a lazy import inside a convenience method of a lower wing
# that calls up; (importing module, imported wing) -> why.
UPWARD_EXCEPTIONS = {
    ("genpqr.estimator._estimator", "counterfactuals"):
        "GenPQR.counterfactual(...) is a one-line convenience for genpqr.counterfactuals.counterfactual(self, ...)",
    ("genpqr.estimator._infer", "inference"):
        "GenPQR.infer(...) is a one-line convenience for genpqr.inference.infer(self, ...)",
}
MAX_FUNCTION_LINES = 65


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["genpqr", *parts])


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FLOORS else None


def _floor(module: str) -> int:
    wing = _wing(module)
    return FLOORS[wing] if wing else OUTSIDE.get(module, 0)


def _is_private_module(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in module.split(".")[1:])


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
    """Module -> modules it imports. A package's imports of its own submodules count (they run
    when the package is imported); imports of the root package do not (it is initialised before
    any of its modules, and inside the package they name only ``__version__``, tested below)."""
    return {module: {t for t, _ in _imports(module) if t in MODULES and t not in (module, "genpqr")}
            for module in MODULES}


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


def test_every_core_module_is_in_a_wing():
    outside = [m for m in MODULES if _wing(m) is None and m not in OUTSIDE]
    assert outside == []


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_wings_import_only_downward():
    upward = [(m, t) for m, targets in _graph().items() for t in targets
              if _wing(t) != _wing(m) and _floor(t) >= _floor(m) and (m, _wing(t)) not in UPWARD_EXCEPTIONS]
    assert upward == []


def test_upward_exceptions_are_still_needed_and_lazy():
    """Each listed exception is an import inside a function, and still exists."""
    for (module, wing), why in UPWARD_EXCEPTIONS.items():
        assert why
        tree = ast.parse(MODULES[module].read_text())
        toplevel = {id(n) for n in tree.body}
        hits = [(t, id(node) in toplevel) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for t in [_target(module, node)] if _wing(t) == wing]
        assert hits, f"{module} no longer imports genpqr.{wing}: remove the exception"
        assert not any(top for _, top in hits), f"{module} imports genpqr.{wing} at module level"


def _target(module, node):
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def test_the_root_package_is_imported_only_for_its_version():
    names = {(m, name) for m in MODULES for t, name in _imports(m) if t == "genpqr" and m not in OUTSIDE}
    assert {name for _, name in names} <= {"__version__"}, names


def test_no_private_names_imported_across_modules():
    private = [(m, f"{t}.{name}") for m in MODULES for t, name in _imports(m)
               if name and name.startswith("_") and not name.startswith("__") and t != m]
    assert private == []


# The public surface (issue 30, shared/DESIGN.md): each wing exports what a user calls; helpers
# stay in private modules, the package's internal API, imported from there inside the package.
MAX_PUBLIC_NAMES = 150
MAX_TOP_LEVEL = 25


def _public(wing):
    return importlib.import_module(f"genpqr.{wing}").__all__


@pytest.mark.parametrize("wing", sorted(w for w in FLOORS if w != "app"))
def test_wing_exports_exactly_its_all(wing):
    """``genpqr.<wing>`` binds every name of its ``__all__`` and nothing else of its private
    modules: a helper is reached through its private module, never through the wing."""
    package = importlib.import_module(f"genpqr.{wing}")
    names = package.__all__
    assert isinstance(names, list) and len(set(names)) == len(names)
    for name in names:
        assert getattr(package, name) is not None
    for path in sorted((PACKAGE / wing).glob("_*.py")):
        if path.name == "__init__.py":
            continue
        module = importlib.import_module(f"genpqr.{wing}.{path.stem}")
        hidden = [n for n in getattr(module, "__all__", []) if n not in names]
        for name in hidden:
            assert not hasattr(package, name) or getattr(package, name) is getattr(module, name, None) and name in names, \
                f"genpqr.{wing}.{name} is reachable but not public"


def test_every_module_of_a_core_wing_is_private():
    """A wing's modules are private (``_name.py``); the wing's ``__init__`` is its public face."""
    public_modules = [m for m in MODULES if _wing(m) and _wing(m) != "app" and m.count(".") >= 2 and not m.endswith(".__main__")
                      and not _is_private_module(m)]
    assert public_modules == []


def test_the_public_surface_is_small():
    import genpqr

    per_wing = {w: len(_public(w)) for w in FLOORS if w != "app"}
    assert sum(per_wing.values()) <= MAX_PUBLIC_NAMES, per_wing
    assert len(genpqr.__all__) <= MAX_TOP_LEVEL
    assert getattr(importlib.import_module("genpqr.app"), "__all__", []) == []


def test_each_public_name_has_one_wing():
    """A name is exported by one wing (the top level re-exports the front door)."""
    seen = {}
    for wing in sorted(w for w in FLOORS if w != "app"):
        package = importlib.import_module(f"genpqr.{wing}")
        for name in package.__all__:
            obj = getattr(package, name)
            if (inspect.isclass(obj) or inspect.isroutine(obj)) and id(obj) in seen:
                pytest.fail(f"{name} is exported by genpqr.{seen[id(obj)]} and genpqr.{wing}")
            seen[id(obj)] = wing


def test_no_wing_imports_a_helper_through_another_wing():
    """Inside the package, a name imported from a wing's package is one of its public names;
    helpers come from the private module that defines them."""
    found = []
    for module in MODULES:
        for target, name in _imports(module):
            wing = _wing(target)
            if name and wing and target == f"genpqr.{wing}" and wing != _wing(module):
                if name not in _public(wing):
                    found.append(f"{module}: genpqr.{wing}.{name}")
    assert found == []


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


def test_only_the_estimator_sets_its_fitted_state():
    """GenPQR's fitted state is one object its ``fit`` sets (issue 30): outside the estimator wing
    no module assigns one of its fitted attributes (``policy_``, ``stage2_``, ... or ``fitted_``)
    on another object; the streamed, distributed, typed and large-K fits return the state."""
    from genpqr.estimator import GenPQR
    from genpqr.estimator._state import StateView

    fitted = {name for name, value in vars(GenPQR).items() if isinstance(value, StateView)} | {"fitted_"}
    found = []
    for module, path in MODULES.items():
        if _wing(module) == "estimator":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for target in targets:
                for el in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(el, ast.Attribute) and el.attr in fitted and not (
                            isinstance(el.value, ast.Name) and el.value.id == "self"):
                        found.append(f"{module}:{node.lineno} {el.attr}")
    assert found == []


def test_genpqr_has_at_most_20_parameters():
    import inspect

    from genpqr.estimator import GenPQR

    assert len(inspect.signature(GenPQR.__init__).parameters) - 1 <= 20


# Wings that may name the command line's flags: the command itself, and the experiments behind
# ``genpqr experiment`` (their runner is the command's).
FLAG_NAMERS = {"app", "experiments"}


def _message_strings(tree):
    """String constants of a module that are not docstrings (messages, labels, table cells)."""
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docs.add(id(node.value))  # attribute docstrings
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_library_never_names_a_command_line_flag():
    """Messages of the library name its Python arguments (as :class:`genpqr.messages.Mention`, which
    the command line names by its flags); only the command and its experiments write a flag."""
    import re

    flag = re.compile(r"(^|[\s(`'\"])--[a-z]")
    found = [f"{module}:{node.lineno}: {node.value[:60]!r}" for module, path in MODULES.items()
             if _wing(module) not in FLAG_NAMERS for node in _message_strings(ast.parse(path.read_text()))
             if flag.search(node.value)]
    assert found == []
