"""Logged transitions: the one data type every stage reads (finite or continuous actions).

The class is :class:`~genpqr.transitions.Transitions` (see :mod:`genpqr.transitions` for its
fields) over an action space of :mod:`genpqr.spaces`; build it with :func:`from_arrays`,
:func:`from_pandas` or :func:`from_episodes`. This module gathers the public names of
:mod:`genpqr.transitions`, :mod:`genpqr.builders` and :mod:`genpqr.long_format`.
"""

from __future__ import annotations

from .builders import from_arrays, from_episodes, refuse_continuous_labels
from .long_format import (TIME_GAPS, LongFormatRows, TimeSteps, check_long_frame, check_some_rows, check_time_column,
                          episode_segments, from_pandas, long_format_rows, time_gap_rows, time_steps)
from .spaces import BoxActions, FiniteActions
from .transitions import EpisodeRows, Transitions, as_flags, optional_vector

#: The finite action space under its former name: labels <-> codes ``0..K-1``.
ActionEncoder = FiniteActions

# former private names (kept for callers that import them)
_flags = as_flags
_optional_vector = optional_vector

__all__ = ["Transitions", "EpisodeRows", "ActionEncoder", "FiniteActions", "BoxActions", "from_arrays", "from_pandas",
           "from_episodes", "long_format_rows", "LongFormatRows", "episode_segments", "time_gap_rows", "TIME_GAPS",
           "TimeSteps", "time_steps",
           "check_time_column", "check_some_rows", "check_long_frame", "refuse_continuous_labels"]
