"""benchmarks/many_actions_features.py runs end to end on a tiny setting and writes its CSV."""

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "many_actions_features.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("many_actions_features", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_many_actions_features(script, tmp_path):
    out = tmp_path / "run"
    rows, large = script.main(["--seeds", "0", "--actions", "5", "--trajectories", "30", "--tiny",
                               "--large", "60", "--large-trajectories", "30", "--out", str(out)])
    assert [r["method"] for r in rows] == list(script.METHODS)
    assert all(np.isfinite(r["mse"]) and r["fit_s"] > 0 for r in rows)
    assert [r["method"] for r in large] == ["cl-attr+af", "oracle+af"]
    assert all(r["maxrss_mb"] > 0 and np.isfinite(r["mse_never"]) for r in large)
    with open(out / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows) + len(large)
    with pytest.raises(FileExistsError):  # never overwrites: --out must be a fresh folder
        script.main(["--actions", "", "--out", str(out)])


def test_deeppqr_row_shares_bc_policy_estimate(script):
    """The deeppqr row is DeepPQR on the bc row's behaviour-cloning estimate (same settings, same seed)."""
    from genpqr.envs import make_synthetic_data

    d = make_synthetic_data(0, 30, n_actions=5)
    est = script.deeppqr(d, 0, tiny=True)
    assert type(est).__name__ == "DeepPQR" and est.anchor_ == 0 and est.gamma_ == 0.9
    bc = script.stage1("bc", d, 0, tiny=True)
    S = d.test.states[:50]
    np.testing.assert_allclose(est.policy_.raw_proba(S), bc.predict_proba(S), rtol=0, atol=1e-8)
