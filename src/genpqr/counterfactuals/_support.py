r"""How much of a counterfactual the data saw: occupancy on thinly observed states and cells.

A counterfactual can be identified (invariant to the normalization, or fixed by a structural
model's functional form) and still rest on states the data never saw: a policy change that
moves the state distribution to where no choice was observed answers with whatever the first
stage (nonparametric route) or the features' functional form (structural route) says there.
This module measures that share, for the baseline and the counterfactual solution, under each
of their state distributions ``d`` (stationary, or from the given initial state):

* ``thin_state_share = sum_s d(s) 1[n(s) < min_visits]``: occupancy on states with fewer
  than ``min_visits`` observed choices (``n(s) = sum_a n(s, a)``);
* ``unvisited_state_share = sum_s d(s) 1[n(s) = 0]``: occupancy on states never observed;
* ``thin_cell_share = sum_{s,a} d(s) pi(a|s) 1[n(s, a) < min_visits]``: the share of the
  choices the solution makes in (state, action) cells observed fewer than ``min_visits``
  times.

The share is *material* when the counterfactual's ``thin_state_share`` exceeds
``threshold`` (default ``MATERIAL_SHARE``); :class:`~genpqr.exceptions.ExtrapolationWarning`
says so with the route's reading (``warn_if_material``).

Bootstrap replicates can leave the support altogether: a replicate's reward or parameters
send the whole state distribution to an edge the data never saw, or an action stops being
chosen (e.g. every bus driven to the top mileage bin, never replaced). ``off_support``
flags such a solution; :class:`~genpqr.counterfactuals.CounterfactualResult` counts them and
its intervals say how many replicates they hold.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..exceptions import ExtrapolationWarning

__all__ = ["MIN_VISITS", "MATERIAL_SHARE", "OFF_SUPPORT_RATE", "SupportReport", "support_report", "off_support",
           "support_statistics", "warn_if_material"]

#: A state (cell) seen fewer times than this is *thin*: its estimate rests on a handful of choices.
MIN_VISITS = 10
#: A counterfactual whose thin-state share exceeds this is flagged (ExtrapolationWarning).
MATERIAL_SHARE = 0.05
#: An action whose long-run rate falls below this is no longer chosen (a replicate off the support).
OFF_SUPPORT_RATE = 1e-6


def _distributions(solution):
    return [(name, d) for name, d in (("stationary", solution.stationary), ("initial", solution.occupancy))
            if d is not None]


def support_statistics(solution, counts, min_visits: int = MIN_VISITS) -> dict:
    """``{distribution: (thin_state_share, unvisited_state_share, thin_cell_share)}`` of one
    ``genpqr.counterfactuals._scenarios.ScenarioSolution`` against the choice counts ``n`` (S, K)."""
    n = np.asarray(counts, dtype=np.float64)
    visits = n.sum(axis=1)
    thin_state, unvisited, thin_cell = visits < min_visits, visits == 0, n < min_visits
    out = {}
    for name, d in _distributions(solution):
        cells = d[:, None] * solution.policy
        out[name] = (float(d @ thin_state), float(d @ unvisited), float(cells[thin_cell].sum()))
    return out


@dataclass(frozen=True)
class SupportReport:
    """Occupancy of the baseline and the counterfactual on thinly observed states and cells.

    Attributes
    ----------
    min_visits : int
    threshold : float
        The counterfactual's thin-state share above which the answer is flagged.
    baseline, counterfactual : dict
        ``{distribution: (thin_state_share, unvisited_state_share, thin_cell_share)}``.
    thin_states : ndarray of int
        The states with fewer than ``min_visits`` observed choices.
    """

    min_visits: int
    threshold: float
    baseline: dict
    counterfactual: dict
    thin_states: np.ndarray

    @property
    def share(self) -> float:
        """The largest thin-state share of the counterfactual over its distributions."""
        return max((v[0] for v in self.counterfactual.values()), default=0.0)

    @property
    def material(self) -> bool:
        return self.share > self.threshold

    def to_frame(self):
        """One row per (scenario, distribution): the three shares."""
        import pandas as pd

        rows = [dict(scenario=scenario, distribution=name, thin_state_share=v[0], unvisited_state_share=v[1],
                     thin_cell_share=v[2])
                for scenario, stats in (("baseline", self.baseline), ("counterfactual", self.counterfactual))
                for name, v in stats.items()]
        return pd.DataFrame(rows)

    def describe(self) -> str:
        parts = []
        for name in self.counterfactual:
            b, c = self.baseline.get(name, (np.nan,) * 3), self.counterfactual[name]
            parts.append(f"{name}: {c[0]:.1%} of the counterfactual's occupancy (baseline {b[0]:.1%}) on states seen "
                         f"fewer than {self.min_visits} times, {c[1]:.1%} on states never seen, {c[2]:.1%} of its "
                         f"choices in (state, action) cells seen fewer than {self.min_visits} times")
        return "support: " + "; ".join(parts) if parts else "support: no state distribution to weigh"


def support_report(baseline, counterfactual, counts, *, min_visits: int = MIN_VISITS,
                   threshold: float = MATERIAL_SHARE) -> SupportReport:
    """``SupportReport`` of two solutions against the choice counts ``n`` (S, K)."""
    if int(min_visits) < 1:
        raise ValueError(f"min_visits must be a positive number of choices, got {min_visits!r}")
    if not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"support threshold must be a share in [0, 1], got {threshold!r}")
    visits = np.asarray(counts, dtype=np.float64).sum(axis=1)
    return SupportReport(int(min_visits), float(threshold), support_statistics(baseline, counts, min_visits),
                         support_statistics(counterfactual, counts, min_visits),
                         np.flatnonzero(visits < min_visits))


def off_support(solution, counts) -> bool:
    """Whether a (replicate's) solution has left the data's support: more than half of its
    state distribution on states with no observed choice, or an action the data holds whose
    long-run rate fell below :data:`OFF_SUPPORT_RATE` (no longer chosen)."""
    n = np.asarray(counts, dtype=np.float64)
    unvisited, observed = n.sum(axis=1) == 0, n.sum(axis=0) > 0
    for _, d in _distributions(solution):
        rates = d @ solution.policy
        if float(d @ unvisited) > 0.5 or np.any(rates[observed] < OFF_SUPPORT_RATE):
            return True
    return False


def warn_if_material(report: SupportReport, route: str, stacklevel: int = 3) -> None:
    """:class:`~genpqr.exceptions.ExtrapolationWarning` when the counterfactual's thin-state share
    is material, with what it means for the route's answer."""
    if not report.material:
        return
    reading = ("the structural answer there rests on the features' functional form outside the data"
               if route == "structural" else
               "the nonparametric answer there is extrapolation: the reward at those states is whatever the first "
               "stage (and the probability clip) says where few or no choices were observed")
    warnings.warn(f"the counterfactual rests on thinly observed states: {report.share:.1%} of its occupancy is on "
                  f"states the data saw fewer than {report.min_visits} times (threshold {report.threshold:.0%}); "
                  f"{reading}. {report.describe()}", ExtrapolationWarning, stacklevel=stacklevel)
