"""Files and RL dataset containers round-trip to the same Transitions."""

import types

import numpy as np
import pandas as pd
import pytest

from genpqr import from_episodes, from_pandas
from genpqr.exceptions import GenPQRWarning
from genpqr.data import from_d3rlpy, from_imitation, from_minari, read_transitions


def long_frame():
    rng = np.random.default_rng(0)
    rows = []
    for ep in range(5):
        for t in range(6):
            rows.append({"id": ep, "t": t, "x": rng.normal(), "y": rng.normal(),
                         "choice": ["keep", "replace", "wait"][rng.integers(3)], "done": ep % 2 == 1 and t == 5})
    return pd.DataFrame(rows)


def same(a, b):
    for k in ("states", "actions", "next_states", "terminated", "truncated", "episode_ids"):
        assert np.array_equal(getattr(a, k), getattr(b, k), equal_nan=k == "next_states"), k
    assert np.array_equal(a.action_labels, b.action_labels)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_files_round_trip(tmp_path, suffix):
    frame = long_frame()
    path = tmp_path / f"log.{suffix}"
    frame.to_csv(path, index=False) if suffix == "csv" else frame.to_parquet(path)
    kw = dict(episode="id", time="t", state=["x", "y"], action="choice", terminated="done")
    same(read_transitions(path, **kw), from_pandas(frame, **kw))


def test_bad_files(tmp_path):
    frame = long_frame()
    path = tmp_path / "log.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_transitions(tmp_path / "nope.csv", episode="id", time="t", state="x", action="choice")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['speed'\]"):
        read_transitions(path, episode="id", time="t", state=["speed"], action="choice")
    with pytest.raises(ValueError, match="unknown data format"):
        read_transitions(tmp_path / "log.csv", episode="id", time="t", state="x", action="choice", format="xls")
    mixed = frame.astype({"choice": object})
    mixed.loc[0, "choice"] = 3
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    with pytest.raises(ValueError, match="mixes numbers and text"):
        read_transitions(tmp_path / "mixed.csv", episode="id", time="t", state="x", action="choice")
    with pytest.raises(ValueError, match="mixes types"):
        from_pandas(mixed, episode="id", time="t", state="x", action="choice")


def episodes():
    rng = np.random.default_rng(1)
    out = []
    for e in range(4):
        T = 3 + e
        out.append({"states": rng.normal(size=(T + 1, 2)), "actions": rng.integers(0, 3, size=T),
                    "terminated": e % 2 == 0, "rewards": rng.normal(size=T)})
    return out


def test_minari_d3rlpy_imitation_adapters():
    """Duck-typed containers with the attribute names of each library's episode objects."""
    eps = episodes()
    reference = from_episodes(eps)
    minari = types.SimpleNamespace(iterate_episodes=lambda: iter([
        types.SimpleNamespace(observations=e["states"], actions=e["actions"], rewards=e["rewards"],
                              terminations=np.r_[np.zeros(len(e["actions"]) - 1, bool), e["terminated"]])
        for e in eps]))
    same(from_minari(minari), reference)
    trajs = [types.SimpleNamespace(obs=e["states"], acts=e["actions"], terminal=e["terminated"], rews=e["rewards"])
             for e in eps]
    # no infos: a terminal end cannot be told from a time limit; taken as terminated, with a warning
    with pytest.warns(GenPQRWarning, match=r"2 of 4 imitation trajectories end with terminal=True but carry no infos"):
        same(from_imitation(trajs), reference)
    d3 = types.SimpleNamespace(episodes=[types.SimpleNamespace(observations=e["states"][:-1], actions=e["actions"][:, None],
                                                               rewards=e["rewards"][:, None], terminated=e["terminated"])
                                         for e in eps])
    same(from_d3rlpy(d3), from_episodes([dict(e, states=e["states"][:-1]) for e in eps]))


def test_imitation_time_limit_from_infos():
    """imitation marks every complete episode terminal; infos[-1]["TimeLimit.truncated"] tells a
    time limit (truncated) from an absorbing end (terminated); with infos, no warning."""
    import warnings

    eps = episodes()
    trajs = [types.SimpleNamespace(obs=e["states"], acts=e["actions"], terminal=True, rews=e["rewards"],
                                   infos=[{}] * (len(e["actions"]) - 1)
                                   + [{"TimeLimit.truncated": not e["terminated"]}])
             for e in eps]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = from_imitation(trajs)
    same(data, from_episodes(eps))
    ends = np.r_[data.episode_ids[1:] != data.episode_ids[:-1], True]
    assert data.terminated[ends].tolist() == [e["terminated"] for e in eps]
    assert data.truncated[ends].tolist() == [not e["terminated"] for e in eps]
