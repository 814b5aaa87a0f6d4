"""Imports on demand for the package's ``__init__`` modules (PEP 562).

A package ``__init__`` writes its re-exports as ordinary imports inside ``if TYPE_CHECKING:``
(so readers, type checkers, IDEs and the import-graph test see them as they are) and ends with
the line that binds them::

    TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

    if TYPE_CHECKING:
        from ._models import Model, make_model

    __all__ = ["Model", "make_model"]

    __getattr__, __dir__ = attach(__name__, __file__, __all__)

:func:`attach` reads those imports from the ``__init__``'s source once, when the package is
imported (a few dozen lines; no module is executed), and returns a module ``__getattr__`` that
imports a name's module the first time the name is read and binds the name in the package, so
every later read is an ordinary attribute lookup. ``from genpqr.stage1 import ConditionalLogit``,
``genpqr.stage1.ConditionalLogit`` and ``from genpqr.stage1 import *`` all work as before and
give the same objects; what is not read is never imported (``import genpqr`` imports no
scikit-learn, SciPy, pandas or torch). The imports are declared once; this is the "stub" form of
the Scientific Python lazy-loading proposal (SPEC 1), with the stub kept in the ``__init__`` itself.

Only relative imports (``from .module import name [as alias]``, ``from ..wing import name``,
``from . import submodule``) are allowed in the block. A wing's modules are private (``_name``), so
no public name is also a submodule's name (the import system binds a submodule in its package when
it is first imported, which would replace such a name): :func:`attach` refuses one.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys

__all__ = ["attach"]


def _lazy_imports(path: str) -> dict[str, tuple[str, str | None]]:
    """``{name: (relative module, attribute or None for a submodule)}`` from the top-level
    ``if TYPE_CHECKING:`` blocks of the source file at ``path``."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    table = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.ImportFrom) and stmt.level >= 1):
                raise ImportError(f"{path}:{stmt.lineno}: only relative 'from . import' statements may be lazy")
            dots = "." * stmt.level
            for alias in stmt.names:
                name = alias.asname or alias.name
                table[name] = (dots + stmt.module, alias.name) if stmt.module else (dots + alias.name, None)
    return table


def attach(package: str, path: str, names: list[str]):
    """``(__getattr__, __dir__)`` for the package ``package`` whose ``__init__`` is at ``path``;
    ``names`` is its ``__all__``. Raises ImportError if a name of ``__all__`` is neither bound
    nor lazily imported, or a lazy name is also a submodule's name."""
    table = _lazy_imports(path)
    module = sys.modules[package]
    missing = [n for n in names if n not in table and n not in vars(module)]
    if missing:
        raise ImportError(f"{package}.__all__ names {missing}, which {package} neither defines nor imports")
    files = set(os.listdir(os.path.dirname(path)))
    shadowed = [n for n, (_, attr) in table.items() if attr is not None and ({n, f"{n}.py"} & files)]
    if shadowed:
        raise ImportError(f"{package} exports {shadowed}, also the names of its submodules: make the submodules private")

    def __getattr__(name: str):
        try:
            source, attr = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        target = importlib.import_module(source, package)
        value = target if attr is None else getattr(target, attr)
        setattr(module, name, value)
        return value

    def __dir__():
        return sorted(set(vars(module)) | set(table))

    return __getattr__, __dir__

