"""Every command on docs/counterfactuals.md and docs/train_on_recovered_reward.md runs.

Everything runs in a scratch folder holding a copy of examples/ (``checkout_unchanged``: the
checkout is left as it was). Python blocks run as they are; `genpqr` / `echo` shell blocks as
shell commands; the `python examples/...` and `python benchmarks/...` commands run through
their ``main`` with a small budget and their default output folders (their full runs take
minutes; the figures on the pages come from full runs, and raise the same warnings). Every
warning raised or printed is checked against the page's list in tests/doc_warnings.py. The
rows of the pages' result tables that do not depend on the budget are compared with what the
small run prints (tests/doc_output.py); the demand-curve table with the results file it comes from.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..doc_output import output_differences
from ..doc_warnings import check_warnings, printed, recording

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("counterfactuals.md", "train_on_recovered_reward.md")
pytestmark = pytest.mark.usefixtures("checkout_unchanged")
SMALL = {
    "examples/engine_replacement_counterfactual.py": ["--bootstrap", "2", "--factors", "0.9,1.1"],
    "examples/train_on_recovered_reward.py": ["--timesteps", "512"],  # the full run's data: its warnings
    "benchmarks/soft_fqi_synthetic.py": ["--seeds", "1", "--n-train", "60", "--n-test", "20", "--n-states", "100",
                                         "--n-iterations", "5", "--n-value-starts", "10", "--n-rollouts", "2",
                                         "--horizon", "5"],
}


def blocks(page):
    text = (ROOT / "docs" / page).read_text()
    return re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S)


def shell_commands(page):
    out = []
    for lang, body in blocks(page):
        if lang:
            continue
        for cmd in body.replace("\\\n", " ").splitlines():
            if cmd.strip():
                out.append(cmd.strip())
    return out


def load_script(rel):
    spec = importlib.util.spec_from_file_location(Path(rel).stem + "_doc", ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shown_outputs(page) -> dict:
    """``{python block: the text block right after it}``: what the page says the block prints."""
    found = blocks(page)
    return {body: found[i + 1][1] for i, (lang, body) in enumerate(found[:-1])
            if lang == "python" and found[i + 1][0] == "text"}


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run(page, tmp_path, monkeypatch, capsys):
    """Every python block runs, and a block followed by a ``text`` block prints what it shows
    (tests/doc_output.py: numbers to their shown digits)."""
    monkeypatch.chdir(tmp_path)
    code = [body for lang, body in blocks(page) if lang == "python"]
    shown = shown_outputs(page)
    namespace = {"__name__": "__doc_block__"}  # as a reader runs them: a block uses the names above it
    with recording() as found:
        for body in code:
            capsys.readouterr()
            exec(compile(body, f"docs/{page}", "exec"), namespace)
            if body in shown:
                differences = output_differences(shown[body], capsys.readouterr().out)
                assert not differences, "\n".join(differences)
    check_warnings(f"docs/{page}", "python", found)


def budget_independent_rows(table: str) -> str:
    """The rows of train_on_recovered_reward.md's table that do not depend on PPO's budget."""
    return "\n".join(line for line in table.splitlines() if line.startswith("|") and "PPO" not in line)


@pytest.mark.parametrize("page", PAGES)
def test_shell_commands_run(page, tmp_path, capsys, monkeypatch):
    commands = shell_commands(page)
    assert commands
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    shell: list = []
    for cmd in commands:
        script = next((s for s in SMALL if s in cmd), None)
        if script is not None:
            capsys.readouterr()
            with recording() as found:
                load_script(script).main(SMALL[script])
            check_warnings(f"docs/{page}", script, found)
            if script == "examples/train_on_recovered_reward.py":
                table = re.search(r"^\| environment \| policy \|.*?\n\n", (ROOT / "docs" / page).read_text(),
                                  re.S | re.M).group(0)
                assert not output_differences(budget_independent_rows(table),
                                              budget_independent_rows(capsys.readouterr().out))
            continue
        assert cmd.startswith(("genpqr ", "echo ")), cmd
        genpqr_cmd = cmd.replace("genpqr ", f"{sys.executable} -m genpqr ", 1) if cmd.startswith("genpqr") else cmd
        proc = subprocess.run(["bash", "-c", genpqr_cmd], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"{cmd}\n{proc.stderr}"
        shell.append(printed(proc.stdout + proc.stderr))
    if shell:  # the page's genpqr commands
        check_warnings(f"docs/{page}", "shell", [w for found in shell for w in found])


def test_demand_curve_table_is_its_results_file():
    """counterfactuals.md's demand-curve table shows docs/results/counterfactuals/demand.csv (the run
    the page's figure comes from) to its digits."""
    import pandas as pd

    text = (ROOT / "docs" / "counterfactuals.md").read_text()
    shown = re.search(r"\| RC x \| true rate.*?\n\n", text, re.S).group(0)
    frame = pd.read_csv(ROOT / "docs" / "results" / "counterfactuals" / "demand.csv")
    lines = ["| RC x | true rate (%) | GenPQR rate (%) | 95% interval (%) | policy gap vs mean-zero |", "|---|---|---|---|---|"]
    lines += [f"| {r.factor:.2f} | {100 * r.rate_true:.3f} | {100 * r.rate_hat:.3f} | [{100 * r.rate_lo:.3f}, "
              f"{100 * r.rate_hi:.3f}] | {r.gap:.2g} |" for r in frame.itertuples()]
    assert not output_differences(shown, "\n".join(lines))
