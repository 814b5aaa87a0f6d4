"""A time column of timestamps (dates, datetimes, durations) as step numbers in the data's own unit.

A long-format frame's time column may hold step counters (numbers) or timestamps: a
``datetime64`` or ``timedelta64`` column (e.g. a Parquet timestamp or date column), Python
``date`` / ``datetime`` objects, or text in ISO 8601 (``2024-01-05``, ``2024-01-05T13:30:00``,
with or without a UTC offset; the text of a CSV file). Timestamps become step numbers
``(t - origin) // unit`` where ``unit`` is the data's own step: the most common positive step
between consecutive rows of an episode (a day for daily dates, an hour for hourly readings), and
``origin`` the earliest timestamp. Every step must then be a whole multiple of the unit (a
larger multiple is a gap, which the gap rule of ``genpqr.data._long_format.time_gap_rows`` refuses or
splits); otherwise the column is refused naming the unit (calendar months vary in length).

The unit and origin are those of the *whole* data: ``StampSteps`` gathers what they need
from disjoint sets of episodes (summable, as ``genpqr.data._long_format.TimeSteps``), so an
out-of-core reader numbers every chunk as the whole frame would be numbered in memory.
Text that is neither a number nor an ISO 8601 date is refused naming the column and the value
(day/month orders such as ``01/05/2024`` are ambiguous, and are refused too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validation import plain

__all__ = ["Clock", "StampSteps", "is_timestamps", "timestamp_ns", "stamp_steps", "timestamps_as_steps"]

_UNITS = ((86_400_000_000_000, "day"), (3_600_000_000_000, "hour"), (60_000_000_000, "minute"),
          (1_000_000_000, "second"), (1_000_000, "millisecond"), (1_000, "microsecond"), (1, "nanosecond"))
_ISO = "ISO 8601 dates or datetimes (e.g. 2024-01-05 or 2024-01-05T13:30:00)"


def duration(ns: int) -> str:
    """``ns`` nanoseconds in words: ``"1 day"``, ``"31 days"``, ``"90 minutes"``."""
    ns = int(ns)
    for size, name in _UNITS:
        if ns % size == 0:
            n = ns // size
            return f"{n:,} {name}{'' if abs(n) == 1 else 's'}"
    return f"{ns} nanoseconds"  # pragma: no cover - the last unit always divides


@dataclass(frozen=True)
class Clock:
    """How a time column of timestamps is numbered: step ``(t - origin) // unit``.

    Attributes
    ----------
    origin : int
        The earliest timestamp, in nanoseconds (since 1970-01-01 for dates and datetimes).
    unit : int
        The data's step, in nanoseconds (positive).
    kind : {"datetime", "timedelta"}
    """

    origin: int
    unit: int
    kind: str = "datetime"

    def steps(self, ns: np.ndarray) -> np.ndarray:
        """Step numbers (int64) of timestamps in nanoseconds."""
        return (np.asarray(ns, dtype=np.int64) - self.origin) // self.unit

    def label(self, step) -> str:
        """The timestamp of step number ``step``, as the user wrote it (a date when it is midnight)."""
        import pandas as pd

        ns = self.origin + int(round(float(step))) * self.unit
        if self.kind == "timedelta":
            return str(pd.Timedelta(ns, "ns"))
        stamp = pd.Timestamp(ns, unit="ns")
        return stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()

    def describe(self) -> str:
        """``"steps of 1 day from 2024-01-05"``."""
        return f"steps of {duration(self.unit)} from {self.label(0)}"


@dataclass(frozen=True)
class StampSteps:
    """The within-episode steps of a timestamp column, in nanoseconds: what :class:`Clock` needs
    of the whole data. Summable (``+``) over disjoint sets of whole episodes.

    Attributes
    ----------
    origin : int or None
        The earliest timestamp (None: no row).
    values, counts : ndarray of shape (m,), int64
        The distinct positive steps between consecutive rows of one episode, and how often each occurs.
    kind : {"datetime", "timedelta"}
    """

    origin: int | None = None
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    kind: str = "datetime"

    def __add__(self, other: "StampSteps") -> "StampSteps":
        origins = [o for o in (self.origin, other.origin) if o is not None]
        values = np.concatenate([self.values, other.values])
        merged, inverse = np.unique(values, return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([self.counts, other.counts]), minlength=merged.size)
        return StampSteps(min(origins) if origins else None, merged, counts.astype(np.int64),
                          self.kind if self.origin is not None else other.kind)

    def clock(self, time: str) -> Clock:
        """The :class:`Clock` of the data: its most common step as the unit (the smallest on ties;
        one nanosecond when no episode has two distinct times). ``ValueError`` naming the column
        ``time`` and the unit when a step is no whole multiple of it."""
        if not self.counts.size:
            return Clock(int(self.origin or 0), 1, self.kind)
        unit = int(self.values[np.argmax(self.counts)])
        off = self.values % unit != 0
        if off.any():
            raise ValueError(
                f"time column {time!r} holds timestamps whose steps are not whole multiples of the data's most common "
                f"step, {duration(unit)} (e.g. a step of {duration(int(self.values[off][0]))}; calendar months or "
                f"years vary in length): convert the column to step numbers (e.g. months since the start) or to "
                f"evenly spaced times")
        return Clock(int(self.origin), unit, self.kind)


def is_timestamps(column) -> bool:
    """A column of timestamps: ``datetime64`` / ``timedelta64`` dtype, Python dates or datetimes,
    or text that is not all numbers (then parsed as ISO 8601 by :func:`timestamp_ns`, which
    refuses what does not parse)."""
    import datetime

    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(column) or pd.api.types.is_timedelta64_dtype(column):
        return True
    if not (column.dtype == object or pd.api.types.is_string_dtype(column)):
        return False
    values = column.dropna()
    if values.empty:
        return False
    first = values.iloc[0]
    if isinstance(first, (datetime.date, datetime.timedelta, np.datetime64, np.timedelta64)):
        return True
    if not isinstance(first, str):
        return False
    return bool(pd.to_numeric(values.astype(str), errors="coerce").isna().any())


def timestamp_ns(column, time: str, first_row: int = 0) -> tuple[np.ndarray, str]:
    """``(ns, kind)``: a column of timestamps (:func:`is_timestamps`) as int64 nanoseconds (since
    1970-01-01 UTC for dates and datetimes; a UTC offset is honoured, naive times are taken as
    they are) and ``"datetime"`` or ``"timedelta"``. ``ValueError`` naming the column ``time``
    and the first value that is missing or not a date (``first_row``: the data row of the
    column's first entry, for the message)."""
    import datetime

    import pandas as pd

    from ._validation import data_row

    missing = column.isna().to_numpy()
    if missing.any():
        raise ValueError(f"time column {time!r} has {int(missing.sum())} missing timestamp(s) (first at "
                         f"{data_row(first_row + int(np.flatnonzero(missing)[0]))})")
    if pd.api.types.is_timedelta64_dtype(column):
        return column.to_numpy().astype("timedelta64[ns]").astype(np.int64), "timedelta"
    if pd.api.types.is_datetime64_any_dtype(column):
        stamps = column
    elif isinstance(column.iloc[0], (datetime.timedelta, np.timedelta64)):  # Python durations
        return _parsed(column, time, first_row, pd.to_timedelta).to_numpy().astype("timedelta64[ns]").astype(
            np.int64), "timedelta"
    else:
        stamps = _parsed(column, time, first_row, lambda c, **kw: pd.to_datetime(c, utc=True, **kw))
    if isinstance(stamps.dtype, pd.DatetimeTZDtype):
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    return stamps.to_numpy().astype("datetime64[ns]").astype(np.int64), "datetime"


def _parsed(column, time: str, first_row: int, parse):
    """``parse(column)`` (text as ISO 8601), refusing the first value that does not parse."""
    import pandas as pd

    from ._validation import data_row

    text = column.dtype != object or all(isinstance(v, str) for v in column.tolist())
    kw = {"format": "ISO8601"} if text and parse is not pd.to_timedelta else {}
    try:
        parsed = parse(column, errors="coerce", **kw)
    except (TypeError, ValueError, OverflowError):
        parsed = pd.Series([parse(pd.Series([v]), errors="coerce", **kw).iloc[0] for v in column.tolist()])
    bad = parsed.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"time column {time!r} must be numeric (step numbers) or hold {_ISO}, got "
                         f"{plain(column.iloc[i])!r} at {data_row(first_row + i)}, neither a number nor a date or time"
                         f"{' (day/month orders are ambiguous)' if '/' in str(column.iloc[i]) else ''}")
    return parsed


def stamp_steps(episodes: np.ndarray, ns: np.ndarray, kind: str = "datetime") -> StampSteps:
    """``StampSteps`` of some whole episodes (``episodes``: the episode of every row, in any
    order; ``ns``: the rows' timestamps in nanoseconds)."""
    import pandas as pd

    if ns.size == 0:
        return StampSteps(kind=kind)
    codes = pd.factorize(episodes)[0]
    order = np.lexsort((ns, codes))
    same = codes[order][1:] == codes[order][:-1]
    steps = np.diff(ns[order])[same]
    values, counts = np.unique(steps[steps > 0], return_counts=True)
    return StampSteps(int(ns.min()), values.astype(np.int64), counts.astype(np.int64), kind)


def timestamps_as_steps(frame, episode: str, time: str, clock: Clock | None = None, first_row: int = 0):
    """``(frame, clock)``: ``frame`` with its time column of timestamps as step numbers of
    ``clock`` (default: the frame's own, :meth:`StampSteps.clock`), a new frame (the input is not
    modified). A time column of numbers: ``(frame, None)``, the frame itself."""
    col = frame[time]
    if not is_timestamps(col):
        return frame, None
    ns, kind = timestamp_ns(col, time, first_row)
    if clock is None:
        clock = stamp_steps(frame[episode].to_numpy(), ns, kind).clock(time)
    elif clock.kind != kind:
        raise ValueError(f"time column {time!r} holds {kind}s where the rest of the data holds {clock.kind}s")
    return frame.assign(**{time: clock.steps(ns)}), clock
