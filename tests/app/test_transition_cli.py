"""`genpqr fit --transition auto|counts|shrinkage|lowrank|classifier` (genpqr.app.transition_choice)."""

import numpy as np
import pandas as pd
import pytest

from genpqr import GenPQR, datasets, from_pandas, normalization as N
from genpqr.app.flags import console_text
from genpqr.registry import COMPARED, SELECTED, STREAMS, TRANSITION_MODELS
from genpqr.stage2 import ShrinkageKernel

from .test_workflow import LABELS, base_flags, fit_cli, write_tabular_csv


def test_parse_transition_kinds():
    auto, counts, lowrank = (TRANSITION_MODELS.parse(t) for t in ("auto", "counts", "lowrank"))
    assert (auto.name, auto.value, auto.can(SELECTED)) == ("auto", None, True)
    assert (counts.name, counts.value, counts.can(STREAMS), counts.can(COMPARED)) == ("counts", None, True, False)
    assert (lowrank.name, lowrank.can(COMPARED)) == ("lowrank", True)
    with pytest.raises(ValueError) as info:
        TRANSITION_MODELS.parse("smooth")
    assert "--transition must be auto, counts, shrinkage, lowrank, classifier" in console_text(info.value)


def test_auto_keeps_counts_on_the_bundled_example(tmp_path, capsys):
    path = datasets.path("choices")
    flags = [path, "--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma", 0.9,
             "--normalization", "anchor:a"]
    code, out, err = fit_cli(flags + ["--out", tmp_path / "auto"], capsys)
    assert code == 0, err
    assert "transition model: counts (0.1% of the moves are the only one" in out and "no held-out comparison" in out
    code, out, err = fit_cli(flags + ["--out", tmp_path / "counts", "--transition", "counts"], capsys)
    assert code == 0, err and "transition model" not in out
    a, b = (pd.read_csv(tmp_path / d / "rewards.csv") for d in ("auto", "counts"))
    pd.testing.assert_frame_equal(a, b)


def test_a_named_model_is_fitted_on_well_filled_cells(tmp_path, capsys):
    """The shortcuts of auto (counts kept outright, the low-rank model only on thin cells) do not
    apply to a model the user names: it is fitted and compared with the counts."""
    path = datasets.path("choices")
    flags = [path, "--episode", "episode", "--time", "time", "--state", "state", "--action", "action", "--gamma", 0.9,
             "--normalization", "anchor:a", "--transition", "lowrank", "--out", tmp_path / "lowrank"]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    assert "transition model: lowrank (requested; by held-out likelihood: counts" in out
    assert "held-out next-state log-likelihood" in out and "    lowrank " in out


def test_thin_cells_choose_a_model_that_shares_strength(tmp_path, capsys):
    path = tmp_path / "thin.csv"
    frame, _ = write_tabular_csv(path, n_episodes=40, horizon=6, S=40)
    code, out, err = fit_cli(base_flags(path, tmp_path / "auto"), capsys)
    assert code == 0, err
    assert "cells are thin" in out and "transition model: counts" not in out
    source = next(x for x in out.splitlines() if "where the reward's uncertainty comes from" in x)
    moves = pd.read_csv(tmp_path / "auto" / "rewards.csv").filter(like="transitions_").to_numpy()
    thin = (moves > 0) & (moves < 10)
    assert f"{moves[thin].sum() / moves.sum():.1%} of the observed moves are on {int(thin.sum())} " in source
    assert "which pools cells" in source and "--bootstrap N splits" in source
    code, out, err = fit_cli(base_flags(path, tmp_path / "shrink") + ["--transition", "shrinkage"], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if "shrinkage  " in x)
    concentrations = tuple(float(c) for c in line.split("concentrations ")[1].split(", "))
    # the same numbers as GenPQR given the model with the printed concentrations
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    direct = GenPQR(N.anchor_action("left"), gamma=0.9, q_model="exact", cross_fit=5, random_state=0,
                    transition_model=ShrinkageKernel(concentrations=concentrations)).fit(data).reward_table()
    r = pd.read_csv(tmp_path / "shrink" / "rewards.csv")
    np.testing.assert_allclose(r[[f"reward_{a}" for a in direct.columns]].to_numpy(), direct.to_numpy(), rtol=1e-2,
                               atol=1e-2)  # the printed concentrations are rounded to 3 digits
    assert "transition model: shrinkage" in out and set(LABELS) <= set(direct.columns)


def test_the_api_default_is_the_cli_default_on_thin_cells(tmp_path, capsys):
    """One answer per question: ``GenPQR()`` chooses the transition model as ``genpqr fit`` does."""
    path = tmp_path / "thin.csv"
    frame, _ = write_tabular_csv(path, n_episodes=40, horizon=6, S=40)
    code, out, err = fit_cli(base_flags(path, tmp_path / "auto")[:-1], capsys)
    assert code == 0, err
    data = from_pandas(frame, episode="episode", time="time", state="state", action="action")
    model = GenPQR(N.anchor_action("left"), gamma=0.9, q_model="exact", cross_fit=5, random_state=0).fit(data)
    selection = model.transition_selection_
    assert selection.chosen != "counts" and model.transition_model_ is not None
    assert selection.summary().splitlines()[0] in out
    assert f"transition model: {selection.chosen} (" in str(model.summary())
    api = model.reward_table()
    cli = pd.read_csv(tmp_path / "auto" / "rewards.csv")
    np.testing.assert_allclose(cli[[f"reward_{a}" for a in api.columns]].to_numpy(), api.to_numpy(), rtol=0,
                               atol=1e-8)
    counts = GenPQR(N.anchor_action("left"), gamma=0.9, q_model="exact", random_state=0, transition_model="counts")
    assert counts.fit(data).transition_selection_ is None and counts.transition_model_ is None
    assert not np.allclose(counts.reward_table().to_numpy(), api.to_numpy(), atol=1e-3)


def test_the_selection_summary_indented_for_the_console_leaves_no_stray_words():
    """The summary's lines are wrapped at 100 columns; the console indents them by two more, and
    wrapping the indented lines as they stood left a word or two on lines of their own."""
    from genpqr.app.console import fit_width, unwrap
    from genpqr.app.transition_choice import TransitionChoice
    from genpqr.stage2._transition_selection import _wrapped_note

    lines = ["transition model: shrinkage (counts miss 55.5% of held-out moves (over 5%: cells are thin), compared "
             "on every held-out move; it beats counts by +4.8856 per move = 918.1 standard errors, the most)",
             "  held-out next-state log-likelihood per move (5 episode folds, 900000 moves):"]
    lines += _wrapped_note("lowrank    -3.1038, +4.6101 vs counts on the moves compared (SE 0.0057); 0.0% of "
                           "held-out moves unexplained; rank 20, concentration 100, 0 state groups", indent=4)
    lines += _wrapped_note("(its search stopped at rank 10: the last rank step gained 0.1710 per move, it trails "
                           "shrinkage by 0.5420 (SE 0.00091) on its own folds, more than 2 x 1 ranks left x that gain)")
    summary = "\n".join(lines)
    assert max(map(len, lines[1:])) >= 98  # the library's own lines use the whole width
    printed = TransitionChoice("shrinkage", summary).describe().splitlines()
    assert max(map(len, printed)) <= 100
    as_they_stood = fit_width("\n".join("  " + line for line in lines)).splitlines()
    stray = [line.strip() for line in as_they_stood if len(line.strip().split()) == 1]  # a lone word mid-note
    assert stray == ["moves", "trails"] and not {line.strip() for line in printed} & set(stray), printed
    assert len(printed) == len(as_they_stood) - 2
    assert unwrap("\n".join(printed)).split() == unwrap(summary).split()  # the same words, in order
