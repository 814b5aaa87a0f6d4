"""Tests of genpqr.data: the three builders agree, labels map both ways, inputs are validated
with named messages and never modified, and the episode-grouped splits keep episodes whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genpqr.data import Transitions, from_arrays, from_episodes, from_pandas
from genpqr.data._spaces import FiniteActions

FIELDS = ("states", "actions", "next_states", "terminated", "truncated", "episode_ids", "outcomes", "rewards",
          "timesteps")


def assert_same_transitions(a: Transitions, b: Transitions, *, compare_terminal_next: bool = True,
                            fields=FIELDS) -> None:
    """Field-by-field equality. The next state of a terminated row is a placeholder that no
    computation reads (its continuation weight is 0), so it can be left out of the comparison."""
    assert isinstance(a, Transitions) and isinstance(b, Transitions)
    assert a.n == b.n
    np.testing.assert_array_equal(a.action_labels, b.action_labels)
    for name in fields:
        x, y = getattr(a, name), getattr(b, name)
        if x is None or y is None:
            assert x is None and y is None, name
            continue
        if name == "next_states" and not compare_terminal_next:
            live = ~a.terminated
            x, y = x[live], y[live]
        np.testing.assert_array_equal(x, y, err_msg=name)
        assert x.dtype == y.dtype, name


# ---------------------------------------------------------------------------- a small logged data set
# Four episodes covering the four ways an episode can end:
#   ep 0: T+1 states, terminated      ep 1: T+1 states, truncated (cut by a time limit)
#   ep 2: T states, terminated        ep 3: T states, not terminated (last step has no next state)
def _state(e: int, t: int) -> list[float]:
    return [10.0 * e + t, -(10.0 * e + t) / 4.0]


EPISODES_SPEC = [
    # (episode id in the frame, T, T+1 states?, terminated, actions, outcomes)
    ("ep-a", 3, True, True, ["left", "right", "stay"], [1.0, 2.0, 3.0]),
    ("ep-b", 2, True, False, ["stay", "stay"], [4.0, 5.0]),
    ("ep-c", 3, False, True, ["right", "left", "left"], [6.0, 7.0, 8.0]),
    ("ep-d", 3, False, False, ["left", "stay", "right"], [9.0, 10.0, 11.0]),
]


def make_episodes():
    out = []
    for e, (_, T, plus_one, done, actions, outcomes) in enumerate(EPISODES_SPEC):
        n_states = T + 1 if plus_one else T
        out.append({
            "states": np.array([_state(e, t) for t in range(n_states)]),
            "actions": np.array(actions),
            "terminated": done,
            "outcomes": np.array(outcomes),
        })
    return out


def make_frame():
    """The same data in long format: one row per step. For a truncated episode with T+1
    states the final state gets a row of its own (its action is never used); a terminated
    episode's final (absorbing) state is not a row."""
    rows = []
    for e, (ep_id, T, plus_one, done, actions, outcomes) in enumerate(EPISODES_SPEC):
        n_rows = T + 1 if (plus_one and not done) else T
        for t in range(n_rows):
            s = _state(e, t)
            rows.append({
                "episode": ep_id, "time": t, "x": s[0], "y": s[1],
                "action": actions[min(t, T - 1)],
                "done": bool(done and t == T - 1),
                "outcome": outcomes[min(t, T - 1)],
            })
    return pd.DataFrame(rows)


def expected_by_hand() -> Transitions:
    """The transitions written out by hand with from_arrays."""
    S = _state
    states = [S(0, 0), S(0, 1), S(0, 2), S(1, 0), S(1, 1), S(2, 0), S(2, 1), S(2, 2), S(3, 0), S(3, 1)]
    next_states = [S(0, 1), S(0, 2), S(0, 3), S(1, 1), S(1, 2), S(2, 1), S(2, 2), S(2, 2), S(3, 1), S(3, 2)]
    return from_arrays(
        np.array(states),
        ["left", "right", "stay", "stay", "stay", "right", "left", "left", "left", "stay"],
        np.array(next_states),
        terminated=[0, 0, 1, 0, 0, 0, 0, 1, 0, 0],
        truncated=[0, 0, 0, 0, 1, 0, 0, 0, 0, 1],
        episode_ids=[7, 7, 7, 8, 8, 9, 9, 9, 10, 10],
        outcomes=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
        timesteps=[0, 1, 2, 0, 1, 0, 1, 2, 0, 1],
    )


def pandas_kwargs(**extra):
    kw = dict(episode="episode", time="time", state=["x", "y"], action="action", terminated="done",
              outcome="outcome")
    kw.update(extra)
    return kw


# ---------------------------------------------------------------------------- the builders agree
def test_from_episodes_matches_hand_written_transitions():
    t = from_episodes(make_episodes(), keep_last=False)
    assert_same_transitions(t, expected_by_hand())
    np.testing.assert_array_equal(t.action_labels, ["left", "right", "stay"])
    assert (t.n, t.state_dim, t.n_actions, t.n_episodes, len(t)) == (10, 2, 3, 4, 10)
    # T+1 states: the terminated last step sees the real final state ...
    np.testing.assert_array_equal(t.next_states[2], _state(0, 3))
    # ... T states: the unobserved next state of the not-terminated episode's last step is dropped
    assert t.episode_ids.tolist().count(3) == 2


def test_from_pandas_matches_from_episodes():
    t_pd = from_pandas(make_frame(), **pandas_kwargs(keep_last=False))
    t_ep = from_episodes(make_episodes(), keep_last=False)
    # only the next state of the T+1-states terminated episode differs: a frame cannot hold the
    # absorbing state, so from_pandas stores a placeholder there (never read: continues == 0)
    assert_same_transitions(t_pd, t_ep, compare_terminal_next=False)
    assert t_pd.state_names == ("x", "y")
    np.testing.assert_array_equal(t_pd.next_states[2], _state(0, 2))  # the placeholder: its own state
    np.testing.assert_array_equal(t_pd.continues[t_pd.terminated], 0.0)


def test_from_pandas_row_order_does_not_matter():
    frame = make_frame()
    reference = from_pandas(frame, **pandas_kwargs())
    for seed in range(3):
        shuffled = frame.sample(frac=1.0, random_state=seed)
        assert not shuffled.index.equals(frame.index)
        assert_same_transitions(from_pandas(shuffled, **pandas_kwargs()), reference)
    # a non-default index does not matter either
    assert_same_transitions(from_pandas(frame.set_index(frame.index * 3 + 100), **pandas_kwargs()), reference)


def test_from_pandas_marks_truncation_before_a_dropped_last_row():
    frame = pd.DataFrame({"episode": [0, 0, 0, 1, 1], "time": [0, 1, 2, 0, 1], "s": [0.0, 1, 2, 5, 6],
                          "action": [1, 0, 1, 0, 0], "cut": [False, False, False, False, True]})
    t = from_pandas(frame, episode="episode", time="time", state="s", action="action", truncated="cut",
                    keep_last=False)
    assert t.n == 3  # the last row of each episode has no next state
    np.testing.assert_array_equal(t.states[:, 0], [0, 1, 5])
    np.testing.assert_array_equal(t.next_states[:, 0], [1, 2, 6])
    np.testing.assert_array_equal(t.truncated, [False, True, True])
    np.testing.assert_array_equal(t.terminated, [False, False, False])


def test_from_episodes_T_plus_one_and_T_states():
    s = np.arange(4.0)
    # T+1 states, not terminated: every step kept, the last truncated, next state observed
    t = from_episodes([{"states": s, "actions": [0, 1, 0]}])
    np.testing.assert_array_equal(t.next_states[:, 0], [1, 2, 3])
    np.testing.assert_array_equal(t.truncated, [False, False, True])
    np.testing.assert_array_equal(t.terminated, [False, False, False])
    # T states, not terminated, keep_last=False: the last step has no next state and is dropped
    t = from_episodes([{"states": s[:3], "actions": [0, 1, 0]}], keep_last=False)
    np.testing.assert_array_equal(t.states[:, 0], [0, 1])
    np.testing.assert_array_equal(t.truncated, [False, True])
    # ... by default it is a choice-only row: its choice is kept, its next state is unobserved
    t = from_episodes([{"states": s[:3], "actions": [0, 1, 0]}])
    np.testing.assert_array_equal(t.states[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(t.next_observed, [True, True, False])
    assert np.isnan(t.next_states[2, 0]) and t.n_choice_only == 1
    np.testing.assert_array_equal(t.with_next().states[:, 0], [0, 1])
    # T states, terminated: every step kept, the last terminated (next state a placeholder)
    t = from_episodes([{"states": s[:3], "actions": [0, 1, 0], "terminated": True}])
    np.testing.assert_array_equal(t.states[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(t.terminated, [False, False, True])
    np.testing.assert_array_equal(t.truncated, [False, False, False])
    np.testing.assert_array_equal(t.continues, [1.0, 1.0, 0.0])
    assert t.continues.dtype == np.float64


def test_from_episodes_rewards_and_mixed_episodes():
    eps = [{"states": [0, 1, 2], "actions": ["a", "b"], "rewards": [0.5, -1.0]},
           {"states": [3, 4], "actions": ["b", "c"], "rewards": [2.0, 3.0], "terminated": True}]
    t = from_episodes(eps)
    np.testing.assert_array_equal(t.rewards, [0.5, -1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.labels_of(), ["a", "b", "b", "c"])
    assert t.outcomes is None


def test_to_pandas_round_trip_with_next_state_columns():
    t = expected_by_hand()
    t = from_arrays(t.states, t.labels_of(), t.next_states, terminated=t.terminated, truncated=t.truncated,
                    episode_ids=t.episode_ids, outcomes=t.outcomes, rewards=np.arange(t.n) / 10.0,
                    timesteps=t.timesteps, state_names=["x", "y"])
    frame = t.to_pandas()
    assert list(frame.columns) == ["episode", "time", "x", "y", "action", "next_x", "next_y", "terminated",
                                   "truncated", "outcome", "reward"]
    back = from_pandas(frame, episode="episode", time="time", state=["x", "y"], action="action",
                       terminated="terminated", truncated="truncated", outcome="outcome", reward="reward",
                       next_state=["next_x", "next_y"])
    assert_same_transitions(back, t)  # exact, including truncated ends and terminal next states
    # and again from a shuffled frame
    assert_same_transitions(from_pandas(frame.sample(frac=1.0, random_state=1), episode="episode", time="time",
                                        state=["x", "y"], action="action", terminated="terminated",
                                        truncated="truncated", outcome="outcome", reward="reward",
                                        next_state=["next_x", "next_y"]), t)


def test_to_pandas_round_trip_long_format_when_every_episode_terminates():
    frame = make_frame()
    frame = frame[frame["episode"].isin(["ep-a", "ep-c"])]  # the two terminated episodes
    t = from_pandas(frame, **pandas_kwargs())
    out = t.to_pandas()
    assert list(out.columns[:4]) == ["episode", "time", "x", "y"]
    back = from_pandas(out, episode="episode", time="time", state=["x", "y"], action="action",
                       terminated="terminated", truncated="truncated", outcome="outcome")
    assert_same_transitions(back, t)


def test_from_pandas_next_state_errors():
    frame = expected_by_hand().to_pandas()
    with pytest.raises(ValueError, match="next_state"):
        from_pandas(frame, episode="episode", time="time", state=["s0", "s1"], action="action",
                    next_state="next_s0")
    with pytest.raises(ValueError, match="next_zz"):
        from_pandas(frame, episode="episode", time="time", state=["s0", "s1"], action="action",
                    next_state=["next_s0", "next_zz"])


# ---------------------------------------------------------------------------- action labels
@pytest.mark.parametrize(
    "actions, labels",
    [
        (["b", "a", "c", "a"], ["a", "b", "c"]),
        ([5, -2, 7, 5], [-2, 5, 7]),
        ([0.5, -1.25, 3.0, 0.5], [-1.25, 0.5, 3.0]),
        (np.array([True, False, True]), [False, True]),
    ],
)
def test_observed_labels_are_sorted_codes(actions, labels):
    t = from_arrays(np.zeros((len(actions), 1)), actions, np.zeros((len(actions), 1)))
    np.testing.assert_array_equal(t.action_labels, labels)
    assert t.actions.dtype == np.int64
    np.testing.assert_array_equal(t.actions, [labels.index(a) for a in actions])
    np.testing.assert_array_equal(t.labels_of(), actions)
    np.testing.assert_array_equal(t.encoder.decode(t.encoder.encode(actions)), actions)
    np.testing.assert_array_equal(t.labels_of([0]), labels[:1])


def test_fixed_action_labels_order_and_never_observed_action():
    order = ["stay", "left", "right", "jump"]  # "jump" never happens
    t = from_arrays(np.zeros((4, 1)), ["left", "right", "left", "stay"], np.zeros((4, 1)), action_labels=order)
    np.testing.assert_array_equal(t.action_labels, order)
    np.testing.assert_array_equal(t.actions, [1, 2, 1, 0])
    np.testing.assert_array_equal(t.action_counts(), [1, 2, 1, 0])
    assert t.n_actions == 4
    assert t.encoder.encode_one("jump") == 3
    # the same order through the other builders
    eps = [{"states": [0.0, 1.0, 2.0, 3.0, 4.0], "actions": ["left", "right", "left", "stay"]}]
    np.testing.assert_array_equal(from_episodes(eps, action_labels=order).actions, [1, 2, 1, 0])
    frame = pd.DataFrame({"e": 0, "t": range(5), "s": np.arange(5.0), "a": ["left", "right", "left", "stay", "stay"]})
    np.testing.assert_array_equal(
        from_pandas(frame, episode="e", time="t", state="s", action="a", action_labels=order,
                    keep_last=False).actions, [1, 2, 1, 0])


def test_float_labels_fixed_order():
    enc = FiniteActions(np.array([2.5, -1.0, 0.25]))
    np.testing.assert_array_equal(enc.encode([0.25, 2.5, -1.0, 0.25]), [2, 0, 1, 2])
    np.testing.assert_array_equal(enc.decode([2, 0, 1]), [0.25, 2.5, -1.0])


def test_unknown_label_error_names_label_and_known_labels():
    with pytest.raises(ValueError, match=r"\['fly'\].*\['stay', 'left'\]"):
        from_arrays(np.zeros((2, 1)), ["stay", "fly"], np.zeros((2, 1)), action_labels=["stay", "left"])
    enc = FiniteActions(np.array([3, 1]))
    with pytest.raises(ValueError, match=r"\[2\].*\[3, 1\]"):
        enc.encode([1, 2])
    with pytest.raises(ValueError, match="new_actions"):
        enc.encode([9], name="new_actions")
    with pytest.raises(ValueError, match="action"):
        enc.encode_one(0)


def test_encoder_rejects_bad_labels_and_codes():
    with pytest.raises(ValueError, match="distinct"):
        FiniteActions(np.array(["a", "b", "a"]))
    with pytest.raises(ValueError, match="non-empty"):
        FiniteActions(np.array([]))
    with pytest.raises(ValueError, match="distinct"):
        from_arrays(np.zeros((1, 1)), ["a"], np.zeros((1, 1)), action_labels=["a", "a"])
    enc = FiniteActions(np.array(["a", "b"]))
    with pytest.raises(ValueError, match="codes"):
        enc.decode([0, 2])
    with pytest.raises(ValueError, match="codes"):
        enc.decode([-1])
    with pytest.raises(ValueError, match="1-D"):
        enc.encode(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="NaN"):
        FiniteActions(np.array([0.0, 1.0])).encode([0.0, np.nan])


@settings(max_examples=60, deadline=None)
@given(
    labels=st.one_of(
        st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=6, unique=True),
        st.lists(st.integers(-1000, 1000), min_size=1, max_size=6, unique=True),
        st.lists(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=6, unique=True),
    ),
    data=st.data(),
)
def test_encode_decode_are_inverse(labels, data):
    enc = FiniteActions(np.array(labels))
    K = len(labels)
    np.testing.assert_array_equal(enc.encode(np.array(labels)), np.arange(K))
    np.testing.assert_array_equal(enc.decode(np.arange(K)), np.array(labels))
    codes = np.array(data.draw(st.lists(st.integers(0, K - 1), min_size=1, max_size=20)))
    np.testing.assert_array_equal(enc.encode(enc.decode(codes)), codes)
    sample = np.array(labels)[codes]
    np.testing.assert_array_equal(enc.decode(enc.encode(sample)), sample)
    # from_observed: the sorted distinct labels
    obs = FiniteActions.from_observed(sample)
    np.testing.assert_array_equal(obs.labels, np.unique(sample))


# ---------------------------------------------------------------------------- hypothesis: builders agree
_episode = st.fixed_dictionaries({
    "T": st.integers(1, 5),
    "plus_one": st.booleans(),
    "terminated": st.booleans(),
    "seed": st.integers(0, 2**16),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episodes=st.lists(_episode, min_size=1, max_size=5),
       alphabet=st.sampled_from([["a", "b", "c"], [10, -3], [0.5, -2.0, 7.25, 1.0]]))
def test_from_episodes_and_from_pandas_agree(episodes, alphabet):
    eps, rows, kept_labels = [], [], []
    for e, spec in enumerate(episodes):
        rng = np.random.default_rng(spec["seed"])
        T = spec["T"]
        n_states = T + 1 if spec["plus_one"] else T
        states = rng.normal(size=(n_states, 2)).round(3)
        actions = np.array(alphabet, dtype=object)[rng.integers(0, len(alphabet), size=T)].tolist()
        outcomes = rng.normal(size=T).round(3)
        eps.append({"states": states, "actions": np.array(actions), "terminated": spec["terminated"],
                    "outcomes": outcomes})
        n_rows = T + 1 if (spec["plus_one"] and not spec["terminated"]) else T
        for t in range(n_rows):
            rows.append({"ep": 3 * e - 5, "t": 2 * t, "s0": states[t, 0], "s1": states[t, 1],
                         "a": actions[min(t, T - 1)], "done": spec["terminated"] and t == T - 1,
                         "y": outcomes[min(t, T - 1)]})
        m = T if (spec["plus_one"] or spec["terminated"]) else T - 1
        kept_labels += actions[:m]
    n_expected = len(kept_labels)
    frame = pd.DataFrame(rows).sample(frac=1.0, random_state=0)
    kw = dict(episode="ep", time="t", state=["s0", "s1"], action="a", terminated="done", outcome="y")
    if n_expected == 0:
        with pytest.raises(ValueError, match="at least one"):
            from_episodes(eps, keep_last=False)
        with pytest.raises(ValueError, match="at least one"):
            from_pandas(frame, keep_last=False, **kw)
        return
    t_ep = from_episodes(eps, keep_last=False)
    t_pd = from_pandas(frame, keep_last=False, **kw)
    assert t_ep.n == n_expected
    fields = tuple(f for f in FIELDS if f != "timesteps")  # the frame's clock ticks by 2
    assert_same_transitions(t_pd, t_ep, compare_terminal_next=False, fields=fields)
    np.testing.assert_array_equal(t_pd.timesteps, 2 * t_ep.timesteps)
    # every row's code decodes back to the logged label, and re-encodes to the same code
    assert t_ep.labels_of().tolist() == kept_labels
    np.testing.assert_array_equal(t_ep.encoder.encode(t_ep.labels_of()), t_ep.actions)


# ---------------------------------------------------------------------------- validation
def _base(n=4, d=2):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), np.array([0, 1, 1, 0][:n]), rng.normal(size=(n, d))


@pytest.mark.parametrize("name", ["terminated", "truncated", "episode_ids", "outcomes", "rewards", "timesteps"])
def test_length_mismatch_of_optional_vectors(name):
    s, a, s2 = _base()
    value = [0, 1, 0] if name in ("terminated", "truncated") else [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match=name):
        from_arrays(s, a, s2, **{name: value})


def test_shape_errors_name_the_argument():
    s, a, s2 = _base()
    with pytest.raises(ValueError, match="actions"):
        from_arrays(s, np.zeros((4, 2)), s2)
    with pytest.raises(ValueError, match="next_states"):
        from_arrays(s, a, s2[:, :1])
    with pytest.raises(ValueError, match="states has 3 rows"):
        from_arrays(s[:3], a, s2)
    with pytest.raises(ValueError, match="next_states has 3 rows"):
        from_arrays(s, a, s2[:3])
    with pytest.raises(ValueError, match="states must be a 2-D"):
        from_arrays(np.zeros((4, 2, 1)), a, s2)
    with pytest.raises(ValueError, match="outcomes must be a 1-D"):
        from_arrays(s, a, s2, outcomes=np.zeros((4, 1)))
    # an (n, 1) column of actions is accepted as 1-D
    assert from_arrays(s, a[:, None], s2).n == 4


@pytest.mark.parametrize(
    "name, bad",
    [("states", np.nan), ("states", np.inf), ("next_states", -np.inf), ("next_states", np.nan),
     ("outcomes", np.nan), ("outcomes", np.inf), ("rewards", np.nan)],
)
def test_non_finite_values_are_rejected(name, bad):
    s, a, s2 = _base()
    args = {"states": s.copy(), "next_states": s2.copy(), "outcomes": np.zeros(4), "rewards": np.zeros(4)}
    args[name][(1, 0) if args[name].ndim == 2 else 1] = bad
    with pytest.raises(ValueError, match=f"{name} must be finite"):
        from_arrays(args["states"], a, args["next_states"], outcomes=args["outcomes"], rewards=args["rewards"])


def test_non_numeric_states_and_non_boolean_flags():
    s, a, s2 = _base()
    with pytest.raises(TypeError, match="states must be numeric"):
        from_arrays(np.array([["a", "b"]] * 4), a, s2)
    with pytest.raises(TypeError, match="next_states must be numeric"):
        from_arrays(s, a, np.array([[None, 1.0]] * 4, dtype=object))
    with pytest.raises(TypeError, match="outcomes must be numeric"):
        from_arrays(s, a, s2, outcomes=["x"] * 4)
    with pytest.raises(TypeError, match="terminated must be boolean"):
        from_arrays(s, a, s2, terminated=["yes", "no", "no", "no"])
    with pytest.raises(TypeError, match="terminated must be boolean"):
        from_arrays(s, a, s2, terminated=[0, 2, 0, 0])
    with pytest.raises(TypeError, match="truncated must be boolean"):
        from_arrays(s, a, s2, truncated=[0.5, 0, 0, 0])
    # 0/1 integers are fine
    t = from_arrays(s, a, s2, terminated=[0, 1, 0, 0], truncated=np.array([1.0, 0, 0, 0]))
    assert t.terminated.dtype == bool and t.truncated.dtype == bool


def test_empty_input_and_missing_actions():
    with pytest.raises(ValueError, match="at least one row"):
        from_arrays(np.empty((0, 2)), [], np.empty((0, 2)))
    with pytest.raises(ValueError, match="at least one episode"):
        from_episodes([])
    s, _, s2 = _base()
    with pytest.raises(ValueError, match="None"):
        from_arrays(s, np.array(["a", None, "b", "a"], dtype=object), s2)
    with pytest.raises(ValueError, match="None"):
        from_episodes([{"states": [0.0, 1.0, 2.0], "actions": np.array(["a", None], dtype=object)}])
    with pytest.raises(ValueError, match="NaN"):
        from_arrays(s, [0.0, np.nan, 1.0, 0.0], s2)


def _frame():
    return pd.DataFrame({"ep": [0, 0, 0, 1, 1], "t": [0, 1, 2, 0, 1], "s": [1.0, 2, 3, 4, 5],
                         "a": ["x", "y", "x", "y", "y"], "done": [False, False, True, False, False],
                         "y": [0.1, 0.2, 0.3, 0.4, 0.5]})


def test_from_pandas_validation():
    f = _frame()
    kw = dict(episode="ep", time="t", state="s", action="a", terminated="done", outcome="y")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['time', 'r'\]"):
        from_pandas(f, episode="ep", time="time", state="s", action="a", reward="r")
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        from_pandas(f.to_dict(), **kw)
    with pytest.raises(ValueError, match=r"\(ep, t\) pairs must be unique; \[0, 1\]"):
        from_pandas(f.assign(t=[0, 1, 1, 0, 1]), **kw)
    with pytest.raises(ValueError, match="'done' marks a step as terminal although its episode continues"):
        from_pandas(f.assign(done=[False, True, False, False, False]), **kw)
    with pytest.raises(TypeError, match="state column 's' must be numeric"):
        from_pandas(f.assign(s=list("abcde")), **kw)
    with pytest.raises(ValueError, match="action column 'a' has 1 missing"):
        from_pandas(f.assign(a=["x", None, "x", "y", "y"]), **kw)
    with pytest.raises(ValueError, match="states must be finite"):
        from_pandas(f.assign(s=[1.0, np.nan, 3, 4, 5]), **kw)
    with pytest.raises(ValueError, match="outcomes must be finite"):
        from_pandas(f.assign(y=[0.1, np.inf, 0.3, 0.4, 0.5]), **kw)
    with pytest.raises(TypeError, match="'done' must be boolean"):
        from_pandas(f.assign(done=["no", "no", "yes", "no", "no"]), **kw)
    with pytest.raises(TypeError, match="'done' must be boolean"):
        from_pandas(f.assign(done=[0, 0, np.nan, 0, 0]), **kw)
    with pytest.raises(ValueError, match="at least one row"):
        from_pandas(f.iloc[:0], **kw)
    # 0/1 flags and object columns of Python bools are fine
    ok = from_pandas(f.assign(done=[0, 0, 1, 0, 0]), **kw)
    assert_same_transitions(ok, from_pandas(f.assign(done=np.array([False, False, True, False, False], dtype=object)),
                                            **kw))
    assert_same_transitions(ok, from_pandas(f, **kw))


def test_from_episodes_validation():
    with pytest.raises(TypeError, match="episode 0 must be a mapping"):
        from_episodes([[0, 1]])
    with pytest.raises(TypeError, match="episode 1 must be a mapping with 'states' and 'actions'"):
        from_episodes([{"states": [0.0, 1.0], "actions": [0]}, {"states": [0.0]}])
    with pytest.raises(ValueError, match=r"episodes\[0\]\['states'\] must have T\+1=3 or T=2 rows, got 5"):
        from_episodes([{"states": np.zeros(5), "actions": [0, 1]}])
    with pytest.raises(ValueError, match=r"episodes\[0\]\['actions'\] must be a non-empty 1-D"):
        from_episodes([{"states": [0.0], "actions": 3}])
    with pytest.raises(ValueError, match=r"episodes\[0\]\['actions'\] must be a non-empty 1-D"):
        from_episodes([{"states": [0.0], "actions": []}])
    with pytest.raises(ValueError, match=r"episodes\[0\]\['outcomes'\] must have 2 entries"):
        from_episodes([{"states": [0.0, 1.0, 2.0], "actions": [0, 1], "outcomes": [1.0]}])
    with pytest.raises(ValueError, match="every episode or none must have 'outcomes'"):
        from_episodes([{"states": [0.0, 1.0], "actions": [0], "outcomes": [1.0]},
                       {"states": [0.0, 1.0], "actions": [0]}])
    with pytest.raises(ValueError, match=r"episodes\[0\]\['states'\] must be finite"):
        from_episodes([{"states": [0.0, np.nan], "actions": [0]}])
    with pytest.raises(TypeError, match=r"episodes\[0\]\['states'\] must be numeric"):
        from_episodes([{"states": ["a", "b"], "actions": [0]}])


# ---------------------------------------------------------------------------- no aliasing, no mutation
def test_from_arrays_copies_and_does_not_modify_inputs():
    rng = np.random.default_rng(1)
    inputs = dict(states=rng.normal(size=(6, 2)), actions=np.array([2, 0, 1, 1, 0, 2]),
                  next_states=rng.normal(size=(6, 2)))
    optional = dict(terminated=np.array([0, 0, 1, 0, 0, 1], dtype=bool), truncated=np.zeros(6, dtype=bool),
                    episode_ids=np.array([0, 0, 0, 1, 1, 1]), outcomes=rng.normal(size=6),
                    rewards=rng.normal(size=6), timesteps=np.array([0.0, 1, 2, 0, 1, 2]),
                    action_labels=np.array([2, 0, 1]))
    before = {k: v.copy() for k, v in {**inputs, **optional}.items()}
    t = from_arrays(inputs["states"], inputs["actions"], inputs["next_states"], **optional)
    for k, v in {**inputs, **optional}.items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
        assert v.flags.writeable, k
    snapshot = {f: np.array(getattr(t, f)) for f in FIELDS}
    labels = t.action_labels.copy()
    for v in {**inputs, **optional}.values():  # mutate every input afterwards
        v[...] = v[::-1] if v.dtype != bool else ~v
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(t, f), snapshot[f], err_msg=f)
    np.testing.assert_array_equal(t.action_labels, labels)


def test_stored_arrays_are_read_only():
    t = from_episodes(make_episodes())
    t = from_arrays(t.states, t.labels_of(), t.next_states, terminated=t.terminated, episode_ids=t.episode_ids,
                    outcomes=t.outcomes, rewards=np.zeros(t.n), timesteps=t.timesteps, next_observed=t.next_observed)
    for f in FIELDS + ("action_labels", "next_observed"):
        arr = getattr(t, f)
        assert not arr.flags.writeable, f
        with pytest.raises(ValueError):
            arr[0] = arr[1]
    for f in FIELDS:  # so are a subset's
        assert not getattr(t.subset([0, 1]), f).flags.writeable, f


def test_from_pandas_does_not_modify_frame():
    frame = make_frame().sample(frac=1.0, random_state=3)
    before = frame.copy(deep=True)
    t = from_pandas(frame, **pandas_kwargs())
    pd.testing.assert_frame_equal(frame, before)
    snapshot = {f: np.array(getattr(t, f)) for f in FIELDS}
    frame.loc[:, ["x", "y", "outcome"]] = 0.0  # later edits of the frame do not reach the Transitions
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(t, f), snapshot[f], err_msg=f)


def test_from_episodes_does_not_modify_episodes():
    eps = make_episodes()
    before = [{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ep.items()} for ep in eps]
    t = from_episodes(eps)
    for ep, ref in zip(eps, before):
        assert ep.keys() == ref.keys()
        for k in ep:
            np.testing.assert_array_equal(ep[k], ref[k])
    states0 = t.states.copy()
    eps[0]["states"][:] = -99.0
    np.testing.assert_array_equal(t.states, states0)


# ---------------------------------------------------------------------------- subsets and splits
def _many_episodes(n_episodes=10, seed=0) -> Transitions:
    rng = np.random.default_rng(seed)
    eps = []
    for _ in range(n_episodes):
        T = int(rng.integers(1, 6))
        eps.append({"states": rng.normal(size=(T + 1, 3)), "actions": rng.choice(["a", "b", "c", "d"], size=T),
                    "terminated": bool(rng.integers(2)), "outcomes": rng.normal(size=T)})
    return from_episodes(eps, action_labels=["a", "b", "c", "d", "never"])


def test_subset_mask_and_indices():
    t = _many_episodes()
    idx = np.array([4, 0, 7])
    mask = np.zeros(t.n, dtype=bool)
    mask[idx] = True
    for index, rows in ((idx, idx), (mask, np.flatnonzero(mask)), (idx.tolist(), idx)):
        sub = t.subset(index)
        assert sub.n == len(rows)
        assert sub.encoder is t.encoder and sub.n_actions == t.n_actions == 5
        assert sub.rewards is None and t.rewards is None
        for f in FIELDS:
            if f != "rewards":
                np.testing.assert_array_equal(getattr(sub, f), getattr(t, f)[rows], err_msg=f)


def test_action_counts_and_continues():
    t = _many_episodes()
    counts = t.action_counts()
    assert counts.shape == (5,) and counts.sum() == t.n and counts[4] == 0
    np.testing.assert_array_equal(counts, [np.sum(t.labels_of() == lab) for lab in ["a", "b", "c", "d", "never"]])
    np.testing.assert_array_equal(t.continues, np.where(t.terminated, 0.0, 1.0))


def test_episode_folds_keep_episodes_whole_and_cover_rows_once():
    t = _many_episodes(n_episodes=12)
    folds = t.episode_folds(3, random_state=0)
    assert len(folds) == 3
    seen = np.zeros(t.n, dtype=int)
    for train, test in folds:
        seen[test] += 1
        np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(t.n))
        assert not set(t.episode_ids[train]) & set(t.episode_ids[test])
    np.testing.assert_array_equal(seen, 1)
    again = t.episode_folds(3, random_state=0)
    for (tr1, te1), (tr2, te2) in zip(folds, again):
        np.testing.assert_array_equal(te1, te2)
        np.testing.assert_array_equal(tr1, tr2)
    with pytest.raises(ValueError, match="n_splits"):
        t.episode_folds(1)
    with pytest.raises(ValueError, match="13 episode folds from 12"):
        t.episode_folds(13)


@pytest.mark.parametrize("kind", ["int", "str", "descending"])
def test_episode_folds_are_group_k_folds(kind):
    """The folds are scikit-learn's GroupKFold(shuffle=True) folds, computed without its checks;
    and n_episodes (by sorting) counts the distinct ids as np.unique does."""
    from sklearn.model_selection import GroupKFold

    rng = np.random.default_rng(0)
    ids = {"int": rng.integers(0, 50, 400), "str": np.array([f"e{i}" for i in rng.integers(0, 30, 300)]),
           "descending": np.repeat(np.arange(40)[::-1], 3)}[kind]
    n = len(ids)
    t = from_arrays(rng.integers(0, 3, n).astype(float), rng.integers(0, 2, n), rng.integers(0, 3, n).astype(float),
                    episode_ids=ids)
    assert t.n_episodes == np.unique(ids).size
    for seed in (0, 7):
        for k in (2, 3, 5):
            ours = t.episode_folds(k, random_state=seed)
            theirs = list(GroupKFold(k, shuffle=True, random_state=seed).split(t.states, groups=t.episode_ids))
            for (tr1, te1), (tr2, te2) in zip(ours, theirs, strict=True):
                np.testing.assert_array_equal(tr1, tr2)
                np.testing.assert_array_equal(te1, te2)


def test_split_episodes():
    t = _many_episodes(n_episodes=10)
    train, test = t.split_episodes(0.3, random_state=5)
    assert train.n + test.n == t.n
    assert not set(train.episode_ids) & set(test.episode_ids)
    assert test.n_episodes == 3 and train.n_episodes == 7
    train2, test2 = t.split_episodes(0.3, random_state=5)
    np.testing.assert_array_equal(test.states, test2.states)
    np.testing.assert_array_equal(train.episode_ids, train2.episode_ids)
    # the rows are those of the original, in order
    is_test = np.isin(t.episode_ids, test.episode_ids)
    np.testing.assert_array_equal(test.states, t.states[is_test])
    np.testing.assert_array_equal(train.outcomes, t.outcomes[~is_test])
    # tiny fractions still leave one episode on each side
    tr, te = t.split_episodes(0.001, random_state=0)
    assert te.n_episodes == 1 and tr.n_episodes == 9
    for bad in (0.0, 1.0, -0.2):
        with pytest.raises(ValueError, match="test_fraction"):
            t.split_episodes(bad)
    with pytest.raises(ValueError, match="2 episodes"):
        from_episodes([{"states": [0.0, 1.0, 2.0], "actions": [0, 1]}]).split_episodes(0.5)
