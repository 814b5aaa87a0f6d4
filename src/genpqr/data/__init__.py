"""Logged data: the one data type every stage reads, and where it comes from.

:class:`Transitions` (finite or continuous actions) over an action space (:class:`FiniteActions`:
labels <-> codes ``0..K-1``, optionally with an :class:`ActionTable` of features; :class:`BoxActions`: a box of real actions); builders from arrays,
pandas and long-format tables (:func:`from_arrays`, :func:`from_pandas`, :func:`from_episodes`);
row weights through a learner's ``fit`` (``fit_weighted``); CSV/Parquet readers and the Minari, d3rlpy and imitation adapters. Input validation shared by
every wing is the private module ``_validation`` (the package's internal API).
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._transitions import Transitions
    from ._action_table import ActionTable
    from ._spaces import BoxActions, FiniteActions
    from ._builders import from_arrays, from_episodes
    from ._long_format import from_pandas
    from ._io import from_d3rlpy, from_imitation, from_minari, read_transitions

__all__ = ["Transitions", "ActionTable", "FiniteActions", "BoxActions", "from_arrays", "from_pandas",
           "from_episodes", "read_transitions", "from_minari", "from_d3rlpy", "from_imitation"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
