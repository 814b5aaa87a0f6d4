"""Imports on demand (issue 31, item 3): ``import genpqr``, ``genpqr --version`` and ``--help``
import no scikit-learn, SciPy's statistics, pandas, PyArrow or torch; what the package exports
stays the same names bound to the same objects, loaded when first read (:mod:`genpqr.lazy`).

Each check runs in a fresh interpreter (``sys.modules`` of this test process holds everything
the other tests imported). Which modules are loaded does not depend on the machine; how long it
takes does, and is measured by ``benchmarks/import_time.py``, not here.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("sklearn", "scipy", "scipy.stats", "pandas", "pyarrow", "torch", "matplotlib", "jinja2", "joblib")
ENTRY = "import sys; from genpqr.app.cli import main; code = main(sys.argv[1:])"


def _loaded_after(code: str, *args: str) -> tuple[set, str]:
    """The top-level names in ``sys.modules`` of a fresh interpreter after it ran ``code`` (with
    ``args`` as ``sys.argv[1:]``), and what it printed."""
    script = textwrap.dedent(f"""
        import io, json, sys, contextlib
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec({code!r})
        except SystemExit:
            pass
        print(json.dumps([sorted(sys.modules), out.getvalue()]))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          check=True)
    modules, printed = json.loads(done.stdout.strip().splitlines()[-1])
    return set(modules), printed


def _heavy(modules: set) -> list:
    return [m for m in HEAVY if m in modules]


def test_import_genpqr_imports_nothing_heavy():
    modules, _ = _loaded_after("import genpqr; genpqr.__version__; dir(genpqr); genpqr.GenPQRWarning")
    assert _heavy(modules) == []
    assert "numpy" not in modules  # the root package binds its names on first use


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["fit", "--help"], ["counterfactual", "--help"],
                                  ["experiment", "--help"], ["demo", "--help"], ["report", "--help"]])
def test_the_command_line_answers_help_and_version_without_the_library(argv):
    modules, printed = _loaded_after(ENTRY, *argv)
    assert printed.startswith("genpqr " if argv == ["--version"] else "usage: genpqr")
    assert _heavy(modules) == [], argv
    if argv == ["--version"]:
        assert "numpy" not in modules and "genpqr.app.config" not in modules


def test_python_dash_m_genpqr_version_is_light():
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    script = ("import runpy, sys\nsys.argv = ['genpqr', '--version']\ntry:\n    runpy.run_module('genpqr', "
              "run_name='__main__', alter_sys=True)\nexcept SystemExit as e:\n    code = e.code\n"
              "print(code, sorted(m for m in " + repr(HEAVY) + " if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.splitlines() == [f"genpqr {_version()}", "0 []"]


def _version() -> str:
    import genpqr

    return genpqr.__version__


def test_the_root_package_exports_every_name_of_its_all_on_first_use():
    modules, printed = _loaded_after(
        "import genpqr; ns = {}; exec('from genpqr import *', ns); "
        "print(all(ns[n] is getattr(genpqr, n) for n in genpqr.__all__), set(genpqr.__all__) <= set(dir(genpqr)), "
        "genpqr.GenPQR.__module__, genpqr.stage2.__name__)")
    assert printed.split() == ["True", "True", "genpqr.estimator._estimator", "genpqr.stage2"]
    assert "sklearn" in modules  # the star import reads NotFittedError, scikit-learn's subclass


def test_reading_genpqr_imports_no_scikit_learn():
    """``GenPQR`` follows scikit-learn's contract without importing it (a ``LightEstimator``)."""
    modules, printed = _loaded_after("import genpqr; m = genpqr.GenPQR(gamma=0.5); print(sorted(m.get_params())[:2])")
    assert printed.strip() == "['clip', 'continuous']"
    assert "sklearn" not in modules and "scipy.stats" not in modules


# A tabular fit (the library's exact path, and ``genpqr fit`` on tabular states) needs neither
# scikit-learn nor SciPy's statistics: importing them costs more than the fit (issue 31).
TABULAR_DATA = """
import numpy as np
rng = np.random.default_rng(0)
n_episodes, horizon, S = 60, 8, 6
episode = np.repeat(np.arange(n_episodes), horizon)
time = np.tile(np.arange(horizon), n_episodes)
state = rng.integers(0, S, episode.size)
action = (rng.random(episode.size) < 0.3 + 0.1 * state).astype(int)
"""


def test_a_tabular_fit_imports_no_scikit_learn():
    code = TABULAR_DATA + """
import pandas as pd
from genpqr import GenPQR, from_pandas, normalization as N
frame = pd.DataFrame({"episode": episode, "time": time, "state": state, "action": action})
data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
model = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", random_state=0, progress=False).fit(data)
model.get_params(); model.set_params(gamma=0.9)
print(model.reward(np.arange(S)).shape)
"""
    modules, printed = _loaded_after(code)
    assert printed.split() == ["(6,", "2)"]
    assert "sklearn" not in modules and "scipy.stats" not in modules


def test_genpqr_fit_on_tabular_states_imports_no_scikit_learn(tmp_path):
    code = TABULAR_DATA + f"""
import csv
with open({str(tmp_path / "t.csv")!r}, "w", newline="") as fh:
    writer = csv.writer(fh)
    writer.writerow(["episode", "time", "state", "action"])
    writer.writerows(zip(episode.tolist(), time.tolist(), state.tolist(), action.tolist()))
from genpqr.app.cli import main
sys.argv[1:] and main(sys.argv[1:])
"""
    modules, _ = _loaded_after(code, "fit", str(tmp_path / "t.csv"), "--episode", "episode", "--time", "time",
                               "--state", "state", "--action", "action", "--gamma", "0.9", "--normalization",
                               "anchor:0", "--quiet", "--out", str(tmp_path / "out"))
    assert (tmp_path / "out" / "report.html").is_file() and (tmp_path / "out" / "rewards.csv").is_file()
    assert "sklearn" not in modules and "scipy.stats" not in modules


def test_an_unknown_name_is_an_attribute_error():
    import genpqr
    import genpqr.stage1

    for package in (genpqr, genpqr.stage1):
        with pytest.raises(AttributeError, match="has no attribute 'not_a_name'"):
            package.not_a_name  # noqa: B018
    assert not hasattr(genpqr, "not_a_name")


def test_a_public_name_is_never_a_submodule():
    """``genpqr.structural.identification`` is the function (its module is private), whichever
    is imported first; a wing exporting a name that is also a submodule's name is refused."""
    _, printed = _loaded_after("import genpqr.structural._identification, genpqr.structural as s; "
                               "print(type(s.identification).__name__, type(s.type_counterfactuals).__name__)")
    assert printed.split() == ["function", "function"]
    _, printed = _loaded_after("from genpqr.structural import identification; print(type(identification).__name__)")
    assert printed.split() == ["function"]


def test_exceptions_module_imports_no_third_party_library():
    modules, printed = _loaded_after("import genpqr.exceptions as e; print(e.GenPQRWarning.__mro__[1].__name__)")
    assert printed.split() == ["UserWarning"]
    assert _heavy(modules) == [] and "numpy" not in modules


def test_not_fitted_error_is_sklearns_and_caught_as_such():
    """A demanding user's ``except NotFittedError`` (scikit-learn's) keeps catching genpqr's."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    import genpqr
    from genpqr.exceptions import NotFittedError

    assert NotFittedError is genpqr.NotFittedError and issubclass(NotFittedError, SklearnNotFittedError)
    assert issubclass(NotFittedError, ValueError) and issubclass(NotFittedError, AttributeError)
    assert NotFittedError.__module__ == "genpqr.exceptions" and NotFittedError.__qualname__ == "NotFittedError"
    with pytest.raises(SklearnNotFittedError):
        genpqr.GenPQR().reward([[0.0]])
    error = pickle.loads(pickle.dumps(NotFittedError("not fitted")))
    assert type(error) is NotFittedError and str(error) == "not fitted"
    assert "NotFittedError" in dir(genpqr.exceptions)


def _package(tmp_path: Path, init: str) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(init))
    (pkg / "_mod.py").write_text("A = 1\nB = 2\n")
    return pkg


@pytest.fixture
def import_pkg(tmp_path, monkeypatch):
    """Imports the package ``pkg`` written under ``tmp_path``; forgets it afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield lambda: importlib.import_module("pkg")
    for name in ("pkg", "pkg._mod"):
        sys.modules.pop(name, None)


HEADER = """
    from typing import TYPE_CHECKING
    from genpqr.lazy import attach
"""


def test_attach_binds_on_first_read_and_lists_the_names(tmp_path, import_pkg):
    _package(tmp_path, HEADER + """
    if TYPE_CHECKING:
        from ._mod import A, B as C
    __all__ = ["A", "C"]
    __getattr__, __dir__ = attach(__name__, __file__, __all__)
    """)
    pkg = import_pkg()
    assert "A" not in vars(pkg) and {"A", "C"} <= set(dir(pkg))
    assert (pkg.A, pkg.C) == (1, 2) and vars(pkg)["A"] == 1  # bound: later reads are plain lookups


@pytest.mark.parametrize("block, all_, match", [
    ("import os", '["os"]', "only relative"),
    ("from ._mod import A", '["A", "Z"]', r"names \['Z'\]"),
])
def test_attach_refuses_what_it_cannot_load(tmp_path, import_pkg, block, all_, match):
    _package(tmp_path, HEADER + f"""
    if TYPE_CHECKING:
        {block}
    __all__ = {all_}
    __getattr__, __dir__ = attach(__name__, __file__, __all__)
    """)
    with pytest.raises(ImportError, match=match):
        import_pkg()


def test_the_transition_selection_with_its_low_rank_groups_imports_no_scikit_learn():
    """``transition_model="auto"`` on thin cells fits the low-rank model, whose state groups are
    k-means (written out, scikit-learn's step for step): the selection imports no scikit-learn."""
    code = TABULAR_DATA + """
from genpqr.stage2 import LowRankKernel, select_transition_model
from genpqr.data import from_arrays
S2, K2, n2 = 30, 4, 3000
ep = np.repeat(np.arange(n2 // 10), 10)
s2 = rng.integers(0, S2, n2)
a2 = rng.integers(0, K2, n2)
data2 = from_arrays(s2, a2, (s2 + a2 + rng.integers(0, 3, n2)) % S2, episode_ids=ep)
model = LowRankKernel(ranks=(2,), concentrations=(10.0,), group_counts=(0, 3), random_state=0).fit(data2, n_states=S2)
picked = select_transition_model(data2, n_states=S2, random_state=0, progress=False)
print(model.rank_, picked.chosen in ("counts", "shrinkage", "lowrank"))
"""
    modules, printed = _loaded_after(code)
    assert printed.split() == ["2", "True"], printed
    assert "sklearn" not in modules
