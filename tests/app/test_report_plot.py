"""The report's SVG figures (genpqr.app.report_plot, genpqr.app.report_svg): well-formed, escaped, the heat map's raster
exact, ticks where the data are, ids unique on a page."""

import base64
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from genpqr.app.report_plot import Axes, Figure
from genpqr.app.report_svg import colormap, log_ticks, nice_ticks, png_data_uri

NS = "{http://www.w3.org/2000/svg}"


def parse(fig: Figure, caption: str = "a figure"):
    return ET.fromstring(fig.svg(caption))


def test_png_of_the_heat_map_decodes_to_the_cells():
    from PIL import Image

    rgb = np.random.default_rng(0).integers(0, 256, size=(7, 5, 3)).astype(np.uint8)
    uri = png_data_uri(rgb)
    assert uri.startswith("data:image/png;base64,")
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))
    np.testing.assert_array_equal(decoded, rgb)


def test_heat_map_is_one_raster_whatever_the_number_of_cells():
    """A 2,000 x 30 heat map is one image element (a pixel per cell, scaled), not 60,000 shapes."""
    values = np.random.default_rng(1).random((2000, 30))
    ax = Axes("t", "action", "state", yinvert=True)
    ax.image(colormap("viridis", values), (-0.5, 29.5, -0.5, 1999.5))
    svg = parse(Figure([ax], colorbar=("viridis", 0.0, 1.0, "value")))
    assert len(list(svg.iter(f"{NS}image"))) == 1 and len(list(svg.iter(f"{NS}rect"))) < 10


def test_text_from_the_data_is_escaped_and_the_svg_well_formed():
    label = "<script>alert(1)</script> & $x$"
    ax = Axes(label, label, label, xticks=[(0, label), (1, "b")])
    ax.line([0, 1], [0, 1], label=label)
    ax.bars([0, 1], [1, 2], label="bars")
    text = Figure([ax], title=label).svg(label)
    assert "<script" not in text and "&lt;script&gt;" in text
    svg = ET.fromstring(text)  # parses: well-formed
    assert svg.find(f"{NS}title").text == label
    assert sum(t.text == label for t in svg.iter(f"{NS}text")) >= 4  # title, axis labels, legend


def test_ids_are_unique_across_figures_on_a_page():
    figures = []
    for _ in range(3):
        ax = Axes()
        ax.hatch(0, 1, 0, 1, label="hatched")
        figures.append(Figure([ax], colorbar=("coolwarm", -1.0, 1.0, "r")).svg())
    ids = re.findall(r"id='([^']+)'", "".join(figures))
    assert len(ids) == len(set(ids)) and len(ids) >= 9


def test_ticks_cover_the_data_with_round_numbers():
    ticks = nice_ticks(-0.13, 2.71)
    values = [v for v, _ in ticks]
    assert values[0] >= -0.13 and values[-1] <= 2.71 and 3 <= len(values) <= 8
    assert all(label in ("0", "0.5", "1", "1.5", "2", "2.5", "0.0", "1.0", "2.0") for _, label in ticks), ticks
    assert [label for _, label in nice_ticks(0, 1)] == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
    assert [label for _, label in log_ticks(1e-3, 20)] == ["10\u207b\u00b3", "10\u207b\u00b2", "10\u207b\u00b9",
                                                             "10\u2070", "10\u00b9"]


@pytest.mark.parametrize("ylog", [False, True])
def test_marks_land_inside_the_panel(ylog):
    """Data map into the panel's plotting area (pixels), the first point bottom left, the last top right."""
    ax = Axes(ylog=ylog)
    ax.line([1, 2, 3], [1, 10, 100], marker="o")
    svg = parse(Figure([ax], width=400, panel_height=300))
    circles = [(float(c.get("cx")), float(c.get("cy"))) for c in svg.iter(f"{NS}circle")]
    x0, y0, w, h = ax.box
    assert all(x0 <= cx <= x0 + w and y0 <= cy <= y0 + h for cx, cy in circles)
    assert circles[0][0] < circles[1][0] < circles[2][0] and circles[0][1] > circles[1][1] > circles[2][1]
    if ylog:  # equal ratios, equal steps
        assert abs((circles[0][1] - circles[1][1]) - (circles[1][1] - circles[2][1])) < 0.2


def test_many_labelled_ticks_are_turned_upright():
    ax = Axes(xticks=[(k, f"item-{k:04d}") for k in range(30)])
    ax.bars(np.arange(30), np.ones(30))
    svg = parse(Figure([ax], width=600))
    upright = [t for t in svg.iter(f"{NS}text") if "rotate(-90)" in t.get("transform", "") and t.get("class") is None]
    assert len(upright) == 30
