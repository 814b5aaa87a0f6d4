"""`genpqr fit` (genpqr.app.workflow): config, checks of bad files, tabular recovery, outputs."""

import argparse
import json

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr import GenPQR, from_pandas, normalization as N, stage2
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.stage1 import FrequencyClassifier
from genpqr.app.console import unwrap
from genpqr.app.flags import console_text
from genpqr.app.fit_parser import add_fit_parser
from genpqr.app.workflow import FitConfig, StateIndex, config_from_args, run_fit
from genpqr.registry import INPUT_FILE, NORMALIZATIONS, TRANSITION_MODELS

LABELS = np.array(["left", "stay", "right"])
GAMMA = 0.9


# ---------------------------------------------------------------------------- helpers (also used by test_fit_report)
def tabular_problem(S=15, K=3, seed=0):
    mdp = random_mdp(S, K, n_next=4, gamma=GAMMA, random_state=seed)
    return mdp, stage2.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)


def write_tabular_csv(path, n_episodes=300, horizon=10, seed=1, S=15, labels=LABELS, outcome_noise=0.3):
    """Logged choices of the soft-optimal policy of a random MDP, in long format."""
    mdp, policy = tabular_problem(S, len(labels))
    data = simulate_tabular(mdp, policy, n_episodes=n_episodes, horizon=horizon, outcome_noise=outcome_noise,
                            random_state=seed)
    frame = pd.DataFrame({"episode": data.episode_ids, "time": data.timesteps.astype(int),
                          "state": data.states[:, 0].astype(int), "action": np.asarray(labels)[data.actions],
                          "outcome": data.outcomes})
    frame.to_csv(path, index=False)
    return frame, mdp


def fit_cli(argv, capsys=None):
    """``genpqr fit ARGV`` through add_fit_parser; returns (exit code, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="genpqr")
    add_fit_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["fit", *map(str, argv)])
    code = args.func(args)
    out, err = capsys.readouterr() if capsys is not None else ("", "")
    return code, unwrap(out), err  # the console's lines as printed before wrapping at 100 characters


def base_flags(csv, out, normalization="anchor:left"):
    return [csv, "--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma",
            GAMMA, "--normalization", normalization, "--out", out, "--quiet"]


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "choices.csv"
    frame, mdp = write_tabular_csv(path, n_episodes=1500, horizon=20)
    return path, frame, mdp


@pytest.fixture
def small_csv(tmp_path):
    path = tmp_path / "choices.csv"
    frame, _ = write_tabular_csv(path, n_episodes=80, horizon=8)
    return path, frame


# ---------------------------------------------------------------------------- recovery
def test_fit_recovers_known_tabular_reward(big_csv, tmp_path, capsys):
    path, frame, mdp = big_csv
    code, out, err = fit_cli(base_flags(path, tmp_path / "out"), capsys)
    assert code == 0, err
    assert "exact solve" in out and "rewards.csv" in out
    rewards = pd.read_csv(tmp_path / "out" / "rewards.csv")
    assert list(rewards.columns[:3]) == ["state_index", "state", "visits"]
    # columns in the simulation's action order (LABELS), whose code 0 is the anchor "left"
    est = rewards[[f"reward_{a}" for a in LABELS]].to_numpy()
    truth = stage2.normalized_reward(mdp.reward, mdp.kernel, GAMMA, N.anchor_action(0))
    np.testing.assert_allclose(est[:, 0], 0, atol=1e-10)
    # 30,000 transitions on 45 state-action pairs: sampling error well below 0.25 everywhere
    assert np.max(np.abs(est - truth)) < 0.25
    assert np.corrcoef(est.ravel(), truth.ravel())[0, 1] > 0.99
    # the same numbers as GenPQR called directly on the same file (exact identity)
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    direct = GenPQR(N.anchor_action("left"), gamma=GAMMA, q_model="exact", cross_fit=5, n_states=15,
                    random_state=0).fit(data)
    table = direct.reward_table()
    np.testing.assert_allclose(est, table[list(LABELS)].to_numpy(), atol=1e-8)
    # the saved model loads with one call and gives the same table
    loaded = genpqr.load(tmp_path / "out" / "model.joblib")
    np.testing.assert_allclose(loaded.reward_table()[list(LABELS)].to_numpy(), est, atol=1e-12)


def test_outputs_and_effective_config_rerun(small_csv, tmp_path, capsys):
    path, _ = small_csv
    code, _, err = fit_cli(base_flags(path, tmp_path / "a", "mean-zero") + ["--seed", 3], capsys)
    assert code == 0, err
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["config.json", "manifest.json", "model.joblib", "report.html", "rewards.csv"]
    saved = json.loads((tmp_path / "a" / "config.json").read_text())
    assert saved["q_model"] == "exact" and saved["policy_model"] == "auto" and saved["seed"] == 3
    assert saved["clip"] == "auto"
    # rerun from the saved config, overriding the output folder by a flag
    code, _, err = fit_cli(["--config", tmp_path / "a" / "config.json", "--out", tmp_path / "b"], capsys)
    assert code == 0, err
    a, b = (pd.read_csv(tmp_path / d / "rewards.csv") for d in "ab")
    pd.testing.assert_frame_equal(a, b)
    mean = a[[f"reward_{x}" for x in LABELS]].to_numpy().mean(axis=1)
    np.testing.assert_allclose(mean, 0, atol=1e-10)  # mean-zero normalization


def test_config_file_values_are_overridden_by_flags(tmp_path):
    cfg = tmp_path / "fit.json"
    cfg.write_text(json.dumps({"data": "x.csv", "episode": "e", "time": "t", "state": "s1,s2", "action": "a",
                               "gamma": 0.5, "normalization": "mean-zero", "out": "o", "bins": {"s1": [1, 2]}}))
    parser = argparse.ArgumentParser()
    add_fit_parser(parser.add_subparsers())
    args = parser.parse_args(["fit", "--config", str(cfg), "--gamma", "0.8", "--bins", "s2=0.5", "--cross-fit", "1"])
    config = config_from_args(args)
    assert config.gamma == 0.8 and config.state == ["s1", "s2"] and config.cross_fit == 1
    assert config.bins == {"s1": [1.0, 2.0], "s2": [0.5]}
    assert config.normalization == "mean-zero" and config.data == "x.csv"
    with pytest.raises(ValueError, match="unknown config key"):
        FitConfig.from_dict({"gama": 0.9})
    with pytest.raises(ValueError, match="--gamma"):
        FitConfig.from_dict({"data": "x", "episode": "e", "time": "t", "state": "s", "action": "a",
                             "normalization": "mean-zero", "out": "o"}).check()


def parsed(registry, text):
    """``(entry name, argument)`` of a typed name (the spec layer's parse, :mod:`genpqr.registry`)."""
    spec = registry.parse(text)
    return spec.name, spec.value


def test_spec_parsers():
    assert parsed(NORMALIZATIONS, "anchor:a:b") == ("anchor", "a:b")
    assert parsed(NORMALIZATIONS, "mean_zero") == ("mean-zero", None)
    assert parsed(NORMALIZATIONS, "behaviour:y") == ("behavior", "y")
    with pytest.raises(ValueError, match="anchor:ACTION"):
        NORMALIZATIONS.parse("anchr:1")
    with pytest.raises(ValueError, match="needs an argument"):
        NORMALIZATIONS.parse("value")
    assert parsed(TRANSITION_MODELS, "increment:4:replace") == ("increment", (4, "replace"))
    assert parsed(TRANSITION_MODELS, "increment:2") == ("increment", (2, None))
    spec = TRANSITION_MODELS.parse("P.npy")
    assert spec.can(INPUT_FILE) and spec.value == "P.npy"
    with pytest.raises(ValueError, match="increment:MAX"):
        TRANSITION_MODELS.parse("increment:x")
    with pytest.raises(ValueError) as info:
        NORMALIZATIONS.parse("anchr:1")
    assert console_text(info.value).startswith("--normalization must be one of anchor:ACTION")


# ---------------------------------------------------------------------------- normalizations and labels
def test_numeric_labels_given_as_text(tmp_path, capsys):
    path = tmp_path / "d.csv"
    write_tabular_csv(path, n_episodes=60, horizon=8, labels=np.array([10, 20, 30]))
    code, _, err = fit_cli(base_flags(path, tmp_path / "o", "anchor:20"), capsys)
    assert code == 0, err
    rewards = pd.read_csv(tmp_path / "o" / "rewards.csv")
    np.testing.assert_allclose(rewards["reward_20"], 0, atol=1e-10)


def test_state_anchor_and_value_columns(small_csv, tmp_path, capsys):
    path, frame = small_csv
    anchors = np.where(frame["state"] % 2 == 0, "left", "right")
    frame = frame.assign(anchor=anchors, h=frame["state"] / 10.0)
    frame.loc[frame.index[::7], "anchor"] = np.nan  # missing values are fine when the state has one elsewhere
    frame.to_csv(path, index=False)
    # the transition model as GenPQR's default chooses it (on these thin cells not the counts)
    code, _, err = fit_cli(base_flags(path, tmp_path / "sa", "state-anchor:anchor"), capsys)
    assert code == 0, err
    r = pd.read_csv(tmp_path / "sa" / "rewards.csv")
    at_anchor = np.where(r["state"] % 2 == 0, r["reward_left"], r["reward_right"])
    np.testing.assert_allclose(at_anchor, 0, atol=1e-10)
    # same as GenPQR with the (S,) table
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    table = np.where(np.arange(15) % 2 == 0, "left", "right").astype(object)
    direct = GenPQR(N.state_anchor(table), gamma=GAMMA, q_model="exact", cross_fit=5,
                    random_state=0).fit(data).reward_table()  # no n_states: a category code, as in the CLI
    np.testing.assert_allclose(r[[f"reward_{a}" for a in direct.columns]].to_numpy(), direct.to_numpy(), atol=1e-8)
    code, _, err = fit_cli(base_flags(path, tmp_path / "v", "value:h"), capsys)
    assert code == 0, err
    # inconsistent per-state values are refused
    frame.loc[frame.index[0], "h"] = 99.0
    frame.to_csv(path, index=False)
    code, _, err = fit_cli(base_flags(path, tmp_path / "bad", "value:h"), capsys)
    assert code == 2 and "different values at one state" in err


def test_behavior_normalization_uses_outcome_column(small_csv, tmp_path, capsys):
    path, frame = small_csv
    code, _, err = fit_cli(base_flags(path, tmp_path / "b", "behavior:outcome") + ["--save-data"], capsys)
    assert code == 0, err
    model = genpqr.load(tmp_path / "b" / "model.joblib")
    rec = model.stage2_.recovery
    data = model.training_data_  # kept by --save-data
    s = data.states[:, 0].astype(int)
    means = np.bincount(s, weights=data.outcomes, minlength=15) / np.bincount(s, minlength=15)
    np.testing.assert_allclose(np.sum(rec.mu * rec.reward, axis=1), means, atol=1e-8)


# ---------------------------------------------------------------------------- states: bins, transitions, features
def test_bins_discretize_a_continuous_column(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n_ep, T = 100, 8
    x = rng.uniform(0, 3, size=n_ep * T)
    frame = pd.DataFrame({"episode": np.repeat(np.arange(n_ep), T), "time": np.tile(np.arange(T), n_ep),
                          "x": x, "z": rng.integers(0, 2, size=x.size),
                          "action": np.where(rng.random(x.size) < 0.3 + 0.2 * (x > 1), "b", "a")})
    path = tmp_path / "c.csv"
    frame.to_csv(path, index=False)
    flags = [path, "--episode", "episode", "--time", "time", "--state", "x,z", "--action", "action", "--gamma",
             0.8, "--normalization", "anchor:a", "--bins", "x=1,2", "--out", tmp_path / "o", "--quiet"]
    code, _, err = fit_cli(flags, capsys)
    assert code == 0, err
    r = pd.read_csv(tmp_path / "o" / "rewards.csv")
    assert len(r) == 6 and set(r["x"]) == {"[-inf, 1)", "[1, 2)", "[2, inf)"} and set(r["z"]) == {0, 1}
    assert r["visits"].sum() == n_ep * T  # every observed choice, the last of each episode included
    # features keyed by bin labels or by state_index give the same parameters
    cells = [(i, xl, zl, a) for i, (xl, zl) in enumerate(zip(r["x"], r["z"])) for a in "ab"]
    pd.DataFrame({"x": [c[1] for c in cells], "z": [c[2] for c in cells], "action": [c[3] for c in cells],
                  "f": [float(c[3] == "b") for c in cells]}).to_csv(tmp_path / "f1.csv", index=False)
    pd.DataFrame({"state_index": [c[0] for c in cells], "action": [c[3] for c in cells],
                  "f": [float(c[3] == "b") for c in cells]}).to_csv(tmp_path / "f2.csv", index=False)
    estimates = []
    for name in ("f1", "f2"):
        code, _, err = fit_cli(flags[:-3] + ["--features", tmp_path / f"{name}.csv", "--out", tmp_path / name,
                                             "--quiet"], capsys)
        assert code == 0, err
        estimates.append(pd.read_csv(tmp_path / name / "parameters.csv")["estimate"].to_numpy())
    np.testing.assert_allclose(estimates[0], estimates[1], atol=1e-12)
    # the index: sorted distinct (bin, z) combinations
    index = StateIndex.build(frame, ["x", "z"], {"x": [1.0, 2.0]})
    assert not index.identity and index.n_states == 6
    np.testing.assert_array_equal(index.keys, [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]])


def test_given_kernel_file_matches_genpqr(small_csv, tmp_path, capsys):
    path, frame = small_csv
    mdp, _ = tabular_problem()
    # the simulation's action codes follow LABELS, the data's codes the sorted labels
    order = [list(LABELS).index(a) for a in np.sort(LABELS)]
    dense = mdp.kernel.matrix.toarray().reshape(15, 3, 15)[:, order, :]
    np.save(tmp_path / "P.npy", dense)
    code, _, err = fit_cli(base_flags(path, tmp_path / "k") + ["--transition", tmp_path / "P.npy"], capsys)
    assert code == 0, err
    r = pd.read_csv(tmp_path / "k" / "rewards.csv")
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    direct = GenPQR(N.anchor_action("left"), gamma=GAMMA, q_model="exact", cross_fit=5, transition_model=dense,
                    random_state=0).fit(data).reward_table()  # no n_states: a category code, as in the CLI
    np.testing.assert_allclose(r[[f"reward_{a}" for a in direct.columns]].to_numpy(), direct.to_numpy(), atol=1e-8)


def test_sparse_kernel_files_match_the_dense_file(small_csv, tmp_path, capsys, monkeypatch):
    """--transition FILE.npz (scipy sparse (S*K, S)) and a large .npy read into CSR give the dense file's rewards."""
    import scipy.sparse as sp

    from genpqr.stage2 import _kernel_files as states

    path, _ = small_csv
    mdp, _ = tabular_problem()
    order = [list(LABELS).index(a) for a in np.sort(LABELS)]
    dense = mdp.kernel.matrix.toarray().reshape(15, 3, 15)[:, order, :]
    np.save(tmp_path / "P.npy", dense)
    sp.save_npz(tmp_path / "P.npz", sp.csr_matrix(dense.reshape(45, 15)))
    spec = TRANSITION_MODELS.parse("P.npz")
    assert spec.can(INPUT_FILE) and spec.value == "P.npz"
    assert sp.issparse(states.load_kernel(str(tmp_path / "P.npz"), 3))
    assert isinstance(states.load_kernel(str(tmp_path / "P.npy"), 3), np.ndarray)
    monkeypatch.setattr(states, "SPARSE_FILE_BYTES", 100)  # the .npy file counts as large: read into CSR
    loaded = states.load_kernel(str(tmp_path / "P.npy"), 3)
    assert sp.issparse(loaded) and loaded.shape == (45, 15) and np.array_equal(loaded.toarray(), dense.reshape(45, 15))
    rewards = []
    for name in ("P.npy", "P.npz"):
        code, _, err = fit_cli(base_flags(path, tmp_path / name[2:]) + ["--transition", tmp_path / name], capsys)
        assert code == 0, err
        rewards.append(pd.read_csv(tmp_path / name[2:] / "rewards.csv").filter(like="reward_").to_numpy())
    monkeypatch.setattr(states, "SPARSE_FILE_BYTES", 1 << 40)
    code, _, err = fit_cli(base_flags(path, tmp_path / "dense") + ["--transition", tmp_path / "P.npy"], capsys)
    assert code == 0, err
    base = pd.read_csv(tmp_path / "dense" / "rewards.csv").filter(like="reward_").to_numpy()
    for r in rewards:
        np.testing.assert_allclose(r, base, rtol=0, atol=1e-10)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="cannot read the transition kernel .*bad.npz.*scipy.sparse.save_npz"):
        states.load_kernel(str(tmp_path / "bad.npz"), 3)


def test_increment_transitions_on_bus_engine_panel(tmp_path, capsys):
    from genpqr.structural._ddc import IncrementKernel
    from genpqr.envs._rust import bus_engine, simulate_buses

    panel = simulate_buses(bus_engine(n_states=40, rc=4.0, theta11=40.0), n_buses=20, n_periods=40, random_state=0)
    path = tmp_path / "bus.csv"
    panel.frame.drop(columns="next_mileage").to_csv(path, index=False)
    flags = [path, "--episode", "bus", "--time", "month", "--state", "mileage", "--action", "action", "--gamma",
             0.975, "--normalization", "anchor:replace", "--transition", "increment:4:replace", "--n-states", 40,
             "--out", tmp_path / "o", "--quiet", "--policy-model", "frequency"]
    code, _, err = fit_cli(flags, capsys)
    assert code == 0, err
    r = pd.read_csv(tmp_path / "o" / "rewards.csv")
    assert len(r) == 40 and np.array_equal(r["state_index"], r["mileage"])
    data = from_pandas(panel.frame.drop(columns="next_mileage"), episode="bus", time="month", state="mileage",
                       action="action")
    with pytest.warns(genpqr.WeakSupportWarning):  # mileage 24.. never visited
        direct = GenPQR(N.anchor_action("replace"), gamma=0.975, q_model="exact", cross_fit=5, n_states=40,
                        policy_model=FrequencyClassifier(n_states=40), transition_model=IncrementKernel(4, "replace"),
                        random_state=0).fit(data).reward_table()
    np.testing.assert_allclose(r["reward_keep"], direct["keep"], atol=1e-8)


def test_features_give_parameters_with_bootstrap_intervals(tmp_path, capsys):
    """A reward linear in two features: the WLS projection recovers the parameters."""
    S, K = 12, 3
    x = np.arange(S) / (S - 1)
    feats = np.zeros((S, K, 2))
    feats[:, 1:, 0] = 1.0
    feats[:, 1, 1], feats[:, 2, 1] = x, -x
    theta = np.array([-0.3, 1.2])
    mdp = random_mdp(S, K, n_next=4, gamma=GAMMA, random_state=3)
    mdp = stage2.TabularMDP(mdp.kernel, GAMMA, feats @ theta)
    policy = stage2.soft_optimal_policy(mdp.reward, mdp.kernel, GAMMA)
    data = simulate_tabular(mdp, policy, n_episodes=1000, horizon=15, random_state=4)
    labels = np.array(["a", "b", "c"])
    pd.DataFrame({"episode": data.episode_ids, "time": data.timesteps, "state": data.states[:, 0].astype(int),
                  "action": labels[data.actions]}).to_csv(tmp_path / "d.csv", index=False)
    rows = [{"state": s, "action": labels[a], "f_bonus": feats[s, a, 0], "f_level": feats[s, a, 1]}
            for s in range(S) for a in range(K)]
    pd.DataFrame(rows).to_csv(tmp_path / "f.csv", index=False)
    flags = base_flags(tmp_path / "d.csv", tmp_path / "o", "anchor:a") + ["--features", tmp_path / "f.csv",
                                                                           "--bootstrap", 4, "--cross-fit", 1]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    assert "f_bonus" in out
    params = pd.read_csv(tmp_path / "o" / "parameters.csv")
    assert list(params.columns[:5]) == ["parameter", "estimate", "std_error", "ci_low", "ci_high"]
    assert set(params.estimator) == {"npl"} and params.converged.all()  # the default: the MLE
    assert params.ci_kind.iloc[0].startswith("bootstrap percentile") and params.std_error_kind.iloc[0].startswith(
        "bootstrap") and params.std_error_analytic_kind.iloc[0].startswith("OPG")
    np.testing.assert_allclose(params["estimate"], theta, atol=0.15)  # 14,000 transitions
    assert np.all(np.abs(params["estimate"] - theta) < 4 * params["std_error_analytic"])
    assert np.all(params["ci_low"] <= params["ci_high"])
    r = pd.read_csv(tmp_path / "o" / "rewards.csv")
    for col in ("reward_b_se", "reward_b_lo", "reward_b_hi"):
        assert col in r.columns
    # the saved model's summary carries the structural table the console printed (statsmodels' shape)
    model = genpqr.load(tmp_path / "o")
    summary = model.summary()
    text = summary.as_text()
    assert "f_bonus" in text and "f_level" in text and text.index("f_bonus") > text.index(summary.title)
    assert "f_bonus" in summary.as_html() and "tabular" in summary.as_latex()
    assert len(summary.tables) >= 2 and summary.to_frame().shape[1] == 2  # the fit's figures, then the table
    np.testing.assert_allclose(model.structural_.params, params["estimate"], rtol=1e-6)
    # labelled rewards: columns are the action labels, the same numbers as the array
    states = np.arange(S)[:, None]
    frame = model.reward(states, as_frame=True)
    assert list(frame.columns) == ["a", "b", "c"]
    np.testing.assert_array_equal(frame.to_numpy(), model.reward(states))
    at = model.reward(states, labels[np.arange(S) % K], as_frame=True)
    assert at.name == "reward" and at.shape == (S,)
    # a features file that misses a visited pair is refused
    pd.DataFrame(rows[1:]).to_csv(tmp_path / "f2.csv", index=False)
    flags[flags.index(tmp_path / "f.csv")] = tmp_path / "f2.csv"
    code, _, err = fit_cli(flags, capsys)
    assert code == 2 and "no row for" in err


# ---------------------------------------------------------------------------- continuous states
def test_continuous_states_with_linear_fqe(tmp_path, capsys):
    rng = np.random.default_rng(1)
    n_ep, T = 60, 10
    n = n_ep * T
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    act = np.where(rng.random(n) < 1 / (1 + np.exp(-x1)), "go", "wait")
    frame = pd.DataFrame({"ep": np.repeat(np.arange(n_ep), T), "t": np.tile(np.arange(T), n_ep), "x1": x1,
                          "x2": x2, "choice": act})
    frame.to_csv(tmp_path / "c.csv", index=False)
    flags = [tmp_path / "c.csv", "--episode", "ep", "--time", "t", "--state", "x1,x2", "--action", "choice",
             "--gamma", 0.8, "--normalization", "anchor:wait", "--q-model", "linear", "--out", tmp_path / "o",
             "--quiet"]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    r = pd.read_csv(tmp_path / "o" / "rewards.csv")
    assert len(r) == n
    assert {"reward", "continuation", "reward_go", "reward_wait"} <= set(r.columns)
    np.testing.assert_allclose(r["reward_wait"], 0, atol=1e-8)
    model = genpqr.load(tmp_path / "o" / "model.joblib")
    np.testing.assert_allclose(model.reward(frame[["x1", "x2"]].to_numpy(), frame["choice"]), r["reward"])
    # a state-anchor column in continuous mode: 1-nearest-neighbour lookup, and the model pickles
    frame.assign(anc=np.where(x2 > 0, "go", "wait")).to_csv(tmp_path / "c2.csv", index=False)
    flags[0] = tmp_path / "c2.csv"
    flags[flags.index("anchor:wait")] = "state-anchor:anc"
    flags[flags.index(tmp_path / "o")] = tmp_path / "o2"
    code, _, err = fit_cli(flags, capsys)
    assert code == 0, err
    r2 = pd.read_csv(tmp_path / "o2" / "rewards.csv")
    at_anchor = np.where(x2 > 0, r2["reward_go"], r2["reward_wait"])
    np.testing.assert_allclose(at_anchor, 0, atol=1e-8)


def test_continuous_states_default_is_the_library_default(tmp_path, capsys):
    """One answer per question: ``genpqr fit`` on continuous states without --policy-model and
    --q-model fits GenPQR()'s own defaults (a basis logit, the LSTD fixed point on its basis), and
    ``--q-model auto`` is the same fit; the reward equals the API's with the command line's folds."""
    from genpqr.stage1 import BasisLogit
    from genpqr.stage2 import LSTDQ

    rng = np.random.default_rng(3)
    n_ep, T = 80, 10
    n = n_ep * T
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    act = np.where(rng.random(n) < 1 / (1 + np.exp(-x1 + 0.5 * x2 ** 2)), "go", "wait")
    frame = pd.DataFrame({"ep": np.repeat(np.arange(n_ep), T), "t": np.tile(np.arange(T), n_ep), "x1": x1,
                          "x2": x2, "choice": act})
    frame.to_csv(tmp_path / "c.csv", index=False)
    flags = [tmp_path / "c.csv", "--episode", "ep", "--time", "t", "--state", "x1,x2", "--action", "choice",
             "--gamma", 0.8, "--normalization", "anchor:wait", "--out", tmp_path / "o"]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    assert "continuous states, policy basis-logit, Q model auto (LSTD fixed point)" in out
    model = genpqr.load(tmp_path / "o" / "model.joblib")
    assert isinstance(model.policy_model, BasisLogit) and model.q_model is None
    assert isinstance(model.q_model_, LSTDQ)
    data = from_pandas(frame, episode="ep", time="t", state=["x1", "x2"], action="choice")
    api = GenPQR(N.anchor_action("wait"), gamma=0.8, cross_fit=5, random_state=0).fit(data)
    assert isinstance(api.q_model_, LSTDQ) and type(api.policy_.models[0]) is type(model.policy_.models[0])
    r = pd.read_csv(tmp_path / "o" / "rewards.csv")
    np.testing.assert_allclose(r["reward"], api.reward(frame[["x1", "x2"]].to_numpy(), frame["choice"]),
                               rtol=1e-8, atol=1e-10)
    code, _, err = fit_cli(flags[:-1] + [tmp_path / "o2", "--q-model", "auto", "--quiet"], capsys)
    assert code == 0, err
    np.testing.assert_allclose(pd.read_csv(tmp_path / "o2" / "rewards.csv")["reward"], r["reward"], rtol=1e-12)


# ---------------------------------------------------------------------------- bad input
def _frame(n_ep=20, T=6, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"episode": np.repeat(np.arange(n_ep), T), "time": np.tile(np.arange(T), n_ep),
                         "state": rng.integers(0, 4, n_ep * T), "action": rng.choice(["left", "stay"], n_ep * T)})


def _mixed_state(f):
    f = f.astype({"state": object})
    f.loc[3, "state"] = "high"
    return f


def _mixed_action(f):
    f = f.astype({"action": object})
    f.loc[5, "action"] = 7
    return f


def _anchor_only_last(f):
    f = f.assign(action=np.where(f["state"] % 2 == 0, "stay", "right"))
    f.loc[f["time"] == f["time"].max(), "action"] = "left"  # "left" only where no next state is observed
    return f


BAD = {
    "missing columns": (lambda f: f.drop(columns=["time"]), [], ["missing column", "'time' (--time)"]),
    "missing state column": (lambda f: f, ["--state", "stat"], ["missing column", "'stat' (--state)"]),
    "mixed types in a state column": (_mixed_state, [], ["'state' mixes numbers and text", "'high'"]),
    "mixed types in the action column": (_mixed_action, [], ["'action' mixes numbers and text"]),
    "text state column with a continuous Q model": (lambda f: f.assign(state=f["state"].map("s{}".format)),
                                                    ["--q-model", "linear"],
                                                    ["state column 'state' must be numeric", "--q-model exact"]),
    "single action": (lambda f: f.assign(action="stay"), ["--normalization", "mean-zero"],
                      ["only one action", "a reward cannot be identified from choices among one option"]),
    "anchor never taken": (lambda f: f, ["--normalization", "anchor:right"],
                           ["anchor action 'right' is never taken", "['left', 'stay']"]),
    "anchor only where no next state is observed": (_anchor_only_last, [], ["never occur in the data"]),
    "missing state values": (lambda f: f.astype({"state": float}).assign(
        state=lambda g: g["state"].where(g.index != 4)), [], ["state column 'state' has 1 missing"]),
    "bad normalization": (lambda f: f, ["--normalization", "anchored:left"], ["--normalization must be one of"]),
    "more folds than episodes": (lambda f: f, ["--cross-fit", "50"], ["--cross-fit 50 needs at least 50 episodes"]),
    "one bootstrap replicate": (lambda f: f, ["--bootstrap", "1"], ["--bootstrap must be 0"]),
    "unknown policy model": (lambda f: f, ["--policy-model", "svm"], ["--policy-model must be one of"]),
    "bad import path": (lambda f: f, ["--policy-model", "no_such_module:Clf"], ["cannot import policy model"]),
    "features in continuous mode": (lambda f: f, ["--q-model", "linear", "--features", "f.csv"],
                                    ["need the tabular mode"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_fail_with_one_line_naming_the_problem(case, tmp_path, capsys):
    make, extra, phrases = BAD[case]
    path = tmp_path / "bad.csv"
    make(_frame()).to_csv(path, index=False)
    flags = base_flags(path, tmp_path / "out")
    for i in range(0, len(extra), 2):  # later flags win in argparse
        flags += extra[i:i + 2]
    code, out, err = fit_cli(flags, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("genpqr fit: error: ")
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    assert "Traceback" not in err


def test_missing_data_file_and_missing_settings(tmp_path, capsys):
    code, _, err = fit_cli(base_flags(tmp_path / "nope.csv", tmp_path / "o"), capsys)
    assert code == 2 and "does not exist" in err
    code, _, err = fit_cli([tmp_path / "nope.csv", "--out", tmp_path / "o"], capsys)
    assert code == 2 and "--episode" in err and "--gamma" in err and "--normalization" in err


def test_run_fit_returns_outputs(small_csv, tmp_path):
    path, _ = small_csv
    config = FitConfig(data=str(path), episode="episode", time="time", state=["state"], action="action", gamma=0.9,
                       normalization="anchor:stay", out=str(tmp_path / "o"), quiet=True, cross_fit=2)
    outputs = run_fit(config)
    assert outputs.tabular and outputs.state_index.identity and outputs.state_index.n_states == 15
    assert set(outputs.files) == {"model", "rewards", "config", "report", "manifest"}
    assert outputs.config.q_model == "exact" and "genpqr fit:" in outputs.describe()


def test_a_large_dense_npy_kernel_stays_dense(tmp_path, monkeypatch):
    """A large .npy kernel with most entries non-zero is read into memory as an array, not CSR."""
    from genpqr.stage2 import _kernel_files as states

    P = np.random.default_rng(0).dirichlet(np.ones(6), size=12).reshape(6, 2, 6)
    np.save(tmp_path / "P.npy", P)
    monkeypatch.setattr(states, "SPARSE_FILE_BYTES", 100)
    loaded = states.load_kernel(str(tmp_path / "P.npy"), 2)
    assert type(loaded) is np.ndarray and np.array_equal(loaded, P)
