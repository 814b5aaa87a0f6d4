"""The Examples sections of the main classes' docstrings run as doctests and print what they show
(GenPQR's and StructuralFit's are kept in docs/_examples/ and shown on their pages: their
modules are at the size limit).

The API pages of these classes show their Examples (tests/docs/test_browser.py checks that the
built pages have the section); here each is run with :mod:`doctest` (whitespace normalized,
``...`` matching any text), so an example cannot drift from what the code prints.
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from genpqr import GenPQR, Transitions
from genpqr.counterfactuals import CounterfactualResult
from genpqr.structural import StructuralFit

CLASSES = [GenPQR, Transitions, StructuralFit, CounterfactualResult]


#: docs/conf.py's Examples kept beside the site, for a class whose module has no room left
#: (tests/test_architecture.py's module size): appended to its docstring on its API page.
SITE_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "_examples"


#: Where each class is documented (its API page, and its file in docs/_examples if it has one).
DOCUMENTED = {GenPQR: "genpqr.GenPQR", Transitions: "genpqr.Transitions",
              StructuralFit: "genpqr.structural.StructuralFit",
              CounterfactualResult: "genpqr.counterfactuals.CounterfactualResult"}


def _examples_of(cls):
    path = SITE_EXAMPLES / f"{DOCUMENTED[cls]}.rst"
    if path.exists():
        text = path.read_text(encoding="utf-8")
        return [doctest.DocTestParser().get_doctest(text, {}, DOCUMENTED[cls], str(path), 0)]
    return doctest.DocTestFinder(recurse=False).find(cls, cls.__name__, globs={})


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_class_docstring_examples_run(cls, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    examples = [t for t in _examples_of(cls) if t.examples]
    assert examples, f"{cls.__name__}'s docstring has no examples"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    for test in examples:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {cls.__name__} failed (output above)"


def test_the_parameter_groups_of_the_api_pages_cover_the_signatures():
    """docs/conf.py's PARAMETER_GROUPS (the "Parameters at a glance" table of GenPQR's page) lists
    every parameter of the signature once, and nothing else."""
    import importlib
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("genpqr_docs_conf", Path(__file__).resolve().parents[2] / "docs"
                                                  / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    for name in conf.PARAMETER_GROUPS:
        module, _, attribute = name.rpartition(".")
        cls = getattr(importlib.import_module(module), attribute)
        assert conf.parameter_group_problems(name, cls) == [], name
