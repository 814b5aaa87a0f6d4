"""Progress bars: their width, and the bar of a step that never shows.

Every wing draws its bars (tqdm) at ``ncols=bar_width()``: the terminal's width less one, at most
``BAR_WIDTH`` (the console's lines are at most 100 characters); a bar otherwise fills the terminal,
however wide.

The bar of a step that never shows (``progress=False``, ``genpqr fit --quiet``):
Every tqdm bar, shown or not, takes tqdm's multiprocessing lock when it is made, which imports
``multiprocessing`` (and ``tqdm.auto`` imports ``asyncio``): a tenth of a second of a small
fit spent on a bar nobody sees. ``SilentBar`` has the part of tqdm's interface the package's
steps use (iteration, ``with``, ``update``, ``close``, the postfix and description setters,
``n``, ``desc``, ``disable``) and does nothing.
"""

from __future__ import annotations

import os
import sys

__all__ = ["SilentBar", "BAR_WIDTH", "bar_width"]

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


class SilentBar:
    """A disabled progress bar without tqdm: ``iterable`` is iterated as given."""

    disable = True

    def __init__(self, iterable=None, *, total=None, desc: str = "", **_ignored):
        self.iterable, self.total, self.desc = iterable, total, desc or ""
        self.n = self.last_print_n = 0

    def __iter__(self):
        return iter(self.iterable)

    def __len__(self):
        return len(self.iterable) if self.total is None else self.total

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.n += n

    def close(self):
        pass

    def refresh(self):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def set_description_str(self, desc=None, refresh=True):
        self.desc = desc or ""
