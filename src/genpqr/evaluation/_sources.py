r"""Where the reward's uncertainty comes from: the bootstrap with one stage held fixed.

On the exact tabular path the recovered reward is a function of two estimates,
``r = f(u_hat, P_hat)``: the policy ``u = log pi_hat`` (stage 1, with the normalization fitted
from it) and the kernel ``P_hat`` (the transitions). Each replicate of :func:`bootstrap_sources`
resamples whole episodes, refits the estimator on them (``u*``, ``P*``), and re-solves
``Q = u - g + gamma P mu Q`` (paper, Eq. of Theorem "IRL via a Bellman equation") three ways:

- **policy**: ``r(u*, P_hat)`` -- the policy (and the normalization fitted with it) from the
  resampled episodes, the kernel held at the full-sample estimate;
- **transitions**: ``r(u_hat, P*)`` -- the kernel from the resampled episodes (from counts, or
  the estimator's structured ``transition_model`` applied to them), the policy and
  normalization held at the full-sample fit;
- **both**: ``r(u*, P*)``, the ordinary bootstrap (:func:`genpqr.evaluation.bootstrap`, same
  seeds, same replicates).

To first order ``Var(both) ~ Var(policy) + Var(transitions)``: the policy and the kernel are
estimated from the choice and the next-state parts of the likelihood, whose scores are
uncorrelated. A kernel given by the user (an array as ``transition_model``) makes the
transitions part exactly zero; a policy that does not depend on the data (a prefit policy)
makes the policy part exactly zero.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..data import Transitions
from ..data._validation import check_random_state
from ._inference import (BootstrapResult, check_bootstrap_args, check_exact, refit_copy, replicate_fit,
                         replicate_parts, replicate_template)

__all__ = ["BootstrapSources", "bootstrap_sources", "RESAMPLE_SOURCES", "reward_table_statistic"]

#: What :func:`genpqr.evaluation.bootstrap`'s ``resample`` accepts.
RESAMPLE_SOURCES = ("both", "policy", "transitions")


def reward_table_statistic(model) -> np.ndarray:
    """The reward table ``(S, K)`` of an exact-path model (the default statistic)."""
    return np.asarray(model.stage2_.recovery.reward, dtype=np.float64)


reward_table_statistic.reads_tables = True  # a count replicate serves it (genpqr.evaluation._count_replicates)


def _replicate(seed, estimator, full, data, statistic, both_statistic, plan=None):
    """One replicate: ``(policy part, transitions part, both)`` statistics (from counts with
    ``plan``); quiet (the full fit warned)."""
    from ..exceptions import GenPQRWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        rep = replicate_fit(estimator, data, seed, plan)
        policy, moves = replicate_parts(full, rep)
        return (np.asarray(statistic(policy), dtype=np.float64), np.asarray(statistic(moves), dtype=np.float64),
                np.asarray(both_statistic(rep), dtype=np.float64))


@dataclass(frozen=True)
class BootstrapSources:
    """The bootstrap split by source (see the module docstring); each part a
    :class:`~genpqr.evaluation.BootstrapResult` over the same resampled episodes.

    Attributes
    ----------
    policy : BootstrapResult
        Policy resampled, kernel held at the full-sample estimate.
    transitions : BootstrapResult
        Kernel resampled, policy held at the full-sample fit.
    both : BootstrapResult
        Both resampled (the ordinary bootstrap, with ``both_statistic``).
    """

    policy: BootstrapResult
    transitions: BootstrapResult
    both: BootstrapResult

    def variances(self) -> dict:
        """``{"policy", "transitions", "both"}`` -> replicate variances (``ddof=1``), each shaped like
        the statistic of that part."""
        return {name: getattr(self, name).std_error ** 2 for name in ("policy", "transitions", "both")}

    def transition_share(self) -> np.ndarray:
        """``Var_transitions / (Var_policy + Var_transitions)`` per entry (NaN where both are 0)."""
        v = self.variances()
        total = v["policy"] + v["transitions"]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, v["transitions"] / np.where(total > 0, total, 1.0), np.nan)

    def frame(self, labels=None, visits=None, transitions=None):
        """Per (state, action) of a reward-table statistic ``(S, K)``: a DataFrame with
        ``state_index``, ``action``, the ``reward``, ``se_policy``, ``se_transitions``,
        ``se_both`` and ``transition_share``; ``visits`` / ``transitions`` (S, K) add the
        logged rows and the observed transitions of each cell."""
        import pandas as pd

        estimate = np.asarray(self.policy.estimate)
        if estimate.ndim != 2:
            raise ValueError(f"frame() needs a reward-table statistic of shape (S, K), got {estimate.shape}")
        S, K = estimate.shape
        labels = np.arange(K) if labels is None else np.asarray(labels)
        columns = {"state_index": np.repeat(np.arange(S), K), "action": np.tile(labels, S)}
        if visits is not None:
            columns["visits"] = np.asarray(visits).ravel()
        if transitions is not None:
            columns["transitions"] = np.asarray(transitions).ravel()
        columns.update(reward=estimate.ravel(), se_policy=self.policy.std_error.ravel(),
                       se_transitions=self.transitions.std_error.ravel(),
                       se_both=np.ravel(self.both.std_error)[:S * K], transition_share=self.transition_share().ravel())
        return pd.DataFrame(columns)


def bootstrap_sources(estimator, data: Transitions, *, n_boot: int = 200, statistic: Callable | None = None,
                      both_statistic: Callable | None = None, n_jobs: int = 1, random_state=None,
                      progress: bool | None = None, fitted=None, method: str = "auto") -> BootstrapSources:
    """Bootstrap over whole episodes, split into the variance from the policy and from the transitions.

    Parameters
    ----------
    estimator : GenPQR with ``q_model="exact"``
        Cloned and refitted on every replicate's episodes (give ``n_states``, so that every
        replicate has the states of the full sample).
    data : Transitions
        At least ``genpqr.evaluation._inference.MIN_BOOTSTRAP_EPISODES`` episodes.
    n_boot : int
        Replicates (at least 2); each gives all three parts.
    statistic : callable model -> array, optional
        Of the policy and transitions parts (a shallow copy of a model whose ``stage2_`` was
        re-solved); default the reward table ``(S, K)``.
    both_statistic : callable model -> array, optional
        Of the both-resampled part (the refitted replicate); default ``statistic``.
    n_jobs, random_state, progress, fitted
        As in :func:`genpqr.evaluation.bootstrap`; with the same ``random_state`` the ``both``
        part is that function's result.
    method : {"auto", "refit"}
        As in :func:`genpqr.evaluation.bootstrap`: replicates from reweighted counts where
        they give the refit's numbers (both statistics must read only the fitted tables).
    """
    if method not in ("auto", "refit"):
        raise ValueError(f"method must be 'auto' or 'refit', got {method!r}")
    check_bootstrap_args(n_boot, data, n_jobs)
    statistic = statistic or reward_table_statistic
    both_statistic = both_statistic or statistic
    full = fitted if fitted is not None else refit_copy(estimator).fit(data)
    check_exact(full)
    estimate, both_estimate = (np.asarray(f(full), dtype=np.float64) for f in (statistic, both_statistic))
    seeds = check_random_state(random_state).integers(0, 2**63 - 1, size=n_boot)
    template = replicate_template(estimator, full)
    from ._count_replicates import count_plan, reads_tables, run_replicates

    plan = count_plan(template, full, data, statistic) if method == "auto" and reads_tables(both_statistic) else None
    reps = run_replicates(_replicate, seeds, (template, full, data, statistic, both_statistic, plan), n_jobs=n_jobs,
                          progress=progress, plan=plan)
    policy, moves, both = (np.stack([r[i] for r in reps]) for i in range(3))
    return BootstrapSources(BootstrapResult(estimate, policy), BootstrapResult(estimate, moves),
                            BootstrapResult(both_estimate, both))
