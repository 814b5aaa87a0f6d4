"""The width of the progress bars on stderr: the console's lines are at most 100 characters.

Every wing draws its bars (tqdm) at ``ncols=bar_width()``: the terminal's width less one, at most
``BAR_WIDTH``; a bar otherwise fills the terminal, however wide.
"""

from __future__ import annotations

import os
import sys

__all__ = ["BAR_WIDTH", "bar_width"]

#: The widest a progress bar is drawn: the console's lines are at most 100 characters.
BAR_WIDTH = 100


def bar_width() -> int:
    """Columns for a bar on stderr: the terminal's less one, at most ``BAR_WIDTH`` (that
    many when stderr is no terminal or does not say its width)."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns - 1
    except (AttributeError, ValueError, OSError):
        return BAR_WIDTH
    return BAR_WIDTH if columns <= 0 else min(columns, BAR_WIDTH)
