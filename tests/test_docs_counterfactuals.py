"""Every command on docs/counterfactuals.md and docs/train_on_recovered_reward.md runs.

Python blocks run as they are; `genpqr` / `echo` shell blocks run in a scratch folder; the
`python examples/...` and `python benchmarks/...` commands run through their ``main`` with a
small budget (their full runs take minutes; the figures on the pages come from full runs, and
raise the same warnings). Every warning raised or printed is checked against the page's list
in tests/doc_warnings.py.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .doc_warnings import check_warnings, printed, recording

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("counterfactuals.md", "train_on_recovered_reward.md")
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


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = [body for lang, body in blocks(page) if lang == "python"]
    with recording() as found:
        for body in code:
            exec(compile(body, f"docs/{page}", "exec"), {"__name__": "__doc_block__"})
    check_warnings(f"docs/{page}", "python", found)


@pytest.mark.parametrize("page", PAGES)
def test_shell_commands_run(page, tmp_path, capsys):
    commands = shell_commands(page)
    assert commands
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    shell: list = []
    for cmd in commands:
        script = next((s for s in SMALL if s in cmd), None)
        if script is not None:
            out = ["--out", str(tmp_path / "docs")] if "engine_replacement" in script else []
            with recording() as found:
                load_script(script).main(SMALL[script] + out)
            check_warnings(f"docs/{page}", script, found)
            continue
        assert cmd.startswith(("genpqr ", "echo ")), cmd
        genpqr_cmd = cmd.replace("genpqr ", f"{sys.executable} -m genpqr ", 1) if cmd.startswith("genpqr") else cmd
        proc = subprocess.run(["bash", "-c", genpqr_cmd], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"{cmd}\n{proc.stderr}"
        shell.append(printed(proc.stdout + proc.stderr))
    if shell:  # the page's genpqr commands
        check_warnings(f"docs/{page}", "shell", [w for found in shell for w in found])
