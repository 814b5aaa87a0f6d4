"""The ``continuous`` experiment runs end to end and writes its table and figure."""

import pandas as pd

from genpqr.experiments._continuous import run_continuous_experiment, write_report


def test_tiny_continuous_experiment(tmp_path):
    frame = run_continuous_experiment(n_values=(300, 600), seeds=(0,), out_dir=tmp_path,
                                      methods=("oracle-policy", "linear-gaussian"), n_eval=200, readoff_samples=64)
    assert len(frame) == 2 * 2 * 2
    assert {"n", "seed", "normalization", "method", "reward_mse", "reward_corr"} <= set(frame.columns)
    assert (frame.reward_corr > 0.9).all()
    for name in ("results.csv", "results.md", "figure.png", "config.json"):
        assert (tmp_path / name).exists()
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "results.csv").drop(columns="warnings"),
                                  frame.drop(columns="warnings"), check_dtype=False)
    write_report(tmp_path)  # rebuilt from the file
    assert "| anchor | linear-gaussian | 300 |" in (tmp_path / "results.md").read_text()


def test_cli_continuous_experiment_tiny(tmp_path):
    from genpqr.app.cli import main

    assert main(["experiment", "continuous", "--tiny", "--seeds", "1", "--out", str(tmp_path), "--quiet"]) == 0
    assert (tmp_path / "results.csv").exists() and (tmp_path / "results.md").exists()
