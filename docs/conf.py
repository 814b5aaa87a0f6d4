"""Sphinx configuration of the genpqr documentation site: ``make docs`` -> build/docs/index.html.

The site has four parts, each a section of the top navigation bar with its own sidebar:

* getting started and the user guide: docs/*.md, rendered by MyST (``$...$`` is maths), one page
  per task (``guide.md`` lists them), a glossary of what the console prints and a page for
  contributors;
* the gallery: examples/gallery/plot_*.py, run by sphinx-gallery while the site is built (a
  failing example fails the build), rendered into docs/gallery/ (ignored by git);
* the API reference: one page per module of :data:`API`, generated into docs/api/ (ignored by
  git) by :func:`write_api_pages` when the build starts, from each module's ``__all__``; a
  wing's page also carries the docstrings of its private modules (:func:`_implementation_notes`).

The build is strict (``-W --keep-going`` in the Makefile, ``nitpicky``): any warning fails it,
those raised by the docstrings of src/genpqr included (reST markup, a reference that does not
resolve, maths that does not convert). Third-party names cannot resolve (no intersphinx: the CI
machine is offline) and are the only ones ignored (:data:`nitpick_ignore_regex`).

The site needs no network to be read either: maths is converted to MathML while the site is built
(:func:`visit_math`, by the ``latex2mathml`` package; browsers draw MathML themselves), not typeset
by a script fetched from a CDN.

A reduced site, for the browser checks of tests/docs/test_browser.py (the full build takes minutes):
``GENPQR_DOCS_API=genpqr,genpqr.structural`` keeps the API pages of those modules only and
``GENPQR_DOCS_GALLERY=REGEX`` runs only the gallery examples whose path matches (the others are
shown without their output). References into the pages left out do not resolve there, so the
reduced build is not strict; ``make docs`` builds everything.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "src"))  # the checkout's genpqr, whatever the environment has installed

import genpqr  # noqa: E402

project = "genpqr"
author = "the genpqr developers"
copyright = "the genpqr developers"
release = version = genpqr.__version__

# ---------------------------------------------------------------------------------------------
# The API reference: the one list to edit when the package's layout changes. Each entry is a
# section of the reference, each module gets a page with its docstring and every name of its
# ``__all__`` (a module without ``__all__``: the public functions and classes it defines). A
# name exported by several modules is documented once, under the shortest exporting path (ties:
# the module that defines it); the others link to it, and references to them resolve there.
API = {
    "The package": ["genpqr", "genpqr.exceptions", "genpqr.registry", "genpqr.messages"],
    "Data and action spaces": ["genpqr.data", "genpqr.datasets"],
    "Actions: reference measures, densities, integration": ["genpqr.actions"],
    "Normalizations": ["genpqr.normalization"],
    "Stage 1: the policy": ["genpqr.stage1"],
    "Stage 2: Q-evaluation": ["genpqr.stage2"],
    "The estimator": ["genpqr.estimator"],
    "Evaluation": ["genpqr.evaluation"],
    "Counterfactuals: using the reward": ["genpqr.counterfactuals"],
    "Inference: debiased estimates and intervals": ["genpqr.inference"],
    "Scale: out of core and on a cluster": ["genpqr.scale"],
    "Stage models": ["genpqr.models"],
    "Structural estimation": ["genpqr.structural"],
    "Baselines": ["genpqr.baselines"],
    "Environments with ground truth": ["genpqr.envs"],
    "Experiments": ["genpqr.experiments"],
}

_KEEP = [m for m in os.environ.get("GENPQR_DOCS_API", "").split(",") if m]
if _KEEP:  # the reduced site (module docstring)
    API = {section: [m for m in modules if m in _KEEP] for section, modules in API.items()}
    API = {section: modules for section, modules in API.items() if modules}

# ---------------------------------------------------------------------------------------------
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
# docs/results/ holds the experiments' output tables (written by `genpqr report`), not pages of the guide
exclude_patterns = ["results/**", "_examples/**"]

nitpicky = True
# third-party names: no intersphinx (the CI machine is offline), so they cannot resolve
_THIRD_PARTY = ("numpy", "np", "scipy", "sklearn", "pandas", "pd", "torch", "matplotlib", "pyarrow", "joblib",
                "lightgbm", "dask", "distributed", "gymnasium", "stable_baselines3", "imitation", "zuko", "jinja2",
                "tqdm", "cloudpickle", "minari", "d3rlpy")
nitpick_ignore_regex = [(r"py:.*", rf"({'|'.join(_THIRD_PARTY)})(\..+)?")]

# -- MyST (the user guide is Markdown) ---------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
myst_heading_anchors = 3

# -- autodoc, autosummary, numpydoc ------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc sections state the types; annotations name private modules
autosummary_generate = True
numpydoc_show_class_members = False  # the class template lists the methods
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set = set()

# -- sphinx-gallery ------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples" / "gallery"),
    "gallery_dirs": "gallery",
    "filename_pattern": os.environ.get("GENPQR_DOCS_GALLERY", r"/plot_"),  # every example runs while the site is built
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "min_reported_time": 1,
    "reset_modules_order": "both",
    "reference_url": {"genpqr": None},  # names in the examples' code link to the API reference
    "ignore_repr_types": r"matplotlib\.",  # no "<matplotlib.legend.Legend at 0x...>" under a cell ending in a call
}

# -- HTML ----------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"genpqr {release}"
html_theme_options = {"navigation_depth": 2, "collapse_navigation": True, "show_toc_level": 2,
                      "header_links_before_dropdown": 6, "secondary_sidebar_items": ["page-toc"]}
html_show_sourcelink = False
# the sidebar shows the whole site, the current section open (_templates/sidebar-nav-bs.html), so
# that no page has an empty one; none on the ~700 pages of single functions and classes: rendering
# the navigation tree on each took half of the build's time (their module pages keep it)
html_sidebars = {"api/generated/*": []}
html_static_path = ["_static"]
html_css_files = ["genpqr.css"]  # a wider column; console output wraps instead of scrolling
html_math_renderer = "mathml"


# -- maths: LaTeX -> MathML while the site is built ----------------------------------------------
def _mathml(self, node, latex: str, display: bool) -> str:
    """MathML of one formula (a multi-line one, with ``\\``, set as ``split``: aligned at ``&``);
    a formula the converter cannot read is a warning (which fails the strict build) and is shown
    as its source."""
    from latex2mathml.converter import convert
    from sphinx.util import logging

    tex = latex.strip()
    if display and "\\\\" in tex and "\\begin{" not in tex:
        tex = "\\begin{split}" + tex + "\\end{split}"
    try:
        return convert(tex, display="block" if display else "inline")
    except Exception as exc:  # noqa: BLE001 - the converter raises many kinds; each is a bad formula
        logging.getLogger(__name__).warning("maths that does not convert to MathML (%s): %s", exc, latex, location=node)
        return f"<code>{self.encode(latex)}</code>"


def visit_math(self, node) -> None:
    """Inline maths (``$...$``, ``:math:``) as MathML."""
    from docutils import nodes

    self.body.append(f'<span class="math">{_mathml(self, node, node.astext(), display=False)}</span>')
    raise nodes.SkipNode


def visit_displaymath(self, node) -> None:
    """Displayed maths (``$$...$$``, ``.. math::``) as MathML, one block per equation (equations
    are separated by blank lines), with its number when it has one."""
    from docutils import nodes
    from sphinx.util.math import get_node_equation_number

    self.body.append(self.starttag(node, "div", CLASS="math"))
    if node.get("number"):
        self.body.append(f'<span class="eqno">({get_node_equation_number(self, node)})</span>')
    if node.get("nowrap"):
        parts = [node.astext()]
    else:
        parts = [part for part in node.astext().split("\n\n") if part.strip()]
    self.body.extend(_mathml(self, node, part, display=True) for part in parts)
    self.body.append("</div>\n")
    raise nodes.SkipNode


# ---------------------------------------------------------------------------------------------
# The API pages, written before autosummary reads them.
API_DIR = DOCS / "api"
_ALIASES: dict[str, str] = {}  # a name documented elsewhere -> its documented name
_HOMES: set[str] = set()  # the documented names


def _exports(module_name: str) -> list[tuple[str, object]]:
    """The public names of a module: its ``__all__``, or without one the public functions and
    classes it defines."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return [(name, getattr(module, name)) for name in module.__all__
                if not inspect.ismodule(getattr(module, name))]
    return [(name, obj) for name, obj in vars(module).items() if not name.startswith("_")
            and (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module_name]


def _key(name: str, obj: object):
    """Functions and classes are the same wherever exported; data only under the same name."""
    return id(obj) if inspect.isclass(obj) or inspect.isroutine(obj) else (id(obj), name)


def _homes() -> dict:
    """``{key: documented full name}``: each exported object documented once, under its
    shortest exporting path (ties: its defining module, then the order of :data:`API`)."""
    exporters: dict = {}
    order = [m for modules in API.values() for m in modules]
    for rank, module in enumerate(order):
        for name, obj in _exports(module):
            exporters.setdefault(_key(name, obj), []).append((module, name, rank, obj))
    homes = {}
    for key, found in exporters.items():
        module, name, _, obj = min(found, key=lambda f: (f[0].count("."), getattr(f[3], "__module__", None) != f[0],
                                                         f[2]))
        homes[key] = f"{module}.{name}"
        for other_module, other_name, _, _ in found:
            _ALIASES.setdefault(f"{other_module}.{other_name}", homes[key])
        defined = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        if inspect.isclass(obj) or inspect.isroutine(obj):
            _ALIASES.setdefault(defined, homes[key])
    for alias, home in list(_ALIASES.items()):
        if alias == home:
            del _ALIASES[alias]
    return homes


def _module_page(module: str, homes: dict) -> str:
    """A module's page: its docstring, a table of the names documented here (each with its own
    page) and links to those documented under another path."""
    here, elsewhere = [], []
    for name, obj in _exports(module):
        home = homes[_key(name, obj)]
        if home == f"{module}.{name}":
            here.append(name)
        else:
            elsewhere.append(f"``{name}`` (:py:obj:`{home}`)")
    parent, _, leaf = module.rpartition(".")
    shadowed = bool(parent) and not inspect.ismodule(getattr(importlib.import_module(parent), leaf, None) or importlib)
    # a module named like a function its package exports (genpqr.structural.identification): the
    # function owns the name in the index, the module page is not indexed
    lines = [module, "=" * len(module), "", f".. automodule:: {module}", *(["   :no-index:"] if shadowed else []),
             "", f".. currentmodule:: {module}", ""]
    if here:
        lines += [".. rubric:: Documented here", "", ".. autosummary::", "   :nosignatures:", "   :toctree: generated",
                  "", *(f"   {name}" for name in here), ""]
    if elsewhere:
        lines += [".. rubric:: Also importable from here", "", ", ".join(elsewhere), ""]
    notes = _implementation_notes(module)
    if notes:
        lines += ["How it works", "-" * len("How it works"), ""]
        for private in notes:
            names = getattr(importlib.import_module(private), "__all__", [])[:4]
            lines += [f".. rubric:: {', '.join(names)}{', ...' if len(names) == 4 else ''}", ""] if names else []
            lines += [f".. automodule:: {private}", "   :no-index:", ""]
    return "\n".join(lines)


def _implementation_notes(module: str) -> list[str]:
    """A wing's private modules (``_name.py``) with a docstring, in the order its ``__init__``
    imports them: their docstrings explain the wing's public names (thresholds, algorithms,
    formats) and go on the wing's page, the only place a reader of the site can find them."""
    package = importlib.import_module(module)
    if not hasattr(package, "__path__"):
        return []
    source = inspect.getsource(package)
    found = [m.name for m in pkgutil.iter_modules(package.__path__) if re.fullmatch(r"_[a-z]\w*", m.name)]
    imported_at = {name: source.find(f"from .{name} import") for name in found}  # -1: not imported there
    found.sort(key=lambda name: (imported_at[name] if imported_at[name] >= 0 else len(source), name))
    return [f"{module}.{name}" for name in found if importlib.import_module(f"{module}.{name}").__doc__]


def _index_page() -> str:
    lines = ["API reference", "=============", "",
             "Every public name of the package: each module's page shows its docstring and the names in "
             "its ``__all__``. A name importable from several modules is documented once, under its "
             "shortest path, and listed on the pages of the others.", ""]
    for section, modules in API.items():
        lines += [section, "-" * len(section), "", ".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {module}" for module in modules] + [""]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    """Write only what changed: Sphinx re-reads a page whose file is newer than its last read."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def write_api_pages(app, config) -> None:
    """docs/api/: an index, one page per module of :data:`API`; stale pages and stubs removed."""
    homes = _homes()
    _HOMES.update(homes.values())
    pages = {"index.rst": _index_page()}
    pages.update({f"{module}.rst": _module_page(module, homes) for modules in API.values() for module in modules})
    for name, text in pages.items():
        _write(API_DIR / name, text)
    stubs = {f"{home}.rst" for home in homes.values()}
    for path in API_DIR.glob("*.rst"):
        if path.name not in pages:
            path.unlink()
    for path in (API_DIR / "generated").glob("*.rst"):
        if path.name not in stubs:
            path.unlink()


def _defining_comment(name: str, obj) -> list[str]:
    """The ``#:`` comment of a constant, from a genpqr module that binds it under the same name
    (a wing re-exports the constants of its private modules, where their comments are)."""
    from sphinx.pycode import ModuleAnalyzer

    attribute = name.rpartition(".")[2]
    for module_name in sorted(m for m in sys.modules if m.split(".")[0] == "genpqr"):
        if getattr(sys.modules[module_name], attribute, None) is obj:
            comment = ModuleAnalyzer.for_module(module_name).find_attr_docs().get(("", attribute))
            if comment:
                return list(comment)
    return []


def constant_docstring(app, what, name, obj, options, lines) -> None:
    """A constant's text is its ``#:`` comment, wherever it is documented, and never the
    docstring of its type (``tuple``'s "Built-in immutable sequence." for a tuple of names)."""
    if what not in ("data", "attribute") or inspect.isclass(obj) or inspect.isroutine(obj):
        return
    inherited = inspect.getdoc(type(obj))
    if inherited and "\n".join(lines).strip() == inspect.cleandoc(inherited).strip():
        lines[:] = _defining_comment(name, obj)


#: The parameters of the estimators with many, by role: a table at the top of the class's page,
#: above numpydoc's full list (in the docstring's order). Every parameter of the signature must be
#: in one group (a parameter added or removed is a warning: the strict build fails until the
#: table says where it belongs; tests/docs/test_docstring_examples.py checks the same).
PARAMETER_GROUPS = {
    "genpqr.GenPQR": {
        "The model": ["normalization", "gamma", "random_state", "progress"],
        "Stage 1: the policy": ["policy_model", "policy_prefit", "clip", "cross_fit"],
        "Stage 2: Q-evaluation": ["q_model", "solver"],
        "Tabular states": ["n_states", "transition_model"],
        "Offsets and support": ["offset_model", "min_support"],
        "Continuous actions": ["continuous"],
        "Latent types": ["n_types", "types"],
    },
}


def parameter_group_problems(name: str, cls) -> list[str]:
    """What :data:`PARAMETER_GROUPS` lacks or has too many for ``cls``'s signature."""
    grouped = [p for group in PARAMETER_GROUPS[name].values() for p in group]
    signature = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    return ([f"{p} is in no group" for p in signature if p not in grouped]
            + [f"{p} is not a parameter" for p in grouped if p not in signature]
            + [f"{p} is in two groups" for p in set(grouped) if grouped.count(p) > 1])


#: Examples sections kept beside the site: ``_examples/<documented name>.rst`` (numpydoc's
#: "Examples" section, doctest format) is appended to that class's docstring on its page, for a
#: class whose module has no room left under tests/test_architecture.py's module size
#: (``genpqr.GenPQR``); tests/docs/test_docstring_examples.py runs them as it runs the others.
EXAMPLES = DOCS / "_examples"


def class_examples(app, what, name, obj, options, lines) -> None:
    """Append ``_examples/<name>.rst`` to the docstring of the class ``name`` (its aliases included)."""
    path = EXAMPLES / f"{_ALIASES.get(name, name)}.rst"
    if what == "class" and path.exists():
        lines += ["", *path.read_text(encoding="utf-8").splitlines(), ""]


def parameter_groups(app, what, name, obj, options, lines) -> None:
    """The "Parameters at a glance" table of a class of :data:`PARAMETER_GROUPS` (its aliases
    included), inserted above its Parameters section."""
    from sphinx.util import logging

    home = _ALIASES.get(name, name)
    if what != "class" or home not in PARAMETER_GROUPS:
        return
    for problem in parameter_group_problems(home, obj):
        logging.getLogger(__name__).warning("docs/conf.py PARAMETER_GROUPS[%r]: %s", home, problem)
    table = ["", ".. rubric:: Parameters at a glance", "", ".. list-table::", "   :widths: 30 70", ""]
    for group, names in PARAMETER_GROUPS[home].items():
        table += [f"   * - {group}", f"     - {', '.join(f'``{n}``' for n in names)}"]
    table.append("")
    at = next((i for i, line in enumerate(lines) if line.strip() == "Parameters"), len(lines))
    lines[at:at] = table


def skip_foreign_member(app, what, name, obj, skip, options):
    """Document a class's members defined in genpqr, not those it inherits from another library
    (scikit-learn's ``get_params``, ``Exception.add_note``, ...)."""
    if what == "module" or skip:  # autodoc asks with what="class", autosummary with the member's kind
        return None
    target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    module = getattr(target, "__module__", None)
    if module is None and hasattr(target, "__objclass__"):
        module = target.__objclass__.__module__
    if isinstance(module, str) and module.split(".")[0] != "genpqr":
        return True
    return None


def _documented(cls) -> bool:
    name = f"{cls.__module__}.{cls.__qualname__}"
    return name in _ALIASES or name in _HOMES


def public_bases(app, name, obj, options, bases) -> None:
    """``Bases:`` lists third-party and documented genpqr classes, not private helpers."""
    bases[:] = [b for b in bases if getattr(b, "__module__", "").split(".")[0] != "genpqr" or _documented(b)]


def _scopes(node) -> list[str]:
    """Where a relative name is looked up, innermost first: the page's current class and module
    (Sphinx's rule), then the scopes of the docstring's own object (where its author wrote it:
    a class documented under a re-exported path keeps its defining module's names)."""
    module, cls = node.get("py:module"), node.get("py:class")
    scopes = ([f"{module}.{cls}"] if module and cls else []) + ([module] if module else [])
    owner = re.search(r"docstring of ([\w.]+)", node.source or "")
    if owner:
        parts = owner.group(1).split(".")
        scopes += [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
    return scopes


def _home_of(obj) -> str | None:
    """Where a genpqr function or class is documented (None: nowhere)."""
    name = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    return _ALIASES.get(name, name if name in _HOMES else None)


def _in_namespace(scopes: list[str], target: str):
    """``(object, rest)``: what the first part of ``target`` names in the namespace of the
    innermost module among ``scopes`` that has it (its imports included), as Python reads it."""
    head, _, rest = target.partition(".")
    for scope in scopes:
        module = sys.modules.get(scope)
        if module is not None and hasattr(module, head):
            return getattr(module, head), rest
    return None, ""


def resolve_alias(app, env, node, contnode):
    """Resolve a reference Sphinx's own rule leaves unresolved, as the docstring's reader would:

    * a name documented under another path (a re-export, or the module that defines it) links to
      where it is documented, and so do its members;
    * a relative name is also looked up where the docstring was written (:func:`_scopes`), in
      that module's namespace: a name it imports from another genpqr module links to that
      name's page, and one it imports from the standard library or another package is shown
      as text (it has no page here: no intersphinx offline, as for :data:`nitpick_ignore_regex`).
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    domain = env.domains["py"]

    def resolve(name):
        return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], name, node, contnode)

    scopes = _scopes(node)
    for candidate in [target, *(f"{scope}.{target}" for scope in scopes)]:
        parts = candidate.split(".")
        homes = [".".join([_ALIASES[".".join(parts[:cut])], *parts[cut:]])
                 for cut in range(len(parts), 1, -1) if ".".join(parts[:cut]) in _ALIASES]
        for name in [candidate, *homes[:1]]:
            found = resolve(name)
            if found is not None:
                return found
    obj, rest = _in_namespace(scopes, target)
    if obj is None or not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)):
        return None
    defined = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", None) or ""
    if defined.split(".")[0] != "genpqr":
        return contnode
    home = obj.__name__ if inspect.ismodule(obj) else _home_of(obj)
    return None if home is None else resolve(".".join([home, rest]) if rest else home)


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    app.connect("config-inited", write_api_pages)  # before Sphinx lists the sources and autosummary writes stubs
    app.connect("autodoc-skip-member", skip_foreign_member)
    app.connect("autodoc-process-docstring", constant_docstring, priority=400)  # before numpydoc (500)
    app.connect("autodoc-process-docstring", parameter_groups, priority=400)
    app.connect("autodoc-process-docstring", class_examples, priority=400)
    app.connect("autodoc-process-bases", public_bases)
    app.connect("missing-reference", resolve_alias)
