r"""What a user needs to trust a :class:`genpqr.GenPQR` fit (computed on the training data).

:class:`FitDiagnostics` holds what both action spaces share (sizes, the stage-1 fit, coverage,
the stage-2 solve, the failed checks); :class:`Diagnostics` adds the finite-action fields and
:class:`ContinuousDiagnostics` the continuous-action ones. Fields are keyword-only.
:mod:`genpqr.diagnostic_checks` turns them into warnings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = ["FitDiagnostics", "Diagnostics", "ContinuousDiagnostics"]


@dataclass(kw_only=True)
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
        ``"Category: message"`` of every failed check (:mod:`genpqr.diagnostic_checks`), also
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


@dataclass(kw_only=True)
class Diagnostics(FitDiagnostics):
    """A finite-action fit's diagnostics (the fields of :class:`FitDiagnostics` and these).

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
    """

    action_counts: dict
    support_count: int
    n_last_choices: int = 0
    n_states: int = 0
    unvisited_states: list = field(default_factory=list)
    fraction_floored: float = 0.0
    clip: tuple = (0.0, 1.0)
    clip_rule: str = ""


@dataclass(kw_only=True)
class ContinuousDiagnostics(FitDiagnostics):
    """A continuous-action fit's diagnostics (the fields of :class:`FitDiagnostics` and these).

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
