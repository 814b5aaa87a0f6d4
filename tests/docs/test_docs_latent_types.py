"""docs/latent_types.md: its python blocks run and print what the page shows (tests/doc_output.py),
its `genpqr fit --types` command runs, and the warnings of both are the page's (tests/doc_warnings.py)."""

from __future__ import annotations

import re
import shlex

import pandas as pd
import pytest

from genpqr.app.cli import main

from ..doc_output import output_differences
from ..doc_warnings import ROOT, check_warnings, printed, recording

PAGE = ROOT / "docs" / "latent_types.md"
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


@pytest.mark.usefixtures("checkout_unchanged")
def test_page_runs_and_prints_what_it_shows(tmp_path, monkeypatch, capsys):
    blocks = FENCE.findall(PAGE.read_text(encoding="utf-8"))
    code = [body for lang, body in blocks if lang == "python"]
    shown = next(body for lang, body in blocks if lang == "" and body.startswith("M=1"))
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__doc_block__"}
    capsys.readouterr()
    with recording() as found:
        for body in code:
            exec(compile(body, "docs/latent_types.md", "exec"), namespace)
    assert not output_differences(shown, capsys.readouterr().out)
    check_warnings("docs/latent_types.md", "python", found)
    shell = []
    for lang, body in blocks:
        if lang != "bash":
            continue
        argv = shlex.split(body.replace("\\\n", " "))
        assert argv[0] == "genpqr"
        assert main(argv[1:]) == 0
        shell += printed(capsys.readouterr().out)
    check_warnings("docs/latent_types.md", "shell", shell)
    rewards, types = pd.read_csv(tmp_path / "fit-types" / "rewards.csv"), pd.read_csv(tmp_path / "fit-types" / "types.csv")
    assert sorted(rewards["type"].unique()) == [0, 1] and len(types) == 500
