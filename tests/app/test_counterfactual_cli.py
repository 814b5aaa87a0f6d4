"""``genpqr counterfactual`` on a ``genpqr fit`` folder."""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr.app.cli import main
from genpqr.counterfactuals import IdentificationWarning, load_counterfactual

DATA = Path(__file__).resolve().parents[2] / "examples" / "data" / "choices.csv"


@pytest.fixture(scope="module")
def fit_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit")
    code = main(["fit", str(DATA), "--episode", "episode", "--time", "time", "--state", "state", "--action",
                 "action", "--gamma", "0.9", "--normalization", "anchor:a", "--bootstrap", "4", "--cross-fit", "0",
                 "--save-data", "--out", str(out), "--quiet"])
    assert code == 0
    return out


def test_flags_match_the_python_api(fit_dir, tmp_path, capsys):
    out = tmp_path / "cf"
    assert main(["counterfactual", str(fit_dir), "--reward-change", "b=-0.5", "--initial", "0", "--horizon", "20",
                 "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "invariant to the normalization" in printed
    summary = pd.read_csv(out / "summary.csv")
    model = genpqr.load(fit_dir / "model.joblib")
    direct = model.counterfactual(reward_change={"b": -0.5}, initial=0, horizon=20, n_boot=4, random_state=0)
    expected = direct.to_frame()
    np.testing.assert_allclose(summary["counterfactual"], expected["counterfactual"], atol=1e-12)
    np.testing.assert_allclose(summary["difference_lo"], expected["difference_lo"], atol=1e-12)
    ident = json.loads((out / "identification.json").read_text())
    assert ident["invariant"] and ident["normalization_gap"] < 1e-9
    assert load_counterfactual(out / "counterfactual.npz").bootstrap.shape[0] == 4
    states = pd.read_csv(out / "states.csv")
    assert np.allclose(states.filter(like="counterfactual_policy").sum(axis=1), 1.0)


def test_spec_file_with_new_transitions_warns(fit_dir, tmp_path, capsys):
    rng = np.random.default_rng(0)
    kernel = rng.dirichlet(np.ones(15), size=(15, 3))
    np.save(tmp_path / "P.npy", kernel)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"transitions": str(tmp_path / "P.npy"), "gamma": 0.8, "bootstrap": 0,
                                "check_normalization": "mean-zero"}))
    assert main(["counterfactual", str(fit_dir), "--spec", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "NOT invariant" in captured.out and "WARNING" in captured.err
    ident = json.loads((tmp_path / "o" / "identification.json").read_text())
    assert ident["changes"] == ["transitions", "gamma"] and ident["normalization_gap"] > 1e-3
    model = genpqr.load(fit_dir / "model.joblib")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentificationWarning)
        direct = model.counterfactual(transitions=kernel, gamma=0.8)
    states = pd.read_csv(tmp_path / "o" / "states.csv")
    np.testing.assert_allclose(states["counterfactual_policy[b]"], direct.counterfactual.policy[:, 1], atol=1e-12)


@pytest.mark.parametrize("argv, message", [
    (["--reward-change", "z=1"], "fitted actions are"),
    (["--reward-change", "b"], "LABEL=AMOUNT"),
    (["--transitions", "nope.npy"], "does not exist"),
    (["--check-normalization", "weird"], "check_normalization must be"),
])
def test_errors(fit_dir, tmp_path, capsys, argv, message):
    assert main(["counterfactual", str(fit_dir), *argv, "--bootstrap", "0", "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_not_a_fit_folder(tmp_path, capsys):
    assert main(["counterfactual", str(tmp_path)]) == 2
    assert "not a genpqr fit folder" in capsys.readouterr().err


def test_replicates_are_the_fits_resamples(fit_dir):
    """The counterfactual bootstrap redraws the fit's resamples (same seed, same episodes)."""
    from genpqr.evaluation import bootstrap

    model = genpqr.load(fit_dir / "model.joblib")
    boot = bootstrap(model, model.training_data_, n_boot=4, random_state=0, progress=False, fitted=model)
    rewards = pd.read_csv(fit_dir / "rewards.csv")
    lo, _ = boot.interval(0.95)
    np.testing.assert_allclose(rewards["reward_b_lo"], lo[:, 1], atol=1e-12)


def test_continuous_fit_is_refused(tmp_path, capsys):
    lqg = DATA.parent / "lqg.csv"
    out = tmp_path / "fit"
    assert main(["fit", str(lqg), "--episode", "episode", "--time", "time", "--state", "s", "--action", "a",
                 "--action-type", "continuous", "--gamma", "0.9", "--normalization", "anchor:0", "--cross-fit", "0",
                 "--out", str(out), "--quiet"]) == 0
    assert main(["counterfactual", str(out), "--bootstrap", "0"]) == 2
    assert "needs a tabular fit" in capsys.readouterr().err


def slim_fit(data, out):
    """A ``genpqr fit`` folder saved without its data (the default), 4 bootstrap replicates."""
    assert main(["fit", str(data), "--episode", "episode", "--time", "time", "--state", "state", "--action",
                 "action", "--gamma", "0.9", "--normalization", "anchor:a", "--bootstrap", "4", "--cross-fit", "0",
                 "--out", str(out), "--quiet"]) == 0
    return out


FLAGS = ["--reward-change", "b=-0.5", "--initial", "0", "--horizon", "20"]


def test_slim_fit_folder_rereads_its_data_for_the_bootstrap(fit_dir, tmp_path, capsys):
    """A fit saved without its data (the default) gets the same counterfactual, intervals
    included, as one saved with it: the bootstrap refits on the data file named in
    config.json, read again and numbered as the fit did."""
    from genpqr.app.config import FitConfig
    from genpqr.app.workflow import tabular_training_data

    full = genpqr.load(fit_dir / "model.joblib")
    again = tabular_training_data(FitConfig.from_json(fit_dir / "config.json"))
    for name in ("states", "actions", "next_states", "terminated", "truncated", "episode_ids", "next_observed"):
        np.testing.assert_array_equal(getattr(again, name), getattr(full.training_data_, name), err_msg=name)
    slim = slim_fit(DATA, tmp_path / "slim")
    capsys.readouterr()
    assert main(["counterfactual", str(slim), *FLAGS, "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert "read again from" in capsys.readouterr().err
    assert main(["counterfactual", str(fit_dir), *FLAGS, "--out", str(tmp_path / "b"), "--quiet"]) == 0
    a, b = (pd.read_csv(tmp_path / d / "summary.csv") for d in ("a", "b"))
    assert "difference_lo" in a.columns
    pd.testing.assert_frame_equal(a, b)
    ida, idb = (json.loads((tmp_path / d / "identification.json").read_text()) for d in ("a", "b"))
    assert ida == idb


def test_slim_fit_folder_without_its_data_gives_point_estimates_and_says_why(fit_dir, tmp_path, capsys):
    """When the data file has changed or gone, the inherited bootstrap falls back to point
    estimates with a note naming the reason, and an explicit one is a clear error."""
    data = tmp_path / "choices.csv"
    frame = pd.read_csv(DATA)
    frame.to_csv(data, index=False)
    slim = slim_fit(data, tmp_path / "slim")
    frame.loc[frame.index[:40], "action"] = "a"  # the file changes after the fit
    frame.to_csv(data, index=False)
    capsys.readouterr()
    assert main(["counterfactual", str(slim), *FLAGS, "--out", str(tmp_path / "a"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "no bootstrap intervals" in err and "has changed since the fit" in err
    assert main(["counterfactual", str(fit_dir), *FLAGS, "--bootstrap", "0", "--out", str(tmp_path / "b"),
                 "--quiet"]) == 0
    a, b = (pd.read_csv(tmp_path / d / "summary.csv") for d in ("a", "b"))
    pd.testing.assert_frame_equal(a, b)
    assert main(["counterfactual", str(slim), *FLAGS, "--bootstrap", "3", "--quiet"]) == 2
    assert "--save-data" in capsys.readouterr().err
    data.unlink()
    assert main(["counterfactual", str(slim), *FLAGS, "--out", str(tmp_path / "c"), "--quiet"]) == 0
    assert "is not there any more" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "c" / "summary.csv"), b)


def test_slim_model_renormalizes_exactly(fit_dir, tmp_path):
    from genpqr import normalization as N

    full = genpqr.load(fit_dir / "model.joblib")
    full.save(tmp_path / "slim.joblib")
    slim = genpqr.load(tmp_path / "slim.joblib")
    assert not hasattr(slim, "training_data_")
    for norm in (N.mean_zero(), N.anchor_action("b")):
        r_full, r_slim = full.renormalize(norm), slim.renormalize(norm)
        np.testing.assert_allclose(r_slim.reward_table().to_numpy(dtype=float),
                                   r_full.reward_table().to_numpy(dtype=float), atol=1e-10)
        assert r_slim.diagnostics_.max_mu_over_pi > 0


def test_episodes_that_end_need_an_initial_state(tmp_path, capsys):
    """A fit whose kernel terminates has no long-run distribution: no empty table, but a note that
    names --initial; with it the statistics are printed."""
    frame = pd.read_csv(DATA)
    last = frame.groupby("episode")["time"].transform("max") == frame["time"]
    frame["terminated"] = (last & (frame["episode"] % 2 == 0)).astype(int)  # half the episodes end
    data = tmp_path / "ending.csv"
    frame.to_csv(data, index=False)
    fit = tmp_path / "fit"
    assert main(["fit", str(data), "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
                 "--terminated", "terminated", "--gamma", "0.9", "--normalization", "anchor:a", "--cross-fit", "0",
                 "--out", str(fit), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["counterfactual", str(fit), "--reward-change", "b=-0.5", "--out", str(tmp_path / "cf")]) == 0
    printed = capsys.readouterr().out
    assert "Empty DataFrame" not in printed and "no summary statistics: the fitted kernel ends episodes" in printed
    assert "--initial STATE" in printed
    assert main(["counterfactual", str(fit), "--reward-change", "b=-0.5", "--initial", "0", "--horizon", "20",
                 "--out", str(tmp_path / "cf0")]) == 0
    assert "rate[b]" in capsys.readouterr().out
