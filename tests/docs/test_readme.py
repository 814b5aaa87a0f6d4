"""Every code block of README.md and of the pages it leads to runs, and prints what the page shows
(and the `genpqr` commands of examples/README.md run).

The pages: README.md and the docs pages that took over its content (:data:`PAGES`).

* ```python blocks are executed as they are, in order, in one namespace per page (in a temporary
  working directory); a ```text block right after a python block is the output that block prints,
  compared line by line with what it prints today (tests/doc_output.py: ``...`` for left-out text,
  numbers to the digits shown);
* ```bash blocks of `genpqr` commands run in-process through ``genpqr.app.cli.main`` in a
  temporary working directory holding a copy of ``examples/`` (so a command cannot write into
  the checkout; ``checkout_unchanged`` checks that none did). ``$(python -m genpqr.datasets
  NAME)`` is the shipped data set's path. A ```text block right after a bash block is what its
  (last) command prints, compared as above. Substitutions, each to keep the suite fast, on
  commands whose output the page does not show: ``--bootstrap 200`` becomes ``--bootstrap 20``
  and ``--n-jobs 2`` ``--n-jobs 1``; ``genpqr experiment`` runs its ``--tiny`` variant on one
  seed and one method (the full sweep takes hours);
* SKIPPED (justified): ``make demo`` (creates the virtual environment the tests already run
  in; ``genpqr demo`` itself is tested in test_cli.py), ``make test`` (the whole suite, this file
  included) and the install commands (building and installing the wheel into a fresh
  environment: ``make wheel-check``, a CI step, runs them and tests/app/test_wheel.py checks
  the result).
Other fenced blocks (data excerpts, printed output) are not code.
The warnings each run raises or prints are checked against the page's list in
tests/doc_warnings.py.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from genpqr import datasets
from genpqr.app.cli import main

from ..doc_output import output_differences
from ..doc_warnings import check_warnings, printed, recording

ROOT = Path(__file__).resolve().parents[2]
#: README.md and the pages that hold what it used to (every one with code).
PAGES = ("README.md", "docs/getting_started.md", "docs/install.md", "docs/python_api.md", "docs/your_data.md",
         "docs/experiments.md")
SKIP = {"make demo", "make test", "python -m pip install build", "python -m build",
        "python -m pip install dist/genpqr-0.1.0-py3-none-any.whl",
        "python -m pip install 'dist/genpqr-0.1.0-py3-none-any.whl[rl]'", "genpqr --version"}
SHIPPED = re.compile(r'"\$\(python -m genpqr\.datasets (\w+)\)"')
pytestmark = pytest.mark.usefixtures("checkout_unchanged")
FENCE = re.compile(r"```([a-z]*)\n(.*?)```", re.S)


def _blocks(path: Path):
    return [(lang, body) for lang, body in FENCE.findall(path.read_text(encoding="utf-8"))]


def _with_output(path: Path):
    """``(language, code, shown output or None)`` of the page's python and bash blocks: the output
    is a ```text block that comes next (prose between them, no other block)."""
    fences = list(FENCE.finditer(path.read_text(encoding="utf-8")))
    found = []
    for m, after in zip(fences, [*fences[1:], None]):
        if m.group(1) in ("python", "bash"):
            shown = after.group(2) if after is not None and after.group(1) == "text" else None
            found.append((m.group(1), m.group(2), shown))
    return found


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


def _adapt(argv: list[str], outs: list, shown: bool = False) -> list[str]:
    """The substitutions listed in the module docstring (none on a command whose output is shown)."""
    argv = list(argv)
    if "--out" in argv:
        outs.append(argv[argv.index("--out") + 1])
    if shown:
        return argv
    for flag, value in (("--bootstrap", "20"), ("--n-jobs", "1")):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
    if argv[0] == "experiment":
        if "--seeds" in argv:
            argv[argv.index("--seeds") + 1] = "1"
        argv += ["--tiny", "--quiet", "--methods", "GenPQR (BC, GBT)"]
    if argv[0] == "fit":
        argv.append("--quiet")
    return argv


def _in_scratch_folder(tmp: Path, monkeypatch) -> None:
    """Work in ``tmp``, beside a copy of the checkout's examples/ (the data the commands read)."""
    shutil.copytree(ROOT / "examples", tmp / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp)


@pytest.mark.parametrize("page", [p for p in PAGES if "```python" in (ROOT / p).read_text(encoding="utf-8")])
def test_python_blocks_run_and_print_what_the_page_shows(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"doc_{Path(page).stem}"}
    compared = 0
    with recording() as found:
        for i, (lang, body, shown) in enumerate(_with_output(ROOT / page)):
            if lang != "python":
                continue
            capsys.readouterr()
            exec(compile(body, f"{page} python block {i}", "exec"), namespace)
            if shown is not None:
                differences = output_differences(shown, capsys.readouterr().out)
                assert not differences, f"{page}, python block {i} prints otherwise than shown: {differences}"
                compared += 1
    assert compared >= 1, f"{page}: no python block shows its output"
    check_warnings(page, "python", found)
    if page == "docs/python_api.md":
        assert (tmp_path / "model.joblib").exists()


@pytest.mark.parametrize("readme", [*(p for p in PAGES if "```bash" in (ROOT / p).read_text(encoding="utf-8")),
                                    "examples/README.md"])
def test_readme_shell_blocks_run(readme, tmp_path, monkeypatch, capsys):
    tagged_only = readme != "examples/README.md"
    shown_after = {_commands(body)[-1]: shown for lang, body, shown in _with_output(ROOT / readme)
                   if lang == "bash" and shown is not None}
    commands = _shell_commands(ROOT / readme, tagged_only=tagged_only)
    assert commands, f"no commands found in {readme}"
    _in_scratch_folder(tmp_path, monkeypatch)
    outs: list = []
    ran = 0
    with recording() as found:
        for command in commands:
            if command in SKIP:
                continue
            shown = shown_after.get(command)
            command = SHIPPED.sub(lambda m: shlex.quote(str(datasets.path(m.group(1)))), command)
            argv = shlex.split(command)
            assert argv[0] == "genpqr", f"{readme}: unexpected command {command!r} (run it here or list it in SKIP)"
            code = main(_adapt(argv[1:], outs, shown=shown is not None))
            console = capsys.readouterr()
            assert code == 0, f"{readme}: {command!r} failed: {console.err}"
            if shown is not None:
                differences = output_differences(shown, console.out)
                assert not differences, f"{readme}: {command!r} prints otherwise than shown: {differences}"
            found += printed(console.out + console.err)
            ran += 1
    assert ran >= 1
    for out in outs:
        assert any((tmp_path / out).iterdir())
    check_warnings(readme, "shell", found)
    if readme == "examples/README.md":
        check_continuous_claims(tmp_path / "fit-lqg")


def test_readme_is_short_and_starts_with_make_demo_and_make_test():
    """The README is an overview (at most 120 lines), its quick start the two make commands, its
    picture a file of the repository; everything else is in the documentation site."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert [body for lang, body in FENCE.findall(quick)] == ["make demo\nmake test\n"]
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text, re.S):
        assert (ROOT / image).is_file(), image
    for link in re.findall(r"\]\((docs/[\w/.-]+\.md)\)", text):
        assert (ROOT / link).is_file(), link


def test_your_data_shows_the_data_file():
    """The excerpt of your_data.md is the first rows of examples/data/choices.csv."""
    text = (ROOT / "docs" / "your_data.md").read_text(encoding="utf-8")
    excerpt = next(b for lang, b in FENCE.findall(text) if b.startswith("episode,time,state,action"))
    head = (ROOT / "examples" / "data" / "choices.csv").read_text().splitlines()
    assert not output_differences(excerpt, "\n".join(head[:len(excerpt.strip().splitlines())])), excerpt


def _examples_page():
    text = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    return text, [body for lang, body in _blocks(ROOT / "examples" / "README.md") if lang == ""]


def _page_fit_command() -> list:
    command = next(c for c in _shell_commands(ROOT / "examples" / "README.md", tagged_only=False)
                   if c.startswith("genpqr fit examples/data/choices.csv"))
    return shlex.split(command)[1:]


@pytest.mark.slow
def test_examples_readme_shows_what_its_command_prints(tmp_path, monkeypatch, capsys):
    """The printed block of examples/README.md is what its command prints today, every line, with
    the numbers to the digits shown (tests/doc_output.py): the full 200-replicate bootstrap, run
    with one worker (the replicates do not depend on --n-jobs)."""
    _, blocks = _examples_page()
    shown = next(b for b in blocks if b.startswith("genpqr fit: 6000 choices"))
    argv = _page_fit_command()
    argv[argv.index("--n-jobs") + 1] = "1"
    _in_scratch_folder(tmp_path, monkeypatch)
    assert main(argv) == 0
    assert not output_differences(shown, capsys.readouterr().out)


def test_examples_readme_shows_the_data_file_and_the_error_it_prints(tmp_path, monkeypatch, capsys):
    """The CSV excerpt is the file's first rows, and the bad-input message is what the page's
    command prints with an anchor that is never taken."""
    _, blocks = _examples_page()
    excerpt = next(b for b in blocks if b.startswith("episode,time,state,action,outcome"))
    head = (ROOT / "examples" / "data" / "choices.csv").read_text().splitlines()
    assert not output_differences(excerpt, "\n".join(head)), excerpt
    error = next(b for b in blocks if b.startswith("genpqr fit: error:"))
    argv = _page_fit_command()
    argv[argv.index("--normalization") + 1] = "anchor:z"
    _in_scratch_folder(tmp_path, monkeypatch)
    assert main(argv) == 2
    assert not output_differences(error, capsys.readouterr().err)


def check_continuous_claims(folder: Path) -> None:
    """examples/README.md "Continuous actions": the reward's error, the truth's variance and the
    correlation it states, and the class of the saved model, on the page's command's output."""
    import numpy as np
    import pandas as pd

    import genpqr

    text, _ = _examples_page()
    mse, var, corr = map(float, re.search(r"mean squared error ([\d.]+) \(the true reward's variance is ([\d.]+); "
                                          r"correlation ([\d.]+)\)", " ".join(text.split())).groups())
    reward = pd.read_csv(folder / "rewards.csv").reward.to_numpy()
    truth = pd.read_csv(ROOT / "examples" / "data" / "lqg.csv").true_reward.to_numpy()
    assert np.mean((reward - truth) ** 2) == pytest.approx(mse, abs=5e-4)
    assert truth.var() == pytest.approx(var, abs=5e-3)
    assert np.corrcoef(reward, truth)[0, 1] == pytest.approx(corr, abs=5e-4)
    model_class, space_class = re.search(r"`model.joblib` holds a `genpqr.(\w+)` whose action space is a "
                                         r"`genpqr.(\w+)`", " ".join(text.split())).groups()
    model = genpqr.load(folder / "model.joblib")
    assert type(model) is getattr(genpqr, model_class)
    assert type(model.action_space_) is getattr(genpqr, space_class)


def test_the_readme_picture_is_made_by_its_script(tmp_path):
    """docs/readme.png (the README's and the site's front page's picture) is what
    examples/readme_figure.py draws: the script runs (a short bootstrap here) and draws a picture
    of the same size."""
    import subprocess
    import sys

    import matplotlib.image

    out = tmp_path / "readme.png"
    env = {"PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "readme_figure.py"), "--out", str(out),
                           "--n-boot", "10"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert matplotlib.image.imread(out).shape == matplotlib.image.imread(ROOT / "docs" / "readme.png").shape
