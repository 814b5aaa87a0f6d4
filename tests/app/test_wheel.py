"""The package as a user installs it: `make wheel-check` (a CI step) builds the sdist and the wheel,
installs the wheel into fresh virtual environments and runs this file with GENPQR_WHEEL_CHECK
naming its folder (skipped otherwise):

* ``dist/``: the sdist and the wheel (``python -m build``: the wheel is built from the sdist);
* ``venv/``: a fresh environment holding the wheel with the extras ``[dask,rl]`` (the dev pins
  as constraints);
* ``venv-adapters/`` and ``adapters-install.json``: the wheel with ``[adapters]`` in a fresh
  environment layered on the adapters environment (``make test-adapters``; their gymnasium pins
  cannot share the other one), and pip's report of what it installed.

The installed command runs in a scratch folder outside the checkout with no PYTHONPATH, so it can
only use what the wheel holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = os.environ.get("GENPQR_WHEEL_CHECK")
pytestmark = pytest.mark.skipif(not CHECK, reason="run by `make wheel-check` (GENPQR_WHEEL_CHECK unset)")
FOLDER = (ROOT / CHECK) if CHECK else None
# the files of a source checkout that the sdist leaves out
NOT_IN_SDIST = {".gitignore"}


def _version() -> str:
    import ast

    tree = ast.parse((ROOT / "src" / "genpqr" / "__init__.py").read_text(encoding="utf-8"))
    return next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", None) == "__version__")


def _tracked(under: str = "") -> set:
    """The checkout's files (git's tracked files when it is a git checkout, else the files on disk)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", under or "."], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode()
        return {name for name in out.split("\0") if name and (ROOT / name).is_file()}
    except (OSError, subprocess.CalledProcessError):
        base = ROOT / under
        return {str(p.relative_to(ROOT)) for p in base.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and ".git" not in p.parts}


def _archive(suffix: str) -> Path:
    found = sorted((FOLDER / "dist").glob(f"genpqr-*{suffix}"))
    assert len(found) == 1, f"expected one genpqr-*{suffix} in {FOLDER / 'dist'}, found {found}"
    return found[0]


def _wheel_metadata():
    with zipfile.ZipFile(_archive(".whl")) as wheel:
        names = set(wheel.namelist())
        info = f"genpqr-{_version()}.dist-info"
        metadata = Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    return names, info, metadata, entry_points


def test_wheel_holds_every_package_file_its_templates_and_data_sets():
    names, info, _, _ = _wheel_metadata()
    package = {name.removeprefix("src/") for name in _tracked("src/genpqr")}
    assert package - names == set(), "files of src/genpqr missing from the wheel"
    assert {n for n in names if not n.startswith(info)} == package, "the wheel holds files outside src/genpqr"
    for needed in ("genpqr/app/templates/discrete.html", "genpqr/app/templates/report.css",
                   "genpqr/datasets/data/choices.csv", "genpqr/datasets/data/features.csv",
                   "genpqr/datasets/data/lqg.csv", f"{info}/licenses/LICENSE"):
        assert needed in names


def test_wheel_metadata_names_the_license_extras_and_command():
    _, _, metadata, entry_points = _wheel_metadata()
    assert metadata["Name"] == "genpqr" and metadata["Version"] == _version()
    assert metadata["License-Expression"] == "MIT" and metadata["License-File"] == "LICENSE"
    assert {"dask", "rl", "adapters", "torch", "parquet"} <= set(metadata.get_all("Provides-Extra"))
    adapters = {r.split(">")[0].split("=")[0].strip() for r in metadata.get_all("Requires-Dist")
                if 'extra == "adapters"' in r}
    assert adapters == {"minari", "d3rlpy", "imitation"}
    assert "genpqr = genpqr.app.cli:main" in entry_points
    assert "genpqr" in metadata.get_payload() and metadata["Description-Content-Type"] == "text/markdown"


def test_sdist_holds_the_checkout_its_tests_and_docs():
    with tarfile.open(_archive(".tar.gz")) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    missing = _tracked() - NOT_IN_SDIST - names
    assert missing == set(), f"tracked files missing from the sdist: {sorted(missing)[:20]}"
    assert {"LICENSE", "tests/conftest.py", "docs/counterfactuals.md", "examples/data/choices.csv"} <= names


def _run(argv, cwd, **kwargs):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, f"{argv}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


SMOKE_RL_DASK = """
import sys
from pathlib import Path
import numpy as np
import genpqr, gymnasium, stable_baselines3, distributed
import genpqr.scale
from genpqr import datasets
from genpqr.counterfactuals import RecoveredRewardWrapper, RewardFunction

assert Path(genpqr.__file__).is_relative_to(Path(sys.prefix)), genpqr.__file__   # the wheel, not the checkout
assert datasets.load("choices").shape == (6000, 5)
model = genpqr.load("fit/model.joblib")
print(RewardFunction(model)(np.array([[0], [5]]), np.array(["b", "c"])))
assert issubclass(RecoveredRewardWrapper, gymnasium.Wrapper)
"""


def test_installed_wheel_runs_the_command_on_its_bundled_data(tmp_path):
    venv = FOLDER / "venv" / "bin"
    assert _run([str(venv / "genpqr"), "--version"], tmp_path).strip() == f"genpqr {_version()}"
    paths = dict(line.split() for line in _run([str(venv / "python"), "-m", "genpqr.datasets"], tmp_path)
                 .splitlines())
    assert set(paths) == {"choices", "features", "lqg"}
    out = _run([str(venv / "genpqr"), "fit", paths["choices"], "--episode", "episode", "--time", "time",
                "--state", "state", "--action", "action", "--gamma", "0.9", "--normalization", "anchor:a",
                "--features", paths["features"], "--out", "fit", "--quiet"], tmp_path, timeout=300)
    assert "bonus:" in out and "level:" in out
    for name in ("model.joblib", "rewards.csv", "parameters.csv", "config.json", "report.html"):
        assert (tmp_path / "fit" / name).stat().st_size > 0, name
    assert "<html" in (tmp_path / "fit" / "report.html").read_text(encoding="utf-8")[:500]  # the templates
    _run([str(venv / "python"), "-c", SMOKE_RL_DASK], tmp_path, timeout=300)


SMOKE_ADAPTERS = """
import sys
from pathlib import Path
import numpy as np
import d3rlpy, minari
from imitation.data.types import Trajectory
import genpqr
from genpqr.data import from_imitation

assert Path(genpqr.__file__).is_relative_to(Path(sys.prefix)), genpqr.__file__
data = from_imitation([Trajectory(obs=np.arange(4.0)[:, None], acts=np.array([0, 1, 1]), infos=None, terminal=True)])
assert data.n == 3, data
"""


def test_installed_wheel_with_the_adapters_extra(tmp_path):
    report = json.loads((FOLDER / "adapters-install.json").read_text())
    installed = {item["metadata"]["name"].lower() for item in report["install"]}
    assert "genpqr" in installed
    assert installed - {"genpqr", "pip", "setuptools", "wheel"} == set(), (
        "[adapters] needs packages the pinned adapters environment lacks (requirements-adapters.txt)")
    venv = FOLDER / "venv-adapters" / "bin"
    assert _run([str(venv / "genpqr"), "--version"], tmp_path).strip() == f"genpqr {_version()}"
    _run([str(venv / "python"), "-c", SMOKE_ADAPTERS], tmp_path, timeout=300)


def test_not_run_from_the_checkout_by_accident():
    """The check's environments are not the interpreter running this file."""
    assert not Path(sys.prefix).resolve().is_relative_to(FOLDER.resolve())
