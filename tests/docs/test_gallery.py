"""The gallery (examples/gallery/plot_*.py) runs as plain scripts.

`make docs` runs every example too, inside sphinx-gallery while it builds the site (a failing
example fails the build; CI runs it). This test runs each as a user would, ``python
examples/gallery/plot_x.py`` in a fresh process from a scratch working directory, so that the
examples are also checked by `make test` without building the site, and checks what the site
build cannot: that an example needs nothing from the documentation build, writes nothing into
the checkout or the working directory (its files go to temporary folders), and warns only what
its text explains (tests/doc_warnings.py: Python warnings on stderr and the ``Category: message``
lines it prints). Marked slow: each example takes a few seconds (`make test` still runs them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..doc_warnings import check_warnings, printed

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "examples" / "gallery"
SCRIPTS = sorted(GALLERY.glob("plot_*.py"))


def _files(folder: Path) -> dict:
    """Every file under ``folder`` (caches excluded) with its size and modification time."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_gallery_examples_are_in_sphinx_gallery_format():
    assert SCRIPTS, "no examples/gallery/plot_*.py"
    for script in SCRIPTS:
        text = script.read_text(encoding="utf-8")
        assert text.startswith('"""\n') and "\n====" in text.split('"""')[1], (
            f"{script.name}: sphinx-gallery needs a module docstring that starts with a title")
        assert "# %%" in text, f"{script.name}: no '# %%' cells"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_gallery_example_runs_as_a_plain_script(script, tmp_path):
    before = _files(ROOT / "examples")
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stderr[-3000:]}"
    assert _files(ROOT / "examples") == before, f"{script.name} wrote into the checkout's examples/"
    assert not list(tmp_path.iterdir()), f"{script.name} wrote into its working directory: {list(tmp_path.iterdir())}"
    check_warnings(f"examples/gallery/{script.name}", "script", printed(proc.stdout + proc.stderr))
