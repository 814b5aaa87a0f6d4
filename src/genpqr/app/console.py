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

__all__ = ["WIDTH", "INTERNALS", "fit_width", "unwrap", "short_warning", "GLOSSARY_POINTER"]

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


def unwrap(text: str, width: int = WIDTH) -> str:
    """The lines :func:`fit_width` wrapped, joined back: a line indented four more than the line
    it continues, whose first word would not have fitted on that line (for scripts that read the
    console line by line)."""
    out, indents, previous = [], [], ""
    for line in str(text).splitlines():
        indent = len(line) - len(line.lstrip(" "))
        word = line.strip().split(" ", 1)[0]
        if out and indent == indents[-1] + 4 and len(previous) + 1 + len(word) > width:
            out[-1].append(line.strip())
        else:
            out.append([line])
            indents.append(indent)
        previous = line
    return "\n".join(" ".join(part) for part in out)


def clauses(message: str) -> list:
    """``message`` cut after each ``.``, ``;`` or ``:`` followed by a space, outside brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(message):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth <= 0 and ch in ".;:" and message[i + 1:i + 2] == " " and i > 0 and not message[i - 1].isupper():
            out.append(message[start:i + 1])
            start = i + 1
    return out + [message[start:]] if start < len(message) else out


def short_warning(text: str, width: int = WIDTH, indent: str = "  ") -> str:
    """A warning ``"Category: message"`` as one line of at most ``width`` characters: the
    category and the message's first clause (asides in brackets dropped when it is too long),
    then as many of the next clauses as fit; cut at a word with ``...`` when even the first does
    not fit."""
    category, sep, message = " ".join(str(text).split()).partition(": ")
    if not sep:
        category, message = "", category
    head = indent + (f"{category}: " if category else "")
    parts = [p.strip() for p in clauses(message)] or [""]
    line = head + parts[0]
    if len(line.rstrip(".;:")) > width:  # the asides in brackets go first
        line = head + " ".join(_without_brackets(parts[0]).split())
    if len(line.rstrip(".;:")) > width:
        cut = line[:width - 4].rsplit(" ", 1)[0]
        return cut.rstrip(",;:(") + " ..."
    line = line.strip()
    for part in parts[1:]:  # more of the message while it fits
        if len(f"{indent}{line} {part}".rstrip(".;:")) > width:
            break
        line = f"{line} {part}"
    return indent + line.rstrip(" .;:")


def _without_brackets(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        depth += ch in "(["
        if depth == 0:
            out.append(ch)
        depth -= ch in ")]" and depth > 0
    return "".join(out)
