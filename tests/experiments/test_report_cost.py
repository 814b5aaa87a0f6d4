"""benchmarks/report_cost.py runs ``genpqr fit`` in a child process and splits off the report's time."""

import importlib.util
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "report_cost.py"


def _script():
    spec = importlib.util.spec_from_file_location("report_cost", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_a_small_many_items_case(tmp_path):
    """300 items and 40 choices: the command succeeds, the report's seconds are part of the
    command's, and the page's per-action figures are bounded (it stays small)."""
    script = _script()
    logs, items, anchor = script.many_items(tmp_path, 300, n_rows=40, n_states=3)
    frame = pd.read_csv(logs)
    assert len(frame) == 40 and frame.episode.nunique() >= 5 and anchor == frame.action.mode().iloc[0]
    args = [logs, *script.COMMON, "--normalization", f"anchor:{anchor}", "--action-features", items]
    r = script.run_case(args, tmp_path / "fit", str(SCRIPT.parents[1] / "src"))
    assert 0 < r["report_s"] < r["wall_s"] and 0 < r["report_cpu_s"] < r["cpu_s"]
    assert 1 < r["size_kb"] < 250
    assert (tmp_path / "fit" / "rewards.csv").is_file()
