"""Every Python block of docs/inference.md runs as written (a reader runs them in order), and the
warnings they raise are the page's list in tests/doc_warnings.py."""

import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from genpqr.app.cli import main

from ..doc_warnings import check_warnings, printed, recording

ROOT = Path(__file__).resolve().parents[2]
PAGE = "inference.md"
pytestmark = pytest.mark.usefixtures("checkout_unchanged")


def test_python_blocks_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / PAGE).read_text()
    code = [body for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S) if lang == "python"]
    assert code
    namespace = {"__name__": "__doc_block__"}
    with recording() as found:
        for body in code:
            exec(compile(body, f"docs/{PAGE}", "exec"), namespace)
    check_warnings(f"docs/{PAGE}", "python", found)
    result = namespace["result"]
    assert result.se_kind == "efficient influence function" and len(result.names) == 5
    # the command line's --infer gives the API's numbers (one answer per question)
    shell = []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S):
        if lang != "bash":
            continue
        argv = shlex.split(body.replace("\\\n", " "))
        assert argv[0] == "genpqr"
        capsys.readouterr()
        assert main([*argv[1:], "--quiet"]) == 0
        out = capsys.readouterr().out
        assert max(len(line) for line in out.splitlines()[out.splitlines().index("Debiased inference: one-step "
                                                                                    "estimator, efficient influence "
                                                                                    "function"):]) <= 100
        shell += printed(out)
    check_warnings(f"docs/{PAGE}", "shell", shell)
    table = pd.read_csv(tmp_path / "fit-inference" / "inference.csv", index_col="component")
    answer = namespace["answer"]
    np.testing.assert_allclose(table.loc[answer.names, "estimate"], answer.params, rtol=1e-10)
    np.testing.assert_allclose(table.loc[answer.names, "std_error"], answer.bse, rtol=1e-10)
    by_input = answer.se_by_input  # the split by input too
    for column in ("se_first_stage", "se_kernel", "se_state_law", "share_first_stage", "share_kernel",
                   "share_state_law", "share_cross"):
        np.testing.assert_allclose(table.loc[answer.names, column], by_input[column], rtol=1e-9, atol=1e-12)
    assert np.all(namespace["given"]["share_kernel"] == 0.0)
    parameters = pd.read_csv(tmp_path / "fit-inference" / "parameters.csv", index_col="parameter")
    assert list(table.index[-2:]) == list(parameters.index) == ["bonus", "level"]
    for column in ("estimate", "std_error"):
        np.testing.assert_allclose(table[column].iloc[-2:], parameters[column], rtol=1e-10)
