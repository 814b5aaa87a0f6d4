"""Which warnings each documented run may raise, and where the page explains them (issue 19, item 5).

The tests that run the code of a page (README.md, examples/README.md, docs/*.md, the gallery's
examples/gallery/plot_*.py, `genpqr demo`)
record its warnings with :func:`recording` (Python warnings, every category, every time) and
:func:`printed` (the ``Category: message`` lines that ``genpqr fit`` and ``genpqr counterfactual``
print for the warnings they catch), then :func:`check_warnings` compares them with
:data:`EXPECTED`: a warning that is not listed for that page and part fails, and so does a
listed one that no longer occurs (remove it and its explanation). ``test_doc_warnings.py``
checks that the page explains every listed warning: some paragraph names its category and
quotes the listed fragment of its message.

:data:`EXPECTED` maps a page to its parts: ``"python"`` (its python blocks), ``"shell"`` (its
``genpqr`` commands), the path of a script a page runs (run by the tests on a small budget,
whose warnings are those of the full run) or ``"script"`` (a gallery example run as it is, by
tests/docs/test_gallery.py; its explanation is in the example's own text).
"""

from __future__ import annotations

import contextlib
import re
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COVERAGE = ("CoverageWarning", "rests on rarely taken actions")
FQE_NOT_CONVERGED = ("ConvergenceWarning", "FQE did not converge")
SOFT_FQI_NOT_CONVERGED = ("ConvergenceWarning", "soft FQI did not reach tol")
CLIP_FLOOR = ("ClippingWarning", "below the lower clip bound")
NOT_INVARIANT = ("IdentificationWarning", "not invariant to the normalization")
THIN_TRANSITIONS = ("ThinTransitionsWarning", "fewer than 10 observed transitions")
WEAK_SUPPORT = ("WeakSupportWarning", "have no observed choice")

EXPECTED = {
    "README.md": {"python": [], "shell": []},
    "docs/getting_started.md": {"python": [], "shell": []},
    "docs/install.md": {"shell": []},
    "docs/python_api.md": {"python": []},
    "docs/your_data.md": {"shell": []},
    "docs/experiments.md": {"shell": []},
    "examples/README.md": {"shell": []},
    "docs/counterfactuals.md": {
        "python": [COVERAGE],
        "shell": [NOT_INVARIANT],
        "examples/engine_replacement_counterfactual.py": [COVERAGE],
        "benchmarks/soft_fqi_synthetic.py": [FQE_NOT_CONVERGED, SOFT_FQI_NOT_CONVERGED],
    },
    "docs/distributed.md": {"python": []},
    "docs/inference.md": {"python": [WEAK_SUPPORT], "shell": []},
    "docs/engine_replacement.md": {"python": [COVERAGE]},
    "docs/choosing_a_transition_model.md": {"python": [THIN_TRANSITIONS], "shell": []},
    "docs/large_action_spaces.md": {"python": [], "shell": []},
    "docs/latent_types.md": {"python": [], "shell": []},
    "docs/model_selection.md": {"python": []},
    "docs/out_of_core.md": {"python": [FQE_NOT_CONVERGED], "shell": []},
    "docs/saving_and_loading.md": {"python": [COVERAGE]},
    "docs/structural_estimation.md": {"python": [], "shell": [COVERAGE]},
    "docs/train_on_recovered_reward.md": {
        "python": [COVERAGE],
        "examples/train_on_recovered_reward.py": [CLIP_FLOOR, COVERAGE],
    },
    "examples/gallery/plot_1_tabular_demo.py": {"script": []},
    "examples/gallery/plot_2_bus_engine.py": {"script": [COVERAGE]},
    "examples/gallery/plot_3_experiment2_mini.py": {"script": []},
    "examples/gallery/plot_4_continuous_actions.py": {"script": []},
    "examples/gallery/plot_5_out_of_core.py": {"script": []},
    "examples/gallery/plot_6_train_on_recovered_reward.py": {"script": []},
}
#: `genpqr demo` (`make demo`): explained in its own output, next to the warning.
DEMO_EXPECTED = [COVERAGE]
#: Pages whose code no test runs, and why.
NOT_RUN = {
    "docs/benchmarks.md": "its blocks are benchmark sweeps of minutes to hours (their runs are kept in docs/results)",
    "docs/data_conventions.md": "no code blocks",
    "docs/index.md": "no code blocks: the documentation site's front page (its toctrees are ::: directives)",
    "docs/guide.md": "no code blocks: the user guide's table of pages (a ::: toctree)",
    "docs/glossary.md": "the console's terms: glossary directives, no code",
    "docs/contributing.md": "no code blocks",
    "docs/reproducibility.md": "no code blocks",
}

_PRINTED = re.compile(r"\b([A-Z]\w*Warning)\)?: (.+)")


@contextlib.contextmanager
def recording():
    """Record every Python warning raised inside (``simplefilter("always")``); yields the list
    that receives ``(category name, message)`` pairs when the block ends."""
    found: list = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield found
    found.extend((w.category.__name__, str(w.message)) for w in caught)


def printed(text: str) -> list:
    """``(category, message)`` of the warnings a command printed (``Category: message`` lines)."""
    from genpqr.app.console import unwrap

    return [(m.group(1), m.group(2)) for m in map(_PRINTED.search, unwrap(text).splitlines()) if m]


def _matches(entry, warning) -> bool:
    return warning[0] == entry[0] and entry[1].lower() in warning[1].lower()


def check_warnings(page: str, part: str, found) -> None:
    """Fail on a warning of ``page``'s ``part`` that :data:`EXPECTED` does not list, and on a
    listed one that did not occur."""
    expected = EXPECTED[page][part]
    unexpected = sorted({f"{c}: {m[:300]}" for c, m in found if not any(_matches(e, (c, m)) for e in expected)})
    missing = [f"{c}: ...{f}..." for c, f in expected if not any(_matches((c, f), w) for w in found)]
    assert not unexpected, (f"{page} ({part}) raised warning(s) the page does not explain; fix the cause or explain "
                            f"them on the page and list them in tests/doc_warnings.py: {unexpected}")
    assert not missing, (f"{page} ({part}) no longer raises {missing}: remove it from tests/doc_warnings.py and its "
                         f"explanation from the page")


def paragraphs(text: str) -> list:
    """The text's paragraphs (split at blank lines), whitespace collapsed, lower case."""
    return [" ".join(p.split()).lower() for p in re.split(r"\n\s*\n", text)]


def explained(text: str, entry) -> bool:
    """Whether some paragraph of ``text`` names the warning's category and quotes its fragment."""
    category, fragment = (e.lower() for e in entry)
    return any(category in p and fragment in p for p in paragraphs(text))
