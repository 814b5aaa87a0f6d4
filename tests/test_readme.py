"""Every code block of README.md runs (and the `genpqr` commands of examples/README.md).

* ```python blocks are executed as they are (in a temporary working directory);
* ```bash blocks of `genpqr` commands run in-process through ``genpqr.app.cli.main`` with the
  repository root as working directory. Substitutions, each to keep the suite fast and the
  repository clean: ``--out`` points into a temporary folder; ``--bootstrap 200`` becomes
  ``--bootstrap 20`` and ``--n-jobs 2`` ``--n-jobs 1``; ``genpqr experiment`` runs its
  ``--tiny`` variant on one seed and one method (the full sweep takes hours);
* SKIPPED (justified): ``make demo`` (creates the virtual environment the tests already run
  in; ``genpqr demo`` itself is tested in test_cli.py) and ``make test`` (the whole suite,
  this file included).
Other fenced blocks (data excerpts, printed output) are not code.
The warnings each run raises or prints are checked against the page's list in
tests/doc_warnings.py (none for these pages).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from genpqr.app.cli import main

from .doc_warnings import check_warnings, printed, recording

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"make demo", "make test"}
FENCE = re.compile(r"```([a-z]*)\n(.*?)```", re.S)


def _blocks(path: Path):
    return [(lang, body) for lang, body in FENCE.findall(path.read_text(encoding="utf-8"))]


def _commands(body: str) -> list[str]:
    """Shell lines with backslash continuations joined; trailing comments dropped."""
    joined = body.replace("\\\n", " ")
    return [line.split("#")[0].strip() for line in joined.splitlines() if line.split("#")[0].strip()]


def _shell_commands(path: Path, tagged_only: bool) -> list[str]:
    out = []
    for lang, body in _blocks(path):
        command = re.match(r"genpqr [a-z]+\s", body.lstrip())  # not printed output ("genpqr fit: ...")
        if lang == "bash" or (not tagged_only and lang == "" and command):
            out += _commands(body)
    return out


def _adapt(argv: list[str], tmp: Path, outs: dict) -> list[str]:
    """The substitutions listed in the module docstring."""
    argv = list(argv)
    for flag, value in (("--bootstrap", "20"), ("--n-jobs", "1")):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
    if "--out" in argv:
        i = argv.index("--out") + 1
        outs[argv[i]] = str(tmp / argv[i].replace("/", "_"))
        argv[i] = outs[argv[i]]
    if argv[0] == "experiment":
        if "--seeds" in argv:
            argv[argv.index("--seeds") + 1] = "1"
        argv += ["--tiny", "--quiet", "--methods", "GenPQR (BC, GBT)"]
    if argv[0] == "report":
        argv[1] = outs.get(argv[1], argv[1])
    if argv[0] == "fit":
        argv.append("--quiet")
    return argv


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    blocks = [body for lang, body in _blocks(ROOT / "README.md") if lang == "python"]
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    with recording() as found:
        for i, body in enumerate(blocks):
            exec(compile(body, f"README.md python block {i}", "exec"), {"__name__": f"readme_{i}"})
    assert (tmp_path / "model.joblib").exists()
    check_warnings("README.md", "python", found)


@pytest.mark.parametrize("readme", ["README.md", "examples/README.md"])
def test_readme_shell_blocks_run(readme, tmp_path, monkeypatch, capsys):
    commands = _shell_commands(ROOT / readme, tagged_only=readme == "README.md")
    assert commands, f"no commands found in {readme}"
    monkeypatch.chdir(ROOT)
    outs: dict = {}
    ran = 0
    with recording() as found:
        for command in commands:
            if command in SKIP:
                continue
            argv = shlex.split(command)
            assert argv[0] == "genpqr", f"{readme}: unexpected command {command!r} (run it here or list it in SKIP)"
            code = main(_adapt(argv[1:], tmp_path, outs))
            console = capsys.readouterr()
            assert code == 0, f"{readme}: {command!r} failed: {console.err}"
            found += printed(console.out + console.err)
            ran += 1
    assert ran >= 1
    for out in outs.values():
        assert any(Path(out).iterdir())
    check_warnings(readme, "shell", found)


def test_examples_readme_prints_what_the_fit_estimates(tmp_path):
    """The parameter lines printed in examples/README.md (``NAME: EST (SE BOOT, bootstrap)  [LO, HI]
    (OPG SE SE)``) are what its command estimates today (estimate and OPG SE to the printed digits),
    so the page cannot go stale silently."""
    text = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    printed = re.findall(r"^\s+(\w+): (-?[\d.]+) \(SE [\d.]+, bootstrap\)  \[[-\d., ]+\]  \(OPG SE ([\d.]+)\)",
                         text, re.M)
    assert {name for name, _, _ in printed} == {"bonus", "level"}
    command = next(c for c in _shell_commands(ROOT / "examples" / "README.md", tagged_only=False)
                   if c.startswith("genpqr fit"))
    argv = shlex.split(command)[1:]
    argv = [a for i, a in enumerate(argv) if a != "--bootstrap" and (i == 0 or argv[i - 1] != "--bootstrap")]
    assert main(_adapt(argv, tmp_path, {}) + ["--quiet"]) == 0
    import pandas as pd

    table = pd.read_csv(next(tmp_path.glob("*/parameters.csv"))).set_index("parameter")
    for name, est, se in printed:
        assert table.loc[name, "estimate"] == pytest.approx(float(est), abs=0.6 * 10 ** -(len(est.split(".")[1])))
        assert table.loc[name, "std_error"] == pytest.approx(float(se), abs=0.6 * 10 ** -(len(se.split(".")[1])))
