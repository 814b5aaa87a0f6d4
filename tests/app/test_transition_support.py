"""`genpqr fit`'s transition support: transitions_<action> in rewards.csv, the thin-transitions
warning, the reward's uncertainty by source, a float32 kernel, and no fragmented frames."""

import warnings

import numpy as np
import pandas as pd
import pytest

from genpqr import GenPQR, ThinTransitionsWarning, from_pandas, normalization as N
from genpqr.estimator._diagnostic_checks import THIN_SHARE, THIN_TRANSITIONS
from genpqr.stage1 import FrequencyClassifier

from .test_workflow import fit_cli, tabular_problem, write_tabular_csv

MANY = np.array([f"a{k:02d}" for k in range(26)])


def _thin_csv(path):
    """26 actions, 20 states, 150 episodes of 8 steps: most (state, action) cells see a few moves."""
    return write_tabular_csv(path, n_episodes=150, horizon=8, S=20, labels=MANY)


def _argv(csv, out, *extra):
    return [str(csv), "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
            "--gamma", "0.9", "--normalization", "anchor:a00", "--policy-model", "frequency", "--cross-fit", "0",
            "--out", str(out), "--quiet", *extra]


def test_many_actions_bootstrap_no_fragmentation_and_transition_columns(tmp_path, capsys):
    """25+ actions with --bootstrap: no pandas PerformanceWarning; transitions_<action> for every
    action (0 where the action is never taken at a state) equal to the model's counts; the
    thin-transitions warning names rewards.csv; the uncertainty split is printed and written."""
    csv = tmp_path / "many.csv"
    frame, _ = _thin_csv(csv)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        code, out, err = fit_cli(_argv(csv, tmp_path / "fit", "--bootstrap", "3", "--transition", "counts",
                                       "--verbose"), capsys)  # the warnings in full
    assert code == 0, err
    rewards = pd.read_csv(tmp_path / "fit" / "rewards.csv")
    assert [c for c in rewards.columns if c.startswith("transitions_")] == [f"transitions_{a}" for a in MANY]
    # the observed moves out of each (state, action): every row but an episode's last
    moves = frame[frame.groupby("episode")["time"].transform("max") != frame["time"]]
    expected = pd.crosstab(moves["state"], moves["action"]).reindex(index=rewards["state"], columns=MANY,
                                                                  fill_value=0)
    np.testing.assert_array_equal(rewards[[f"transitions_{a}" for a in MANY]].to_numpy(), expected.to_numpy())
    assert (rewards[[f"transitions_{a}" for a in MANY]] == 0).any().any()
    assert "ThinTransitionsWarning" in out and "transitions_<action>" in out and "rewards.csv" in out
    assert "reward SE from the policy:" in out and "from the transitions:" in out
    by_source = pd.read_csv(tmp_path / "fit" / "reward_se_by_source.csv")
    assert len(by_source) == rewards.shape[0] * MANY.size
    assert {"se_policy", "se_transitions", "se_both", "transitions", "visits"} <= set(by_source.columns)
    assert "Transition support" in (tmp_path / "fit" / "report.html").read_text()


def test_given_kernel_float32_accepted_and_no_thin_warning(tmp_path, capsys):
    """A kernel saved in float32 (rows off 1 by ~1e-7) is accepted, renormalized and said so; a
    given kernel never raises the thin-transitions warning; a real excess is refused."""
    csv = tmp_path / "many.csv"
    _, mdp = _thin_csv(csv)
    kernel = tmp_path / "P32.npy"
    np.save(kernel, mdp.kernel.dense().astype(np.float32))
    code, out, err = fit_cli(_argv(csv, tmp_path / "fit", "--transition", str(kernel), "--bootstrap", "2"), capsys)
    assert code == 0, err
    assert "renormalized to sum to 1" in out and "ThinTransitionsWarning" not in out
    assert "from the transitions: 0 " in out and "no transition part" in out  # the kernel is given
    code, out, err = fit_cli(_argv(csv, tmp_path / "fit1", "--transition", str(kernel)), capsys)
    source = next(x for x in out.splitlines() if "where the reward's uncertainty comes from" in x)
    assert "the policy -- a median of" in source and "the transitions are the given kernel" in source
    bad = mdp.kernel.dense()
    bad[2, 2, 0] += 1e-4
    np.save(kernel, bad)
    code, _, err = fit_cli(_argv(csv, tmp_path / "fit2", "--transition", str(kernel)), capsys)
    assert code == 2 and "P[2, 2, :] sums to 1.0001" in err


@pytest.mark.filterwarnings("ignore::genpqr.exceptions.CoverageWarning")
def test_thin_share_and_api_warning():
    """transition_counts_ counts moves (not choices); the share is that of the rows on cells with
    fewer than THIN_TRANSITIONS moves, and the warning fires above THIN_SHARE only when P is estimated."""
    mdp, policy = tabular_problem(S=20, K=26)
    from genpqr.envs import simulate_tabular

    data = simulate_tabular(mdp, policy, n_episodes=150, horizon=8, random_state=1)
    with pytest.warns(ThinTransitionsWarning, match="rewards.csv"):
        model = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=20, transition_model="counts",
                       policy_model=FrequencyClassifier()).fit(data)
    trans = data.with_next()
    cells = np.zeros((20, 26))
    np.add.at(cells, (trans.states[:, 0].astype(int), trans.actions), 1)
    np.testing.assert_array_equal(model.transition_counts_, cells)
    visits = model.stage2_.counts
    share = visits[(cells < THIN_TRANSITIONS) & (visits > 0)].sum() / visits.sum()
    assert model.diagnostics_.thin_transition_share == pytest.approx(share, abs=1e-12) and share > THIN_SHARE
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThinTransitionsWarning)
        given = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=20,
                       policy_model=FrequencyClassifier(), transition_model=mdp.kernel).fit(data)
        # the default chooses a model that pools the thin cells: its kernel is not the counts of each cell
        pooled = GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=20, random_state=0,
                        policy_model=FrequencyClassifier()).fit(data)
    assert np.isnan(given.diagnostics_.thin_transition_share)
    assert pooled.transition_selection_.chosen != "counts" and np.isnan(pooled.diagnostics_.thin_transition_share)


def test_no_thin_warning_on_the_bundled_example():
    from genpqr import datasets

    frame = pd.read_csv(datasets.path("choices"))
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThinTransitionsWarning)
        model = GenPQR(N.anchor_action("a"), gamma=0.9, q_model="exact").fit(data)
    assert model.diagnostics_.thin_transition_share < THIN_SHARE
