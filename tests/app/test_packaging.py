"""What the wheel is made from, checked without building it (`make wheel-check` builds and installs
it: tests/app/test_wheel.py): the license, the package data globs, the extras the docs name, the
shipped data sets (genpqr.datasets) and their loader."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from genpqr import datasets, from_pandas
from genpqr.datasets.__main__ import main as datasets_main

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE = ROOT / "src" / "genpqr"


def test_license_is_mit_and_shipped():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the genpqr developers\n")
    assert PYPROJECT["project"]["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]


def test_package_data_globs_cover_every_data_file_of_the_package():
    """A template or data file not matched by ``[tool.setuptools.package-data]`` would be left out
    of the wheel (and `genpqr fit` would fail there only)."""
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["genpqr"]
    files = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert any(f.startswith("app/templates/") for f in files) and any(f.startswith("datasets/data/") for f in files)
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []


def test_version_has_one_source():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "genpqr.__version__"}


def _requirement_names(requirements):
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_extras_named_in_the_docs_exist():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert _requirement_names(extras["adapters"]) == {"minari", "d3rlpy", "imitation"}
    assert _requirement_names(extras["rl"]) == {"gymnasium", "stable-baselines3"}
    assert _requirement_names(extras["dask"]) == {"distributed"}
    pages = [ROOT / "README.md", ROOT / "examples" / "README.md", *(ROOT / "docs").glob("*.md")]
    pattern = re.compile(r"pip install [^`\n]*?\[([a-z][a-z0-9,-]*)\]|`\[([a-z][a-z0-9,-]*)\]`")  # an extra starts with a letter
    named = {extra for page in pages for groups in pattern.findall(page.read_text(encoding="utf-8"))
             for extra in ",".join(groups).split(",") if extra}
    assert {"rl", "dask", "adapters"} <= named
    assert named <= set(extras), f"the docs name extras pyproject.toml lacks: {named - set(extras)}"


def test_docs_name_the_wheel_of_this_version():
    from genpqr import __version__

    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    names = {m for page in pages for m in re.findall(r"genpqr-([\w.]+?)(?:-py3-none-any\.whl|\.tar\.gz)",
                                                     page.read_text(encoding="utf-8"))}
    assert names == {__version__}


def test_build_tools_are_pinned_and_ci_checks_the_wheel():
    pins = dict(line.split("==") for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert pins["build"] == "1.6.1" and pins["twine"] == "7.0.0"
    assert "make wheel-check" in (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^wheel-check:", (ROOT / "Makefile").read_text(), re.M)


@pytest.mark.parametrize("name", sorted(datasets.DATASETS))
def test_shipped_data_sets_are_the_examples_files(name):
    """The package's copies are the files examples/README.md and the docs run on
    (examples/make_example_data.py and make_lqg_data.py write both)."""
    shipped = datasets.path(name)
    assert shipped.is_file() and shipped.is_relative_to(PACKAGE / "datasets" / "data")
    assert shipped.read_bytes() == (ROOT / "examples" / "data" / datasets.DATASETS[name]).read_bytes()


def test_loader_returns_the_documented_tables():
    choices, features, lqg = (datasets.load(name) for name in ("choices", "features", "lqg"))
    assert choices.shape == (6000, 5) and list(choices.columns) == ["episode", "time", "state", "action", "outcome"]
    assert choices.episode.nunique() == 600 and sorted(choices.action.unique()) == ["a", "b", "c"]
    assert features.shape == (45, 4) and list(features.columns) == ["state", "action", "bonus", "level"]
    assert lqg.shape == (2000, 5) and list(lqg.columns) == ["episode", "time", "s", "a", "true_reward"]
    data = from_pandas(choices, episode="episode", time="time", state="state", action="action")
    assert data.n == 6000
    with pytest.raises(ValueError, match=r"name must be one of \['choices', 'features', 'lqg'\], got 'bus'"):
        datasets.path("bus")


def test_datasets_command_prints_paths(capsys):
    assert datasets_main(["choices"]) == 0
    assert capsys.readouterr().out == f"{datasets.path('choices')}\n"
    assert datasets_main([]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["choices", "features", "lqg"]
    assert datasets_main(["bus"]) == 2
    assert "unknown data set(s) ['bus']" in capsys.readouterr().err


def test_loader_frame_is_a_plain_pandas_frame():
    assert isinstance(datasets.load("features"), pd.DataFrame)
