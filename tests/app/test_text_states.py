"""Text state labels (issue 32 item 5): each distinct label is one tabular state, unordered; the
labels are kept in rewards.csv and key the features file; the fit equals the fit of the same
data with the labels encoded as integers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from genpqr import datasets
from genpqr.app.cli import main

FLAGS = ["--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma", "0.9",
         "--normalization", "anchor:a", "--quiet", "--cross-fit", "1"]
WORDS = "home work gym shop park cafe bank school road bus train lake hill farm club".split()


def fit(capsys, *argv, code=0):
    got = main(["fit", *map(str, argv), *FLAGS])
    out, err = capsys.readouterr()
    assert got == code, err
    return out + err


@pytest.fixture
def files(tmp_path):
    frame = datasets.load("choices")
    frame.to_csv(tmp_path / "numbers.csv", index=False)
    names = np.array([f"{w}-{i}" for i, w in enumerate(WORDS)], dtype=object)  # sorted order != numeric order
    text = frame.assign(state=names[frame["state"].to_numpy()])
    text.to_csv(tmp_path / "text.csv", index=False)
    return tmp_path, names


def test_text_state_labels_are_tabular_states(files, capsys):
    tmp_path, names = files
    fit(capsys, tmp_path / "numbers.csv", "--out", tmp_path / "n")
    fit(capsys, tmp_path / "text.csv", "--out", tmp_path / "t")
    n, t = pd.read_csv(tmp_path / "n" / "rewards.csv"), pd.read_csv(tmp_path / "t" / "rewards.csv")
    assert set(t["state"]) == set(names)  # the labels, not codes
    t = t.assign(state=t["state"].map({name: i for i, name in enumerate(names)})).sort_values("state")
    cols = ["visits", "reward_a", "reward_b", "reward_c"]
    np.testing.assert_allclose(t[cols].to_numpy(float), n.sort_values("state")[cols].to_numpy(float), atol=1e-10)


def test_features_keyed_by_text_labels(files, capsys):
    tmp_path, names = files
    rows = [{"state": name, "action": a, "f_bonus": float(a != "a"), "f_level": i / 14 * (a == "b")}
            for i, name in enumerate(names) for a in "abc"]
    pd.DataFrame(rows).to_csv(tmp_path / "f.csv", index=False)
    numeric = [{**r, "state": i // 3} for i, r in enumerate(rows)]
    pd.DataFrame(numeric).to_csv(tmp_path / "fn.csv", index=False)
    fit(capsys, tmp_path / "text.csv", "--features", tmp_path / "f.csv", "--out", tmp_path / "t")
    fit(capsys, tmp_path / "numbers.csv", "--features", tmp_path / "fn.csv", "--out", tmp_path / "n")
    pt, pn = (pd.read_csv(tmp_path / d / "parameters.csv") for d in ("t", "n"))
    np.testing.assert_allclose(pt["estimate"], pn["estimate"], rtol=1e-6)
    pd.DataFrame(rows[3:]).assign(state=lambda f: f["state"].where(f.index > 0, "nowhere")).to_csv(
        tmp_path / "bad.csv", index=False)
    err = fit(capsys, tmp_path / "text.csv", "--features", tmp_path / "bad.csv", "--out", tmp_path / "b", code=2)
    assert "nowhere" in err


def test_text_states_where_an_order_or_numbers_are_needed(files, capsys):
    tmp_path, _ = files
    err = fit(capsys, tmp_path / "text.csv", "--transition", "increment:2", "--out", tmp_path / "i", code=2)
    assert "text labels" in err and "unordered" in err
    err = fit(capsys, tmp_path / "text.csv", "--q-model", "linear", "--out", tmp_path / "l", code=2)
    assert "must be numeric, got text" in err and "--q-model exact" in err
