"""`genpqr fit --features` with two collinear features: NPL and NFXP print and write the same."""

import numpy as np
import pandas as pd

from genpqr import datasets

from .test_workflow import fit_cli


def test_npl_and_nfxp_mark_the_same_parameters(tmp_path, capsys):
    feats = pd.read_csv(datasets.path("features"))
    feats["bonus2"] = feats["bonus"]  # equal on the data: only bonus + bonus2 is identified
    path = tmp_path / "features.csv"
    feats.to_csv(path, index=False)
    tables, outputs = {}, {}
    for est in ("npl", "nfxp"):
        code, out, err = fit_cli([datasets.path("choices"), "--episode", "episode", "--time", "time", "--state",
                                  "state", "--action", "action", "--gamma", "0.9", "--normalization", "anchor:a",
                                  "--features", path, "--estimator", est, "--out", tmp_path / est, "--quiet"], capsys)
        assert code == 0, err
        tables[est] = pd.read_csv(tmp_path / est / "parameters.csv").set_index("parameter")
        outputs[est] = out
    for est, table in tables.items():
        assert list(table.index) == ["bonus", "level", "bonus2", "bonus + bonus2"]
        assert list(table["identified"]) == [False, True, False, True]
        assert table.loc[["bonus", "bonus2"], ["estimate", "std_error", "ci_low", "ci_high"]].isna().all().all()
        assert "bonus: not identified by the choices" in outputs[est]
        assert "bonus + bonus2: -0.287 (SE 0.03049, OPG)" in outputs[est]
        assert "NOT CONVERGED" not in outputs[est]
    shown = ["estimate", "std_error", "ci_low", "ci_high"]
    np.testing.assert_allclose(tables["npl"][shown].to_numpy(), tables["nfxp"][shown].to_numpy(), rtol=1e-4,
                               atol=1e-6)
