"""The shape of the package in numbers: ``make architecture`` prints them, the test
suite (tests/test_architecture_report.py) checks them.

* the places a ``GenPQR`` is built from a command-line config (functions of ``genpqr.app`` that
  call ``GenPQR(...)``): one, ``build_estimator``;
* the places each kind of command-line string (a registry: policy models, Q models, transition
  models...) is parsed: the generic option parser, plus any call ``REGISTRY.parse(...)``
  elsewhere;
* assignments to a ``GenPQR``'s fitted attributes outside the estimator wing: none;
* public names per wing (``__all__``) and in all, and at the top level;
* ``GenPQR``'s parameter count;
* the largest function and module.

Run: ``python tools/architecture.py`` (``--json`` for the figures as JSON).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "genpqr"


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        yield ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"), path


def _enclosing_functions(tree):
    """``node -> name of the enclosing top-level function or class`` for every node."""
    owner = {}
    for top in tree.body:
        name = getattr(top, "name", "<module>")
        for node in ast.walk(top):
            owner[node] = name
    return owner


def fitted_attributes() -> set:
    """The fitted attributes of ``GenPQR`` (its read-only views of the fitted state)."""
    sys.path.insert(0, str(SRC.parent))
    from genpqr.estimator import GenPQR

    return {name for name, value in vars(GenPQR).items() if name.endswith("_") and not name.startswith("_")
            and not callable(value)}


def measure() -> dict:
    sys.path.insert(0, str(SRC.parent))
    import genpqr
    from genpqr import registry

    registries = {name for name, value in vars(registry).items() if isinstance(value, registry.Registry)}
    fitted = fitted_attributes()
    build_places, generic_parse, explicit_parse, outside = set(), [], {}, []
    largest_function, largest_module = ("", 0), ("", 0)
    for module, path in _modules():
        text = path.read_text()
        tree = ast.parse(text)
        owner = _enclosing_functions(tree)
        n_lines = len(text.splitlines())
        if n_lines > largest_module[1]:
            largest_module = (module, n_lines)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > largest_function[1]:
                    largest_function = (f"{module}.{node.name}", size)
            if isinstance(node, ast.Call):
                func = node.func
                if module.startswith("genpqr.app") and isinstance(func, ast.Name) and func.id == "GenPQR":
                    uses_config = any(isinstance(n, ast.Name) and n.id == "config" for n in ast.walk(node))
                    if uses_config:  # built from the command line's config (the demo's fixed settings are not)
                        build_places.add(f"{module}.{owner.get(node, '?')}")
                if (isinstance(func, ast.Attribute) and func.attr == "parse" and module != "genpqr.registry"
                        and isinstance(func.value, ast.Name)):
                    where = f"{module}:{node.lineno}"
                    if func.value.id in registries:
                        explicit_parse.setdefault(func.value.id, []).append(where)
                    elif func.value.id == "registry":
                        generic_parse.append(where)
            if module.startswith("genpqr.estimator"):
                continue
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and t.attr in fitted and not (
                            isinstance(t.value, ast.Name) and t.value.id == "self"):
                        outside.append(f"{module}:{t.lineno} .{t.attr}")
    wings = {}
    for path in sorted(SRC.iterdir()):
        if (path / "__init__.py").exists():
            wing = importlib.import_module(f"genpqr.{path.name}")
            wings[path.name] = len(getattr(wing, "__all__", []))
    from genpqr.estimator import GenPQR

    parse_places = {name: len(generic_parse) + len(explicit_parse.get(name, [])) for name in sorted(registries)}
    return dict(build_places=sorted(build_places), parse_places=parse_places,
                generic_parse=generic_parse, explicit_parse=explicit_parse, outside_assignments=outside,
                public_names=wings, public_total=sum(wings.values()), top_level=len(genpqr.__all__),
                genpqr_parameters=len(inspect.signature(GenPQR).parameters),
                largest_function=largest_function, largest_module=largest_module)


def report(m: dict) -> str:
    lines = [f"places a GenPQR is built from a config: {len(m['build_places'])} ({', '.join(m['build_places'])})",
             "places each command-line string kind is parsed (the option parser "
             f"{', '.join(m['generic_parse'])}, plus):"]
    lines += [f"  {name}: {count}" + (f" (also {', '.join(m['explicit_parse'][name])})"
                                      if name in m["explicit_parse"] else "")
              for name, count in m["parse_places"].items()]
    lines.append(f"assignments to GenPQR's fitted attributes outside genpqr.estimator: "
                 f"{len(m['outside_assignments'])}" + "".join(f"\n  {a}" for a in m["outside_assignments"]))
    lines.append(f"public names: {m['public_total']} across the wings, {m['top_level']} at the top level")
    lines += [f"  genpqr.{wing}: {n}" for wing, n in m["public_names"].items()]
    lines.append(f"GenPQR's parameters: {m['genpqr_parameters']}")
    lines.append(f"largest function: {m['largest_function'][0]} ({m['largest_function'][1]} lines)")
    lines.append(f"largest module: {m['largest_module'][0]} ({m['largest_module'][1]} lines)")
    return "\n".join(lines)


if __name__ == "__main__":
    figures = measure()
    print(json.dumps(figures, indent=2) if "--json" in sys.argv else report(figures))
