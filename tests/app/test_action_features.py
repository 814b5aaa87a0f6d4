"""``genpqr fit --action-features FILE`` (genpqr.app.action_features): the same reward as the
API on the same data (1e-8), a reward column for every action of the table, never-taken actions
marked in the console, the report and ``diagnostics_``; and ``from_episodes(action_features=)``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr import GenPQR, from_pandas, normalization as N
from genpqr.app.cli import main
from genpqr.data import from_episodes
from genpqr.stage1 import ConditionalLogit
from genpqr.stage2 import LSTDQ

N_EP, T = 40, 6


def _write(tmp_path):
    """A panel of 4 states where the items a, b, c are taken and d (dear) never; items.csv lists
    d first (the API keeps the table's order, the CLI sorts the labels: the same reward)."""
    rng = np.random.default_rng(0)
    n = N_EP * T
    state = rng.integers(0, 4, n)
    frame = pd.DataFrame({"episode": np.repeat(np.arange(N_EP), T), "time": np.tile(np.arange(T), N_EP),
                          "state": state, "action": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
                          "x": (state + rng.normal(0, 0.3, n)).round(4)})
    frame.to_csv(tmp_path / "data.csv", index=False)
    items = pd.DataFrame({"action": ["d", "a", "b", "c"], "price": [5.0, 1.0, 2.0, 3.0],
                          "quality": [1.0, 1.0, 2.0, 2.5]})
    items.to_csv(tmp_path / "items.csv", index=False)
    return frame, items.set_index("action")


def _fit_cli(tmp_path, capsys, *extra):
    code = main(["fit", str(tmp_path / "data.csv"), "--episode", "episode", "--time", "time", "--action", "action",
                 "--gamma", "0.9", "--normalization", "anchor:a", "--action-features", str(tmp_path / "items.csv"),
                 "--quiet", *map(str, extra)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_cli_and_api_give_the_same_reward_tabular(tmp_path, capsys):
    frame, items = _write(tmp_path)
    data = from_pandas(pd.read_csv(tmp_path / "data.csv"), episode="episode", time="time", state="state",
                       action="action", action_features=items)
    assert data.action_labels.tolist() == ["d", "a", "b", "c"] and data.taken_actions().tolist() == [False] + [True] * 3
    model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", n_states=4,
                   policy_model=ConditionalLogit(state_basis="onehot", n_states=4)).fit(data)
    stdout = _fit_cli(tmp_path, capsys, "--state", "state", "--out", tmp_path / "fit")
    rewards = pd.read_csv(tmp_path / "fit" / "rewards.csv")
    table = model.reward_table()
    assert [c for c in rewards.columns if c.startswith("reward_")] == ["reward_a", "reward_b", "reward_c", "reward_d"]
    np.testing.assert_allclose(rewards[[f"reward_{a}" for a in table.columns]].to_numpy(), table.to_numpy(),
                               rtol=0, atol=1e-8)
    assert table.attrs["never_taken"] == ["d"] and model.diagnostics_.n_never_taken == 1
    line = "1 action(s) in the table were never taken: their rewards are predictions from their features (['d'])"
    assert line in stdout and "action table: 4 actions, 1 never taken" in stdout
    assert "action table: 4 actions, 1 never taken" in str(model.summary())
    html = (tmp_path / "fit" / "report.html").read_text()
    assert "never taken: its reward is a prediction from its features" in html and "; taken" in html
    saved = genpqr.load(tmp_path / "fit" / "model.joblib")
    assert saved.diagnostics_.n_never_taken == 1 and saved.taken_actions_.tolist() == [True] * 3 + [False]


def test_cli_and_api_give_the_same_reward_continuous_states(tmp_path, capsys):
    """Continuous states: the linear state basis, a cross-fitted first stage (folds by --seed) and
    closed-form LSTD; rewards.csv's reward_<label> columns at every data row."""
    frame, items = _write(tmp_path)
    data = from_pandas(pd.read_csv(tmp_path / "data.csv"), episode="episode", time="time", state="x",
                       action="action", action_features=items)
    model = GenPQR(N.anchor_action("a"), gamma=0.9, policy_model=ConditionalLogit(), q_model=LSTDQ(random_state=0),
                   cross_fit=5, random_state=0, progress=False).fit(data)
    _fit_cli(tmp_path, capsys, "--state", "x", "--q-model", "lstd", "--out", tmp_path / "fit")
    rewards = pd.read_csv(tmp_path / "fit" / "rewards.csv")
    expected = model.reward(frame[["x"]].to_numpy())
    np.testing.assert_allclose(rewards[[f"reward_{a}" for a in data.action_labels]].to_numpy(), expected,
                               rtol=0, atol=1e-8)
    assert model.diagnostics_.n_never_taken == 1


def test_encoding_flag_gives_the_api_stage_2_on_action_features(tmp_path, capsys):
    """``--encoding action_features --q-model lstd`` is ``LSTDQ(encoding="action_features")`` (pair
    features ``phi(s) (x) x_a``): the API's reward to 1e-8, and it differs from the per-action
    default; ``--encoding action_features`` without ``--action-features`` is refused by name."""
    frame, items = _write(tmp_path)
    data = from_pandas(pd.read_csv(tmp_path / "data.csv"), episode="episode", time="time", state="x",
                       action="action", action_features=items)
    kw = dict(policy_model=ConditionalLogit(), cross_fit=5, random_state=0, progress=False)
    model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model=LSTDQ(encoding="action_features", random_state=0),
                   **kw).fit(data)
    _fit_cli(tmp_path, capsys, "--state", "x", "--q-model", "lstd", "--encoding", "action_features",
             "--out", tmp_path / "fit")
    rewards = pd.read_csv(tmp_path / "fit" / "rewards.csv")[[f"reward_{a}" for a in data.action_labels]].to_numpy()
    np.testing.assert_allclose(rewards, model.reward(frame[["x"]].to_numpy()), rtol=0, atol=1e-8)
    per_action = GenPQR(N.anchor_action("a"), gamma=0.9, q_model=LSTDQ(random_state=0), **kw).fit(data)
    assert np.abs(rewards - per_action.reward(frame[["x"]].to_numpy())).max() > 1e-6
    code = main(["fit", str(tmp_path / "data.csv"), "--episode", "episode", "--time", "time", "--action", "action",
                 "--state", "x", "--gamma", "0.9", "--normalization", "anchor:a", "--q-model", "lstd",
                 "--encoding", "action_features", "--quiet", "--out", str(tmp_path / "fit2")])
    assert code == 2 and "--encoding action_features" in capsys.readouterr().err


def test_without_a_table_no_never_taken_figure(tmp_path):
    frame, _ = _write(tmp_path)
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", n_states=4).fit(data)
    assert model.diagnostics_.n_never_taken is None and "action table" not in str(model.summary())


def test_every_action_taken_says_none_never_taken(tmp_path):
    frame, items = _write(tmp_path)
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action",
                       action_features=items.drop(index="d"))
    model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact", n_states=4,
                   policy_model=ConditionalLogit(state_basis="onehot", n_states=4)).fit(data)
    assert model.diagnostics_.n_never_taken == 0
    assert "action table: 3 actions, 0 never taken" in str(model.summary())


def test_config_key_and_config_json_rerun(tmp_path, capsys):
    """``action_features`` is a config key like the flags; config.json holds its absolute path."""
    import json

    _write(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps({"action_features": str(tmp_path / "items.csv"), "state": "state"}))
    code = main(["fit", str(tmp_path / "data.csv"), "--config", str(tmp_path / "c.json"), "--episode", "episode",
                 "--time", "time", "--action", "action", "--gamma", "0.9", "--normalization", "anchor:a", "--quiet",
                 "--out", str(tmp_path / "fit")])
    assert code == 0, capsys.readouterr().err
    saved = json.loads((tmp_path / "fit" / "config.json").read_text())
    assert saved["action_features"] == str((tmp_path / "items.csv").resolve())
    assert saved["policy_model"] == "conditional-logit"


def test_from_episodes_carries_the_table():
    table = genpqr.ActionTable(["x", "y", "z"], [[0.0], [1.0], [2.0]])
    episodes = [{"states": np.arange(4.0)[:, None], "actions": np.array(["x", "y", "x"])},
                {"states": np.arange(3.0)[:, None], "actions": np.array(["y", "y"]), "terminated": True}]
    data = from_episodes(episodes, action_features=table)
    assert data.action_table == table and data.taken_actions().tolist() == [True, True, False]
    from genpqr.exceptions import MissingActionLabelError

    with pytest.raises(MissingActionLabelError, match="'w'"):
        from_episodes([{"states": np.zeros((2, 1)), "actions": np.array(["w"])}], action_features=table)


@pytest.mark.parametrize("name, settings", [("two-tower", {}),
                                            ("bilinear", {"state_layers": (), "action_layers": ()})])
def test_two_tower_and_bilinear_policy_models_from_the_command_line(name, settings, tmp_path, capsys):
    """``--policy-model two-tower`` / ``bilinear`` (the Python-only models of docs/large_action_spaces.md,
    one registry entry each) fit the API's ``TwoTowerClassifier`` with the same settings and seed;
    on tabular states they are refused, pointing to the conditional logit."""
    pytest.importorskip("torch")
    from genpqr.models import TwoTowerClassifier

    frame, items = _write(tmp_path)
    data = from_pandas(pd.read_csv(tmp_path / "data.csv"), episode="episode", time="time", state="x",
                       action="action", action_features=items)
    model = GenPQR(N.anchor_action("a"), gamma=0.9, policy_model=TwoTowerClassifier(random_state=0, **settings),
                   q_model=LSTDQ(random_state=0), cross_fit=None, random_state=0, progress=False).fit(data)
    _fit_cli(tmp_path, capsys, "--state", "x", "--q-model", "lstd", "--policy-model", name, "--cross-fit", 0,
             "--out", tmp_path / "fit")
    rewards = pd.read_csv(tmp_path / "fit" / "rewards.csv")[[f"reward_{a}" for a in data.action_labels]].to_numpy()
    # the API's table lists d first, the command line sorts the labels: the towers (float32, mini-batches) see
    # the actions in another order, so the two fits agree to the training's precision, not to float64's
    np.testing.assert_allclose(rewards, model.reward(frame[["x"]].to_numpy()), rtol=1e-4, atol=1e-5)
    code = main(["fit", str(tmp_path / "data.csv"), "--episode", "episode", "--time", "time", "--action", "action",
                 "--state", "state", "--gamma", "0.9", "--normalization", "anchor:a", "--action-features",
                 str(tmp_path / "items.csv"), "--policy-model", name, "--quiet", "--out", str(tmp_path / "tab")])
    assert code == 2 and f"--policy-model {name} needs continuous states" in capsys.readouterr().err
    code = main(["fit", str(tmp_path / "data.csv"), "--episode", "episode", "--time", "time", "--action", "action",
                 "--state", "x", "--gamma", "0.9", "--normalization", "anchor:a", "--policy-model", name, "--quiet",
                 "--out", str(tmp_path / "none")])
    assert code == 2 and "give --action-features" in capsys.readouterr().err
