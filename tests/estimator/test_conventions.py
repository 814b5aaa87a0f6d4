"""The data conventions of structural estimation (issue 9, item 4), each on a hand-written panel:
every observed choice enters stage 1 and the choice counts (the last row of an episode too);
every observed transition enters the kernel; the increment kernel under the reset action
follows Rust's timing (P(.|x, replace) = P(.|0, keep)); several groups pooled in one file."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import Ridge

from genpqr import GenPQR, normalization as N
from genpqr.structural._nfxp import NFXP
from genpqr.data import from_pandas
from genpqr.structural._ddc import IncrementKernel, choice_counts, increment_kernel, increment_probabilities, kernel_from_increments
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.evaluation._inference import resample_episodes
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage2 import FQE

from ..app.test_workflow import fit_cli

# two buses; mileage bins 0..5; "r" = replace (resets to 0, then the month's increment from 0)
PANEL = pd.DataFrame({
    "bus":     [7, 7, 7, 7, 7, 3, 3, 3, 3],
    "month":   [0, 1, 2, 3, 4, 0, 1, 2, 3],
    "mileage": [0, 1, 3, 4, 1, 2, 2, 3, 0],
    "action":  ["k", "k", "k", "r", "k", "k", "k", "r", "r"],
})


def _panel():
    return from_pandas(PANEL.sample(frac=1.0, random_state=0), episode="bus", time="month", state="mileage",
                       action="action")


def test_last_row_of_each_episode_is_a_choice_without_a_next_state():
    t = _panel()
    assert t.n == len(PANEL) and t.n_choice_only == 2  # both buses' last months are kept
    last = ((t.episode_ids == 1) & (t.timesteps == 4)) | ((t.episode_ids == 0) & (t.timesteps == 3))  # 3->0, 7->1
    np.testing.assert_array_equal(~t.next_observed, last)
    assert np.all(np.isnan(t.next_states[~t.next_observed])) and np.all(t.truncated[~t.next_observed])
    # the choice counts: every row, by hand (codes: k=0, r=1)
    hand = np.zeros((6, 2))
    for s, a in zip(PANEL["mileage"], PANEL["action"]):
        hand[s, int(a == "r")] += 1
    np.testing.assert_array_equal(choice_counts(t, 6), hand)
    # next-state consumers read the 7 complete transitions only
    w = t.with_next()
    assert w.n == 7 and w.n_choice_only == 0 and np.all(np.isfinite(w.next_states))
    # a consumer that forgot with_next() fails loudly on the NaN next states instead of using a placeholder
    from genpqr.stage2 import estimate_transitions

    with pytest.raises(ValueError, match="next_states"):
        estimate_transitions(t.states, t.actions, t.next_states, 6, 2)
    # keep_last=False: the rule before (rows dropped)
    assert from_pandas(PANEL, episode="bus", time="month", state="mileage", action="action", keep_last=False).n == 7


@pytest.mark.filterwarnings("ignore::genpqr.exceptions.GenPQRWarning")
def test_stage_one_uses_every_choice_and_the_kernel_every_transition():
    t = _panel()
    est = GenPQR(N.anchor_action("r"), gamma=0.9, q_model="exact", n_states=6, clip=(1e-3, 1.0),
                 policy_model=FrequencyClassifier(n_states=6), transition_model="counts").fit(t)
    hand_counts = choice_counts(t, 6)
    np.testing.assert_array_equal(est.stage2_.counts, hand_counts)
    np.testing.assert_array_equal(est.policy_.models[0].counts_, hand_counts)  # stage 1 saw all 9 choices
    # the count kernel: each consecutive pair of months within a bus, by hand
    pairs = {}
    for _, g in PANEL.sort_values(["bus", "month"]).groupby("bus"):
        rows = g.to_dict("records")
        for r0, r1 in zip(rows[:-1], rows[1:]):
            pairs.setdefault((r0["mileage"], int(r0["action"] == "r")), []).append(r1["mileage"])
    dense = est.stage2_.kernel.dense()
    for (s, a), nexts in pairs.items():
        np.testing.assert_allclose(dense[s, a], np.bincount(nexts, minlength=6) / len(nexts), atol=1e-15)
    assert est.diagnostics_.n_last_choices == 2 and est.diagnostics_.n_transitions == 9
    # the sample (FQE) path and the NFXP baseline run on the same data without touching a missing next state
    fqe = GenPQR(N.anchor_action("r"), gamma=0.5, q_model=FQE(Ridge(), n_iterations=5), clip=(1e-3, 1.0)).fit(t)
    assert np.all(np.isfinite(fqe.reward(np.arange(6.0)[:, None])))
    feats = np.zeros((6, 2, 2))
    feats[:, 0, 0], feats[:, 0, 1] = 1.0, -np.arange(6) / 10
    nfxp = NFXP(features=feats, gamma=0.5).fit(t)
    assert np.all(np.isfinite(nfxp.theta_))


def test_bootstrap_resampling_keeps_the_unobserved_next_states_aligned():
    t = _panel()
    sample = resample_episodes(t, np.random.default_rng(0))
    assert sample.n_choice_only == int(np.sum(np.isnan(sample.next_states[:, 0])))
    assert np.array_equal(np.isnan(sample.next_states[:, 0]), ~sample.next_observed)


def test_increment_kernel_equals_hand_counted_increments_with_rust_timing():
    t = _panel()
    # increments by hand (the 7 transitions): keep 0->1 (1), keep 1->3 (2), keep 3->4 (1), replace at 4 -> 1:
    # reset to 0 then +1 (1); keep 2->2 (0), keep 2->3 (1), replace at 3 -> 0: reset to 0 then +0 (0)
    hand = np.bincount([1, 2, 1, 1, 0, 1, 0], minlength=3) / 7
    probs, n_used = increment_probabilities(t, 10, 2, reset_action="r")
    assert n_used == 7
    np.testing.assert_allclose(probs, hand, atol=1e-15)
    K = increment_kernel(t, 10, 2, 2, reset_action="r").dense()
    np.testing.assert_allclose(K, kernel_from_increments(hand, 10, 2, reset=1).dense(), atol=1e-15)
    for x in range(10):  # the reset action: P(.|x, replace) = P(.|0, keep)
        np.testing.assert_allclose(K[x, 1], K[0, 0], atol=1e-15)
    np.testing.assert_allclose(K[3, 0, 3:6], hand, atol=1e-15)  # keep: from x


def test_pooled_groups_in_one_file(tmp_path, capsys):
    """Four bus groups with their own bus ids in one CSV: one panel, pooled counts and kernel."""
    model = bus_engine(n_states=40, rc=4.0, theta11=40.0)
    frames, parts = [], []
    for g in range(4):
        f = simulate_buses(model, n_buses=5 + g, n_periods=30, random_state=10 + g).frame
        f = f.drop(columns="next_mileage").assign(bus=lambda d, g=g: d["bus"] + 100 * (g + 1), group=g)
        frames.append(f)
        parts.append(from_pandas(f, episode="bus", time="month", state="mileage", action="action",
                                 action_labels=["keep", "replace"]))
    pooled_frame = pd.concat(frames).sample(frac=1.0, random_state=0)
    pooled = from_pandas(pooled_frame, episode="bus", time="month", state="mileage", action="action",
                         action_labels=["keep", "replace"])
    assert pooled.n == len(pooled_frame) and pooled.n_episodes == 5 + 6 + 7 + 8 and pooled.n_choice_only == 26
    np.testing.assert_array_equal(choice_counts(pooled, 40), sum(choice_counts(p, 40) for p in parts))
    used = [increment_probabilities(p, 40, 4, reset_action="replace") for p in parts]
    pooled_probs, n_pooled = increment_probabilities(pooled, 40, 4, reset_action="replace")
    assert n_pooled == sum(n for _, n in used) == pooled.n - 26
    np.testing.assert_allclose(pooled_probs, sum(p * n for p, n in used) / n_pooled, atol=1e-12)
    est = GenPQR(N.anchor_action("replace"), gamma=0.975, q_model="exact", n_states=40,
                 transition_model=IncrementKernel(4, "replace")).fit(pooled)
    assert est.diagnostics_.n_episodes == 26
    path = tmp_path / "pooled.csv"
    pooled_frame.to_csv(path, index=False)
    code, out, err = fit_cli([path, "--episode", "bus", "--time", "month", "--state", "mileage", "--action",
                              "action", "--gamma", 0.975, "--normalization", "anchor:replace", "--transition",
                              "increment:4:replace", "--n-states", 40, "--out", tmp_path / "o", "--quiet"], capsys)
    assert code == 0, err
    assert f"{pooled.n} choices" in out and "in 26 episodes" in out
    # the same bus ids in two groups are two buses only if the ids differ: a clash is an error
    clash = pd.concat([frames[0], frames[1].assign(bus=frames[1]["bus"] - 100)])
    with pytest.raises(ValueError, match=r"must be unique.*Column 'group' tells the duplicates apart.*"
                                         r"group \* 1000 \+ bus"):
        from_pandas(clash, episode="bus", time="month", state="mileage", action="action")
    # the action (a per-step column) is never offered as the group, even where it tells duplicates apart
    twin = pd.DataFrame({"bus": [1, 1], "month": [0, 0], "mileage": [3, 3], "action": ["keep", "replace"]})
    with pytest.raises(ValueError, match=r"must be unique; \[1, 0\] appears more than once$"):
        from_pandas(twin, episode="bus", time="month", state="mileage", action="action")


def test_to_pandas_round_trip_keeps_choice_only_rows():
    t = _panel()
    frame = t.to_pandas()
    assert "next_observed" in frame.columns and frame["next_mileage"].isna().sum() == 2
    back = from_pandas(frame, episode="episode", time="time", state="mileage", action="action",
                       terminated="terminated", truncated="truncated", next_state="next_mileage")
    for name in ("states", "actions", "next_states", "terminated", "truncated", "episode_ids", "next_observed"):
        np.testing.assert_array_equal(getattr(back, name), getattr(t, name), err_msg=name)
