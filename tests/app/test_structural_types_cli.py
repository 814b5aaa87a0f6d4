"""``genpqr fit --features ... --types M``: the structural mixture MLE from the command line, with
its parameters and posteriors (types.csv) equal to the API's on the same fitted model."""

import argparse

import numpy as np
import pandas as pd

import genpqr
from genpqr.app.fit_parser import add_fit_parser
from genpqr.app.console import unwrap
from genpqr.envs._rust import bus_engine, simulate_typed_buses
from genpqr.estimator import fit_type_models
from genpqr.structural import fit_structural

S = 40


def fit_cli(argv, capsys):
    parser = argparse.ArgumentParser(prog="genpqr")
    add_fit_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["fit", *map(str, argv)])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, unwrap(out), err  # the lines as printed before wrapping at 100 characters


def test_types_flag_matches_the_api(tmp_path, capsys):
    engines = tuple(bus_engine(n_states=S, rc=rc, cost_scale=0.01) for rc in (8.0, 11.0))
    panel = simulate_typed_buses(engines, n_buses=40, n_periods=80, random_state=0)
    panel.frame.drop(columns=["next_mileage", "type"]).to_csv(tmp_path / "bus.csv", index=False)
    X = engines[0].features("rust")
    rows = [dict(state_index=s, action=a, RC=X[s, k, 0], theta11=X[s, k, 1])
            for s in range(S) for k, a in enumerate(["keep", "replace"])]
    pd.DataFrame(rows).to_csv(tmp_path / "features.csv", index=False)
    flags = [tmp_path / "bus.csv", "--episode", "bus", "--time", "month", "--state", "mileage", "--action", "action",
             "--gamma", 0.975, "--normalization", "anchor:replace", "--transition", "increment:4:replace",
             "--n-states", S, "--policy-model", "frequency", "--features", tmp_path / "features.csv",
             "--types", 2, "--save-data", "--out", tmp_path / "o", "--quiet"]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    assert "latent types" in out
    params = pd.read_csv(tmp_path / "o" / "parameters.csv").set_index("parameter")
    types = pd.read_csv(tmp_path / "o" / "types.csv")
    model = genpqr.load(tmp_path / "o" / "model.joblib")
    api = fit_structural(model, X, names=["RC", "theta11"], n_types=2)
    np.testing.assert_allclose(params.loc[api.names, "estimate"], api.theta, rtol=0, atol=1e-8)
    np.testing.assert_allclose(params.loc[api.names, "std_error"], api.std_error, rtol=0, atol=1e-8)
    np.testing.assert_allclose(params.loc[["mixing proportion[type 0]", "mixing proportion[type 1]"], "estimate"],
                               api.mixing_proportions, atol=1e-8)
    assert list(types.columns) == ["episode", "posterior_type_0", "posterior_type_1"]
    np.testing.assert_allclose(types.iloc[:, 1:].to_numpy(), api.posteriors, atol=1e-8)
    assert params["aic"].iloc[0] == api.aic and params["n_types"].iloc[0] == 2
    assert "latent types" in (tmp_path / "o" / "report.html").read_text()
    assert "types in the same order as parameters.csv" in out
    # one set of types: rewards.csv is GenPQR's per-type fit at the MLE's posteriors held fixed
    assert not hasattr(model, "type_models_")
    rewards = pd.read_csv(tmp_path / "o" / "rewards.csv")
    assert list(rewards.columns[:2]) == ["type", "state_index"]
    typed = fit_type_models(model, model.training_data_, api.posteriors)
    for m, one in enumerate(typed):
        mine = rewards[rewards.type == m][["reward_keep", "reward_replace"]].to_numpy()
        np.testing.assert_allclose(mine, one.reward_table().to_numpy(), rtol=0, atol=1e-8)
    assert not np.allclose(typed[0].reward_table().to_numpy(), typed[1].reward_table().to_numpy(), atol=1e-3)


def test_types_flag_refuses_bootstrap_and_pml(tmp_path, capsys):
    panel = simulate_typed_buses(tuple(bus_engine(n_states=S, rc=rc, cost_scale=0.01) for rc in (8.0, 11.0)),
                                 n_buses=10, n_periods=20, random_state=1)
    panel.frame.drop(columns=["next_mileage", "type"]).to_csv(tmp_path / "bus.csv", index=False)
    X = bus_engine(n_states=S, cost_scale=0.01).features("rust")
    pd.DataFrame([dict(state_index=s, action=a, RC=X[s, k, 0], theta11=X[s, k, 1])
                  for s in range(S) for k, a in enumerate(["keep", "replace"])]).to_csv(tmp_path / "f.csv",
                                                                                          index=False)
    base = [tmp_path / "bus.csv", "--episode", "bus", "--time", "month", "--state", "mileage", "--action", "action",
            "--gamma", 0.975, "--normalization", "anchor:replace", "--n-states", S, "--features", tmp_path / "f.csv",
            "--types", 2, "--out", tmp_path / "o", "--quiet"]
    code, _, err = fit_cli(base + ["--estimator", "pml"], capsys)
    assert code == 2 and "--types 2" in err
    code, _, err = fit_cli(base + ["--bootstrap", 5], capsys)
    assert code == 2 and "--bootstrap" in err
