"""The self-contained HTML report of `genpqr fit` (genpqr.app.report)."""

import base64
import io
import re

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr.app.report import ReportContext, render_html, report_figures
from tests.app.test_workflow import base_flags, fit_cli, write_tabular_csv

PNG = re.compile(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'")
SECTIONS = ("1. Data", "2. Policy fit", "3. Q-evaluation", "4. Reward", "5. Coverage diagnostics", "6. Warnings",
            "7. Configuration")


def embedded_images(html):
    return [mpimg.imread(io.BytesIO(base64.b64decode(b)), format="png") for b in PNG.findall(html)]


def assert_not_blank(img):
    """A drawn figure: reasonable size, and a visible share of non-white pixels."""
    rgb = img[..., :3]
    assert img.shape[0] > 150 and img.shape[1] > 150
    ink = np.mean(np.any(rgb < 0.9, axis=-1))
    assert ink > 0.02 and np.std(rgb) > 0.05, (ink, np.std(rgb))


def assert_self_contained(html):
    assert "<script" not in html and "<link" not in html
    assert not re.search(r"src=['\"](?!data:)", html)  # every image is a data URI


@pytest.fixture(scope="module")
def tabular_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tab")
    write_tabular_csv(tmp / "d.csv", n_episodes=120, horizon=8)
    S, labels = 15, ["left", "right", "stay"]
    rows = [{"state": s, "action": a, "bonus": float(a != "left"), "level": s / 14 * (a == "right")}
            for s in range(S) for a in labels]
    pd.DataFrame(rows).to_csv(tmp / "f.csv", index=False)
    code, out, err = fit_cli(base_flags(tmp / "d.csv", tmp / "out") + ["--bootstrap", 3, "--features", tmp / "f.csv"])
    assert code == 0
    return (tmp / "out" / "report.html").read_text()


def test_tabular_report_has_every_section_and_non_empty_figures(tabular_report):
    html = tabular_report
    for section in SECTIONS:
        assert section in html
    images = embedded_images(html)
    # actions, calibration, heat map, transitions per cell, bootstrap intervals, structural fit, coverage (no
    # convergence plot for the exact solve)
    assert len(images) == 7
    assert "Transition support" in html and "reward SE from the policy" in html
    for img in images:
        assert_not_blank(img)
    assert_self_contained(html)
    assert "out-of-fold" in html and "exact linear solve" in html
    assert "Structural parameters" in html and "bonus" in html and "Weighted R" in html
    assert "max mu/pi_hat" in html and "anchor action" in html


def test_continuous_report_shows_convergence_and_partial_dependence(tmp_path, capsys):
    rng = np.random.default_rng(2)
    n_ep, T = 50, 10
    n = n_ep * T
    x = rng.normal(size=(n, 2))
    act = np.where(rng.random(n) < 1 / (1 + np.exp(-x[:, 0] + 0.5 * x[:, 1])), "go", "wait")
    pd.DataFrame({"ep": np.repeat(np.arange(n_ep), T), "t": np.tile(np.arange(T), n_ep), "speed": x[:, 0],
                  "load": x[:, 1], "choice": act}).to_csv(tmp_path / "c.csv", index=False)
    flags = [tmp_path / "c.csv", "--episode", "ep", "--time", "t", "--state", "speed,load", "--action", "choice",
             "--gamma", 0.8, "--normalization", "mean-zero", "--q-model", "linear", "--n-iterations", 40,
             "--out", tmp_path / "o", "--quiet"]
    code, _, err = fit_cli(flags, capsys)
    assert code == 0, err
    html = (tmp_path / "o" / "report.html").read_text()
    for section in SECTIONS:
        assert section in html
    images = embedded_images(html)
    # actions, calibration, FQE convergence, partial dependence, coverage
    assert len(images) == 5
    for img in images:
        assert_not_blank(img)
    assert "fitted Q evaluation" in html and "partial dependence" in html.lower()
    assert "the continuation P mu Q" in html  # what FQE regressed (the default structure)
    assert_self_contained(html)


def test_warnings_and_in_sample_wording_are_reported(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n_ep, T = 40, 6
    n = n_ep * T
    actions = np.where(rng.random(n) < 0.05, "rare", "common")
    actions[:2] = "rare"
    pd.DataFrame({"episode": np.repeat(np.arange(n_ep), T), "time": np.tile(np.arange(T), n_ep),
                  "state": rng.integers(0, 3, n), "action": actions}).to_csv(tmp_path / "w.csv", index=False)
    code, out, err = fit_cli(base_flags(tmp_path / "w.csv", tmp_path / "o", "anchor:rare") + ["--cross-fit", 0],
                             capsys)
    assert code == 0, err
    assert "WeakSupportWarning" in out  # printed by the command too
    html = (tmp_path / "o" / "report.html").read_text()
    warnings_section = html.split("6. Warnings")[1].split("7. Configuration")[0]
    assert "WeakSupportWarning" in warnings_section and "weak support" in warnings_section
    assert "In-sample" in html and "(in-sample" in html


def test_report_figures_from_a_context(tmp_path):
    """The report module on its own: a context built by hand from a fitted model."""
    frame, _ = write_tabular_csv(tmp_path / "d.csv", n_episodes=40, horizon=6)
    data = genpqr.from_pandas(frame, episode="episode", time="time", state="state", action="action")
    model = genpqr.GenPQR(genpqr.normalization.mean_zero(), gamma=0.9, q_model="exact", n_states=15,
                          policy_model=genpqr.stage1.FrequencyClassifier(n_states=15)).fit(data)
    ctx = ReportContext(model=model, config={"gamma": 0.9}, data_summary={"episodes": 40},
                        rewards=model.reward_table(), tabular=True, state_names=["state"])
    figures = report_figures(ctx)
    assert [f.section for f in figures] == ["data", "policy", "reward", "transitions", "coverage"]
    html = render_html(ctx)
    assert "In-sample" in html
    # nothing was caught (ctx.warnings is empty), yet the failed coverage check is listed:
    # 40 short episodes leave some state-action frequencies at the clip bound, so mean-zero's
    # mu/pi_hat exceeds the limit at the states of more than 5% of the rows
    assert model.diagnostics_.max_mu_over_pi > genpqr.estimator.COVERAGE_LIMIT
    assert model.diagnostics_.coverage_share > genpqr.estimator.COVERAGE_SHARE
    section = html.split("6. Warnings")[1].split("7. Configuration")[0]
    assert "CoverageWarning: the recovered reward" in section and "No warnings" not in section
    for img in embedded_images(html):
        assert_not_blank(img)
