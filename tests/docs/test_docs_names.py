"""Every ``genpqr.`` name the pages show exists (issue 21: "every public name in the docs resolves").

The pages (README.md, docs/*.md, examples/**/*.md) name the package's modules, functions,
classes and constants in their code: inline code spans and code blocks. A rename or a move of
the package leaves such a name stale without breaking any build (the pages' Markdown code is
text, not a cross-reference). This test collects every dotted name that starts with
``genpqr.`` in the code of the pages, and every name a python block imports from genpqr
(``from genpqr.scale import fit_parquet``), and checks that it resolves as Python reads it: the
longest importable module, then attributes, and that the API reference documents it: a module
of its ``API`` list, a name of a module's ``__all__`` (with a page of its own, or a link to
where it is documented) or a member of a documented class. It imports genpqr and reads
docs/conf.py's list of pages, without Sphinx or a build.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import re

import pytest

from ..doc_warnings import ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").rglob("*.md")])

FENCE = re.compile(r"^(`{3,}|~{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", re.M | re.S)
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
NAME = re.compile(r"(?<![\w.$/-])genpqr(?:\.[A-Za-z_]\w*)+")


def page_code(text: str) -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of a Markdown page: its fenced blocks (language: the fence's
    info string) and the inline code spans of the rest (language ``"span"``)."""
    found = []
    for m in FENCE.finditer(text):
        found.append((text[:m.start()].count("\n") + 2, m.group(2).strip(), m.group(3)))
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for m in SPAN.finditer(prose):
        found.append((prose[:m.start()].count("\n") + 1, "span", m.group(2)))
    return found


def imported_names(code: str) -> list[str]:
    """The genpqr names a python block imports: ``from genpqr.x import a`` -> ``genpqr.x.a``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a fragment (``...``), or output shown in a python block
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "genpqr":
            names += [f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names if alias.name.split(".")[0] == "genpqr"]
    return names


def names_on(path) -> dict[str, list[str]]:
    """``{name: ["page:line", ...]}`` for every genpqr name in a page's code."""
    text = path.read_text(encoding="utf-8")
    where = path.relative_to(ROOT).as_posix()
    found: dict[str, list[str]] = {}
    for line, language, code in page_code(text):
        names = NAME.findall(code)
        if language in ("python", "py", "python3", "pycon"):
            names += imported_names(code)
        for name in names:
            found.setdefault(name, []).append(f"{where}:{line}")
    return found


def resolve(name: str):
    """The object ``name`` names: its longest importable module prefix, then attributes.
    Raises ``LookupError`` saying which part is missing."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if not f"{module_name}.".startswith(f"{exc.name}."):
                raise  # the module exists but fails to import one of its own dependencies
            continue
        for i, attribute in enumerate(parts[cut:], start=cut):
            if not hasattr(obj, attribute):
                raise LookupError(f"{'.'.join(parts[:i])} has no attribute {attribute!r}")
            obj = getattr(obj, attribute)
        return obj
    raise LookupError(f"no module {parts[0]!r}")


ALL_NAMES: dict[str, list[str]] = {}
for _page in PAGES:
    for _name, _where in names_on(_page).items():
        ALL_NAMES.setdefault(_name, []).extend(_where)


def test_the_pages_name_genpqr_objects():
    """The collection works: the pages do name the package's objects, in spans and blocks."""
    assert len(ALL_NAMES) > 50
    assert "genpqr.load" in ALL_NAMES and "genpqr.scale.fit_dask" in ALL_NAMES


def _skip_without_optional_dependency(exc: ImportError) -> None:
    """An optional dependency of genpqr (gymnasium, torch, ...) that this environment lacks."""
    if (exc.name or "genpqr").split(".")[0] == "genpqr":
        raise exc
    pytest.skip(f"needs the optional dependency {exc.name}")


@pytest.mark.parametrize("name", sorted(ALL_NAMES))
def test_every_genpqr_name_on_the_pages_resolves(name):
    try:
        resolve(name)
    except LookupError as exc:
        pytest.fail(f"{name} ({', '.join(ALL_NAMES[name])}) does not resolve: {exc}")
    except ImportError as exc:
        _skip_without_optional_dependency(exc)


@pytest.mark.parametrize("name", sorted(ALL_NAMES))
def test_the_pages_name_no_private_genpqr_object(name):
    private = [part for part in name.split(".") if part.startswith("_") and not part.startswith("__")]
    assert not private, f"{name} ({', '.join(ALL_NAMES[name])}) is private: name its public path"


@functools.cache
def _api_reference():
    """``(modules, documented names)`` of the API reference, as docs/conf.py writes its pages."""
    spec = importlib.util.spec_from_file_location("genpqr_docs_conf", ROOT / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    documented = set(conf._homes().values()) | set(conf._ALIASES)  # the pages, and the paths that link to them
    return {module for modules in conf.API.values() for module in modules}, documented


def test_every_genpqr_name_on_the_pages_is_documented():
    try:
        modules, documented = _api_reference()
    except ImportError as exc:  # the reference imports every documented module
        _skip_without_optional_dependency(exc)
    missing = []
    for name in sorted(ALL_NAMES):
        owner = name.rpartition(".")[0]
        member = owner in documented and inspect.isclass(resolve(owner))
        if name not in modules and name not in documented and not member:
            missing.append(f"{name} ({', '.join(ALL_NAMES[name])})")
    assert not missing, ("names on the pages without an API page (add them to their module's __all__, or the "
                         f"module to docs/conf.py's API): {missing}")


# Modules with a public name that are not the library's API: the command (documented by
# ``genpqr --help`` and the guides) and the lazy-import machinery of the ``__init__``s.
NOT_API = ("genpqr.app", "genpqr.lazy", "genpqr.__main__", "genpqr.datasets.__main__")


def test_every_public_module_has_an_api_page():
    """docs/conf.py's API lists the package, its exceptions, the registries and messages a
    contributor extends, and every wing: each wing's modules are private (``_x``), so the
    reference documents exactly the wings' ``__all__``; no page of ``genpqr.app``."""
    package = ROOT / "src" / "genpqr"
    public = set()
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        name = ".".join(parts)
        if not any(part.startswith("_") and part != "__main__" for part in parts[1:]) and not any(
                name == m or name.startswith(m + ".") for m in NOT_API):
            public.add(name)
    try:
        modules, _ = _api_reference()
    except ImportError as exc:
        _skip_without_optional_dependency(exc)
    assert public - modules == set(), "public modules missing from docs/conf.py's API"
    assert modules - public == set(), "docs/conf.py's API names modules that are not there (or private)"
    assert not any(m.startswith("genpqr.app") for m in modules)


def test_collector_reads_spans_blocks_and_imports():
    text = ("Use `genpqr.scale.fit_parquet` and ``genpqr.GenPQR``.\n\n"
            "```python\nfrom genpqr.stage2 import (FQE,\n    LSTDQ)\nimport genpqr.envs\nx = genpqr.load(p)\n```\n\n"
            "```bash\npython -m genpqr.app.cli fit\n```\n")
    found = {name for _, language, code in page_code(text)
             for name in NAME.findall(code) + (imported_names(code) if language == "python" else [])}
    assert found == {"genpqr.scale.fit_parquet", "genpqr.GenPQR", "genpqr.stage2", "genpqr.stage2.FQE",
                     "genpqr.stage2.LSTDQ", "genpqr.envs", "genpqr.load", "genpqr.app.cli"}


def test_resolve_names_the_missing_part():
    assert resolve("genpqr.scale.ParquetSource.plan") is not None
    with pytest.raises(LookupError, match="genpqr.scale has no attribute 'fit_nowhere'"):
        resolve("genpqr.scale.fit_nowhere")
    with pytest.raises(LookupError, match="has no attribute 'nowhere'"):
        resolve("genpqr.nowhere.thing")
