"""Warnings that mean something (issue 19, item 5).

The pages' own tests run their code with the warnings recorded and compare them with the
list in tests/doc_warnings.py (test_readme.py, test_docs_counterfactuals.py,
test_model_selection.py, test_distributed.py, test_stream.py, test_structural.py, test_gallery.py). Here: every
listed warning is explained on its page, every page with code is covered, `genpqr demo` and
the one page no other test runs (docs/engine_replacement.md) warn only what they explain, and
``genpqr fit --features`` prints the warnings about rewards.csv apart from those about
parameters.csv.
"""

from __future__ import annotations

import re
import shlex

import numpy as np
import pandas as pd
import pytest

from genpqr.app.cli import main

from ..doc_warnings import DEMO_EXPECTED, EXPECTED, NOT_RUN, ROOT, check_warnings, explained, printed, recording


@pytest.mark.parametrize("page", sorted(EXPECTED))
def test_every_listed_warning_is_explained_on_its_page(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    for part, entries in EXPECTED[page].items():
        for entry in entries:
            assert explained(text, entry), (f"{page} ({part}) raises {entry[0]} ('{entry[1]}') but no paragraph of "
                                            f"the page names {entry[0]} and quotes '{entry[1]}'")


def test_every_page_with_code_is_covered():
    pages = {"README.md", "examples/README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")),
             *(f"examples/gallery/{p.name}" for p in (ROOT / "examples" / "gallery").glob("plot_*.py"))}
    assert pages == set(EXPECTED) | set(NOT_RUN)
    for page in NOT_RUN:
        if "no code blocks" in NOT_RUN[page]:
            assert "```" not in (ROOT / page).read_text(encoding="utf-8"), page


def test_the_check_fails_on_an_unexpected_and_on_a_missing_warning():
    coverage = ("CoverageWarning", "the recovered reward ... rests on rarely taken actions: at the states of 9%")
    check_warnings("docs/engine_replacement.md", "python", [coverage])
    with pytest.raises(AssertionError, match="does not explain"):
        check_warnings("docs/engine_replacement.md", "python", [coverage, ("ClippingWarning", "x")])
    with pytest.raises(AssertionError, match="no longer raises"):
        check_warnings("docs/engine_replacement.md", "python", [])
    assert printed("wrote:\n  x.csv\n1 warning(s) about rewards.csv:\n  CoverageWarning: the reward ...\n"
                   "demo.py:3: ConvergenceWarning: FQE did not converge\n") == [
        ("CoverageWarning", "the reward ..."), ("ConvergenceWarning", "FQE did not converge")]
    text = "A.\n\nThe fit warns `CoverageWarning`:\nthe reward rests on rarely\ntaken actions.\n\nB."
    assert explained(text, ("CoverageWarning", "rests on rarely taken actions"))
    assert not explained(text.replace("rarely\n", "rarely\n\n"),
                         ("CoverageWarning", "rests on rarely taken actions"))


@pytest.mark.usefixtures("checkout_unchanged")
def test_make_demo_warns_only_what_it_explains(tmp_path, capsys):
    """`make demo` (genpqr demo with its defaults): its one warning is printed with its measured
    cost, the reward's error at the states the warning means against the others."""
    with recording() as found:
        assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    found += printed(out)
    EXPECTED["genpqr demo"] = {"output": DEMO_EXPECTED}
    try:
        check_warnings("genpqr demo", "output", found)
    finally:
        del EXPECTED["genpqr demo"]
    from genpqr.app.console import unwrap

    for category, _ in DEMO_EXPECTED:
        line = next(line for line in unwrap(out).splitlines() if f"the {category}, checked against the truth" in line)
        flagged, other = map(float, re.findall(r"RMSE is ([\d.]+) at the .* and ([\d.]+) at the other", line)[0])
        assert flagged > 1.5 * other, line  # the warning points at the larger errors


@pytest.mark.usefixtures("checkout_unchanged")
def test_engine_replacement_page_runs_with_the_warning_it_explains(tmp_path, monkeypatch, capsys):
    """docs/engine_replacement.md "Reproduce one panel": its block runs, NPL equals NFXP."""
    text = (ROOT / "docs" / "engine_replacement.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    with recording() as found:
        exec(compile(blocks[0], "docs/engine_replacement.md", "exec"), {"__name__": "__doc_block__"})
    check_warnings("docs/engine_replacement.md", "python", found)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    npl, nfxp = (np.array(line.strip("[]").split(), dtype=float) for line in lines[-2:])
    np.testing.assert_allclose(npl, nfxp, rtol=1e-5)


@pytest.mark.usefixtures("checkout_unchanged")
def test_structural_warnings_are_printed_apart_from_the_rewards_ones(tmp_path, capsys, monkeypatch):
    """A short panel (7 replacements for 2 parameters): the structural step's few-events warning
    comes under "about parameters.csv", the fit's coverage warning under "about rewards.csv", in
    the console and in the report."""
    from genpqr.envs._rust import bus_engine, simulate_buses

    truth = bus_engine(n_states=90, beta=0.9999, rc=10.075, theta11=2.293, theta3=(0.3919, 0.5953, 0.0128))
    sim = simulate_buses(truth, n_buses=37, n_periods=20, random_state=0).frame
    pd.DataFrame({"bus": sim.bus, "month": sim.month, "mileage_bin": sim.mileage,
                  "replace": (sim.action == "replace").astype(int)}).to_csv(tmp_path / "panel.csv", index=False)
    x = np.arange(90)
    pd.DataFrame({"mileage_bin": np.repeat(x, 2), "replace": np.tile([0, 1], 90), "RC": np.tile([1.0, 0.0], 90),
                  "theta11": np.column_stack([-0.001 * x, np.zeros(90)]).ravel()}).to_csv(tmp_path / "f.csv",
                                                                                           index=False)
    monkeypatch.chdir(tmp_path)
    command = ("fit panel.csv --episode bus --time month --state mileage_bin --action replace --gamma 0.9999 "
               "--normalization anchor:1 --transition increment:2:1 --n-states 90 --features f.csv --out fit --quiet "
               "--verbose")  # each warning in full
    assert main(shlex.split(command)) == 0
    from genpqr.app.console import unwrap

    out = unwrap(capsys.readouterr().out)
    tail = out.split("wrote ")[1]
    rewards, params = tail.split("warning(s) about rewards.csv")[1].split("warning(s) about parameters.csv")
    assert "CoverageWarning" in rewards and "WeakSupportWarning: the structural estimates rest on 7" not in rewards
    assert "(not parameters.csv: the npl MLE does not use the normalization" in rewards
    assert "WeakSupportWarning: the structural estimates rest on 7 choice(s)" in params
    assert "CoverageWarning" not in params
    html = (tmp_path / "fit" / "report.html").read_text()
    section = html.split("6. Warnings")[1].split("7. Configuration")[0]
    assert section.index("about rewards.csv") < section.index("CoverageWarning") < section.index(
        "about parameters.csv") < section.index("the structural estimates rest on 7")
