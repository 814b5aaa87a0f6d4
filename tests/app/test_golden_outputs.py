"""The command line's result files on the bundled examples and simulated bus panels, pinned.

Each case runs ``genpqr fit`` as a user does (a child process) and compares the numeric result
files (``rewards.csv``, ``parameters.csv``, ``types.csv``) with the copies in
``tests/app/golden/<case>/``, written by the release before the edge was rebuilt (issue 30) and
before the speed work (issue 31): a refactor or a faster path may not move an answer.

Tolerances are what the computation guarantees across machines: the exact tabular solve and the
closed-form counts to 1e-9; iterative optimizers (L-BFGS, EM, FQE) to their stopping tolerance.
Bootstrap columns are left out (their resampling is the speed work's to change).

Regenerate (only when an answer is meant to change, and say why in the commit):
``PYTHONPATH=src python tests/app/test_golden_outputs.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
DATA = ROOT / "examples" / "data"
FILES = ("rewards.csv", "parameters.csv", "types.csv")

COMMON = ["--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma", "0.9"]
BUS = ["--episode", "bus", "--time", "month", "--state", "mileage", "--action", "action", "--gamma", "0.975"]


def _bus_panel(folder: Path, n_states=40, typed=False) -> None:
    from genpqr.envs._rust import bus_engine, simulate_buses, simulate_typed_buses

    if typed:
        engines = tuple(bus_engine(n_states=n_states, rc=rc, cost_scale=0.01) for rc in (8.0, 11.0))
        panel = simulate_typed_buses(engines, n_buses=40, n_periods=80, random_state=0)
        frame = panel.frame.drop(columns=["next_mileage", "type"])
        X = engines[0].features("rust")
    else:
        engine = bus_engine(n_states=n_states, rc=4.0, theta11=40.0)
        panel = simulate_buses(engine, n_buses=30, n_periods=60, random_state=0)
        frame = panel.frame.drop(columns="next_mileage")
        X = engine.features("rust")
    frame.to_csv(folder / "bus.csv", index=False)
    rows = [dict(state_index=s, action=a, RC=X[s, k, 0], theta11=X[s, k, 1])
            for s in range(n_states) for k, a in enumerate(["keep", "replace"])]
    pd.DataFrame(rows).to_csv(folder / "bus_features.csv", index=False)


def _items(folder: Path) -> None:
    pd.DataFrame({"action": ["a", "b", "c"], "price": [0.0, 1.0, 2.0], "quality": [1.0, 0.5, 2.0]}).to_csv(
        folder / "items.csv", index=False)


# case -> (set-up, command-line arguments after "fit", relative tolerance, absolute tolerance)
CASES = {
    "choices_anchor_features": (None, [DATA / "choices.csv", *COMMON, "--normalization", "anchor:a",
                                       "--features", DATA / "features.csv"], 1e-9, 1e-9),
    "choices_mean_zero_spline": (None, [DATA / "choices.csv", *COMMON, "--normalization", "mean-zero",
                                        "--policy-model", "spline", "--n-states", "15"], 1e-6, 1e-7),
    "choices_projection": (None, [DATA / "choices.csv", *COMMON, "--normalization", "anchor:a",
                                  "--features", DATA / "features.csv", "--estimator", "projection"], 1e-9, 1e-9),
    "choices_continuous_states": (None, [DATA / "choices.csv", *COMMON, "--normalization", "anchor:a",
                                         "--q-model", "linear"], 1e-5, 1e-6),
    "choices_types": (None, [DATA / "choices.csv", *COMMON, "--normalization", "anchor:a", "--types", "2"],
                      1e-5, 1e-6),
    "choices_action_features": (_items, [DATA / "choices.csv", *COMMON, "--normalization", "anchor:a",
                                         "--action-features", "items.csv"], 1e-5, 1e-6),
    "lqg_continuous_actions": (None, [DATA / "lqg.csv", "--episode", "episode", "--time", "time", "--state", "s",
                                      "--action", "a", "--action-type", "continuous", "--gamma", "0.9",
                                      "--normalization", "gaussian:0,1"], 1e-5, 1e-6),
    "bus_increment_features": (_bus_panel, ["bus.csv", *BUS, "--normalization", "anchor:replace", "--transition",
                                            "increment:4:replace", "--n-states", "40", "--features",
                                            "bus_features.csv"], 1e-9, 1e-9),
    "bus_auto": (_bus_panel, ["bus.csv", *BUS, "--normalization", "anchor:keep", "--n-states", "40"], 1e-6, 1e-7),
    "bus_types_features": (lambda f: _bus_panel(f, typed=True),
                           ["bus.csv", *BUS, "--normalization", "anchor:replace", "--transition", "increment:4:replace",
                            "--n-states", "40", "--policy-model", "frequency", "--features", "bus_features.csv",
                            "--types", "2"], 1e-6, 1e-7),
}


def _run(case: str, folder: Path) -> Path:
    setup, args, _, _ = CASES[case]
    folder.mkdir(parents=True, exist_ok=True)
    if setup is not None:
        setup(folder)
    out = folder / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "genpqr", "fit", *map(str, args), "--quiet", "--out", str(out)]
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _numeric(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns a refactor must keep: not the bootstrap's (``_se``, ``_lo``, ``_hi``)."""
    keep = [c for c in frame.columns if not str(c).endswith(("_se", "_lo", "_hi"))]
    return frame[keep]


def compare(golden: Path, out: Path, rtol: float, atol: float) -> None:
    for name in FILES:
        if not (golden / name).exists():
            assert not (out / name).exists(), f"{name} is written now but was not before"
            continue
        expected = _numeric(pd.read_csv(golden / name))
        got = _numeric(pd.read_csv(out / name))
        assert list(got.columns) == list(expected.columns), name
        assert got.shape == expected.shape, name
        for column in expected.columns:
            e, g = expected[column], got[column]
            if pd.api.types.is_numeric_dtype(e) and pd.api.types.is_numeric_dtype(g):
                np.testing.assert_allclose(g.to_numpy(float), e.to_numpy(float), rtol=rtol, atol=atol,
                                           err_msg=f"{name}: {column}")
            else:
                assert g.astype(str).tolist() == e.astype(str).tolist(), f"{name}: {column}"


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_result_files_equal_the_pinned_ones(case, tmp_path):
    out = _run(case, tmp_path / case)
    _, _, rtol, atol = CASES[case]
    compare(GOLDEN / case, out, rtol, atol)


if __name__ == "__main__":  # regenerate the pinned files
    import tempfile

    for case in sorted(CASES):
        with tempfile.TemporaryDirectory() as tmp:
            out = _run(case, Path(tmp) / case)
            target = GOLDEN / case
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for name in FILES:
                if (out / name).exists():
                    shutil.copy(out / name, target / name)
            print(case, sorted(p.name for p in target.iterdir()))
