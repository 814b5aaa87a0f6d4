"""The Jinja2 templates of the `genpqr fit` report (genpqr.app.report_base): escaping, the shared
base page, table truncation and the templates shipped as package data."""

import re
import warnings
from importlib import resources

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr.app.report import ReportContext, render_html
from genpqr.app.report_base import MAX_TABLE_ROWS, format_value, table_view
from tests.app.test_workflow import write_tabular_csv


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    frame, _ = write_tabular_csv(tmp_path_factory.mktemp("t") / "d.csv", n_episodes=40, horizon=6)
    data = genpqr.from_pandas(frame, episode="episode", time="time", state="state", action="action")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the weak-support warnings of 40 short episodes are not under test
        return genpqr.GenPQR(genpqr.normalization.anchor_action("left"), gamma=0.9, q_model="exact", n_states=15,
                             progress=False).fit(data)


def test_text_from_the_data_and_the_fit_is_escaped(fitted):
    ctx = ReportContext(model=fitted, config={"data": "<b>d.csv</b>", "out": "/tmp/a b"},
                        data_summary={"data file": "x<script>alert(1)</script>.csv"},
                        rewards=fitted.reward_table(), warnings=["UserWarning: a <i>tag</i> & an ampersand"],
                        title="fit <report>")
    html = render_html(ctx)
    assert "<script" not in html and "<i>" not in html and "<b>d.csv" not in html
    assert "x&lt;script&gt;alert(1)&lt;/script&gt;.csv" in html
    assert "a &lt;i&gt;tag&lt;/i&gt; &amp; an ampersand" in html
    assert "<title>fit &lt;report&gt;</title>" in html and "<h1>fit &lt;report&gt;</h1>" in html
    # the rerun command quotes a folder with a space, and says the paths are absolute
    assert "<code>genpqr fit --config &#39;/tmp/a b/config.json&#39;</code> (from any folder" in html
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert html.count("<h2 ") == 7  # the sections, each with its anchor in the table of contents
    for anchor in re.findall(r"<h2 id='([\w-]+)'>", html):
        assert f"<a href='#{anchor}'>" in html, anchor


def test_without_an_output_folder_the_command_is_relative(fitted):
    ctx = ReportContext(model=fitted, config={}, data_summary={}, rewards=fitted.reward_table())
    html = render_html(ctx)
    assert "<code>genpqr fit --config config.json</code>." in html and "from any folder" not in html


def test_long_tables_show_the_first_rows_and_say_so():
    frame = pd.DataFrame({"state": np.arange(MAX_TABLE_ROWS + 5), "reward": np.linspace(0, 1, MAX_TABLE_ROWS + 5)})
    view = table_view(frame)
    assert len(view.rows) == MAX_TABLE_ROWS and view.n_rows == MAX_TABLE_ROWS + 5
    assert view.rows[1] == ["1", format_value(1 / (MAX_TABLE_ROWS + 4))] and view.columns == ["state", "reward"]
    assert format_value(np.float64(1 / 3)) == "0.3333" and format_value(0.0) == "0" and format_value(True) == "True"


def test_templates_are_package_data():
    folder = resources.files("genpqr.app") / "templates"
    names = {p.name for p in folder.iterdir()}
    assert {"base.html", "discrete.html", "continuous.html", "macros.html", "structural.html",
            "report.css"} <= names
    for child in ("discrete.html", "continuous.html"):
        assert '{% extends "base.html" %}' in (folder / child).read_text()
