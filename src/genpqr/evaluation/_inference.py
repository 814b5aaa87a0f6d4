"""Bootstrap inference over whole episodes.

Each replicate resamples episodes with replacement (keeping every episode's transitions
together, so within-episode dependence is preserved), refits a clone of the estimator and
evaluates a statistic. The model's parameters, including ``n_states`` and any known
``transition_model``, carry over to the replicates (re-used, not re-estimated from the
full sample); replicates run in parallel with joblib and show a progress bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..data._validation import check_random_state, clone_learner as clone
from ..data import Transitions

__all__ = ["BootstrapResult", "bootstrap", "resample_episodes", "check_bootstrap_episodes", "check_bootstrap_args",
           "MIN_BOOTSTRAP_EPISODES"]

#: Fewest episodes :func:`bootstrap` accepts. With n episodes a replicate is one of at most
#: C(2n-1, n) multisets (126 for n = 5, 92,378 for n = 10), one episode gives zero-width
#: intervals, and percentile intervals of an episode mean cover well below their level for a
#: handful of episodes; ten is the least that gives the intervals a meaning.
MIN_BOOTSTRAP_EPISODES = 10


def check_bootstrap_episodes(n_episodes: int, name: str = "data") -> None:
    """``ValueError`` when fewer than ``MIN_BOOTSTRAP_EPISODES`` episodes are there to resample."""
    if n_episodes < MIN_BOOTSTRAP_EPISODES:
        raise ValueError(
            f"{name}: the bootstrap resamples whole episodes and needs at least {MIN_BOOTSTRAP_EPISODES} of them, but "
            f"the data has {n_episodes}; with so few episodes the intervals would be meaningless (one episode gives "
            f"zero-width intervals)")


def check_bootstrap_args(n_boot: int, data, n_jobs: int) -> None:
    """The bootstrap's arguments: ``n_boot >= 2``, ``data`` a Transitions with enough episodes
    (:func:`check_bootstrap_episodes`), ``n_jobs`` not 0."""
    if n_boot < 2:
        raise ValueError(f"n_boot must be at least 2, got {n_boot}")
    if not isinstance(data, Transitions):
        raise TypeError(f"data must be genpqr.data.Transitions, got {type(data).__name__}")
    check_bootstrap_episodes(data.n_episodes, "data")
    if n_jobs == 0:
        raise ValueError("n_jobs must be a positive number of workers or negative (-1: one per core), got 0")


def resample_episodes(data: Transitions, rng: np.random.Generator) -> Transitions:
    """Episodes drawn with replacement (as many as in ``data``); drawn copies get new ids."""
    episodes, starts = np.unique(data.episode_ids, return_index=True)
    order = np.argsort(data.episode_ids, kind="stable")
    sorted_ids = data.episode_ids[order]
    bounds = np.searchsorted(sorted_ids, episodes), np.searchsorted(sorted_ids, episodes, side="right")
    draw = rng.integers(0, episodes.size, size=episodes.size)
    lengths = bounds[1][draw] - bounds[0][draw]
    index = np.concatenate([order[bounds[0][d]:bounds[1][d]] for d in draw])
    sample = data.subset(index)
    from dataclasses import replace

    new_ids = np.repeat(np.arange(draw.size), lengths)
    return replace(sample, episode_ids=new_ids)


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimate (on the full sample) and bootstrap replicates of a statistic.

    Attributes
    ----------
    estimate : ndarray
    replicates : ndarray of shape ``(n_boot, *estimate.shape)``
    """

    estimate: np.ndarray
    replicates: np.ndarray

    @property
    def std_error(self) -> np.ndarray:
        return self.replicates.std(axis=0, ddof=1)

    def interval(self, level: float = 0.95, method: str = "percentile") -> tuple[np.ndarray, np.ndarray]:
        """Confidence interval: ``"percentile"``, ``"basic"`` (reflected percentile) or
        ``"normal"`` (estimate +- z * standard error)."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        alpha = (1 - level) / 2
        if method == "normal":
            from scipy.stats import norm

            z = norm.ppf(1 - alpha)
            return self.estimate - z * self.std_error, self.estimate + z * self.std_error
        lo, hi = np.quantile(self.replicates, [alpha, 1 - alpha], axis=0)
        if method == "percentile":
            return lo, hi
        if method == "basic":
            return 2 * self.estimate - hi, 2 * self.estimate - lo
        raise ValueError(f"method must be 'percentile', 'basic' or 'normal', got {method!r}")


def _default_statistic(model):
    if hasattr(model, "reward_table"):
        return np.asarray(model.reward_table())
    raise ValueError("give a statistic(model) for non-tabular models")


_default_statistic.reads_tables = True  # the reward table: a count replicate serves it


def check_exact(model) -> None:
    """``ValueError`` unless ``model`` is a fitted exact-path model (a reward table and a kernel table)."""
    stage2 = getattr(model, "stage2_", None)
    if getattr(stage2, "recovery", None) is None or getattr(stage2, "kernel", None) is None:
        raise ValueError("resampling one stage with the other held fixed needs the exact tabular path "
                         "(GenPQR(q_model='exact'), genpqr fit in tabular mode): the kernel must be a table")


def replicate_parts(full, rep):
    """``(policy model, transitions model)`` of one replicate ``rep`` against the full fit: the
    replicate's stage 1 under the full sample's kernel, and the full sample's stage 1 under the
    replicate's kernel (:meth:`genpqr.GenPQR.with_kernel`)."""
    if rep.stage2_.recovery.reward.shape != full.stage2_.recovery.reward.shape:
        raise ValueError(f"a replicate has {rep.stage2_.recovery.reward.shape[0]} states but the full sample "
                         f"{full.stage2_.recovery.reward.shape[0]}; give n_states to the estimator")
    policy = rep.with_kernel(full.stage2_.kernel)
    moves = full.with_kernel(rep.stage2_.kernel, transition_counts=rep.transition_counts_)
    return policy, moves


def refit_copy(estimator):
    """An unfitted copy of ``estimator`` for a replicate; a prefit policy model
    (``policy_prefit=True``) is kept as it is (cloning it would drop its fit)."""
    copy_ = clone(estimator)
    if getattr(estimator, "policy_prefit", False):
        copy_.set_params(policy_model=estimator.policy_model)
    return copy_


def replicate_template(estimator, full):
    """The unfitted estimator each replicate refits: ``estimator``, with ``transition_model="auto"``
    held at the full sample's choice (counts, or the chosen model with its cross-validated
    settings fixed, refitted on each replicate's moves), so replicates do not choose again."""
    copy_ = refit_copy(estimator)
    if isinstance(getattr(estimator, "transition_model", None), str) and \
            getattr(full, "transition_selection_", None) is not None:
        chosen = full.transition_model_
        copy_.set_params(transition_model="counts" if chosen is None else chosen.fixed_copy())
    return copy_


def replicate_fit(template, data, seed: int, plan=None):
    """The fitted replicate of ``seed``: from counts when ``plan`` serves it, else ``template``
    refitted on ``genpqr.evaluation._inference.resample_episodes`` of the same draw."""
    from ._count_replicates import multiplicities

    if plan is not None:
        rep = plan.replicate(multiplicities(plan.counts.n_episodes, np.random.default_rng(seed)))
        if rep is not None:
            return rep
    return refit_copy(template).fit(resample_episodes(data, np.random.default_rng(seed)))


def _replicate(seed, estimator, data, statistic, resample="both", full=None, plan=None):
    """One replicate (from counts with ``plan``, ``_count_replicates``);
    the full-sample fit already raised any warnings, so replicates are quiet."""
    import warnings

    from ..exceptions import GenPQRWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        model = replicate_fit(estimator, data, seed, plan)
        if resample != "both":  # one stage from the replicate, the other held at the full-sample fit
            model = replicate_parts(full, model)[0 if resample == "policy" else 1]
    return np.asarray(statistic(model), dtype=np.float64)


def bootstrap(estimator, data: Transitions, *, n_boot: int = 200, statistic: Callable | None = None,
              n_jobs: int = 1, random_state=None, progress: bool | None = None,
              fitted=None, resample: str = "both", method: str = "auto") -> BootstrapResult:
    """Bootstrap a statistic of a fitted estimator over whole episodes.

    Parameters
    ----------
    estimator : GenPQR (or any estimator with ``fit(data)``)
        Cloned for every replicate.
    data : Transitions
    n_boot : int
        At least 2. ``data`` must hold at least ``MIN_BOOTSTRAP_EPISODES`` episodes.
    statistic : callable model -> array, optional
        Default: the reward table (exact tabular path).
    n_jobs : int
        joblib workers.
    fitted : fitted estimator, optional
        The full-sample fit, if already available (saves one fit).
    resample : {"both", "policy", "transitions"}
        ``"both"``: refit everything on the resampled episodes. Exact tabular path only:
        ``"policy"`` holds the kernel at the full-sample estimate, ``"transitions"`` holds the
        policy (and normalization) at the full-sample fit (:func:`bootstrap_sources`, which
        returns all three from the same replicates).
    method : {"auto", "refit"}
        ``"auto"``: on the exact tabular path with a cell-frequency first stage and count
        transitions, and a statistic that reads only the fitted tables (``reward_table``, or
        one marked ``reads_tables = True``), each replicate is computed from the episodes'
        reweighted counts and one sparse solve instead of a refit -- the same numbers
        (``_count_replicates``); elsewhere, and with ``"refit"``, every
        replicate refits a clone of the estimator on its resampled episodes.
    """
    if method not in ("auto", "refit"):
        raise ValueError(f"method must be 'auto' or 'refit', got {method!r}")
    if resample not in ("both", "policy", "transitions"):
        raise ValueError(f"resample must be 'both', 'policy' or 'transitions', got {resample!r}")
    check_bootstrap_args(n_boot, data, n_jobs)
    statistic = statistic or _default_statistic
    full = fitted if fitted is not None else refit_copy(estimator).fit(data)
    if resample != "both":
        check_exact(full)
    estimate = np.asarray(statistic(full), dtype=np.float64)
    seeds = check_random_state(random_state).integers(0, 2**63 - 1, size=n_boot)
    template = replicate_template(estimator, full)
    from ._count_replicates import count_plan, run_replicates

    plan = count_plan(template, full, data, statistic) if method == "auto" else None
    reps = run_replicates(_replicate, seeds, (template, data, statistic, resample, full, plan), n_jobs=n_jobs,
                          progress=progress, plan=plan)
    return BootstrapResult(estimate, np.stack(reps))
