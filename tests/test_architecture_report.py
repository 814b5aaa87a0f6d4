"""``make architecture`` (tools/architecture.py): the shape of the package, checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import architecture  # noqa: E402


def test_one_way_in_and_one_door():
    m = architecture.measure()
    assert m["build_places"] == ["genpqr.app.build.build_estimator"]  # GenPQR from a config: one place
    assert set(m["parse_places"].values()) == {1}, m["parse_places"]  # each kind of name: parsed once
    assert m["outside_assignments"] == []  # the fitted state is written by the estimator only
    assert m["genpqr_parameters"] <= 20 and m["top_level"] <= 25
    assert m["largest_function"][1] <= 65  # the function-size rule of tests/test_architecture.py


def test_the_script_prints_its_report():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "architecture.py")], capture_output=True, text=True,
                          check=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    out = done.stdout
    assert "places a GenPQR is built from a config: 1" in out and "GenPQR's parameters:" in out
    assert "largest module:" in out and max(map(len, out.splitlines())) <= 100
