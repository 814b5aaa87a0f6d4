"""The quick-start path: `genpqr demo` prints the errors and writes a figure."""

import subprocess
import sys

import numpy as np

from genpqr.app.cli import main


def test_demo_prints_errors_and_writes_figure(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--states", "12", "--episodes", "300"]) == 0
    out = capsys.readouterr().out
    assert "exact solve, true policy and P" in out and "MSE" in out
    exact_row = next(line for line in out.splitlines() if line.startswith("exact solve"))
    assert float(exact_row.split()[-4]) < 1e-10  # max |err| of the exact oracle
    png = tmp_path / "demo.png"
    assert png.exists() and png.stat().st_size > 10_000
    import matplotlib.image as mpimg

    img = mpimg.imread(png)
    assert img.ndim == 3 and np.std(img[..., :3]) > 0.05  # not a blank canvas


def test_module_entry_point_help():
    res = subprocess.run([sys.executable, "-m", "genpqr", "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "demo" in res.stdout
