"""One registry entry is all a new name needs (issue 30, item 1): a policy model, a normalization
and a transition model declared here, in the test, beside the classes they build, and nowhere
else, are parsed, listed in ``genpqr fit --help`` and fitted by ``genpqr fit``, and the fit is the
one the Python API gives with the same objects."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from genpqr import GenPQR, datasets, from_pandas, normalization as N
from genpqr.app.cli import main
from genpqr.registry import GIVEN, NORMALIZATIONS, POLICY_MODELS, STREAMS, TABULAR, TRANSITION_MODELS, Argument
from genpqr.stage2._tabular import transition_counts

GAMMA = 0.9
G = 0.5  # the toy normalization's offset: the anchor's reward is G in every state


class SmoothedKernel:
    """A toy transition model: the counts plus ``pseudo`` moves spread evenly over the states,
    ``GenPQR(transition_model=SmoothedKernel())``'s callable form ``(transitions, S, K) -> kernel``."""

    def __init__(self, pseudo: float = 1.0):
        self.pseudo = pseudo

    def __call__(self, transitions, n_states, n_actions):
        moves, _ = transition_counts(transitions.states, transitions.actions, transitions.next_states, n_states,
                                     n_actions, terminated=transitions.terminated)
        counts = moves.toarray().reshape(n_states, n_actions, n_states) + self.pseudo / n_states
        return counts / counts.sum(axis=-1, keepdims=True)


def _pseudo(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError("a positive number of pseudo-moves PSEUDO")
    return value


def _onehot_logit():
    return make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression(C=10.0, max_iter=5000))


@pytest.fixture
def toys():
    """Declare one entry of each kind (and remove them afterwards); ``built`` records each build."""
    built = []

    def policy(_, *, tabular, **context):
        built.append("policy")
        return _onehot_logit()

    def normalization(action, *, label, **context):
        built.append("normalization")
        return N.anchor_action(label(action, "anchor action"), g=G)

    def transitions(pseudo, **context):
        built.append("transitions")
        return SmoothedKernel(1.0 if pseudo is None else pseudo)

    POLICY_MODELS.add("toy-logit", factory=policy, capabilities=(TABULAR,),
                      help="a one-hot logistic regression (a test's entry)")
    NORMALIZATIONS.add("shifted-anchor", factory=normalization, argument=Argument("ACTION"), capabilities=(STREAMS,),
                       help="an anchor whose reward is 0.5 (a test's entry)")
    TRANSITION_MODELS.add("smoothed", factory=transitions, capabilities=(GIVEN,),
                          argument=Argument("PSEUDO", _pseudo, optional=True),
                          help="counts plus pseudo-moves (a test's entry)")
    try:
        yield built
    finally:
        for registry, name in ((POLICY_MODELS, "toy-logit"), (NORMALIZATIONS, "shifted-anchor"),
                               (TRANSITION_MODELS, "smoothed")):
            registry.remove(name)


def _flags(out):
    return [datasets.path("choices"), "--episode", "episode", "--time", "time", "--state", "state", "--action",
            "action", "--gamma", GAMMA, "--cross-fit", 0, "--quiet", "--out", out]


def test_new_entries_are_fitted_from_the_command_line(toys, tmp_path, capsys):
    out = tmp_path / "fit"
    code = main(["fit", *map(str, _flags(out)), "--policy-model", "toy-logit", "--normalization", "shifted-anchor:a",
                 "--transition", "smoothed:2"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert sorted(toys) == ["normalization", "policy", "transitions"]
    assert "first stage: toy-logit: requested (--policy-model toy-logit)" in printed.out
    rewards = pd.read_csv(out / "rewards.csv")
    np.testing.assert_allclose(rewards["reward_a"], G, atol=1e-10)  # the toy normalization's own offset

    frame = pd.read_csv(datasets.path("choices"))
    data = from_pandas(frame, episode="episode", time="time", state=["state"], action="action")
    api = GenPQR(N.anchor_action("a", g=G), gamma=GAMMA, q_model="exact", policy_model=_onehot_logit(), cross_fit=None,
                 transition_model=SmoothedKernel(2.0), random_state=0, progress=False).fit(data)
    table = api.reward_table()
    for label in ("a", "b", "c"):
        np.testing.assert_allclose(rewards[f"reward_{label}"], table[label].to_numpy(), rtol=1e-9, atol=1e-9)
    counts_fit = tmp_path / "counts"
    assert main(["fit", *map(str, _flags(counts_fit)), "--normalization", "shifted-anchor:a", "--transition",
                 "counts"]) == 0
    assert not np.allclose(pd.read_csv(counts_fit / "rewards.csv")["reward_b"], rewards["reward_b"])  # smoothing acts


def test_new_entries_are_listed_and_checked(toys, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # no line breaks inside the names
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "toy-logit" in text and "shifted-anchor:ACTION" in text and "smoothed[:PSEUDO]" in text
    # the entries' capabilities decide where they may go, as for the built-in names
    code = main(["fit", *map(str, _flags(tmp_path / "o")), "--normalization", "shifted-anchor:a", "--policy-model",
                 "toy-logit", "--q-model", "linear"])
    assert code == 2 and "--policy-model toy-logit needs tabular states" in capsys.readouterr().err
    code = main(["fit", *map(str, _flags(tmp_path / "o")), "--normalization", "shifted-anchor:a", "--transition",
                 "smoothed:x"])
    assert code == 2 and "--transition smoothed[:PSEUDO] needs" in capsys.readouterr().err
