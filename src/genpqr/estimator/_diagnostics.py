r"""What a user needs to trust a :class:`genpqr.GenPQR` fit (computed on the training data).

``FitDiagnostics`` holds what both action spaces share (sizes, the stage-1 fit, coverage,
the stage-2 solve, the failed checks); :class:`Diagnostics` adds the finite-action fields and
``ContinuousDiagnostics`` the continuous-action ones. Fields are keyword-only.
:mod:`genpqr.estimator` turns them into warnings. Their ``repr`` is short (the scalars,
and the lists, dicts and long texts summarized in a few lines: ``print(model.diagnostics_)``);
the full values are the attributes, ``to_dict()`` all of them, ``to_frame()`` the scalars.

``FitSummary`` is what ``GenPQR.summary()`` returns: the printed account of a fit
(``print(model.summary())``, ``str``, ``FitSummary.as_text``), its figures as a table
(``FitSummary.to_frame``) and an HTML table in a notebook.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass, field, fields

import numpy as np

__all__ = ["FitDiagnostics", "Diagnostics", "ContinuousDiagnostics", "FitSummary"]

#: Width of the short ``repr`` of diagnostics.
REPR_WIDTH = 100


def _short(value) -> str:
    """A few characters for one diagnostics field (lists and dicts summarized)."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return repr(bool(value)) if value is not None else "None"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return f"{float(value):.4g}"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, tuple):
        return "(" + ", ".join(_short(v) for v in value) + ")"
    if isinstance(value, dict):
        if len(value) <= 6:
            return "{" + ", ".join(f"{k!r}: {_short(v)}" for k, v in value.items()) + "}"
        return f"{{{len(value)} entries}}"
    if isinstance(value, (list, np.ndarray)):
        items = list(value)
        if not items:
            return "[]"
        if all(isinstance(v, str) for v in items):  # warnings: their categories
            return "[" + ", ".join(v.split(":", 1)[0] for v in items) + "]"
        if len(items) <= 4:
            return "[" + ", ".join(_short(v) for v in items) + "]"
        return f"[{len(items)} values: {_short(items[0])}, ..., {_short(items[-1])}]"
    return repr(value)


@dataclass(kw_only=True, repr=False)
class FitDiagnostics:
    """The fields of every fit's diagnostics.

    Attributes
    ----------
    n_transitions, n_episodes : int
    policy_log_loss : float
        ``-mean u(s_i, a_i)`` (finite actions: ``-mean log pi_hat(a_i|s_i)`` with clipped
        probabilities); out-of-fold when cross-fitting (``policy_log_loss_kind``), else in-sample.
    fraction_clipped : float
        Share of rows whose ``u`` at the observed action hit a clip bound (a probability bound,
        or ``min_log_density`` for continuous actions).
    max_mu_over_pi : float
        ``max mu / pi_hat``: the coverage constant of the theory.
    bellman_residuals, target_changes : list of float
        Per FQE iteration (empty for the exact solver).
    n_iterations : int
    converged : bool
    solver : str
    warnings : list of str
        ``"Category: message"`` of every failed check (:mod:`genpqr.estimator`), also
        raised as warnings by ``fit``.
    """

    n_transitions: int
    n_episodes: int
    policy_log_loss: float
    policy_log_loss_kind: str
    fraction_clipped: float
    max_mu_over_pi: float
    bellman_residuals: list = field(default_factory=list)
    target_changes: list = field(default_factory=list)
    n_iterations: int = 0
    converged: bool = True
    solver: str = ""
    warnings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def __repr__(self) -> str:
        """A few lines: every field, lists and dicts summarized (the values are the attributes)."""
        lines, line = [], ""
        for f in fields(self):  # items kept whole, lines filled up to REPR_WIDTH
            item = f"{f.name}={_short(getattr(self, f.name))}"
            if line and len(line) + 2 + len(item) > REPR_WIDTH - 4:
                lines.append(line + ",")
                line = item
            else:
                line = f"{line}, {item}" if line else item
        lines.append(line)
        return f"{type(self).__name__}(\n" + "\n".join("    " + text for text in lines) + ")"

    def to_frame(self):
        """The scalar fields as a DataFrame (columns ``field``, ``value``; object values); the
        list- and dict-valued fields (residuals, action counts, warnings) are the attributes."""
        import pandas as pd

        scalars = [(f.name, getattr(self, f.name)) for f in fields(self)
                   if isinstance(getattr(self, f.name), (numbers.Number, str, np.bool_, tuple))]
        return pd.DataFrame({"field": [k for k, _ in scalars],
                             "value": pd.Series([v for _, v in scalars], dtype=object)})


@dataclass(kw_only=True, repr=False)
class Diagnostics(FitDiagnostics):
    """A finite-action fit's diagnostics (the fields of
    ``genpqr.estimator._diagnostics.FitDiagnostics`` and these).

    Attributes
    ----------
    action_counts : dict label -> rows
    support_count : int
        Rows whose action has positive weight under ``mu`` at their state (for an anchor
        normalization: the anchor count).
    fraction_floored : float
        Share of rows at whose state some action's probability is below the lower bound
        (its ``log pi_hat`` is the floor ``log(low)``).
    clip : (low, high)
        The bounds used; ``clip_rule`` says how they were chosen (``clip="auto"``).
    n_last_choices : int
        Rows that are choices without an observed next state (an episode's last row):
        counted in ``n_transitions``, stage 1 and the choice counts, not in stage 2.
    n_states : int
        Exact tabular path: the number of states (0 otherwise).
    unvisited_states : list of int
        Exact tabular path: the state indices with no observed choice (``~visited_states_``):
        their rewards are not identified by the data (a failed check, so a warning).
    coverage_share : float
        Share of rows at whose state the normalization weights an action with ``mu/pi_hat``
        above ``genpqr.estimator._diagnostic_checks.COVERAGE_LIMIT`` (the rows behind a large
        ``max_mu_over_pi``; the coverage check fires on this share). NaN when unknown.
    thin_transition_share : float
        Exact tabular path with ``P`` estimated from counts: share of the rows on state-action
        cells with fewer than ``genpqr.estimator._diagnostic_checks.THIN_TRANSITIONS`` observed transitions
        (``transition_counts_``; the thin-transitions check fires on it). NaN when the kernel is
        given or structured, or off the exact path.
    n_thin_cells : int
        Visited cells with fewer than that many transitions.
    thin_cells : list of (int, label)
        Up to five of them (state index, action label), the most visited first.
    n_never_taken : int or None
        With an action table (:class:`genpqr.data.ActionTable`): the number of its actions that
        no row takes (``~taken_actions_``; their rewards are predictions from their features);
        None without a table.
    mu_sum_standard_error : float or None
        Many actions with a sampled mu-sum (mean-zero or behaviour weights, see
        :mod:`genpqr.estimator`'s large-K path): the mean over rows of the standard error of the
        sampled ``sum_a mu(a|s') (u(s', a) - g(s'))``; NaN when the sum is exact there, None on
        the dense paths.
    """

    action_counts: dict
    support_count: int
    n_last_choices: int = 0
    n_states: int = 0
    unvisited_states: list = field(default_factory=list)
    fraction_floored: float = 0.0
    clip: tuple = (0.0, 1.0)
    clip_rule: str = ""
    coverage_share: float = float("nan")
    thin_transition_share: float = float("nan")
    n_thin_cells: int = 0
    thin_cells: list = field(default_factory=list)
    n_never_taken: int | None = None
    mu_sum_standard_error: float | None = None


@dataclass(kw_only=True, repr=False)
class ContinuousDiagnostics(FitDiagnostics):
    """A continuous-action fit's diagnostics (the fields of
    ``genpqr.estimator._diagnostics.FitDiagnostics`` and these).

    Attributes
    ----------
    action_dim : int
    action_space, reference_measure, normalization, integration : str
    n_mu_nodes : int
        Nodes per next state in the Bellman targets.
    density_integral_range : (float, float)
        Min and max of ``int exp(log_prob) da`` at checked states (NaN if not checked).
    min_log_density_on_mu : float
        Smallest ``u`` at the ``mu``-nodes (very negative: ``mu`` reaches where ``pi_hat`` has no mass).
    support_ess : float
        Effective number of training rows supporting ``mu``: the effective sample size
        ``(sum_i w_i)^2 / sum_i w_i^2`` of the importance weights ``w_i = mu(a_i|s_i) / pi_hat(a_i|s_i)``
        (times the sample weights); the continuous analogue of the anchor count (NaN for a point
        mass). ``max_mu_over_pi`` is taken over the ``mu``-nodes (NaN for a point mass).
    """

    action_dim: int
    action_space: str
    reference_measure: str
    normalization: str
    integration: str
    n_mu_nodes: int
    density_integral_range: tuple
    min_log_density_on_mu: float
    support_ess: float


@dataclass(frozen=True, repr=False)
class FitSummary:
    """The account of a fit that ``GenPQR.summary()`` returns.

    ``print(summary)``, ``str(summary)`` and :meth:`as_text` give the text (a title line,
    then one ``label: text`` line per item); :meth:`to_frame` the figures behind it, one row
    per quantity; in a notebook it shows as an HTML table.

    Attributes
    ----------
    title : str
    lines : tuple of (str, str)
        ``(label, text)`` of each printed line after the title.
    figures : dict
        Quantity name -> value (numbers, flags and short texts; :meth:`to_frame`).
    """

    title: str
    lines: tuple = ()
    figures: dict = field(default_factory=dict)

    def as_text(self) -> str:
        """The printed summary (the title, then one indented ``label: text`` line per item)."""
        return "\n".join([self.title, *(f"  {label}: {text}" for label, text in self.lines)])

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()

    def to_frame(self):
        """The figures as a DataFrame: columns ``quantity`` and ``value`` (object values)."""
        import pandas as pd

        return pd.DataFrame({"quantity": list(self.figures), "value": pd.Series(list(self.figures.values()),
                                                                                dtype=object)})

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(f"<tr><th style=\"text-align:left\">{escape(label)}</th><td style=\"text-align:left\">"
                       f"{escape(text)}</td></tr>" for label, text in self.lines)
        return (f"<table><caption style=\"text-align:left\"><b>{escape(self.title)}</b></caption>"
                f"<tbody>{rows}</tbody></table>")
