"""The estimator: :class:`GenPQR` (one class for finite and box actions), its fitted state
(:class:`FittedState`, one object set by ``fit``), the fit paths it chooses (strategies:
``FinitePath`` with the many-actions stage 2 ``LargePath``, ``BoxPath``,
``TypesPath``), the option objects of path-specific knobs (:class:`ContinuousOptions`,
:class:`TypeOptions`), diagnostics and their checks, offsets, persistence (:func:`load`); signed
files and output folders as transactions in the private module ``_manifest`` (the package's internal API).
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._estimator import GenPQR, load
    from ._state import FittedState
    from ._options import ContinuousOptions, TypeOptions
    from ._diagnostics import Diagnostics
    from ._latent_types import fit_type_models, type_criteria

__all__ = ["GenPQR", "load", "FittedState", "ContinuousOptions", "TypeOptions", "Diagnostics", "fit_type_models",
           "type_criteria"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
