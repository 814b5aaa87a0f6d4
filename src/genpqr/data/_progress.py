"""The progress bar of a step that never shows (``progress=False``, ``genpqr fit --quiet``).

Every tqdm bar, shown or not, takes tqdm's multiprocessing lock when it is made, which imports
``multiprocessing`` (and ``tqdm.auto`` imports ``asyncio``): a tenth of a second of a small
fit spent on a bar nobody sees. ``SilentBar`` has the part of tqdm's interface the package's
steps use (iteration, ``with``, ``update``, ``close``, the postfix and description setters,
``n``, ``desc``, ``disable``) and does nothing.
"""

from __future__ import annotations

__all__ = ["SilentBar"]


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
