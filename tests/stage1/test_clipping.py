"""The probability clip (genpqr.stage1): the auto rule binds on no observed action, the
warning fires above CLIP_WARN_FRACTION and not below, explicit bounds and `none` are honoured
in the API and on the command line, and the bounds used are printed and reported."""

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.linear_model import LogisticRegression

from genpqr import GenPQR, normalization as N
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage1._clipping import (AUTO_LOW_FRACTION, AUTO_LOW_MAX, CLIP_WARN_FRACTION, PAPER_CLIP, auto_clip,
                                     clip_fractions, parse_clip, warn_if_clip_binds)
from genpqr.data import from_arrays
from genpqr.exceptions import ClippingWarning
from genpqr.stage2 import FQE

from ..app.test_workflow import base_flags, fit_cli, write_tabular_csv


def test_parse_clip_forms():
    assert parse_clip("auto") == "auto" and parse_clip(" AUTO ") == "auto"
    assert parse_clip("none") is None and parse_clip(None) is None
    assert parse_clip("0.01,0.99") == (0.01, 0.99) == parse_clip((0.01, 0.99))
    for bad in ("0.5", "a,b", "0.9,0.1", "0,2"):
        with pytest.raises(ValueError, match="clip"):
            parse_clip(bad)


def test_auto_clip_is_no_clip_for_positive_probabilities():
    rng = np.random.default_rng(0)
    raw = rng.dirichlet(np.ones(3), size=50)
    bounds, rule = auto_clip(raw, rng.integers(0, 3, 50))
    assert bounds == (0.0, 1.0) and "no clip" in rule
    # a zero only at a next state also triggers the floor
    other = raw[:2].copy()
    other[0] = [0.0, 0.5, 0.5]
    low, high = auto_clip(raw, np.zeros(50, dtype=int), other)[0]
    assert 0 < low <= AUTO_LOW_MAX and high == 1.0


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 40), K=st.integers(2, 4))
def test_auto_floor_binds_on_no_observed_action_with_positive_probability(seed, n, K):
    rng = np.random.default_rng(seed)
    raw = rng.dirichlet(np.full(K, 0.3), size=n)
    raw[rng.random((n, K)) < 0.3] = 0.0  # cells where an action was never seen
    raw[raw.sum(axis=1) == 0, 0] = 1.0
    raw /= raw.sum(axis=1, keepdims=True)
    actions = np.array([rng.choice(np.flatnonzero(r > 0)) for r in raw])  # observed actions have p > 0
    (low, high), _ = auto_clip(raw, actions)
    observed = raw[np.arange(n), actions]
    assert low == pytest.approx(min(AUTO_LOW_MAX, AUTO_LOW_FRACTION * observed.min())) or raw.min() > 0
    frac_observed, frac_floored = clip_fractions(raw, actions, (low, high))
    assert frac_observed == 0.0
    assert frac_floored == pytest.approx(np.mean(np.any(raw < low, axis=1)))


def test_warning_fires_above_the_threshold_not_below():
    below = CLIP_WARN_FRACTION - 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_clip_binds(below, below, PAPER_CLIP, "given")  # nothing raised
        warn_if_clip_binds(CLIP_WARN_FRACTION, 0.0, PAPER_CLIP, "given")  # "more than", not "at least"
    with pytest.warns(ClippingWarning, match=r"hit the clip bounds .* log\(0.99/0.01\) = 4.595.*clip=None") as record:
        warn_if_clip_binds(CLIP_WARN_FRACTION + 0.01, 0.0, PAPER_CLIP, "given")
    # the library names its argument (clip=None); the command line prints the same warning naming its flag
    from genpqr.app.flags import cli_text

    assert re.search(r"hit the clip bounds .* log\(0.99/0.01\) = 4.595.*--clip none", cli_text(record[0].message))
    with pytest.warns(ClippingWarning, match="below the lower clip bound"):
        warn_if_clip_binds(0.0, CLIP_WARN_FRACTION + 0.01, (1e-3, 1.0), "auto: ...")


def _rare_action_data(seed=0, n=3000):
    """Two actions on 30 ordered states; action 1 is rare (under 1%) on the low states."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 30, n)
    p1 = 1 / (1 + np.exp(-(s - 22) / 2.0))
    a = (rng.random(n) < p1).astype(int)
    s2 = np.minimum(s + rng.integers(0, 2, n), 29)
    return from_arrays(s, a, s2, episode_ids=np.arange(n) // 30)


def test_genpqr_paper_clip_warns_and_auto_clip_does_not_bind_on_observed_actions():
    data = _rare_action_data()
    kw = dict(normalization=N.anchor_action(1), gamma=0.9, q_model="exact", n_states=30, cross_fit=None,
              policy_model=FrequencyClassifier(n_states=30))
    with pytest.warns(ClippingWarning, match="hit the clip bounds"):
        paper = GenPQR(clip=PAPER_CLIP, **kw).fit(data)
    assert paper.diagnostics_.fraction_clipped > CLIP_WARN_FRACTION and paper.diagnostics_.clip == PAPER_CLIP
    auto = GenPQR(**kw).fit(data)  # clip="auto" is the default
    d = auto.diagnostics_
    assert d.fraction_clipped == 0.0 and d.clip[1] == 1.0 and d.clip_rule.startswith("auto")
    # the floor is below every observed action's probability: their log pi_hat is the frequency's
    freq = FrequencyClassifier(n_states=30).fit(data.states, data.actions).table_
    u = auto.log_policy(data.states)[np.arange(data.n), data.actions]
    low = d.clip[0]
    p = freq[data.states[:, 0].astype(int)]
    expected = np.log(np.maximum(p, low) / np.maximum(p, low).sum(axis=1, keepdims=True))[np.arange(data.n),
                                                                                          data.actions]
    np.testing.assert_allclose(u, expected, atol=1e-12)


def test_smooth_first_stage_gets_no_clip_and_explicit_clips_are_honoured():
    data = _rare_action_data()
    kw = dict(normalization=N.anchor_action(1), gamma=0.9, q_model="exact", n_states=30,
              policy_model=LogisticRegression())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClippingWarning)
        model = GenPQR(**kw).fit(data)
    assert model.diagnostics_.clip == (0.0, 1.0) and "no clip" in model.diagnostics_.clip_rule
    np.testing.assert_allclose(model.log_policy(data.states),
                               np.log(LogisticRegression().fit(data.states, data.actions).predict_proba(data.states)),
                               atol=1e-12)
    assert GenPQR(clip=(0.02, 0.98), **kw).fit(data).diagnostics_.clip == (0.02, 0.98)
    assert GenPQR(clip=None, **kw).fit(data).diagnostics_.clip == (0.0, 1.0)
    with pytest.raises(ValueError, match="probability 0"):  # frequencies with no clip: log 0
        GenPQR(normalization=N.anchor_action(1), gamma=0.9, q_model="exact", clip=None).fit(data)


def test_cli_clip_flag_config_key_printed_and_reported(tmp_path, capsys):
    path = tmp_path / "c.csv"
    write_tabular_csv(path, n_episodes=60, horizon=8)
    code, out, err = fit_cli(base_flags(path, tmp_path / "a") + ["--clip", "0.01,0.99"], capsys)
    assert code == 0, err
    assert "probability clip: (0.01, 0.99) [given]" in out
    assert json.loads((tmp_path / "a" / "config.json").read_text())["clip"] == "0.01,0.99"
    html = (tmp_path / "a" / "report.html").read_text()
    assert "probability clip" in html and "(0.01, 0.99)" in html
    # the config key, and a flag overriding it
    (tmp_path / "cfg.json").write_text(json.dumps({"clip": "none", "policy_model": "logistic"}))
    code, out, err = fit_cli(["--config", tmp_path / "cfg.json"] + base_flags(path, tmp_path / "b"), capsys)
    assert code == 0, err
    assert "probability clip: (0, 1) [none (no clip)]" in out
    code, out, err = fit_cli(["--config", tmp_path / "cfg.json", "--clip", "auto", "--policy-model", "frequency"]
                             + base_flags(path, tmp_path / "c"), capsys)
    assert code == 0, err
    assert "probability clip: (" in out and "[auto:" in out
    code, _, err = fit_cli(base_flags(path, tmp_path / "d") + ["--clip", "0.9,0.1"], capsys)
    assert code == 2 and "clip" in err


def test_clipping_warning_in_console_and_report(tmp_path, capsys):
    data = _rare_action_data(n=1500)
    frame = pd.DataFrame({"episode": data.episode_ids, "time": np.arange(data.n) % 30,
                          "state": data.states[:, 0].astype(int), "action": data.actions})
    frame.to_csv(tmp_path / "r.csv", index=False)
    flags = base_flags(tmp_path / "r.csv", tmp_path / "o", "anchor:1") + ["--clip", "0.01,0.99",
                                                                         "--policy-model", "frequency"]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    assert "ClippingWarning" in out  # one line; the full text with --verbose and in the report
    code, out, err = fit_cli(flags + ["--verbose"], capsys)
    out = " ".join(out.split())  # lines wrapped at 100 characters
    assert code == 0, err
    assert "ClippingWarning" in out and "pulled toward log(bound)" in out
    html = (tmp_path / "o" / "report.html").read_text()
    assert "ClippingWarning" in html and "pulled toward log(bound)" in html


def test_sample_path_uses_the_same_rule():
    """FQE (continuous states): a logit first stage is not clipped; cell-like zeros get the floor."""
    from sklearn.linear_model import Ridge

    data = _rare_action_data(n=1200)
    kw = dict(normalization=N.anchor_action(1), gamma=0.5, q_model=FQE(Ridge(), n_iterations=20), cross_fit=3,
              random_state=0)
    smooth = GenPQR(policy_model=LogisticRegression(), **kw).fit(data)
    assert smooth.diagnostics_.clip == (0.0, 1.0) and smooth.diagnostics_.fraction_clipped == 0.0
    with pytest.warns(ClippingWarning, match="below the lower clip bound"):
        cells = GenPQR(policy_model=FrequencyClassifier(n_states=30), **kw).fit(data)
    low, high = cells.diagnostics_.clip
    assert 0 < low <= AUTO_LOW_MAX and high == 1.0 and cells.diagnostics_.fraction_clipped < CLIP_WARN_FRACTION
