"""`genpqr fit --types M`: per-type rewards (rewards.csv with a type column), types.csv, the
figures of the mixture, the same numbers as the API, refused combinations."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from genpqr import GenPQR, from_pandas, normalization as N, stage2
from genpqr.app.cli import build_parser, main
from genpqr.envs import random_mdp, simulate_tabular

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

S, GAMMA, LABELS = 6, 0.9, np.array(["a", "b", "c"])


@pytest.fixture(scope="module")
def two_type_csv(tmp_path_factory):
    mdp = random_mdp(S, 3, n_next=3, gamma=GAMMA, random_state=1, reward_scale=1.5)
    frames, offset = [], 0
    for j, (m, n) in enumerate(zip([mdp, dataclasses.replace(mdp, reward=-mdp.reward)], (90, 60))):
        data = simulate_tabular(m, stage2.soft_optimal_policy(m.reward, m.kernel, GAMMA), n_episodes=n, horizon=12,
                                random_state=20 + j)
        frames.append(pd.DataFrame({"episode": data.episode_ids + offset, "time": data.timesteps.astype(int),
                                    "state": data.states[:, 0].astype(int), "action": LABELS[data.actions]}))
        offset += n
    frame = pd.concat(frames, ignore_index=True)
    path = tmp_path_factory.mktemp("types") / "choices.csv"
    frame.to_csv(path, index=False)
    return path, frame


def flags(csv, out, *extra):
    return ["fit", str(csv), "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
            "--gamma", str(GAMMA), "--normalization", "anchor:a", "--out", str(out), "--quiet", *extra]


def test_types_outputs_equal_the_api(two_type_csv, tmp_path, capsys):
    csv, frame = two_type_csv
    out = tmp_path / "fit"
    assert main(flags(csv, out, "--types", "2")) == 0
    printed = capsys.readouterr().out
    assert "latent types: 2" in printed and "BIC" in printed and "types.csv" in printed
    rewards, types = pd.read_csv(out / "rewards.csv"), pd.read_csv(out / "types.csv")
    manifest = json.loads((out / "manifest.json").read_text())
    assert "types.csv" in json.dumps(manifest)
    assert json.loads((out / "config.json").read_text())["types"] == 2
    assert "Latent types" in (out / "report.html").read_text()

    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    api = GenPQR(N.anchor_action("a"), gamma=GAMMA, q_model="exact", n_types=2, random_state=0, cross_fit=5).fit(data)
    np.testing.assert_array_equal(types["episode"], api.type_episodes_)
    np.testing.assert_allclose(types[["posterior_type_0", "posterior_type_1"]], api.type_weights_, atol=1e-10)
    assert list(rewards.columns[:2]) == ["type", "state_index"]
    for m in range(2):
        table = api.type_models_[m].reward_table().to_numpy()
        mine = rewards[rewards.type == m][[f"reward_{label}" for label in LABELS]].to_numpy()
        np.testing.assert_allclose(mine, table, atol=1e-10)
    np.testing.assert_allclose(rewards.groupby("type")["expected_visits"].sum(),
                               [t.training_data_.weights.sum() for t in api.type_models_], rtol=1e-10)
    # the share of episodes EM puts in the larger type: 90 of 150
    assert np.mean(types.most_likely_type == 0) == pytest.approx(0.6, abs=0.05)
    assert f"{api.bic_:.4f}" in printed


def test_types_default_and_config_file(two_type_csv, tmp_path):
    parser = build_parser()
    args = parser.parse_args(flags(two_type_csv[0], tmp_path / "x"))
    assert not hasattr(args, "types")  # unset: FitConfig's 1, or a --config file's value
    assert parser.parse_args(flags(two_type_csv[0], tmp_path / "x", "--types", "3")).types == 3


@pytest.mark.parametrize("extra, match", [(["--types", "0"], "--types must be"),
                                          (["--types", "2", "--bootstrap", "10"], "--bootstrap"),
                                          (["--types", "2", "--chunk-rows", "100"], "--chunk-rows")])
def test_types_refused(two_type_csv, tmp_path, capsys, extra, match):
    assert main(flags(two_type_csv[0], tmp_path / "y", *extra)) == 2
    assert match in capsys.readouterr().err


def test_types_with_continuous_states(two_type_csv, tmp_path, capsys):
    """Continuous states (fitted Q evaluation by LSTD, a logistic first stage): one row per data row and type."""
    csv, frame = two_type_csv
    noisy = frame.assign(state=frame.state + np.random.default_rng(0).uniform(-0.2, 0.2, len(frame)))
    path = tmp_path / "continuous.csv"
    noisy.to_csv(path, index=False)
    out = tmp_path / "fit"
    assert main(flags(path, out, "--types", "2", "--q-model", "lstd", "--policy-model", "logistic")) == 0
    rewards = pd.read_csv(out / "rewards.csv")
    assert len(rewards) == 2 * len(frame) and list(rewards.columns[:3]) == ["type", "episode", "time"]
    assert len(pd.read_csv(out / "types.csv")) == frame.episode.nunique()


def test_counterfactual_on_a_typed_fit_says_what_to_use(two_type_csv, tmp_path, capsys):
    """A typed fit folder is not mistaken for a continuous one: the error names the types and the routes."""
    csv, _ = two_type_csv
    out = tmp_path / "fit"
    assert main(flags(csv, out, "--types", "2")) == 0
    capsys.readouterr()
    assert main(["counterfactual", str(out), "--gamma", "0.8"]) == 2
    err = capsys.readouterr().err
    assert "latent types (--types)" in err and "type_models_[m].counterfactual" in err
    assert "continuous" not in err
