"""The result tables the pages show are those their scripts rebuild from the runs kept in
docs/results (the runs take minutes to hours; rebuilding the tables from their files takes
seconds and only reads them): docs/results/*/results.md (``genpqr report``), the tables of
docs/engine_replacement.md and docs/structural_estimation.md (their benchmark's
``--table-only``)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys

import pytest

from genpqr.experiments import write_report
from genpqr.experiments._continuous import write_report as write_continuous_report

from ..doc_warnings import ROOT

RESULTS = ROOT / "docs" / "results"
pytestmark = pytest.mark.usefixtures("checkout_unchanged")


def _markdown_tables(text: str) -> list:
    return re.findall(r"^\|.*\|\n\|[-| ]+\|\n(?:\|.*\|\n?)+", text, re.M)


@pytest.mark.parametrize("name", ["exp1", "exp1-200", "exp1-1000", "exp2", "many-actions", "many-actions-bc",
                                  "continuous"])
def test_results_tables_are_rebuilt_from_their_files(name, tmp_path):
    folder = shutil.copytree(RESULTS / name, tmp_path / name)
    (write_continuous_report if name == "continuous" else write_report)(folder)
    assert (folder / "results.md").read_text() == (RESULTS / name / "results.md").read_text()


def _table_only(script: str, folder: str, monkeypatch, capsys) -> str:
    spec = importlib.util.spec_from_file_location(f"{script}_tables", ROOT / "benchmarks" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [script, "--table-only", "--out", str(RESULTS / folder)])
    capsys.readouterr()
    module.main()
    return capsys.readouterr().out


@pytest.mark.parametrize("script, folder, page, n_tables", [
    ("engine_replacement", "engine_replacement", "engine_replacement.md", 2),
    ("structural_fit", "structural_fit", "structural_estimation.md", 1),
])
def test_page_tables_are_their_benchmarks_tables(script, folder, page, n_tables, monkeypatch, capsys):
    printed = _markdown_tables(_table_only(script, folder, monkeypatch, capsys))
    assert len(printed) == n_tables
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    for table in printed:
        assert table.strip() in text, f"docs/{page} does not show this table of docs/results/{folder}:\n{table}"


def test_latent_types_tables_are_their_benchmarks_tables(monkeypatch, capsys):
    """docs/benchmarks.md shows the tables benchmarks/rust_types.py rebuilds from the kept run."""
    spec = importlib.util.spec_from_file_location("rust_types_tables", ROOT / "benchmarks" / "rust_types.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["rust_types", "--table-only", "--out",
                                      str(RESULTS / "rust_types" / "rust_types.csv")])
    capsys.readouterr()
    module.main()
    printed = capsys.readouterr().out.strip()
    assert printed in (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
