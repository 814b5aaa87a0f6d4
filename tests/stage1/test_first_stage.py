"""The smooth first stage for sparse ordered cells (genpqr.stage1): the sparse rule by
hand, the classifier contract, CV selection, and on a simulated engine-replacement panel a
log-policy close to the truth with no clip and a CCP answer away from log(99); the same rule
and the same reward through GenPQR's defaults and genpqr fit's (issue 19)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import genpqr
from genpqr import GenPQR, normalization as N
from genpqr.data import from_arrays, from_pandas
from genpqr.structural._ddc import IncrementKernel, project_reward
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.exceptions import ClippingWarning, CoverageWarning
from genpqr.stage1 import FrequencyClassifier, SplineLogit
from genpqr.stage1._first_stage import (SPARSE_MEDIAN_VISITS, cells_are_sparse, choose_tabular_policy,
                                        select_spline_logit)

from ..app.test_workflow import fit_cli


def test_sparse_rule_by_hand():
    # state 0: 40 x a0 and 40 x a1; state 1: 40 x a0 only (a1 never seen there); state 2 unvisited
    s = np.repeat([0, 0, 1], 40)
    a = np.repeat([0, 1, 0], 40)
    sparse, median, zero_share = cells_are_sparse(from_arrays(s, a, s), 3)
    assert median == 60.0 and zero_share == pytest.approx(40 / 120) and sparse  # 33% of rows at a hole
    s, a = np.repeat([0, 0, 1, 1], 40), np.tile([0, 1], 80)
    assert cells_are_sparse(from_arrays(s, a, s), 3) == (False, 80.0, 0.0)
    few = from_arrays(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1]))
    assert cells_are_sparse(few, 2) == (True, 2.0, 1.0) and 2 < SPARSE_MEDIAN_VISITS  # each row its own episode


def test_spline_logit_is_a_classifier_with_interior_probabilities():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, 2000).astype(float)
    y = np.where(rng.random(2000) < 1 / (1 + np.exp(-(x - 40) / 3)), "b", "a")
    model = SplineLogit(n_knots=4, C=10.0)
    assert model.fit(x[:, None], y) is model and list(model.classes_) == ["a", "b"]
    p = model.predict_proba(np.arange(60.0)[:, None])  # beyond the observed range: linear extrapolation
    assert np.all((p > 0) & (p < 1)) and np.allclose(p.sum(axis=1), 1.0)
    assert clone(model).get_params()["n_knots"] == 4 and not hasattr(clone(model), "classes_")
    truth = 1 / (1 + np.exp(-(np.arange(50) - 40) / 3))
    assert np.max(np.abs(model.predict_proba(np.arange(50.0)[:, None])[:, 1] - truth)) < 0.08


def test_selection_by_episode_grouped_cv_and_the_choice():
    rng = np.random.default_rng(1)
    s = rng.integers(0, 30, 1500)
    a = (rng.random(1500) < 1 / (1 + np.exp(-(s - 25) / 2))).astype(int)
    data = from_arrays(s, a, s, episode_ids=np.arange(1500) // 50)
    model, scores = select_spline_logit(data, knots=(3, 5), C=(1.0, 100.0), random_state=0)
    assert len(scores) == 4 and scores[f"n_knots={model.n_knots}, C={model.C:g}"] == min(scores.values())
    clf, choice = choose_tabular_policy(data, 30, ordered=True, random_state=0)
    assert choice.name == "spline" and isinstance(clf, SplineLogit) and "cells are sparse" in choice.reason
    assert "cross-validated log loss" in choice.reason and np.isinf(choice.cv_log_loss["frequency"])
    clf, choice = choose_tabular_policy(data, 30, ordered=False, random_state=0)
    assert choice.name == "frequency" and isinstance(clf, FrequencyClassifier) and "not ordered" in choice.reason


RUST = dict(n_states=90, beta=0.9999, rc=10.075, theta11=2.293, theta3=(0.3919, 0.5953, 0.0128))


@pytest.fixture(scope="module")
def rust_panel():
    model = bus_engine(**RUST)
    panel = simulate_buses(model, n_buses=37, n_periods=117, random_state=0)
    return model, panel


def test_spline_first_stage_on_a_bus_panel_is_close_to_the_truth(rust_panel):
    model, panel = rust_panel
    data = from_pandas(panel.frame.drop(columns="next_mileage"), episode="bus", time="month", state="mileage",
                       action="action")
    clf, choice = choose_tabular_policy(data, 90, ordered=True, random_state=0)
    assert choice.name == "spline" and choice.zero_share > 0.5  # replace unobserved at most cells
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClippingWarning)
        est = GenPQR(N.anchor_action("replace"), gamma=model.beta, q_model="exact", n_states=90, policy_model=clf,
                     cross_fit=5, transition_model=IncrementKernel(2, "replace"), random_state=0).fit(data)
    assert est.diagnostics_.clip == (0.0, 1.0) and est.diagnostics_.fraction_clipped == 0.0
    visited = np.bincount(data.states[:, 0].astype(int), minlength=90) > 0
    err = np.abs(est.log_policy(np.arange(90.0)) - np.log(model.policy))[visited]
    assert err[:, 0].max() < 0.05  # log pi(keep)
    assert np.median(err[:, 1]) < 0.3  # log pi(replace), rare: about 0.1 to 0.2 on these panels
    theta = project_reward(est.stage2_.recovery.reward, model.features("anchor"), est.stage2_.counts).theta
    assert abs(theta[0] - np.log(99)) > 1.0  # no longer the clip's log(0.99/0.01)


def test_cli_says_which_first_stage_and_why(rust_panel, tmp_path, capsys):
    _, panel = rust_panel
    path = tmp_path / "bus.csv"
    panel.frame.drop(columns="next_mileage").to_csv(path, index=False)
    flags = [path, "--episode", "bus", "--time", "month", "--state", "mileage", "--action", "action", "--gamma",
             0.9999, "--normalization", "anchor:replace", "--transition", "increment:2:replace", "--n-states", 90,
             "--out", tmp_path / "o", "--quiet"]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    out = " ".join(out.split())  # lines wrapped at 100 characters
    assert "first stage: spline: spline logit" in out and "cells are sparse" in out
    assert "probability clip: (0, 1) [auto: no clip" in out and "ClippingWarning" not in out
    html = (tmp_path / "o" / "report.html").read_text()
    assert "first stage (policy model)" in html and "spline logit" in html
    code, out, err = fit_cli(flags[:-3] + ["--out", tmp_path / "f", "--policy-model", "frequency", "--quiet"], capsys)
    out = " ".join(out.split())
    assert code == 0 and "ClippingWarning" in out
    # a requested first stage is named too, with the sparsity that would have chosen the spline
    assert "first stage: frequency: requested (--policy-model frequency)" in out
    assert "--policy-model auto would choose a spline logit" in out
    assert "requested (--policy-model frequency)" in (tmp_path / "f" / "report.html").read_text()


def test_degenerate_training_folds_and_bad_requests():
    one_class = SplineLogit().fit(np.arange(10.0)[:, None], np.zeros(10, dtype=int))
    np.testing.assert_array_equal(one_class.predict_proba(np.arange(3.0)[:, None]), np.ones((3, 1)))
    one_state = SplineLogit().fit(np.zeros((4, 1)), np.array([0, 1, 1, 1]))
    np.testing.assert_allclose(one_state.predict_proba(np.zeros((2, 1))), [[0.25, 0.75]] * 2)
    data = from_arrays(np.arange(20) % 5, np.arange(20) % 2, np.arange(20) % 5, episode_ids=np.arange(20) // 4)
    with pytest.raises(ValueError, match="needs an ordered state"):
        choose_tabular_policy(data, 5, ordered=False, force="spline")


def test_zero_share_leaves_the_choice_s_episode_out():
    # state 0: episode 0 takes a1 once, everything else is a0; without episode 0, a1 is unseen at state 0
    s = np.zeros(40, dtype=int)
    a = np.zeros(40, dtype=int)
    a[0] = 1
    ep = np.repeat(np.arange(4), 10)
    sparse, median, zero_share = cells_are_sparse(from_arrays(s, a, s, episode_ids=ep), 1)
    assert zero_share == pytest.approx(10 / 40) and sparse  # episode 0's 10 rows sit at a held-out hole
    a[10] = 1  # a second episode takes a1 too: every episode sees a1 among the others
    assert cells_are_sparse(from_arrays(s, a, s, episode_ids=ep), 1) == (False, 40.0, 0.0)


def _docs_bus_csv(path):
    """The panel of docs/structural_estimation.md, written as its first block writes it."""
    truth = bus_engine(**RUST)
    sim = simulate_buses(truth, n_buses=37, n_periods=117, random_state=0).frame
    pd.DataFrame({"bus": sim.bus, "month": sim.month, "mileage_bin": sim.mileage,
                  "replace": (sim.action == "replace").astype(int)}).to_csv(path, index=False)
    return from_pandas(pd.read_csv(path), episode="bus", time="month", state="mileage_bin", action="replace")


def test_api_and_cli_defaults_give_the_same_reward_on_the_bus_panel(tmp_path, capsys):
    """Issue 19: GenPQR with its defaults (no policy_model, cross_fit or random_state) and genpqr fit
    with its defaults (--policy-model auto, --cross-fit 5, --seed 0) choose the same first stage by
    the same rule and give the same reward table."""
    path = tmp_path / "panel.csv"
    data = _docs_bus_csv(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)  # the anchor (replace) is rare: expected here
        warnings.simplefilter("error", ClippingWarning)
        model = GenPQR(N.anchor_action(1), gamma=0.9999, q_model="exact", n_states=90,
                       transition_model=IncrementKernel(2, 1)).fit(data)
    code, out, err = fit_cli([path, "--episode", "bus", "--time", "month", "--state", "mileage_bin", "--action",
                              "replace", "--gamma", 0.9999, "--normalization", "anchor:1", "--transition",
                              "increment:2:1", "--n-states", 90, "--out", tmp_path / "fit", "--quiet"], capsys)
    assert code == 0, err
    table = model.reward_table()
    rewards = pd.read_csv(tmp_path / "fit" / "rewards.csv")
    np.testing.assert_allclose(rewards[[f"reward_{a}" for a in table.columns]].to_numpy(), table.to_numpy(),
                               rtol=0, atol=1e-8)
    assert model.first_stage_.name == "spline" and model.diagnostics_.clip == (0.0, 1.0)
    line = f"first stage: {model.first_stage_.describe()}"
    assert line in str(model.summary()) and line in " ".join(out.split())  # the same choice, said the same way
    assert genpqr.load(tmp_path / "fit" / "model.joblib").first_stage_.describe() == model.first_stage_.describe()
    assert "ClippingWarning" not in out and table[0].between(7.0, 8.0).all()  # r(s, keep); no clip at 5.02
    # cross-fitting changes the out-of-fold diagnostics only; another seed draws other folds through both doors
    crossed = GenPQR(**{**model.get_params(), "cross_fit": 5, "random_state": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        crossed.fit(data)
    np.testing.assert_array_equal(crossed.reward_table().to_numpy(), table.to_numpy())
    assert crossed.diagnostics_.policy_log_loss_kind == "out-of-fold" != model.diagnostics_.policy_log_loss_kind


def test_the_rule_is_the_same_function_with_the_same_seed(rust_panel):
    """The ordered state: an increment kernel or n_states (GenPQR), the seed of the rule's folds:
    random_state, None meaning genpqr fit's default --seed 0."""
    from genpqr.app.config import FitConfig
    from genpqr.stage1._first_stage import DEFAULT_SEED, state_is_ordered

    _, panel = rust_panel
    data = from_pandas(panel.frame.drop(columns="next_mileage"), episode="bus", time="month", state="mileage",
                       action="action")
    assert state_is_ordered(IncrementKernel(2, "replace")) and state_is_ordered(None, 90)
    assert not state_is_ordered(None, None) and not state_is_ordered(IncrementKernel(2), 90, identity=False)
    assert DEFAULT_SEED == 0 == FitConfig().seed
    default = choose_tabular_policy(data, 90, ordered=True)[1]
    assert default == choose_tabular_policy(data, 90, ordered=True, random_state=0)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unordered = GenPQR(N.anchor_action("replace"), gamma=0.9, q_model="exact").fit(data)
    assert unordered.first_stage_.name == "frequency" and "not ordered" in unordered.first_stage_.reason
