"""Progress on stderr from ``genpqr fit`` (issue 31 item 7): the latent-type EM (``--types``, and
the structural mixture's with ``--features``), the transition selection (``--transition auto`` on
thin cells) and the conditional logit's L-BFGS (``--action-features``) each show a bar on a
terminal, at most 100 columns wide, and ``--quiet`` prints nothing on stderr. The bars are made
visible at once (no 2-second delay) and stderr taken for a terminal: nothing here depends on how
long a fit runs."""

from __future__ import annotations

import re
import sys

import pandas as pd
import pytest

from genpqr.app.console import WIDTH
from genpqr.envs import bus_engine, simulate_typed_buses

from .test_action_features import _write as write_items
from .test_types_cli import flags as types_flags, two_type_csv  # noqa: F401 (a fixture)
from .test_workflow import base_flags, fit_cli, write_tabular_csv

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

S = 40  # the bus panel's mileage bins


def on_a_terminal(monkeypatch):
    """Bars shown at once, and stderr (pytest's capture) taken for a terminal as tqdm asks it;
    called in the test itself: capsys replaces its stream when the test starts."""
    from genpqr.stage1 import _stage1
    from genpqr.stage2 import _transition_selection

    monkeypatch.setattr(_stage1, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(_transition_selection, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def drawn(err: str) -> list[str]:
    """The bars' lines as a terminal shows them: each redraw starts with a carriage return, and
    a nested bar moves the cursor (an escape sequence, no column)."""
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", err)
    return [part for line in text.splitlines() for part in line.split("\r") if part.strip()]


def run(argv, capsys, *, quiet: bool):
    argv = [a for a in map(str, argv) if a != "--quiet"] + (["--quiet"] if quiet else [])
    code, out, err = fit_cli(argv, capsys)
    assert code == 0, err
    return err


def check(argv, capsys, monkeypatch, bar: str):
    on_a_terminal(monkeypatch)
    err = run(argv, capsys, quiet=False)
    assert bar in err, err
    assert all(len(line) <= WIDTH for line in drawn(err)), err
    assert run(argv, capsys, quiet=True) == ""
    return err


def test_latent_type_em(two_type_csv, tmp_path, capsys, monkeypatch):
    csv, _ = two_type_csv
    argv = types_flags(csv, tmp_path / "o", "--types", "2")[1:]
    check(argv, capsys, monkeypatch, "latent types EM")


def test_transition_selection(tmp_path, capsys, monkeypatch):
    path = tmp_path / "thin.csv"
    write_tabular_csv(path, n_episodes=40, horizon=6, S=40)
    err = check(base_flags(path, tmp_path / "auto"), capsys, monkeypatch, "transition selection")
    assert "lowrank: rank " in err  # the low-rank model's own cross-validation: its rank and fold


def test_conditional_logit(tmp_path, capsys, monkeypatch):
    write_items(tmp_path)
    argv = [tmp_path / "data.csv", "--episode", "episode", "--time", "time", "--action", "action", "--gamma", "0.9",
            "--normalization", "anchor:a", "--action-features", tmp_path / "items.csv", "--state", "x",
            "--out", tmp_path / "fit"]
    check(argv, capsys, monkeypatch, "conditional logit")


def test_structural_mixture_em(tmp_path, capsys, monkeypatch):
    """``--features ... --types 2``: the structural mixture MLE's EM and Newton steps."""
    engines = tuple(bus_engine(n_states=S, rc=rc, cost_scale=0.01) for rc in (8.0, 11.0))
    panel = simulate_typed_buses(engines, n_buses=30, n_periods=60, random_state=0)
    panel.frame.drop(columns=["next_mileage", "type"]).to_csv(tmp_path / "bus.csv", index=False)
    X = engines[0].features("rust")
    pd.DataFrame([dict(state_index=s, action=a, RC=X[s, k, 0], theta11=X[s, k, 1])
                  for s in range(S) for k, a in enumerate(["keep", "replace"])]).to_csv(tmp_path / "x.csv", index=False)
    argv = [tmp_path / "bus.csv", "--episode", "bus", "--time", "month", "--state", "mileage", "--action", "action",
            "--gamma", 0.975, "--normalization", "anchor:replace", "--transition", "increment:4:replace",
            "--n-states", S, "--policy-model", "frequency", "--features", tmp_path / "x.csv", "--types", 2,
            "--out", tmp_path / "o"]
    check(argv, capsys, monkeypatch, "latent types (npl, 2 types): EM")
