"""The figures of the ``genpqr fit`` report as inline SVG, drawn from the data without matplotlib.

A report figure is a handful of lines, bars, markers and a heat map; writing it as SVG text costs
milliseconds and a few kilobytes, where rendering a matplotlib figure to PNG costs a second (the
import and the layout) and tens of kilobytes. :class:`Axes` is one panel (linear or log scales,
numeric or labelled ticks; lines, markers, bars, error bars, bands, hatching, a heat map);
:class:`Figure` lays panels out in a grid with a title, one legend (below or to the right) and an
optional colour bar, and writes one ``<svg>`` element. A heat map is one raster image (one pixel
per cell, scaled without smoothing: :func:`genpqr.app.report_svg.png_data_uri`), so its size does
not grow with the number of cells drawn as shapes. Every text from the data is XML-escaped.

Marks carry their meaning in a ``class`` (and ``data-*`` attributes where a reader needs it):
``class='unvisited' data-state='4'`` on the hatched row of a state with no observed choice,
``class='hollow' data-x='4'`` on an open marker, ``class='legend'`` on a legend's text,
``class='panel'`` and ``class='data'`` on a panel and its plotting area.
"""

from __future__ import annotations

import math
from html import escape

import numpy as np

from .report_svg import (BLUE, CHAR, FONT, LIGHT, RED, SMALL, Scale, axis_limits, colormap, line_svg, log_ticks,
                         next_id, nice_ticks, png_data_uri, swatch_svg, text_width)
from .report_svg import svg_number as _n

__all__ = ["Axes", "Figure"]


class Axes:
    """One panel: marks in data coordinates, axis labels, ticks and a title.

    ``xticks``/``yticks``: ``[(position, label), ...]`` for labelled (categorical) ticks, else
    numeric ticks are chosen. ``yinvert``: the first row at the top (a heat map). ``xlim``/``ylim``:
    ``(lo, hi)`` (an end may be None: autoscaled). Each mark with a ``label`` gets a legend entry
    (the figure's legend; one entry per label)."""

    def __init__(self, title: str = "", xlabel: str = "", ylabel: str = "", *, xlog=False, ylog=False, xlim=None,
                 ylim=None, xticks=None, yticks=None, yinvert=False, tick_size=FONT):
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.xlog, self.ylog, self.xlim, self.ylim = xlog, ylog, xlim, ylim
        self.xticks, self.yticks, self.yinvert, self.tick_size = xticks, yticks, yinvert, tick_size
        self.marks, self.legend, self._xs, self._ys = [], [], [], []

    # -------------------------------------------------------------------- marks
    def _extent(self, x=(), y=()):
        self._xs.extend(np.asarray(x, dtype=np.float64).ravel().tolist())
        self._ys.extend(np.asarray(y, dtype=np.float64).ravel().tolist())

    def _label(self, label, swatch):
        if label and label not in [entry[0] for entry in self.legend]:
            self.legend.append((label, swatch))

    def line(self, x, y, color=BLUE, *, width=1.5, dash=None, marker=None, size=3.0, hollow=False, label=None,
             cls=None):
        """A polyline through ``(x, y)`` (broken at NaN; ``width=0``: markers only) with markers
        ``"o"`` or ``"s"`` (``hollow``: white inside)."""
        x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
        self._extent(x, y)
        self.marks.append(("line", dict(x=x, y=y, color=color, width=width, dash=dash, marker=marker, size=size,
                                        hollow=hollow, cls=cls)))
        self._label(label, ("line", dict(color=color, width=width, dash=dash, marker=marker, size=size,
                                         hollow=hollow)))

    def bars(self, x, heights, color=BLUE, *, width=0.8, bottom=0.0, opacity=1.0, label=None, cls=None):
        """Vertical bars centred at ``x`` (``width`` in data units; a sequence: one per bar);
        ``color`` one colour or one per bar."""
        x, heights = np.asarray(x, dtype=np.float64).ravel(), np.asarray(heights, dtype=np.float64).ravel()
        widths = np.broadcast_to(np.asarray(width, dtype=np.float64), x.shape)
        self._extent(np.r_[x - widths / 2, x + widths / 2], np.r_[heights, [bottom] if not self.ylog else []])
        colors = [color] * x.size if isinstance(color, str) else list(color)
        self.marks.append(("bars", dict(x=x, h=heights, w=widths, colors=colors, bottom=bottom, opacity=opacity,
                                        cls=cls)))
        self._label(label, ("rect", dict(color=colors[0] if colors else color)))

    def hist(self, edges, heights, color=BLUE, *, opacity=1.0, label=None):
        """A histogram: one bar per bin of ``edges`` (n + 1,)."""
        edges = np.asarray(edges, dtype=np.float64)
        self.bars((edges[1:] + edges[:-1]) / 2, heights, color, width=np.diff(edges), opacity=opacity, label=label,
                  cls="hist")

    def vlines(self, x, lo, hi, color=LIGHT, *, width=1.2, label=None):
        """Vertical segments from ``lo`` to ``hi`` at ``x`` (intervals)."""
        x, lo, hi = (np.asarray(v, dtype=np.float64).ravel() for v in (x, lo, hi))
        self._extent(x, np.r_[lo, hi])
        self.marks.append(("vlines", dict(x=x, lo=lo, hi=hi, color=color, width=width)))
        self._label(label, ("line", dict(color=color, width=width)))

    def hline(self, y, color="#808080", *, width=0.8, dash=None, label=None):
        """A horizontal line across the panel."""
        self._extent((), [y])
        self.marks.append(("hline", dict(v=float(y), color=color, width=width, dash=dash)))
        self._label(label, ("line", dict(color=color, width=width, dash=dash)))

    def vline(self, x, color=RED, *, width=1.5, dash=None, label=None):
        """A vertical line across the panel."""
        self._extent([x], ())
        self.marks.append(("vline", dict(v=float(x), color=color, width=width, dash=dash)))
        self._label(label, ("line", dict(color=color, width=width, dash=dash)))

    def vspan(self, x0, x1, color="#e6e6e6", *, label=None, cls=None, data=None):
        """A shaded band from ``x0`` to ``x1`` over the panel's height."""
        self.marks.append(("vspan", dict(x0=float(x0), x1=float(x1), color=color, cls=cls, data=data or {})))
        self._label(label, ("rect", dict(color=color)))

    def hatch(self, x0, x1, y0, y1, *, label=None, cls=None, data=None):
        """A hatched rectangle (diagonal lines, no fill)."""
        self.marks.append(("hatch", dict(x0=x0, x1=x1, y0=y0, y1=y1, cls=cls, data=data or {})))
        self._label(label, ("hatch", {}))

    def image(self, rgb, extent):
        """A raster ``rgb`` (rows, cols, 3) uint8 over ``extent = (x0, x1, y0, y1)``: row 0 at ``y0``,
        one cell per pixel, drawn without smoothing."""
        x0, x1, y0, y1 = extent
        self._extent([x0, x1], [y0, y1])
        self.marks.append(("image", dict(rgb=rgb, extent=extent)))

    # -------------------------------------------------------------------- layout
    def _scales(self):
        pad = 0.0 if any(kind == "image" for kind, _ in self.marks) else 0.05
        xlo, xhi = axis_limits(self._xs, self.xlog, self.xlim, pad)
        ylo, yhi = axis_limits(self._ys, self.ylog, self.ylim, pad)
        return Scale(xlo, xhi, self.xlog), Scale(ylo, yhi, self.ylog)

    def _ticks(self, scale, given):
        if given is not None:
            return [(p, lab) for p, lab in given if scale.lo - 1e-9 <= p <= scale.hi + 1e-9]
        return log_ticks(scale.lo, scale.hi) if scale.log else \
            [(t, lab) for t, lab in nice_ticks(scale.lo, scale.hi) if scale.lo - 1e-9 <= t <= scale.hi + 1e-9]

    def render(self, x0: float, y0: float, w: float, h: float, clip_id: str) -> str:
        """The panel's SVG inside the box ``(x0, y0, w, h)``; ``self.box`` is then its plotting area
        ``(x, y, width, height)``."""
        xs, ys = self._scales()
        yticks, xticks = self._ticks(ys, self.yticks), self._ticks(xs, self.xticks)
        ts = self.tick_size
        left = 8 + max([text_width(lab, ts) for _, lab in yticks] or [0]) + (FONT + 8 if self.ylabel else 0)
        longest = max([text_width(lab, ts) for _, lab in xticks] or [0])
        rotate = bool(xticks) and longest + 6 > (w - left - 12) / max(len(xticks), 1)
        bottom = 8 + (min(longest, 140) + 4 if rotate else ts + 4) + (FONT + 8 if self.xlabel else 0)
        top = (FONT + 12) if self.title else 8
        px0, py0, pw, ph = x0 + left, y0 + top, max(w - left - 12, 20), max(h - top - bottom, 20)
        self.box = (px0, py0, pw, ph)
        xs.bind(px0, px0 + pw)
        ys.bind(py0, py0 + ph) if self.yinvert else ys.bind(py0 + ph, py0)
        area = f"x='{_n(px0)}' y='{_n(py0)}' width='{_n(pw)}' height='{_n(ph)}'"
        out = [f"<g class='panel'><clipPath id='{clip_id}'><rect {area}/></clipPath>",
               f"<g class='data' clip-path='url(#{clip_id})'>",
               *(self._mark(kind, m, xs, ys, py0, ph, clip_id) for kind, m in self.marks),
               f"</g><rect {area} fill='none' stroke='#333' stroke-width='0.8'/>",
               *self._tick_svg(xs, ys, xticks, yticks, rotate)]
        if self.xlabel:
            out.append(f"<text class='xlabel' x='{_n(px0 + pw / 2)}' y='{_n(y0 + h - 6)}' text-anchor='middle'>"
                       f"{escape(self.xlabel)}</text>")
        if self.ylabel:
            out.append(f"<text class='ylabel' transform='translate({_n(x0 + FONT + 2)},{_n(py0 + ph / 2)}) "
                       f"rotate(-90)' text-anchor='middle'>{escape(self.ylabel)}</text>")
        if self.title:
            out.append(f"<text class='title' x='{_n(px0 + pw / 2)}' y='{_n(y0 + FONT + 2)}' text-anchor='middle'>"
                       f"{escape(self.title)}</text>")
        return "".join(out) + "</g>"

    def _tick_svg(self, xs, ys, xticks, yticks, rotate: bool) -> list:
        """Tick marks and labels (x labels upright when they would not fit side by side)."""
        px0, py0, pw, ph = self.box
        ts, base, out = self.tick_size, py0 + ph, []
        for v, lab in yticks:
            p = float(ys(v))
            out.append(f"<line x1='{_n(px0 - 4)}' y1='{_n(p)}' x2='{_n(px0)}' y2='{_n(p)}' stroke='#333'/>"
                       f"<text x='{_n(px0 - 6)}' y='{_n(p + ts * 0.35)}' text-anchor='end' font-size='{ts}'>"
                       f"{escape(lab)}</text>")
        for v, lab in xticks:
            p = float(xs(v))
            out.append(f"<line x1='{_n(p)}' y1='{_n(base)}' x2='{_n(p)}' y2='{_n(base + 4)}' stroke='#333'/>")
            if rotate:
                shown = lab if text_width(lab, ts) <= 140 else lab[:int(140 / (CHAR * ts)) - 1] + "\u2026"
                out.append(f"<text transform='translate({_n(p + ts * 0.35)},{_n(base + 7)}) rotate(-90)' "
                           f"text-anchor='end' font-size='{ts}'>{escape(shown)}</text>")
            else:
                out.append(f"<text x='{_n(p)}' y='{_n(base + 6 + ts)}' text-anchor='middle' font-size='{ts}'>"
                           f"{escape(lab)}</text>")
        return out

    def _mark(self, kind, m, xs, ys, py0, ph, uid) -> str:
        if kind == "line":
            return line_svg(m, xs(m["x"]), ys(m["y"]))
        if kind == "bars":
            x_lo, x_hi = xs(m["x"] - m["w"] / 2), xs(m["x"] + m["w"] / 2)
            bottom = ys.lo if ys.log else m["bottom"]
            y_top, y_bot = ys(m["h"]), ys(np.full(m["h"].shape, bottom))
            alpha = f" opacity='{m['opacity']}'" if m["opacity"] != 1.0 else ""
            parts = [f"<g class='{m['cls'] or 'bars'}'{alpha}>"]
            for a, b, t, u, c in zip(x_lo, x_hi, y_top, y_bot, m["colors"]):
                if math.isfinite(t) and abs(u - t) > 0:
                    parts.append(f"<rect x='{_n(min(a, b))}' y='{_n(min(t, u))}' width='{_n(abs(b - a))}' "
                                 f"height='{_n(abs(u - t))}' fill='{c}'/>")
            return "".join(parts) + "</g>"
        if kind == "vlines":
            px, lo, hi = xs(m["x"]), ys(m["lo"]), ys(m["hi"])
            d = "".join(f"M{_n(x)} {_n(a)}V{_n(b)}" for x, a, b in zip(px, lo, hi)
                        if math.isfinite(a) and math.isfinite(b))
            return f"<path class='intervals' d='{d}' stroke='{m['color']}' stroke-width='{m['width']}' fill='none'/>"
        if kind in ("hline", "vline"):
            if kind == "hline":
                p = float(ys(m["v"]))
                x0, x1, y0, y1 = xs.p0, xs.p1, p, p
            else:
                p = float(xs(m["v"]))
                x0, x1, y0, y1 = p, p, py0, py0 + ph
            dash = f" stroke-dasharray='{m['dash']}'" if m["dash"] else ""
            return (f"<line x1='{_n(x0)}' y1='{_n(y0)}' x2='{_n(x1)}' y2='{_n(y1)}' stroke='{m['color']}' "
                    f"stroke-width='{m['width']}'{dash}/>")
        if kind == "vspan":
            a, b = sorted((float(xs(m["x0"])), float(xs(m["x1"]))))
            data = "".join(f" data-{k}='{escape(str(v))}'" for k, v in m["data"].items())
            return (f"<rect class='{m['cls'] or 'band'}'{data} x='{_n(a)}' y='{_n(py0)}' width='{_n(b - a)}' "
                    f"height='{_n(ph)}' fill='{m['color']}'/>")
        if kind == "hatch":
            a, b = sorted((float(xs(m["x0"])), float(xs(m["x1"]))))
            c, d = sorted((float(ys(m["y0"])), float(ys(m["y1"]))))
            data = "".join(f" data-{k}='{escape(str(v))}'" for k, v in m["data"].items())
            return (f"<rect class='{m['cls'] or 'hatched'}'{data} x='{_n(a)}' y='{_n(c)}' width='{_n(b - a)}' "
                    f"height='{_n(d - c)}' fill='url(#{uid}-hatch)' stroke='none'/>")
        if kind == "image":
            x0, x1, y0, y1 = m["extent"]
            a, b = sorted((float(xs(x0)), float(xs(x1))))
            c, d = sorted((float(ys(y0)), float(ys(y1))))
            rgb = m["rgb"]
            if ys.p0 > ys.p1:  # y up: the image's row 0 is at the bottom
                rgb = rgb[::-1]
            rows, cols = rgb.shape[:2]
            fy, fx = max(1, min(16, int((d - c) // max(rows, 1)))), max(1, min(16, int((b - a) // max(cols, 1))))
            big = np.repeat(np.repeat(rgb, fy, axis=0), fx, axis=1)  # sharp cells even where smoothed
            return (f"<image class='heatmap' x='{_n(a)}' y='{_n(c)}' width='{_n(b - a)}' height='{_n(d - c)}' "
                    f"preserveAspectRatio='none' style='image-rendering:pixelated' href='{png_data_uri(big)}'/>")
        raise ValueError(f"unknown mark {kind!r}")


# ============================================================================ a figure
class Figure:
    """Panels in a grid (``ncols`` columns, ``width`` x ``panel_height`` pixels per row of
    panels), a title, one legend (the panels' entries, ``"below"`` or ``"right"``) and an optional
    colour bar (``colorbar=(cmap, lo, hi, label)``) to the right."""

    def __init__(self, panels, *, width=560, panel_height=300, ncols=1, title="", legend="below", legend_title="",
                 colorbar=None):
        self.panels, self.width, self.panel_height, self.ncols = list(panels), width, panel_height, max(1, ncols)
        self.title, self.legend, self.legend_title, self.colorbar = title, legend, legend_title, colorbar

    def _entries(self):
        seen, out = set(), []
        for ax in self.panels:
            for label, swatch in ax.legend:
                if label not in seen:
                    seen.add(label)
                    out.append((label, swatch))
        return out

    def svg(self, caption: str = "") -> str:
        """The figure as one ``<svg>`` element (``caption``: its accessible title)."""
        uid = next_id()
        entries = self._entries() if self.legend else []
        W = float(self.width)
        top = FONT + 14 if self.title else 0
        right = 0.0
        if entries and self.legend == "right":
            right = 36 + max([text_width(lab, SMALL) for lab, _ in entries] + [text_width(self.legend_title, SMALL)])
            right = min(right, 0.45 * W)
        if self.colorbar is not None:
            right += 30 + FONT + 8 + max(text_width(lab, SMALL) for lab in self._cbar_labels())
        grid_w = W - right
        rows = math.ceil(len(self.panels) / self.ncols)
        cell_w = grid_w / self.ncols
        body = []
        for i, ax in enumerate(self.panels):
            r, c = divmod(i, self.ncols)
            body.append(ax.render(c * cell_w, top + r * self.panel_height, cell_w, self.panel_height, f"{uid}-c{i}"))
        H = top + rows * self.panel_height
        if entries and self.legend == "below":
            item_w = 32 + max(text_width(lab, SMALL) for lab, _ in entries)
            per_row = max(1, min(len(entries), int(grid_w // item_w)))
            x0 = max(0.0, (grid_w - per_row * item_w) / 2)
            y = H + 4
            if self.legend_title:
                body.append(f"<text class='legend' x='{_n(x0)}' y='{_n(y + 10)}' font-size='{SMALL}' "
                            f"font-weight='bold'>{escape(self.legend_title)}</text>")
                y += 15
            for j, (label, (kind, style)) in enumerate(entries):
                r, c = divmod(j, per_row)
                ex, ey = x0 + c * item_w, y + 8 + 15 * r
                body.append(swatch_svg(kind, style, ex, ey) + f"<text class='legend' x='{_n(ex + 29)}' "
                            f"y='{_n(ey + 3.5)}' font-size='{SMALL}'>{escape(label)}</text>")
            H = y + 15 * math.ceil(len(entries) / per_row) + 6
        elif entries and self.legend == "right":
            ex, y = grid_w + 8, top + 10
            if self.legend_title:
                body.append(f"<text class='legend' x='{_n(ex)}' y='{_n(y + 4)}' font-size='{SMALL}' "
                            f"font-weight='bold'>{escape(self.legend_title)}</text>")
                y += 15
            limit = max(1, int((H - y) // 15))
            for j, (label, (kind, style)) in enumerate(entries):
                r, c = j % limit, j // limit
                shown = label if text_width(label, SMALL) + 30 <= right - 8 else \
                    label[:max(1, int((right - 40) / (CHAR * SMALL)))] + "\u2026"
                body.append(swatch_svg(kind, style, ex + c * (right / 2), y + 15 * r) +
                            f"<text class='legend' x='{_n(ex + c * (right / 2) + 29)}' y='{_n(y + 15 * r + 3.5)}' "
                            f"font-size='{SMALL}'>{escape(shown)}</text>")
        if self.colorbar is not None:
            body.append(self._render_colorbar(grid_w + (right - (30 + FONT + 8 + max(
                text_width(lab, SMALL) for lab in self._cbar_labels()))) + 4, top, uid))
        if self.title:
            body.insert(0, f"<text class='title' x='{_n(W / 2)}' y='{FONT + 4}' text-anchor='middle' "
                           f"font-weight='bold'>{escape(self.title)}</text>")
        defs = (f"<defs><pattern id='{uid}-hatch' patternUnits='userSpaceOnUse' width='6' height='6' "
                "patternTransform='rotate(45)'><line x1='0' y1='0' x2='0' y2='6' stroke='#404040' "
                "stroke-width='1.2'/></pattern></defs>")
        text = "".join(body).replace("url(#HATCH)", f"url(#{uid}-hatch)")
        return (f"<svg xmlns='http://www.w3.org/2000/svg' class='figure' viewBox='0 0 {_n(W)} {_n(H)}' "
                f"width='{_n(W)}' height='{_n(H)}' role='img' font-size='{FONT}'>"
                f"<title>{escape(caption)}</title>{defs}{text}</svg>")

    def _cbar_labels(self):
        cmap, lo, hi, label = self.colorbar
        return [lab for _, lab in nice_ticks(lo, hi, 5)]

    def _render_colorbar(self, x, top, uid) -> str:
        cmap, lo, hi, label = self.colorbar
        _, y0, _, h = self.panels[0].box  # beside the first panel's plotting area
        stops = "".join(f"<stop offset='{i / 10:.1f}' stop-color='#{''.join(f'{c:02x}' for c in rgb)}'/>"
                        for i, rgb in enumerate(colormap(cmap, np.linspace(1, 0, 11))))
        out = [f"<linearGradient id='{uid}-cbar' x1='0' y1='0' x2='0' y2='1'>{stops}</linearGradient>",
               f"<rect class='colorbar' x='{_n(x)}' y='{_n(y0)}' width='14' height='{_n(h)}' "
               f"fill='url(#{uid}-cbar)' stroke='#333' stroke-width='0.6'/>"]
        for v, lab in nice_ticks(lo, hi, 5):
            if lo - 1e-12 <= v <= hi + 1e-12 and hi > lo:
                p = y0 + h - (v - lo) / (hi - lo) * h
                out.append(f"<line x1='{_n(x + 14)}' y1='{_n(p)}' x2='{_n(x + 18)}' y2='{_n(p)}' stroke='#333'/>"
                           f"<text x='{_n(x + 20)}' y='{_n(p + 3.5)}' font-size='{SMALL}'>{escape(lab)}</text>")
        width = 22 + max(text_width(lab, SMALL) for lab in self._cbar_labels())
        out.append(f"<text class='cbar-label' transform='translate({_n(x + width + FONT)},{_n(y0 + h / 2)}) "
                   f"rotate(-90)' text-anchor='middle'>{escape(label)}</text>")
        return "".join(out)
