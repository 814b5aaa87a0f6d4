"""Compare the output a page shows with what its command prints today.

A page's output block is matched line by line against the printed text:

* a line ``...`` stands for any number of printed lines, and ``...`` inside a line for any text
  (a page may cut a long line or leave lines out);
* every number is compared to the digits the page shows: a float within one unit of its last
  shown digit (``0.0269`` within 1e-4; ``1.77e+03`` within 0.01e+03), an integer exactly;
* all other text exactly (whitespace runs count as one space).

:func:`output_differences` returns the mismatches as readable lines (empty when the page is
right), so a test can say ``assert not output_differences(page_block, printed)``.
"""

from __future__ import annotations

import re

_NUMBER = r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])"
_TOKEN = re.compile(rf"(\.\.\.)|({_NUMBER})")


def _pattern(line: str):
    """The regex of an expected line and the numbers it shows."""
    parts, numbers, pos = [], [], 0
    for m in _TOKEN.finditer(line):
        parts.append(re.escape(line[pos:m.start()]))
        if m.group(1):
            parts.append(".*?")
        else:
            parts.append(r"([-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)")
            numbers.append(m.group(2))
        pos = m.end()
    parts.append(re.escape(line[pos:]))
    return re.compile("".join(parts)), numbers


def _tolerance(shown: str) -> float:
    mantissa, _, exponent = shown.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else None
    if decimals is None:
        return 0.0 if not exponent else 10.0 ** int(exponent)
    return 1.000001 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def _line_matches(expected: str, actual: str) -> str | None:
    """``None`` when ``actual`` shows what ``expected`` does, else why not."""
    pattern, numbers = _pattern(expected)
    m = pattern.fullmatch(actual)
    if m is None:
        return "text differs"
    for shown, got in zip(numbers, m.groups()):
        if abs(float(got) - float(shown)) > _tolerance(shown):
            return f"{got} where the page shows {shown}"
    return None


def _normal(text: str) -> list:
    return [" ".join(line.split()) for line in text.strip("\n").splitlines()]


def output_differences(expected: str, actual: str) -> list:
    """Mismatches between a page's output block ``expected`` and the printed ``actual`` (the one
    reached furthest into the page when ``...`` lines allow several alignments)."""
    want, got = _normal(expected), _normal(actual)

    def match(i, j):  # None if want[i:] matches got[j:], else (page line reached, why not)
        if i == len(want):
            return None if j == len(got) else (i, f"printed more lines than the page shows, from: {got[j]!r}")
        if want[i] == "...":
            failures = []
            for k in range(j, len(got) + 1):
                failure = match(i + 1, k)
                if failure is None:
                    return None
                failures.append(failure)
            return max(failures, key=lambda f: f[0])
        if j == len(got):
            return i, f"the page shows {want[i]!r}, not printed"
        why = _line_matches(want[i], got[j])
        if why is not None:
            return i, f"page line {want[i]!r}\n  printed  {got[j]!r}\n  ({why})"
        return match(i + 1, j + 1)

    failure = match(0, 0)
    return [] if failure is None else [failure[1]]
