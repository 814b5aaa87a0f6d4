"""Stage-1 bookkeeping for continuous actions, now in :mod:`genpqr.policy` (the names are
kept here): fit (or take prefit) a conditional density, optionally cross-fitted by episode,
behind one :class:`FittedDensity`."""

from ..policy import FittedDensity, fit_density, prefit_density

__all__ = ["FittedDensity", "fit_density", "prefit_density"]
