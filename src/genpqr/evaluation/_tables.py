r"""Result summaries in statsmodels' shape: a title, ``label: value`` header items, one table and
its notes, rendered as fixed-width text (at most ``MAX_WIDTH`` columns), HTML and LaTeX (a
table to paste into a paper).

``TableSummary`` is the base of the summaries that results return
(``genpqr.structural._summary.StructuralSummary``, the counterfactual's
``genpqr.counterfactuals._counterfactual_summary.CounterfactualSummary``): a subclass says what it shows
(``TableSummary.layout``, a ``SummaryLayout``) and inherits ``as_text()``,
``as_html()``, ``as_latex()``, ``print`` and the notebook's HTML. ``TableSummary.after``
puts a summary below another one (e.g. the structural table under ``GenPQR.summary()``).
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_WIDTH", "SummaryLayout", "TableSummary", "CombinedSummary", "format_number", "latex_escape"]

#: The widest a printed summary line may be (the console fits a terminal).
MAX_WIDTH = 100


def format_number(x, width: int = 10) -> str:
    """``x`` right-aligned in ``width`` characters: four decimals between 1e-3 and 1e4, two up to
    1e7, else scientific; fewer digits where that would not leave a space before it; ``-`` for NaN."""
    if x is None or not np.isfinite(x):
        return f"{'-':>{width}}" if x is None or np.isnan(x) else f"{x:>{width}}"
    size = abs(x)
    text = f"{x:.4f}" if 1e-3 <= size < 1e4 or x == 0 else f"{x:.2f}" if 1e4 <= size < 1e7 else f"{x:.3e}"
    for digits in (6, 5, 4, 3, 2, 1):
        if len(text) < width:
            break
        text = f"{x:.{digits}g}"
    return f"{text:>{width}}"


def latex_escape(text) -> str:
    """``text`` with LaTeX's special characters escaped (for a table cell or a caption)."""
    out = []
    for ch in str(text):
        out.append({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                    "<": r"$<$", ">": r"$>$", "|": r"$|$"}.get(ch, ch))
    return "".join(out)


def header_lines(header, width: int) -> list:
    """``label: value`` lines of at most ``width`` characters; two short items share a line
    (statsmodels' two columns)."""
    half, lines, i = width // 2, [], 0
    while i < len(header):
        label, value = header[i]
        left = f"{label + ':':<18}{value}"
        if i + 1 < len(header) and len(left) < half and len(f"{header[i + 1][0]}: {header[i + 1][1]}") < half - 1:
            label2, value2 = header[i + 1]
            lines.append(f"{left:<{half}}{label2 + ':':<{half - 12}}{value2:>12}".rstrip())
            i += 2
            continue
        lines += textwrap.wrap(str(value), width, initial_indent=f"{label + ':':<18}", subsequent_indent=" " * 18)
        i += 1
    return lines


@dataclass(frozen=True)
class SummaryLayout:
    """What a summary shows.

    Attributes
    ----------
    title : str
    header : list of (str, str)
        ``(label, value)`` items above the table.
    columns : list of (str, int)
        The table's column headers and their text widths (the first, unnamed column holds the
        row names).
    rows : list of (str, list of str)
        Each row's name and its formatted cells (one per column).
    notes : list of str
        Printed below the table, each after ``Note:``.
    width : int
        The narrowest the text is (it widens to the table, up to ``MAX_WIDTH``).
    name_width : int
        The narrowest the row-name column is.
    """

    title: str
    header: list
    columns: list
    rows: list
    notes: list
    width: int = 78
    name_width: int = 12


def render_text(layout: SummaryLayout, width: int | None = None) -> str:
    """The layout as fixed-width text: no line longer than ``MAX_WIDTH`` (row names that
    would widen the table beyond it are cut, ending in ``~``)."""
    cells = sum(w for _, w in layout.columns)
    name_w = max([layout.name_width] + [len(str(name)) + 1 for name, _ in layout.rows])
    name_w = max(4, min(name_w, MAX_WIDTH - cells))
    W = min(MAX_WIDTH, max(layout.width if width is None else int(width), name_w + cells))
    lines = [layout.title.center(W), "=" * W, *header_lines(layout.header, W), "=" * W]
    lines.append(f"{'':<{name_w}}" + "".join(f"{label:>{w}}" for label, w in layout.columns))
    lines.append("-" * W)
    for name, row in layout.rows:
        name = str(name) if len(str(name)) < name_w else str(name)[:name_w - 2] + "~"
        lines.append(f"{name:<{name_w}}" + "".join(f"{cell:>{w}}" for cell, (_, w) in zip(row, layout.columns)))
    lines.append("=" * W)
    for note in layout.notes:
        lines += textwrap.wrap(note, W, initial_indent="Note: ", subsequent_indent="      ")
    return "\n".join(line.rstrip() for line in lines)


def render_html(layout: SummaryLayout) -> str:
    """The layout as two HTML tables (header items, then the table) and the notes."""
    esc = html.escape
    head = "".join(f"<tr><th style='text-align:left'>{esc(str(k))}</th><td style='text-align:left'>{esc(str(v))}"
                   f"</td></tr>" for k, v in layout.header)
    top = "<tr><th></th>" + "".join(f"<th>{esc(label)}</th>" for label, _ in layout.columns) + "</tr>"
    body = "".join(f"<tr><th style='text-align:left'>{esc(str(name))}</th>"
                   + "".join(f"<td style='text-align:right'>{esc(cell.strip())}</td>" for cell in row) + "</tr>"
                   for name, row in layout.rows)
    notes = "".join(f"<p>Note: {esc(n)}</p>" for n in layout.notes)
    return (f"<div class='genpqr-summary'><table><caption style='text-align:left'><b>{esc(layout.title)}</b>"
            f"</caption>{head}</table><table>{top}{body}</table>{notes}</div>")


def render_latex(layout: SummaryLayout, label: str | None = None) -> str:
    """The layout as a LaTeX ``table`` (plain ``tabular`` and ``\\hline``: no package needed): the
    rows, then the short header items as rows of their own, the long ones and the notes in a
    footnote-sized paragraph below."""
    esc = latex_escape
    k = len(layout.columns)
    out = [r"\begin{table}[htbp]", r"\centering", rf"\caption{{{esc(layout.title)}}}"]
    if label:
        out.append(rf"\label{{{label}}}")
    out += [rf"\begin{{tabular}}{{l{'r' * k}}}", r"\hline",
            " & " + " & ".join(esc(lab) for lab, _ in layout.columns) + r" \\", r"\hline"]
    out += [esc(name) + " & " + " & ".join(esc(cell.strip()) for cell in row) + r" \\" for name, row in layout.rows]
    short = [(lab, str(v)) for lab, v in layout.header if len(str(v)) <= 24]
    if short:
        out.append(r"\hline")
        out += [rf"{esc(lab)} & \multicolumn{{{k}}}{{r}}{{{esc(v)}}} \\" for lab, v in short]
    out += [r"\hline", r"\end{tabular}"]
    text = [f"{lab}: {v}." for lab, v in layout.header if len(str(v)) > 24] + [f"Note: {n}" for n in layout.notes]
    if text:
        out += [r"\par\smallskip", r"\begin{minipage}{0.95\linewidth}\footnotesize",
                *(esc(t) + r"\par" for t in text), r"\end{minipage}"]
    out.append(r"\end{table}")
    return "\n".join(out)


class _Printed:
    """``print``, ``repr`` and a notebook show the summary: its :meth:`as_text`, its :meth:`as_html`."""

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()

    def _repr_html_(self) -> str:
        return self.as_html()


class TableSummary(_Printed):
    """Base of the result summaries: a subclass defines ``layout()``; ``print(summary)``,
    ``as_text()``, ``as_html()``, ``as_latex()``, and in a notebook the HTML."""

    def layout(self) -> SummaryLayout:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def as_text(self, width: int | None = None) -> str:
        """Fixed-width text (statsmodels' layout); lines of at most ``MAX_WIDTH`` characters."""
        return render_text(self.layout(), width)

    def as_html(self) -> str:
        """HTML: the header items and the table (escaped), then the notes."""
        return render_html(self.layout())

    def as_latex(self, label: str | None = None) -> str:
        """A LaTeX ``table`` environment to paste into a paper (``label``: its ``\\label``)."""
        return render_latex(self.layout(), label)

    def after(self, summary) -> "CombinedSummary":
        """``summary`` (any object that prints) with this summary below it."""
        return CombinedSummary((summary, self))


class CombinedSummary(_Printed):
    """Summaries shown one below another (``TableSummary.after``). ``as_text``,
    ``as_html`` and ``as_latex`` join the parts' (a part without HTML or LaTeX is shown as
    preformatted text); ``tables`` chains their tables (or ``to_frame()``); any other attribute
    is the first part's (e.g. ``GenPQR.summary()``'s ``lines``, ``figures``, ``to_frame``)."""

    def __init__(self, parts):
        self.parts = tuple(parts)

    def __getattr__(self, name):
        if name.startswith("__") or name == "parts":
            raise AttributeError(name)
        return getattr(self.parts[0], name)

    @property
    def tables(self) -> list:
        out = []
        for part in self.parts:
            out += list(part.tables) if hasattr(part, "tables") else [part.to_frame()]
        return out

    def as_text(self) -> str:
        return "\n\n".join(part.as_text() if hasattr(part, "as_text") else str(part) for part in self.parts)

    def as_html(self) -> str:
        def one(part):
            for method in ("as_html", "_repr_html_"):
                if hasattr(part, method):
                    return getattr(part, method)()
            return f"<pre>{html.escape(str(part))}</pre>"

        return "".join(one(part) for part in self.parts)

    def as_latex(self, label: str | None = None) -> str:
        return "\n\n".join(part.as_latex(label) if hasattr(part, "as_latex") else
                           "\\begin{verbatim}\n" + str(part) + "\n\\end{verbatim}" for part in self.parts)
