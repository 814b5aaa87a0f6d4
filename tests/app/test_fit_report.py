"""The self-contained HTML report of `genpqr fit` (genpqr.app.report)."""

import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr.app.report import ReportContext, render_html, report_figures
from genpqr.estimator._diagnostic_checks import COVERAGE_LIMIT, COVERAGE_SHARE
from tests.app.test_workflow import base_flags, fit_cli, write_tabular_csv

SVG = re.compile(r"<svg xmlns=.*?</svg>", re.S)
NS = "{http://www.w3.org/2000/svg}"
SECTIONS = ("1. Data", "2. Policy fit", "3. Q-evaluation", "4. Reward", "5. Coverage diagnostics", "6. Warnings",
            "7. Configuration")


def embedded_images(html):
    """The report's figures: each inline SVG, parsed (so well-formed XML)."""
    return [ET.fromstring(text) for text in SVG.findall(html)]


def data_marks(svg) -> list:
    """The drawn data of a figure: the marks inside its panels' data groups that have a size (a
    path with a segment, a circle, a rectangle or a raster image with an area)."""
    marks = []
    for group in svg.iter(f"{NS}g"):
        if group.get("class") != "data":
            continue
        for el in group.iter():
            tag = el.tag.replace(NS, "")
            if tag == "path" and re.search(r"[LV]", el.get("d", "")) or tag == "circle" and float(el.get("r")) > 0 \
                    or tag in ("rect", "image") and float(el.get("width")) > 0 and float(el.get("height")) > 0:
                marks.append(el)
    return marks


def assert_not_blank(svg):
    """A drawn figure: reasonable size, axes, and data drawn in them."""
    assert float(svg.get("width")) > 150 and float(svg.get("height")) > 150
    assert any(g.get("class") == "panel" for g in svg.iter(f"{NS}g"))
    assert len(data_marks(svg)) >= 1, ET.tostring(svg)[:300]


def assert_self_contained(html):
    assert "<script" not in html and "<link" not in html
    assert not re.search(r"src=['\"](?!data:)", html)  # every image is a data URI
    assert not re.search(r"href=['\"](?!data:|#)", html)  # and every link within the page


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
    assert model.diagnostics_.max_mu_over_pi > COVERAGE_LIMIT
    assert model.diagnostics_.coverage_share > COVERAGE_SHARE
    section = html.split("6. Warnings")[1].split("7. Configuration")[0]
    assert "CoverageWarning: the recovered reward" in section and "No warnings" not in section
    for img in embedded_images(html):
        assert_not_blank(img)


# ---------------------------------------------------------------------------- cost and bounds (issues 31, 33)
def test_calibration_on_distinct_states_equals_sklearns_on_the_rows(tmp_path):
    """The calibration figure's points, computed once per distinct (fold, state) with weights,
    are sklearn's calibration_curve over every (row, action) pair (the same quantile bins)."""
    from sklearn.calibration import calibration_curve

    from genpqr.app.report_discrete import _policy_cells, calibration_points
    from genpqr.stage1._policy import clip_proba

    frame, _ = write_tabular_csv(tmp_path / "d.csv", n_episodes=60, horizon=8)
    data = genpqr.from_pandas(frame, episode="episode", time="time", state="state", action="action")
    model = genpqr.GenPQR(genpqr.normalization.anchor_action("left"), gamma=0.9, q_model="exact", n_states=15,
                          cross_fit=3, random_state=0, progress=False).fit(data)
    for held_out in (False, True):
        policy = model.policy_folds_ if held_out else model.policy_
        proba = clip_proba(policy.training_raw_proba(data.states), model.policy_.clip)[0]
        onehot = np.zeros_like(proba)
        onehot[np.arange(data.n), model.training_data_.actions] = 1.0
        cells = _policy_cells(model, held_out=held_out)
        assert cells.proba.shape[0] < data.n / 10  # one row per (fold, state), not per choice
        for n_bins in (5, 10):
            expected = calibration_curve(onehot.ravel(), proba.ravel(), n_bins=n_bins, strategy="quantile")
            for got, want in zip(calibration_points(cells, n_bins), expected):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_many_actions_report_is_bounded(tmp_path, capsys):
    """Issue 33: 2,000 items and 60 rows. The per-action figures show the 30 most visited items
    (the anchor among them), the action table the 60 most frequent and the rewards table their
    columns, each saying so; the page stays small."""
    from genpqr.app.cli import main

    rng = np.random.default_rng(0)
    K, n = 2000, 60
    x = rng.normal(size=(K, 2))
    actions = rng.choice(K, size=n, p=np.exp(x[:, 0]) / np.exp(x[:, 0]).sum())
    pd.DataFrame({"episode": np.arange(n) // 6, "time": np.arange(n) % 6, "state": rng.integers(0, 3, n),
                  "action": actions}).to_csv(tmp_path / "d.csv", index=False)
    pd.DataFrame({"action": np.arange(K), "f0": x[:, 0], "f1": x[:, 1]}).to_csv(tmp_path / "items.csv", index=False)
    anchor = int(np.bincount(actions).argmax())
    code = main(["fit", str(tmp_path / "d.csv"), "--episode", "episode", "--time", "time", "--state", "state",
                 "--action", "action", "--gamma", "0.9", "--normalization", f"anchor:{anchor}", "--action-features",
                 str(tmp_path / "items.csv"), "--quiet", "--out", str(tmp_path / "o")])
    assert code == 0, capsys.readouterr().err
    html = (tmp_path / "o" / "report.html").read_text()
    assert len(html) < 250_000
    assert "The 30 most visited of 2,000 actions are shown; all are in rewards.csv." in html
    assert "The 60 most frequent of 2,000 actions; the other 1,940 have" in html
    assert "Columns of the 30 most visited of 2,000 actions; every action&#39;s columns are in rewards.csv." in html
    table = html.split("id='rewards-table'>Rewards table")[1].split("5. Coverage")[0]
    assert table.count("<th>reward_") == 30 and f"<th>reward_{anchor}</th>" in table
    for svg in embedded_images(html):
        assert_not_blank(svg)
        ticks = [t for t in svg.iter(f"{NS}text") if t.get("transform", "").endswith("rotate(-90)")
                 and t.get("class") is None]
        assert len(ticks) <= 30  # one tick label per shown action at most
    section = html.split("id='action-frequencies'")[1].split("</table>")[0]
    assert section.count("<tr>") == 60


def test_the_report_imports_no_plotting_library(tmp_path):
    """Writing report.html imports neither matplotlib nor scipy.stats nor sklearn.calibration."""
    import subprocess
    import sys

    write_tabular_csv(tmp_path / "d.csv", n_episodes=40, horizon=6)
    code = f"""
import sys
import pandas as pd
import genpqr
from genpqr.app.report import ReportContext, render_html
frame = pd.read_csv({str(tmp_path / "d.csv")!r})
data = genpqr.from_pandas(frame, episode="episode", time="time", state="state", action="action")
model = genpqr.GenPQR(genpqr.normalization.anchor_action("left"), gamma=0.9, q_model="exact", n_states=15,
                      progress=False).fit(data)
before = set(sys.modules)
html = render_html(ReportContext(model=model, config={{}}, data_summary={{}}, rewards=model.reward_table()))
print(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("matplotlib", "scipy", "sklearn")))
"""
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
