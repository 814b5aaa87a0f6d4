"""benchmarks/transition_front_door.py runs ``genpqr fit`` end to end on a small data set and prints its table."""

import importlib.util
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "transition_front_door.py"


def test_small_front_door(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("transition_front_door", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    keep = tmp_path / "runs"
    rows = script.main(["--episodes", "100", "--flags", "auto,counts", "--keep", str(keep)])
    out = capsys.readouterr().out
    assert "| transition flag | transition model used | seconds | peak RSS (MB) | policy TV under the true kernel |" in out
    assert [r["flag"] for r in rows] == ["auto", "counts"]
    assert rows[0]["model"] in ("counts", "shrinkage", "lowrank")
    assert rows[1]["model"].startswith("counts")
    for r in rows:
        assert np.isfinite(r["tv"]) and 0.0 <= r["tv"] <= 1.0
        assert r["seconds"] > 0 and r["rss_mb"] > 0
        assert (keep / f"fit-{r['flag']}" / "rewards.csv").is_file()
    assert not (keep / "true.npy").exists()
