"""docs/saving_and_loading.md: its code runs (with the warnings it explains), and its table of what
a saved model still pickles is what :func:`genpqr.estimator.pickled_parts` measures today on
the three fits the table names (file size within 5%, shares within 2 points, the class counts)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from genpqr import GenPQR, from_pandas, normalization as N, stage2 as T
from genpqr.envs import random_mdp, simulate_tabular
from genpqr.estimator._persistence import pickled_parts
from genpqr.stage2 import FQE

from ..doc_warnings import ROOT, check_warnings, recording

PAGE = ROOT / "docs" / "saving_and_loading.md"
FENCE = re.compile(r"```python\n(.*?)```", re.S)
ROW = re.compile(r"^\| (.+?) \| ([\d.]+) kB \| (\d+)% \| (\d+)% \| (\d+) classes", re.M)


@pytest.mark.usefixtures("checkout_unchanged")
def test_page_python_blocks_run(tmp_path, monkeypatch):
    blocks = FENCE.findall(PAGE.read_text(encoding="utf-8"))
    assert blocks
    monkeypatch.chdir(tmp_path)
    with recording() as found:
        for i, body in enumerate(blocks):
            exec(compile(body, f"docs/saving_and_loading.md python block {i}", "exec"), {"__name__": f"doc_{i}"})
    assert (tmp_path / "model.joblib").read_bytes().startswith(b"GENPQR-SIGNED 1\n")
    check_warnings("docs/saving_and_loading.md", "python", found)


def _readme_data():
    rng = np.random.default_rng(0)
    n = 2000
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    stay = rng.random(n) < 1 / (1 + np.exp(-(x1 - x2)))
    frame = pd.DataFrame({"id": np.repeat(np.arange(200), 10), "t": np.tile(np.arange(10), 200),
                          "x1": x1, "x2": x2, "choice": np.where(stay, "stay", "outside")})
    return from_pandas(frame, episode="id", time="t", state=["x1", "x2"], action="choice")


def _fits():
    """The table's three fits, in its order."""
    from sklearn.linear_model import Ridge

    from genpqr.models._nn import DuelingQNetwork, MLPClassifier
    from genpqr.stage1 import FrequencyClassifier

    mdp = random_mdp(40, 4, n_next=5, gamma=0.9, random_state=0)
    behaviour = T.soft_optimal_solution(mdp.reward, mdp.kernel, 0.9).policy
    tab = simulate_tabular(mdp, behaviour, 2000, 25, random_state=1)
    data = _readme_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield GenPQR(N.anchor_action(0), gamma=0.9, q_model="exact", n_states=40,
                     policy_model=FrequencyClassifier(n_states=40)).fit(tab)
        yield GenPQR(N.anchor_action("outside"), gamma=0.95, cross_fit=5,
                     q_model=FQE(Ridge(), encoding="per_action", n_iterations=500)).fit(data)
        yield GenPQR(N.anchor_action("outside"), gamma=0.95, policy_model=MLPClassifier(random_state=0),
                     q_model=FQE(DuelingQNetwork(random_state=0), n_iterations=30, tol=None)).fit(data)


def test_table_of_what_remains_pickled_is_measured(tmp_path):
    pytest.importorskip("torch")
    rows = ROW.findall(PAGE.read_text(encoding="utf-8"))
    assert len(rows) == 3, rows
    for (name, kb, arrays, objects, n_classes), model in zip(rows, _fits()):
        model.save(tmp_path / "m.joblib")
        size = (tmp_path / "m.joblib").stat().st_size / 1000
        whole = pickled_parts(model).iloc[-1]
        share = whole["array_bytes"] / (whole["array_bytes"] + whole["object_bytes"])
        assert size == pytest.approx(float(kb), rel=0.05), (name, size)
        assert 100 * share == pytest.approx(int(arrays), abs=2), (name, share)
        assert int(arrays) + int(objects) == 100
        assert len(whole["classes"].split(", ")) == int(n_classes), (name, whole["classes"])
