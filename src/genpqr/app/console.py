"""What the commands print fits a terminal: every line at most :data:`WIDTH` characters.

A long line is wrapped at word boundaries under its own indent (:func:`fit_width`); a warning is
one line, its category and its first sentence (:func:`short_warning`), with the full text in
``report.html`` and behind ``--verbose``; the fit summary's internals (the support rows, the
stage-2 solve) are printed with ``--verbose`` only (:data:`INTERNALS`). An error stays one line
(``genpqr fit: error: ...``), whatever its length: scripts and users grep it.
The terms are defined in the docs' glossary (``docs/glossary.md``).
"""

from __future__ import annotations

import textwrap

__all__ = ["WIDTH", "INTERNALS", "fit_width", "first_clause", "short_warning", "GLOSSARY_POINTER"]

#: The widest line a command prints.
WIDTH = 100
#: Labels of the fit summary's lines printed with ``--verbose`` only (the glossary defines them).
INTERNALS = ("support rows", "stage 2", "integration", "reference measure")
#: Where a console term is explained.
GLOSSARY_POINTER = "terms: docs/glossary.md"


def fit_width(text: str, width: int = WIDTH) -> str:
    """``text`` with each line longer than ``width`` wrapped at spaces, continuation lines
    indented four more than the line's own indent (words longer than a line, such as paths,
    are not broken)."""
    out = []
    for line in str(text).splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent + "    ",
                             break_long_words=False, break_on_hyphens=False) or [line]
    return "\n".join(out)


def first_clause(message: str) -> str:
    """``message`` up to its first ``.``, ``;`` or ``:`` followed by a space, outside brackets."""
    depth = 0
    for i, ch in enumerate(message):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth <= 0 and ch in ".;:" and message[i + 1:i + 2] == " " and i > 0 and not message[i - 1].isupper():
            return message[:i]
    return message


def short_warning(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """A warning ``"Category: message"`` as one line of at most ``width`` characters: the
    category and the message's first clause, cut at a word with ``...`` when longer."""
    category, sep, message = " ".join(str(text).split()).partition(": ")
    if not sep:
        category, message = "", category
    head = indent + (f"{category}: " if category else "")
    clause = first_clause(message).strip()
    line = head + clause
    if len(line) > width:  # the asides in brackets go first
        line = head + " ".join(_without_brackets(clause).split())
    if len(line) <= width:
        return line
    cut = line[:width - 4].rsplit(" ", 1)[0]
    return cut.rstrip(",;:(") + " ..."


def _without_brackets(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        depth += ch in "(["
        if depth == 0:
            out.append(ch)
        depth -= ch in ")]" and depth > 0
    return "".join(out)
