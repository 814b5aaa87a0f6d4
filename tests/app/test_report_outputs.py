"""Honest outputs of `genpqr fit` / the demo: failed diagnostics are warnings in the report,
values zero by construction are exact zeros, config.json reruns from any folder, the saved
model leaves the training data out unless asked, and the figures label what they show."""

import json
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import genpqr
from genpqr import normalization as N, stage2
from genpqr.app.demo import run_demo
from genpqr.estimator import Diagnostics
from genpqr.estimator._diagnostic_checks import COVERAGE_LIMIT, COVERAGE_SHARE, failed_diagnostics, poorly_covered
from genpqr.envs import random_mdp
from genpqr.exceptions import ClippingWarning, ConvergenceWarning, CoverageWarning, WeakSupportWarning
from genpqr.app.report import ReportContext, render_html
from genpqr.evaluation import plot_reward_recovery, plot_reward_table
from genpqr.evaluation._plotting import legend_outside, plot_bellman_residuals
from genpqr.stage2 import FQE
from tests.app.test_workflow import LABELS, base_flags, fit_cli, write_tabular_csv


def warnings_section(html):
    return html.split("6. Warnings")[1].split("7. Configuration")[0]


# ---------------------------------------------------------------------------- failed diagnostics -> warnings
def diag(**changes):
    base = dict(n_transitions=1000, n_episodes=100, action_counts={"a": 500, "b": 500}, support_count=500,
                policy_log_loss=0.6, policy_log_loss_kind="out-of-fold", fraction_clipped=0.0, max_mu_over_pi=2.0,
                bellman_residuals=[0.1], target_changes=[1e-9], n_iterations=40, converged=True, solver="fqe")
    return Diagnostics(**{**base, **changes})


def test_each_failed_check_gives_one_warning_and_passing_checks_none():
    kw = dict(normalization="anchor", clip=(0.01, 0.99), min_support=30, tol=1e-6)
    assert failed_diagnostics(diag(), **kw) == []
    cases = [(dict(converged=False), ConvergenceWarning), (dict(fraction_clipped=0.06), ClippingWarning),
             (dict(max_mu_over_pi=COVERAGE_LIMIT * 1.01), CoverageWarning), (dict(support_count=29), WeakSupportWarning)]
    for change, category in cases:
        assert [c for c, _ in failed_diagnostics(diag(**change), **kw)] == [category], change
    # at the thresholds nothing fires; the exact solver never "fails to converge"
    assert failed_diagnostics(diag(fraction_clipped=0.05, max_mu_over_pi=COVERAGE_LIMIT, support_count=30), **kw) == []
    assert failed_diagnostics(diag(converged=False, solver="direct"), **kw) == []
    message = failed_diagnostics(diag(converged=False), **kw, early_stopping=True)[0][1]
    assert "held-out Bellman residual" in message and "1e-09" in message


def test_coverage_check_fires_on_the_share_of_rows_not_on_one_state():
    """A huge mu/pi_hat at states holding a few rows hardly moves the behaviour-weighted reward
    error (diagnostic_checks): silent up to COVERAGE_SHARE of the rows, a warning naming the
    output above it; without the share (older models) the maximum alone decides."""
    kw = dict(normalization="anchor", clip=(0.01, 0.99), min_support=30, tol=1e-6)
    assert failed_diagnostics(diag(max_mu_over_pi=1e4, coverage_share=COVERAGE_SHARE), **kw) == []
    [(category, message)] = failed_diagnostics(diag(max_mu_over_pi=25.0, coverage_share=0.06), **kw)
    assert category is CoverageWarning and "at the states of 6.0% of the rows" in message
    assert "rewards.csv" in message and "parameters.csv) does not use the normalization" in message
    assert failed_diagnostics(diag(max_mu_over_pi=25.0), **kw)[0][0] is CoverageWarning  # share unknown (NaN)
    mu = np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    proba = np.array([[0.04, 0.96], [0.06, 0.94], [0.02, 0.98], [0.0, 1.0]])
    np.testing.assert_array_equal(poorly_covered(mu, proba), [True, False, True, False])


def test_a_fit_that_did_not_converge_says_so_in_the_report(tmp_path, capsys):
    """FQE with hgb (iterations chosen on held-out episodes; the continuous-state default before
    the LSTD fixed point) used to stop unconverged while the report said "No warnings were raised"."""
    rng = np.random.default_rng(2)
    n_ep, T = 40, 8
    x = rng.normal(size=(n_ep * T, 2))
    act = np.where(rng.random(n_ep * T) < 1 / (1 + np.exp(-x[:, 0])), "go", "wait")
    pd.DataFrame({"ep": np.repeat(np.arange(n_ep), T), "t": np.tile(np.arange(T), n_ep), "speed": x[:, 0],
                  "load": x[:, 1], "choice": act}).to_csv(tmp_path / "c.csv", index=False)
    flags = [tmp_path / "c.csv", "--episode", "ep", "--time", "t", "--state", "speed,load", "--action", "choice",
             "--gamma", 0.8, "--normalization", "mean-zero", "--q-model", "hgb", "--n-iterations", 4, "--out",
             tmp_path / "o", "--quiet"]
    code, out, err = fit_cli(flags, capsys)
    assert code == 0, err
    model = genpqr.load(tmp_path / "o" / "model.joblib")
    assert not model.diagnostics_.converged
    section = warnings_section((tmp_path / "o" / "report.html").read_text())
    assert "ConvergenceWarning: FQE did not converge" in section and "No warnings" not in section
    assert "ConvergenceWarning" in out


def test_report_lists_failed_checks_even_when_the_fit_warnings_were_silenced(tmp_path):
    frame, _ = write_tabular_csv(tmp_path / "d.csv", n_episodes=40, horizon=6)
    frame = frame[(frame.action != "left") | (frame.state % 5 == 0)]  # "left" is rare: weak support
    data = genpqr.from_pandas(frame, episode="episode", time="time", state="state", action="action",
                              time_gaps="split")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = genpqr.GenPQR(N.anchor_action("left"), gamma=0.9, q_model="exact", n_states=15).fit(data)
    assert any(w.startswith("WeakSupportWarning") for w in model.diagnostics_.warnings)
    ctx = ReportContext(model=model, config={}, data_summary={}, rewards=model.reward_table(), warnings=[])
    section = warnings_section(render_html(ctx))
    for line in model.diagnostics_.warnings:
        assert line.split(":")[0] in section
    assert "weak support" in section and "No warnings" not in section
    # a caught warning and the same derived one are listed once
    ctx.warnings = list(model.diagnostics_.warnings)
    assert warnings_section(render_html(ctx)).count("weak support") == 1


# ---------------------------------------------------------------------------- exact zeros
def test_anchor_rewards_are_exactly_g_in_the_solver_and_rewards_csv(tmp_path, capsys):
    mdp = random_mdp(12, 3, n_next=4, gamma=0.9, random_state=3)
    sol = stage2.soft_optimal_solution(mdp.reward, mdp.kernel, 0.9)
    for g in (0.0, 0.37):
        rec = stage2.recover_reward(sol.log_policy, mdp.kernel, 0.9, N.anchor_action(1, g=g))
        assert np.all(rec.reward[:, 1] == g)  # bit for bit, not 1e-15
    mean_zero = stage2.recover_reward(sol.log_policy, mdp.kernel, 0.9, N.mean_zero())
    np.testing.assert_allclose(mean_zero.reward.mean(axis=1), 0.0, atol=1e-14)
    write_tabular_csv(tmp_path / "d.csv", n_episodes=60, horizon=6)
    code, _, err = fit_cli(base_flags(tmp_path / "d.csv", tmp_path / "o") + ["--bootstrap", 3], capsys)
    assert code == 0, err
    raw = pd.read_csv(tmp_path / "o" / "rewards.csv", dtype=str)
    for col in ("reward_left", "reward_left_se", "reward_left_lo", "reward_left_hi"):
        assert set(raw[col]) == {"0.0"}, (col, set(raw[col]))
    assert (raw["reward_right"] != "0.0").any()
    table = (tmp_path / "o" / "report.html").read_text().split("id='rewards-table'>Rewards table")[1].split("5. Coverage")[0]
    assert "e-1" not in table  # no 1.776e-15 for a zero


# ---------------------------------------------------------------------------- config.json from anywhere
def test_config_json_reruns_from_another_folder(tmp_path, monkeypatch, capsys):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    write_tabular_csv(work / "d.csv", n_episodes=60, horizon=6)
    rows = [{"state": s, "action": a, "bonus": float(a != "left")} for s in range(15) for a in LABELS]
    pd.DataFrame(rows).to_csv(work / "f.csv", index=False)
    monkeypatch.chdir(work)  # every path relative, as a user types them
    code, _, err = fit_cli(base_flags("d.csv", "out") + ["--features", "f.csv"], capsys)
    assert code == 0, err
    config = json.loads((work / "out" / "config.json").read_text())
    for key in ("data", "features", "out"):
        assert config[key] == str((work / {"data": "d.csv", "features": "f.csv", "out": "out"}[key]).resolve())
    first = (work / "out" / "rewards.csv").read_text()
    params = (work / "out" / "parameters.csv").read_text()
    (work / "out" / "rewards.csv").unlink()
    monkeypatch.chdir(elsewhere)
    # the command the report shows, run as shown
    command = re.search(r"<code>genpqr fit --config (\S+)</code>", (work / "out" / "report.html").read_text()).group(1)
    assert command == str(work.resolve() / "out" / "config.json")
    code, _, err = fit_cli(["--config", command], capsys)
    assert code == 0, err
    assert (work / "out" / "rewards.csv").read_text() == first
    assert (work / "out" / "parameters.csv").read_text() == params
    assert not any(elsewhere.iterdir())  # nothing written where the rerun was started


# ---------------------------------------------------------------------------- model size
def test_model_joblib_leaves_the_training_data_out_unless_asked(tmp_path, capsys):
    write_tabular_csv(tmp_path / "d.csv", n_episodes=1500, horizon=10)
    code, _, err = fit_cli(base_flags(tmp_path / "d.csv", tmp_path / "slim"), capsys)
    assert code == 0, err
    code, _, err = fit_cli(base_flags(tmp_path / "d.csv", tmp_path / "full") + ["--save-data"], capsys)
    assert code == 0, err
    slim, full = (tmp_path / d / "model.joblib" for d in ("slim", "full"))
    assert slim.stat().st_size < full.stat().st_size / 20, (slim.stat().st_size, full.stat().st_size)
    small, big = genpqr.load(slim), genpqr.load(full)
    assert not hasattr(small, "training_data_") and big.training_data_.n == 1500 * 10  # every choice
    grid = np.arange(15)
    assert np.array_equal(small.reward(grid), big.reward(grid))
    assert np.array_equal(small.continuation(grid), big.continuation(grid))
    pd.testing.assert_frame_equal(small.reward_table(), big.reward_table())
    assert str(small.summary()) == str(big.summary())
    np.testing.assert_array_equal(small.policy_value_difference(N.mean_zero(), N.anchor_action("left")),
                                  big.policy_value_difference(N.mean_zero(), N.anchor_action("left")))
    # the exact path re-solves a slim model from its stored tables: the same numbers
    again = big.renormalize(N.mean_zero())
    np.testing.assert_allclose(again.reward(grid).mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(small.renormalize(N.mean_zero()).reward(grid), again.reward(grid), atol=1e-12)
    # the in-memory model that was saved keeps its data (save does not modify it)
    model = genpqr.GenPQR(N.anchor_action("left"), gamma=0.9, q_model="exact", n_states=15, cross_fit=2)
    model.fit(big.training_data_)
    model.save(tmp_path / "m.joblib")
    assert model.training_data_.n == 1500 * 10 and model.policy_folds_.fold_of_row is not None
    assert genpqr.load(tmp_path / "m.joblib").policy_folds_ is None  # the fold models serve diagnostics only


# ---------------------------------------------------------------------------- figures
def test_colour_bars_are_labelled_and_legends_sit_outside_the_axes():
    fig = Figure(figsize=(12, 4), layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    plot_reward_table(np.arange(6.0).reshape(3, 2), ["x", "y"], ax=ax1)
    rng = np.random.default_rng(0)
    t = rng.normal(size=50)
    plot_reward_recovery(t, t + 0.1 * rng.normal(size=50), ax=ax2, c=rng.random(50), colorbar_label="visits")
    plot_bellman_residuals(diag(bellman_residuals=[1.0, 0.5, 0.4, 0.4], target_changes=[1, 0.1, 0.01, 0.001]), ax=ax3,
                           floor=0.4)
    fig.canvas.draw()
    colorbars = [ax for ax in fig.axes if ax not in (ax1, ax2, ax3)]
    assert len(colorbars) == 2 and all(cb.get_ylabel() for cb in colorbars)
    renderer = fig.canvas.get_renderer()
    for ax in (ax2, ax3):
        legend = ax.get_legend()
        assert len(legend.get_texts()) >= 2  # not a single marker
        box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert box.y1 <= area.y0  # below the axes, not over the data
        assert box.y1 <= ax.xaxis.label.get_window_extent(renderer).y0 + 1  # and below the x label
    ax1.plot([0, 1], [0, 2], label="line")
    box = legend_outside(ax1, "right").get_window_extent(renderer)
    assert box.x0 >= ax1.get_window_extent(renderer).x1


def test_demo_explains_the_residual_plateau(tmp_path, capsys):
    """The FQE residual levels off at the noise of the sampled next state: the demo computes
    that floor independently and it equals the plateau."""
    result = run_demo(tmp_path, n_states=12, n_episodes=300, seed=1)
    assert result["residual_floor"] > 0.05
    np.testing.assert_allclose(result["last_residual"], result["residual_floor"], rtol=1e-6)
    assert "not an error" in capsys.readouterr().out
    assert (tmp_path / "demo.png").stat().st_size > 10_000


def test_slim_sample_path_model_refuses_to_renormalize_clearly(tmp_path):
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    s = rng.normal(size=(400, 2))
    a = (rng.random(400) < 1 / (1 + np.exp(-s[:, 0]))).astype(int)
    nxt = s + 0.1 * rng.normal(size=s.shape)
    data = genpqr.from_arrays(s, a, nxt, episode_ids=np.repeat(np.arange(40), 10))
    model = genpqr.GenPQR(N.anchor_action(0), gamma=0.8, q_model=FQE(LinearRegression(), n_iterations=5),
                          progress=False).fit(data)
    model.save(tmp_path / "m.joblib")
    slim = genpqr.load(tmp_path / "m.joblib")
    with pytest.raises(ValueError, match="renormalize needs the training data.*include_data=True"):
        slim.renormalize(N.mean_zero())


# ---------------------------------------------------------------------------- issue 10 audit: honest edges
def test_unvisited_states_and_the_iteration_limit_are_failed_checks():
    kw = dict(normalization="anchor", clip=(0.01, 0.99), min_support=30, tol=1e-6)
    (category, message), = failed_diagnostics(diag(solver="direct", n_states=7, unvisited_states=[5, 6]), **kw)
    assert category is WeakSupportWarning
    assert message.startswith("2 of 7 states have no observed choice (e.g. state_index [5, 6])")
    assert "not identified" in message and "visited_states_" in message
    # early stopping that ran into the iteration limit says so (the held-out residual was still improving),
    # not that the held-out residual chose the count
    at_limit = failed_diagnostics(diag(converged=False, n_iterations=40), **kw, early_stopping=True,
                                  max_iterations=40)[0][1]
    assert "iteration limit n_iterations=40" in at_limit and "raise n_iterations" in at_limit
    assert "chosen by the held-out" not in at_limit
    chosen = failed_diagnostics(diag(converged=False, n_iterations=12), **kw, early_stopping=True,
                                max_iterations=40)[0][1]
    assert "the count chosen by the held-out Bellman residual" in chosen


def test_api_fit_warns_about_states_without_choices():
    """GenPQR.fit (not only genpqr fit) flags states the data never visits: a warning, the
    visited_states_ mask and diagnostics_.warnings; none when every state is visited."""
    rng = np.random.default_rng(0)
    states, actions = rng.integers(0, 4, 400), rng.integers(0, 2, 400)
    data = genpqr.from_arrays(states[:, None], actions, rng.integers(0, 4, 400)[:, None])
    with pytest.warns(WeakSupportWarning, match=r"2 of 6 states have no observed choice \(e\.g\. state_index \[4, 5\]"):
        model = genpqr.GenPQR(N.anchor_action(0), q_model="exact", n_states=6).fit(data)
    assert model.visited_states_.tolist() == [True] * 4 + [False] * 2
    assert model.diagnostics_.unvisited_states == [4, 5]
    assert any(w.startswith("WeakSupportWarning: 2 of 6 states") for w in model.diagnostics_.warnings)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakSupportWarning)
        genpqr.GenPQR(N.anchor_action(0), q_model="exact").fit(data)


def test_report_figures_mark_states_without_choices(tmp_path, capsys):
    """The heat map hatches, and the interval plot shades (hollow markers), the states with no
    observed choice; the warning is printed once (not once before and once after the fit)."""
    from genpqr.app.config import FitConfig
    from genpqr.app.report import context_from_outputs
    from genpqr.app.report_discrete import _fig_heatmap, _fig_intervals
    from genpqr.app.workflow import run_fit

    rng = np.random.default_rng(0)
    n = 40 * 6
    pd.DataFrame({"episode": np.repeat(np.arange(40), 6), "time": np.tile(np.arange(6), 40),
                  "state": rng.integers(0, 4, n), "action": rng.choice(["a", "b"], n)}).to_csv(tmp_path / "d.csv",
                                                                                              index=False)
    config = FitConfig(data=str(tmp_path / "d.csv"), episode="episode", time="time", state=["state"], action="action",
                       gamma=0.9, normalization="anchor:a", out=str(tmp_path / "o"), quiet=True, cross_fit=0,
                       n_states=6, bootstrap=10)
    outputs = run_fit(config)
    assert [w for w in outputs.warnings if "no observed choice" in w] == [
        w for w in outputs.warnings if w.startswith("WeakSupportWarning: 2 of 6 states")]
    assert len([w for w in outputs.warnings if "no observed choice" in w]) == 1
    ctx = context_from_outputs(outputs)
    heat = ET.fromstring(_fig_heatmap(ctx).svg())
    hatched = [el for el in heat.iter() if el.get("class") == "unvisited"]
    assert sorted(int(el.get("data-state")) for el in hatched) == [4, 5]
    assert all(el.get("fill", "").startswith("url(#") for el in hatched)  # drawn with the hatch pattern
    assert "no observed choice" in _legend_texts(heat)[0]
    intervals = ET.fromstring(_fig_intervals(ctx).svg())
    assert any("no observed choice" in t for t in _legend_texts(intervals))
    hollow = [[float(m.get("data-x")) for m in series if m.get("class") == "hollow"] for series in intervals.iter()
              if series.get("class") == "series"]
    hollow = [xs for xs in hollow if xs]
    assert len(hollow) == 2 and all(np.round(xs).tolist() == [4, 5] for xs in hollow)
    assert all(m.get("fill") == "white" for m in intervals.iter() if m.get("class") == "hollow")


def _legend_texts(svg) -> list:
    return [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "legend"]


def test_demo_prints_its_warnings_as_lines_not_source_code(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing escapes as a raw Python warning
        result = run_demo(tmp_path, n_states=12, n_episodes=300, seed=1)
    out = capsys.readouterr().out
    assert result["warnings"][0].startswith("CoverageWarning: the recovered reward")  # anchor 0 is rare here
    flat = " ".join(out.split())  # lines wrapped at 100 characters
    assert "1 warning(s) from the fits" in flat and " ".join(result["warnings"][0].split()) in flat
    # explained by its cost, measured against the truth
    split = result["coverage"]
    assert f"RMSE is {split['rmse_flagged']:.3g} at the {split['n_flagged']} state(s) it means" in flat
