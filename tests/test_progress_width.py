"""Progress bars fit the console (issue 31, item 7): every tqdm bar in the package is drawn at most
``BAR_WIDTH`` (100) columns wide (``ncols=bar_width()``, or the stage-1 ``progress_bar``), however
wide the terminal; tqdm's own default fills the terminal."""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from genpqr.data import _progress

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "genpqr"


class Terminal(io.StringIO):
    """stderr on a terminal (it has a file descriptor, which the size is asked of)."""

    def fileno(self):
        return 2


def wide_terminal(monkeypatch):
    """stderr on a 200-column terminal (``COLUMNS=200``), as tqdm and ``bar_width`` see it: what
    is written to it, and the terminal size both ask for (set in the test's body: pytest puts its
    own stderr back between a fixture and the test)."""
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("LINES", "50")
    monkeypatch.setattr(os, "get_terminal_size", lambda *a: os.terminal_size((200, 50)))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    return terminal


def drawn(text: str) -> list[str]:
    """The lines a terminal shows: a bar redraws its line after carriage returns."""
    return [part for line in text.splitlines() for part in line.split("\r") if part.strip()]


def test_bar_width_is_the_terminal_less_one_at_most_100(monkeypatch):
    monkeypatch.setattr(os, "get_terminal_size", lambda *a: os.terminal_size((200, 50)))
    assert _progress.bar_width() == 100
    monkeypatch.setattr(os, "get_terminal_size", lambda *a: os.terminal_size((60, 50)))
    assert _progress.bar_width() == 59

    def no_terminal(*a):
        raise OSError

    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    assert _progress.bar_width() == 100


def test_every_tqdm_bar_in_the_package_caps_its_width():
    """Each ``tqdm(...)`` call of the package passes ``ncols`` (a new bar without it would fill a
    wide terminal)."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for match in re.finditer(r"\btqdm\(", text):
            depth, end = 0, match.end() - 1
            for end in range(match.end() - 1, len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            if "ncols=" not in text[match.start():end]:
                missing.append(f"{path.relative_to(PACKAGE)}:{text.count(chr(10), 0, match.start()) + 1}")
    assert not missing, missing


def _bootstrap_lines(terminal):
    from genpqr.evaluation._count_replicates import run_replicates

    out = run_replicates(lambda seed, x: seed * x, range(30), (2,), n_jobs=1, progress=True)
    assert out == [2 * s for s in range(30)]
    out = run_replicates(lambda seed, x: seed * x, range(30), (2,), n_jobs=2, progress=True, plan=object())
    assert out == [2 * s for s in range(30)]
    return drawn(terminal.getvalue())


def _fqe_lines(terminal):
    from sklearn.linear_model import LinearRegression

    from genpqr.stage2 import FQE

    rng = np.random.default_rng(0)
    n, K = 200, 3
    states, next_states = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    fqe = FQE(LinearRegression(), n_iterations=5, tol=None, progress=True)
    fqe.fit(states, rng.integers(0, K, n), next_states, np.ones(n), rng.normal(size=n),
            np.full((n, K), 1.0 / K), 0.5)
    return drawn(terminal.getvalue())


def _scan_lines(terminal):
    from genpqr.scale._scan import _bar

    with _bar(10_000, "reading the rows of a long description of a Parquet dataset", True) as bar:
        for _ in range(10):
            bar.update(1000)
    return drawn(terminal.getvalue())


@pytest.mark.parametrize("lines", [_bootstrap_lines, _fqe_lines, _scan_lines], ids=["bootstrap", "FQE", "scan"])
def test_bars_are_at_most_100_columns_on_a_200_column_terminal(lines, monkeypatch):
    shown = lines(wide_terminal(monkeypatch))
    assert shown, "no bar drawn"
    assert max(map(len, shown)) <= _progress.BAR_WIDTH, shown
    assert max(map(len, shown)) > 60  # a bar that takes the width it is given (not a short line)


def test_tqdm_alone_would_draw_the_full_width(monkeypatch):
    """The check above can fail: without ``ncols`` the same bar takes 199 columns."""
    from tqdm.auto import tqdm

    terminal = wide_terminal(monkeypatch)
    for _ in tqdm(range(5), desc="uncapped"):
        pass
    assert max(map(len, drawn(terminal.getvalue()))) > 150
