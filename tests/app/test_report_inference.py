"""The report's "Inference" section (genpqr.app.report_inference): ``genpqr fit --infer`` shows in
report.html the numbers of inference.csv, as the console prints them, with its warnings beside
the components they concern; without ``--infer`` the report has no such section."""

import contextlib
import html as html_lib
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr import datasets
from genpqr.app.console import unwrap
from genpqr.app.report import ReportContext, render_html
from genpqr.app.report_base import INFERENCE_SIDE, warning_sections
from genpqr.app.report_inference import FLAG, number
from genpqr.app.report_svg import RED
from genpqr.inference import infer, policy_value, reward_projection
from genpqr.inference._infer import ESS_WARN
from genpqr.normalization import anchor_action
from tests.app.test_fit_report import SVG, assert_not_blank, assert_self_contained, embedded_images
from tests.app.test_workflow import fit_cli, write_tabular_csv

#: Targets on the bundled choices: a value, a difference, a thin cell (state 13 has 7 choices of c:
#: the Riesz weights rest on few rows, an InferenceWarning), and the projection on the features.
SPECS = ["value:uniform;gamma=0.8", "difference:action=b,behavior", "reward-at:13=c", "projection"]
THIN = "r(13, c)"


def fit_flags(out, *extra):
    return [datasets.path("choices"), "--episode", "episode", "--time", "time", "--state", "state", "--action",
            "action", "--gamma", 0.9, "--normalization", "anchor:a", "--features", datasets.path("features"),
            "--out", out, "--quiet", *extra]


@pytest.fixture(scope="module")
def inferred(tmp_path_factory):
    """The fit folder, report.html and the console's lines of ``genpqr fit --infer ...``."""
    out = tmp_path_factory.mktemp("infer") / "fit"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code, _, _ = fit_cli(fit_flags(out, *[item for spec in SPECS for item in ("--infer", spec)]))
    assert code == 0
    return out, (out / "report.html").read_text(encoding="utf-8"), unwrap(printed.getvalue())


def section(html: str) -> str:
    """The Inference section's HTML (from its heading to the warnings')."""
    assert html.count("<h2 id='inference'>") == 1
    return html.split("<h2 id='inference'>")[1].split("<h2 id='warnings'>")[0]


def estimates_table(html: str) -> pd.DataFrame:
    """The estimates table as the page carries it: each numeric cell's ``data-value`` (full
    precision) under its ``data-column`` (the column of inference.csv); ``shown`` the text."""
    part = section(html)
    table = part.split("<table class='inference'>")[1].split("</table>")[0]
    columns = re.findall(r"<th data-column='([^']+)'", table)
    values, shown = {}, {}
    for name, body in re.findall(r"<tr data-component='([^']+)'[^>]*>(.*?)</tr>", table, flags=re.S):
        name = html_lib.unescape(name)
        cells = re.findall(r"<td data-value='([^']+)'>([^<]*)</td>", body)
        values[name] = [float(v) for v, _ in cells]
        shown[name] = [text for _, text in cells]
    numeric = [c for c in columns if c not in ("component", "target")]
    return (pd.DataFrame.from_dict(values, orient="index", columns=numeric),
            pd.DataFrame.from_dict(shown, orient="index", columns=numeric))


def test_the_report_shows_inference_csv(inferred):
    out, html, _ = inferred
    csv = pd.read_csv(out / "inference.csv", index_col="component")
    values, _ = estimates_table(html)
    assert list(values.index) == list(csv.index)  # one row per component, in order
    assert {"estimate", "std_error", "ci_low", "ci_high", "plug_in"} <= set(values.columns)
    for column in values.columns:  # the very numbers of the file, not a recomputation
        np.testing.assert_array_equal(values[column].to_numpy(), csv[column].to_numpy(), err_msg=column)
    part = section(html)
    assert "efficient influence function, clustered by episode" in part
    assert html_lib.escape(csv["ci_kind"].iloc[0], quote=False) in part
    for target in csv["target"].unique():
        assert html_lib.escape(target, quote=False) in part
    # sections renumbered after it; the table of contents links it
    assert "6. Inference" in html and "7. Warnings" in html and "8. Configuration" in html
    assert "href='#inference'" in html
    assert_self_contained(html)


def test_the_report_prints_what_the_console_prints(inferred):
    """One answer per question: each shown number is the console summary's, digit for digit."""
    _, html, console = inferred
    _, shown = estimates_table(html)
    lines = console.splitlines()
    start = lines.index("Debiased inference: one-step estimator, efficient influence function")
    for name, row in shown.iterrows():
        line = next(line for line in lines[start:] if line.startswith(name + " "))
        tokens = line[len(name):].split()
        expected = [row[c] for c in ("estimate", "std_error", "z", "p_value", "ci_low", "ci_high", "plug_in")]
        assert tokens == expected, (line, expected)


def test_a_fragile_interval_is_flagged_where_it_is_shown(inferred):
    out, html, console = inferred
    csv = pd.read_csv(out / "inference.csv", index_col="component")
    assert csv.loc[THIN, "effective_rows"] < ESS_WARN or csv.loc[THIN, "top_row_share"] > 0.1
    part = section(html)
    rows = dict(re.findall(r"<tr data-component='([^']+)'([^>]*)>", part))
    flagged = {html_lib.unescape(k) for k, attrs in rows.items() if "warn" in attrs}
    assert flagged == {THIN}  # its row only
    assert "1 of 5 component(s) flagged" in part
    warning = part.split("<ul class='inference-warnings'>")[1].split("</ul>")[0]
    assert THIN in warning and "may not be reliable" in warning and "thin overlap" in warning
    # the figure draws it in red, with a legend saying so
    figures = [ET.fromstring(text) for text in SVG.findall(part)]
    assert figures
    for svg in figures:
        assert_not_blank(svg)
    drawn = "".join(SVG.findall(part))
    assert RED in drawn and FLAG in drawn
    # the warnings section and the console say the warning concerns inference.csv, not the reward
    warnings_part = html.split("<h2 id='warnings'>")[1].split("<h2 id='configuration'>")[0]
    assert f"warning(s) about {INFERENCE_SIDE}" in html_lib.unescape(warnings_part)
    assert "InferenceWarning" in warnings_part
    assert f"1 warning(s) about {INFERENCE_SIDE}" in console
    assert "about rewards.csv" not in console


def test_without_infer_the_report_has_no_inference_section(tmp_path):
    code, _, _ = fit_cli(fit_flags(tmp_path / "fit"))
    assert code == 0
    html = (tmp_path / "fit" / "report.html").read_text(encoding="utf-8")
    assert not (tmp_path / "fit" / "inference.csv").exists()
    assert "id='inference" not in html and "Inference" not in html and "#inference" not in html
    assert "6. Warnings" in html and "7. Configuration" in html
    assert len(embedded_images(html)) == 6


def test_a_cross_fitted_result_shows_its_folds_and_plug_in(tmp_path):
    """From a context built by hand: folds (each component's estimate per fold) and a target of
    many components (a projection on five features: a figure of its own)."""
    frame, _ = write_tabular_csv(tmp_path / "d.csv", n_episodes=300)
    data = genpqr.from_pandas(frame, episode="episode", time="time", state="state", action="action")
    model = genpqr.GenPQR(anchor_action("left"), gamma=0.9, q_model="exact", n_states=15).fit(data)
    features = np.random.default_rng(0).normal(size=(15, 3, 5))
    result = infer(model, [policy_value(np.full(3, 1 / 3), gamma=0.8, name="V(uniform)"),
                           reward_projection(features, names=[f"x{k}" for k in range(5)])], data, cross_fit=2,
                   random_state=0, warn=False)
    ctx = ReportContext(model=model, config={"gamma": 0.9}, data_summary={"episodes": 300},
                        rewards=model.reward_table(), tabular=True, state_names=["state"], inference=result)
    html = render_html(ctx)
    part = section(html)
    values, shown = estimates_table(html)
    frame_ = result.to_frame()
    for column in values.columns:
        np.testing.assert_array_equal(values[column].to_numpy(), frame_[column].to_numpy(dtype=np.float64))
    assert shown.loc["x3", "estimate"] == number(result.params["x3"])
    folds = part.split("id='inference-folds'")[1].split("</table>")[0]
    per_fold = [float(v) for v in re.findall(r"data-value='([^']+)'", folds)]
    expected = result.folds.pivot(index="component", columns="fold", values="estimate").reindex(result.names)
    np.testing.assert_array_equal(per_fold, expected.to_numpy().ravel())
    assert "2 episode folds" in part
    figures = [ET.fromstring(text) for text in SVG.findall(part)]
    assert len(figures) == 2  # the scalar target's grid; the projection's own
    for svg in figures:
        assert_not_blank(svg)
    if np.any(np.abs(result.estimate - result.plug_in) > 0.01 * result.std_error):
        assert "Open squares: the plug-in" in part and "class='hollow'" in part


def test_inference_warnings_are_grouped_by_the_output_they_concern():
    fit = "WeakSupportWarning: weak support at state 3"
    inf = "InferenceWarning: r(13, c) (cell): the interval may not be reliable"
    structural = "InferenceWarning: bonus (projection): the interval may not be reliable"
    assert warning_sections([fit]) == [("", [fit])]  # as before without --infer
    assert warning_sections([fit, inf]) == [("about rewards.csv, the nonparametric reward", [fit]),
                                            (f"about {INFERENCE_SIDE}", [inf])]
    assert warning_sections([inf]) == [(f"about {INFERENCE_SIDE}", [inf])]
    # the structural step's own (the projection estimator's standard errors) stay with parameters.csv
    groups = dict(warning_sections([fit, structural, inf], [structural], "projection"))
    assert groups["about parameters.csv, the structural estimates (projection)"] == [structural]
    assert groups[f"about {INFERENCE_SIDE}"] == [inf]


def test_the_standard_errors_split_by_input_agree_everywhere(inferred):
    """inference.csv's se_*/share_* columns, the report's table of them and the console's line per
    component ("SE 0.0480: first stage 71%, kernel 27%, state law 2%") give one answer."""
    from genpqr.inference._result import input_split

    out, html, console = inferred
    csv = pd.read_csv(out / "inference.csv", index_col="component")
    shares = ["share_first_stage", "share_kernel", "share_state_law", "share_cross"]
    np.testing.assert_allclose(csv[shares].sum(axis=1), 1.0, atol=1e-12)
    part = section(html)
    assert "does not split" not in part and "together" not in part
    table = part.split("<table class='inference-inputs'>")[1].split("</table>")[0]
    columns = re.findall(r"<th data-column='([^']+)'", table)
    assert {"std_error", *shares, "se_first_stage", "se_kernel", "se_state_law"} == set(columns)
    rows = re.findall(r"<tr data-inputs-of='([^']+)'>(.*?)</tr>", table, flags=re.S)
    assert [html_lib.unescape(name) for name, _ in rows] == list(csv.index)
    lines = console.splitlines()
    for name, body in rows:
        name = html_lib.unescape(name)
        cells = re.findall(r"<td data-value='([^']+)'>([^<]*)</td>", body)
        np.testing.assert_array_equal([float(v) for v, _ in cells], csv.loc[name, columns].to_numpy(dtype=float))
        shown = dict(zip(columns, (text for _, text in cells)))
        line = next(ln for ln in lines if ln.startswith(name + " ") and " SE " in ln)
        assert line[27:] == input_split(csv.loc[name]), line
        for key, label in (("share_first_stage", "first stage"), ("share_kernel", "kernel"),
                           ("share_state_law", "state law")):
            assert f"{label} {shown[key]}" in line


def test_the_efficient_projection_on_the_command_line(tmp_path):
    """``--infer "projection;weights=efficient"`` beside ``--infer projection``: its components are
    named apart, inference.csv and the report carry its specification test J, and the console
    prints it."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code, _, _ = fit_cli(fit_flags(tmp_path / "fit", "--infer", "projection", "--infer",
                                       "projection;weights=efficient"))
    assert code == 0
    table = pd.read_csv(tmp_path / "fit" / "inference.csv", index_col="component")
    assert list(table.index) == ["bonus", "level", "bonus (efficient)", "level (efficient)"]
    assert table.loc[["bonus", "level"], "J"].isna().all() and table.loc["bonus (efficient)", "J_dof"] > 0
    html = (tmp_path / "fit" / "report.html").read_text(encoding="utf-8")
    assert "J (linear form)" in section(html)
    text = unwrap(printed.getvalue())
    assert "specification test of the linear form (bonus (efficient), level (efficient)" in text
    assert f"J = {table.loc['bonus (efficient)', 'J']:.2f}" in text
