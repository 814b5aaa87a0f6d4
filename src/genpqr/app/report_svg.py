"""SVG primitives of the ``genpqr fit`` report's figures (:mod:`genpqr.app.report_plot` draws with
them): colours and colour maps, text widths, a PNG writer for heat maps (:mod:`zlib`, one pixel per
cell), scales and round-number ticks, markers, polylines and legend symbols. Every text from the
data is XML-escaped where it is written.
"""

from __future__ import annotations

import base64
import itertools
import math
import struct
import zlib

import numpy as np

__all__ = ["PALETTE", "BLUE", "RED", "LIGHT", "GREEN", "FONT", "SMALL", "colormap", "png_data_uri", "text_width",
           "histogram", "nice_ticks", "log_ticks", "Scale", "axis_limits", "marker_svg", "line_svg", "swatch_svg",
           "svg_number", "next_id"]

#: Series colours in order (matplotlib's default cycle, as the report had).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
BLUE, RED, LIGHT, GREEN = "#4477aa", "#cc6677", "#bbbbbb", "#228833"
FONT = 11
SMALL = 10
#: Mean advance of a glyph per pixel of font size (a sans-serif face; used to make room for text).
CHAR = 0.6
#: Anchor colours of the colour maps (evenly spaced; matplotlib's ``viridis`` and ``coolwarm``).
COLORMAPS = {
    "viridis": ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
                "#fde725"),
    "coolwarm": ("#3b4cc0", "#5977e3", "#7b9ff9", "#9ebeff", "#c0d4f5", "#dddcdc", "#f2cbb7", "#f7ac8e", "#ee8468",
                 "#d65244", "#b40426"),
}
_ids = itertools.count()


def next_id() -> str:
    """An id unique on the page (figures, clip paths, patterns and gradients)."""
    return f"g{next(_ids)}"
_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def text_width(text, size: float = FONT) -> float:
    """The width a text takes, estimated (pixels)."""
    return CHAR * size * len(str(text))


def svg_number(v: float) -> str:
    """A coordinate, to a tenth of a pixel."""
    return f"{v:.1f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


_n = svg_number


def _hex(color: str) -> np.ndarray:
    color = color.lstrip("#")
    return np.array([int(color[i:i + 2], 16) for i in (0, 2, 4)], dtype=np.float64)


def colormap(name: str, values) -> np.ndarray:
    """RGB (..., 3) uint8 of ``values`` in [0, 1] under colour map ``name`` (``COLORMAPS``);
    NaN is light grey."""
    anchors = np.array([_hex(c) for c in COLORMAPS[name]])
    v = np.asarray(values, dtype=np.float64)
    grid = np.linspace(0.0, 1.0, anchors.shape[0])
    clean = np.clip(np.nan_to_num(v, nan=0.0), 0.0, 1.0)
    out = np.stack([np.interp(clean, grid, anchors[:, j]) for j in range(3)], axis=-1)
    out[np.isnan(v)] = 235.0
    return np.round(out).astype(np.uint8)


def png_data_uri(rgb: np.ndarray) -> str:
    """A ``data:image/png;base64,...`` URI of an RGB image (h, w, 3) uint8 (no matplotlib, no PIL)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w, _ = rgb.shape
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), rgb.reshape(h, 3 * w)], axis=1).tobytes()

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def histogram(values, bins=40, range_=None, weights=None, density=False):
    """``(edges, heights)`` of ``np.histogram`` (``bins`` may be edges)."""
    heights, edges = np.histogram(np.asarray(values, dtype=np.float64), bins=bins, range=range_, weights=weights,
                                  density=density)
    return edges, heights


# ============================================================================ scales and ticks
def _nice_step(span: float, n: int) -> float:
    raw = span / max(n, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= m * mag * (1 + 1e-9):
            return m * mag
    return 10.0 * mag


def nice_ticks(lo: float, hi: float, n: int = 5) -> list:
    step = _nice_step(hi - lo, n)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
    return [(t, label) for t, label in zip(ticks, _tick_labels(ticks, step))]


def _tick_labels(ticks, step) -> list:
    big = max(abs(t) for t in ticks) if ticks else 0.0
    if big >= 1e5 or (big and big < 1e-3):
        return [f"{t:.3g}" for t in ticks]
    decimals = 0
    while decimals < 6 and abs(round(step, decimals) - step) > 1e-9 * step:
        decimals += 1
    return [f"{0.0 if abs(t) < 1e-12 * max(step, 1e-300) else t:.{decimals}f}" for t in ticks]


def log_ticks(lo: float, hi: float) -> list:
    a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    every = max(1, math.ceil((b - a + 1) / 7))
    return [(10.0 ** e, "10" + str(e).translate(_SUPERSCRIPT)) for e in range(a, b + 1, every)
            if lo * (1 - 1e-9) <= 10.0 ** e <= hi * (1 + 1e-9)]


class Scale:
    """Data to pixels on one axis: ``[lo, hi]`` onto ``[p0, p1]``, linear or log10."""

    def __init__(self, lo, hi, log=False):
        self.lo, self.hi, self.log = lo, hi, log

    def bind(self, p0: float, p1: float) -> "Scale":
        self.p0, self.p1 = p0, p1
        return self

    def __call__(self, v):
        v = np.asarray(v, dtype=np.float64)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                v, lo, hi = np.log10(np.maximum(v, 1e-300)), math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        return self.p0 + (v - lo) / (hi - lo) * (self.p1 - self.p0)


def axis_limits(values, log: bool, given, pad: float = 0.05):
    """Axis limits: ``given`` where set (a ``None`` end autoscaled), else the data's range padded."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x) and (x > 0 or not log)],
                   dtype=np.float64)
    lo, hi = (float(v.min()), float(v.max())) if v.size else ((0.1, 1.0) if log else (0.0, 1.0))
    if log:
        lo_l, hi_l = math.log10(lo), math.log10(hi)
        if hi_l - lo_l < 1e-9:
            lo_l, hi_l = lo_l - 0.5, hi_l + 0.5
        d = (hi_l - lo_l) * pad
        lo, hi = 10.0 ** (lo_l - d), 10.0 ** (hi_l + d)
    else:
        if hi - lo < 1e-12 * max(1.0, abs(hi)):
            lo, hi = lo - 0.5 * max(1.0, abs(lo) * 0.1), hi + 0.5 * max(1.0, abs(hi) * 0.1)
        d = (hi - lo) * pad
        lo, hi = lo - d, hi + d
    if given is not None:
        lo = given[0] if given[0] is not None else lo
        hi = given[1] if given[1] is not None else hi
    return lo, hi




# ============================================================================ marks
def marker_svg(kind, x, y, size, color, hollow, cls=None, at=None) -> str:
    fill = "white" if hollow else color
    c = (f" class='{cls}'" if cls else "") + (f" data-x='{at:.6g}'" if at is not None else "")
    if kind == "s":
        return (f"<rect{c} x='{_n(x - size)}' y='{_n(y - size)}' width='{_n(2 * size)}' height='{_n(2 * size)}' "
                f"fill='{'none' if hollow else color}' stroke='{color}'/>")
    return f"<circle{c} cx='{_n(x)}' cy='{_n(y)}' r='{_n(size)}' fill='{fill}' stroke='{color}'/>"


def line_svg(m, px, py) -> str:
    ok = np.isfinite(px) & np.isfinite(py)
    parts = [f"<g class='{m['cls'] or 'series'}'>"]
    if m["width"] > 0 and ok.sum() >= 2:
        d, pen = [], False
        for x, y, good in zip(px, py, ok):
            if good:
                d.append(f"{'L' if pen else 'M'}{_n(x)} {_n(y)}")
            pen = bool(good)
        dash = f" stroke-dasharray='{m['dash']}'" if m["dash"] else ""
        parts.append(f"<path d='{''.join(d)}' fill='none' stroke='{m['color']}' stroke-width='{m['width']}'"
                     f"{dash} stroke-linejoin='round'/>")
    if m["marker"]:
        cls = "hollow" if m["hollow"] else None  # (hollow: with its data x, for a reader of the SVG)
        parts.extend(marker_svg(m["marker"], x, y, m["size"], m["color"], m["hollow"], cls, at if m["hollow"] else None)
                     for x, y, at, good in zip(px, py, m["x"], ok) if good)
    return "".join(parts) + "</g>"


def swatch_svg(kind, style, x, y) -> str:
    """A legend's symbol in a 24 x 10 box at ``(x, y)`` (its vertical middle)."""
    if kind == "rect":
        return f"<rect x='{_n(x + 4)}' y='{_n(y - 5)}' width='16' height='10' fill='{style['color']}'/>"
    if kind == "hatch":
        return (f"<rect x='{_n(x + 4)}' y='{_n(y - 5)}' width='16' height='10' fill='url(#HATCH)' stroke='#404040' "
                "stroke-width='0.5'/>")
    out = ""
    if style.get("width", 1.5) > 0:
        dash = f" stroke-dasharray='{style['dash']}'" if style.get("dash") else ""
        out += (f"<line x1='{_n(x)}' y1='{_n(y)}' x2='{_n(x + 24)}' y2='{_n(y)}' stroke='{style['color']}' "
                f"stroke-width='{style.get('width', 1.5)}'{dash}/>")
    if style.get("marker"):
        out += marker_svg(style["marker"], x + 12, y, style.get("size", 3.0), style["color"],
                          style.get("hollow", False))
    return out
