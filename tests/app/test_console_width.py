"""The console fits a terminal (issue 32): every line that `genpqr demo` (what `make demo` runs),
the README's example, `genpqr fit`, `genpqr counterfactual` and `genpqr report` print on the
bundled data and the simulated bus panel is at most 100 characters, and a warning is one line
(its full text behind --verbose, which prints the fit's internals too)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from genpqr import datasets
from genpqr.app.cli import main
from genpqr.app.console import WIDTH, fit_width, short_warning

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.app.test_golden_outputs import BUS, _bus_panel  # noqa: E402

CHOICES = ["--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma", "0.9"]


def run(capsys, *argv, code=0) -> str:
    got = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert got == code, err
    return out + err


def too_long(text: str) -> list:
    # progress bars redraw one line with carriage returns; what a terminal keeps is the last draw
    lines = [line.rsplit("\r", 1)[-1] for line in text.splitlines()]
    return [f"{len(line)}: {line}" for line in lines if len(line) > WIDTH]


def test_fit_width_and_short_warnings():
    text = "  where it comes from: " + "word " * 50
    wrapped = fit_width(text).splitlines()
    assert max(map(len, wrapped)) <= WIDTH and len(wrapped) == 3
    assert all(line.startswith("      ") for line in wrapped[1:])  # under the line's indent, four more
    assert " ".join(" ".join(wrapped).split()) == " ".join(text.split())  # nothing lost
    long_path = "wrote " + "/x" * 70
    assert "    " + "/x" * 70 in fit_width(long_path).splitlines()  # a path is not broken (its own line)
    line = short_warning("CoverageWarning: the recovered reward (model.reward / reward_table(); genpqr fit: "
                         "rewards.csv) rests on rarely taken actions: at 12 states ...")
    assert line.startswith("  CoverageWarning: the recovered reward rests on rarely taken actions")  # no aside
    assert len(line) <= WIDTH and "(" not in line
    assert len(short_warning("W: " + "x " * 200)) <= WIDTH


@pytest.mark.slow
def test_every_console_line_fits_100_columns(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    problems = {}
    # make demo (a smaller problem: the lines are the same)
    problems["demo"] = too_long(run(capsys, "demo", "--out", "demo-output", "--episodes", 400))
    # the README's example, as written (Python block and command line)
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    problems["README python"] = too_long(done.stdout + done.stderr)
    choices = datasets.path("choices")
    text = run(capsys, "fit", choices, *CHOICES, "--normalization", "anchor:a", "--out", "fit-example")
    problems["README fit"] = too_long(text)
    assert "fit-example/:\n  model.joblib, rewards.csv" in text
    problems["counterfactual (nonparametric)"] = too_long(
        run(capsys, "counterfactual", "fit-example", "--reward-change", "b=0.5", "--out", "cf-example"))
    # the bus panel, with features: the structural table, the welfare in money
    _bus_panel(tmp_path)
    text = run(capsys, "fit", "bus.csv", *BUS, "--normalization", "anchor:replace", "--transition",
               "increment:4:replace", "--n-states", "40", "--features", "bus_features.csv", "--out", "bus-fit")
    problems["bus fit"] = too_long(text)
    assert "warning(s)" in text and "--verbose" in text  # warnings: one line each, the full text named
    assert "support rows" not in text and "stage 2" not in text  # internals: --verbose
    verbose = run(capsys, "fit", "bus.csv", *BUS, "--normalization", "anchor:replace", "--transition",
                  "increment:4:replace", "--n-states", "40", "--features", "bus_features.csv", "--out", "bus-fit",
                  "--verbose")
    problems["bus fit --verbose"] = too_long(verbose)
    assert "support rows" in verbose and "stage 2" in verbose and len(verbose) > len(text)
    text = run(capsys, "counterfactual", "bus-fit", "--parameter-change", "RC=*2", "--money-parameter", "RC",
               "--out", "bus-cf")
    problems["bus counterfactual"] = too_long(text)
    assert "welfare (RC units)" in text and (tmp_path / "bus-cf" / "welfare.csv").is_file()
    # genpqr report draws an experiment's folder: on a fit folder, its refusal fits too
    problems["report"] = too_long(run(capsys, "report", "bus-fit", code=2))
    assert not {k: v for k, v in problems.items() if v}, {k: v for k, v in problems.items() if v}
