"""Logged data: the one data type every stage reads, and where it comes from.

:class:`Transitions` (finite or continuous actions) over an action space (:class:`FiniteActions`:
labels <-> codes ``0..K-1``, optionally with an :class:`ActionTable` of features; :class:`BoxActions`: a box of real actions); builders from arrays,
pandas and long-format tables (:func:`from_arrays`, :func:`from_pandas`, :func:`from_episodes`);
row weights through a learner's ``fit`` (:func:`fit_weighted`); CSV/Parquet readers and the Minari, d3rlpy and imitation adapters. Input validation shared by
every wing is the public module :mod:`genpqr.data.validation` (not re-exported here).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._action_table import ActionTable, as_action_table
    from ._spaces import ActionSpace, BoxActions, FiniteActions, Nodes, as_actions
    from ._spaces import FiniteActions as ActionEncoder  # the finite action space under its former name
    from ._transitions import EpisodeRows, Transitions, as_flags, optional_vector
    from ._builders import from_arrays, from_episodes, refuse_continuous_labels
    from ._long_format import (LongFormatRows, TIME_GAPS, TimeSteps, check_long_frame, check_some_rows, check_time_column,
                               episode_segments, from_pandas, long_format_rows, time_gap_rows, time_steps)
    from ._weights import check_sample_weight, fit_weighted
    from ._clock import Clock, StampSteps, is_timestamps, stamp_steps, timestamp_ns, timestamps_as_steps
    from ._io import from_d3rlpy, from_imitation, from_minari, read_table, read_transitions

__all__ = ["check_sample_weight", "fit_weighted", "ActionTable", "as_action_table", "ActionSpace", "FiniteActions", "BoxActions", "Nodes", "as_actions", "Transitions", "EpisodeRows",
           "as_flags", "optional_vector", "from_arrays", "from_episodes", "refuse_continuous_labels", "from_pandas",
           "long_format_rows", "LongFormatRows", "episode_segments", "time_gap_rows", "TIME_GAPS", "TimeSteps",
           "time_steps", "check_time_column", "check_some_rows", "check_long_frame", "read_table", "read_transitions",
           "from_minari", "from_d3rlpy", "from_imitation", "ActionEncoder", "Clock", "StampSteps", "stamp_steps",
           "timestamps_as_steps", "is_timestamps", "timestamp_ns"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
