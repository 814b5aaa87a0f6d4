"""What a discrete-action ``genpqr fit`` computes after the fit: the bootstrap over episodes
(and its statistics, picklable for parallel workers), ``rewards.csv`` (one row per state in
tabular mode, one per data row otherwise) and the projection of the reward table on the
features.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TabularStatistic", "RowRewardStatistic", "bootstrap_statistic", "project", "run_bootstrap",
           "run_bootstrap_sources", "sources_frame", "source_lines",
           "tabular_rewards", "row_rewards", "projected_parameters"]


class TabularStatistic:
    """Bootstrap statistic: the reward table, plus the projected parameters when features
    are given (weights: the replicate's visits per state-action pair)."""

    reads_tables = True  # the fitted tables only: a count replicate serves it (genpqr.evaluation)

    def __init__(self, features=None):
        self.features = features

    def __call__(self, model):
        table = np.asarray(model.stage2_.recovery.reward, dtype=np.float64)
        if self.features is None:
            return table
        theta = project(table, self.features, model.stage2_.counts)[0]
        return np.concatenate([table.ravel(), theta])


def bootstrap_statistic(features, names, estimator):
    """The bootstrap statistic of the tabular mode: the reward table, plus the parameters
    (the projection, or re-estimated by the structural estimator)."""
    if features is None or estimator == "projection":
        return TabularStatistic(features)
    from .structural import StructuralStatistic

    return StructuralStatistic(features, names, estimator)


class RowRewardStatistic:
    """Bootstrap statistic: the reward at given (state, action code) rows."""

    def __init__(self, states, codes):
        self.states, self.codes = np.asarray(states, dtype=np.float64), np.asarray(codes, dtype=np.int64)

    def __call__(self, model):
        return model.reward(self.states)[np.arange(self.codes.size), self.codes]


def project(table, features, weights):
    """WLS of the reward table on the features: ``(theta, weighted R^2)``
    (:func:`genpqr.structural.project_reward`, or a small fallback if that module is absent)."""
    try:
        from ..structural._ddc import project_reward
    except ImportError:  # pragma: no cover - ddc ships with genpqr; kept for partial installs
        project_reward = None
    if project_reward is not None:
        res = project_reward(table, features, weights)
        return np.asarray(res.theta), float(res.weighted_r2)
    X = features.reshape(-1, features.shape[2])
    sw = np.sqrt(np.asarray(weights, dtype=np.float64).reshape(-1))
    y = np.asarray(table).reshape(-1)
    theta = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)[0]
    total = float(np.sum((sw * y) ** 2))
    return theta, (1.0 - float(np.sum((sw * (y - X @ theta)) ** 2)) / total if total > 0 else 1.0)



def run_bootstrap(model, data, statistic, config):
    """:func:`genpqr.evaluation.bootstrap` over whole episodes with the config's replicates,
    workers and seed; a failed replicate is a ``ValueError`` saying so."""
    from ..evaluation import bootstrap

    try:
        return bootstrap(model, data, n_boot=config.bootstrap, statistic=statistic, n_jobs=config.n_jobs,
                         random_state=config.seed, progress=False if config.quiet else None, fitted=model)
    except ValueError as exc:
        raise ValueError(f"a bootstrap replicate failed (resampled episodes): {exc}") from None


def run_bootstrap_sources(model, data, statistic, config):
    """Tabular mode: :func:`genpqr.evaluation.bootstrap_sources` over the same replicates as
    :func:`run_bootstrap` (its ``both`` part is that bootstrap, with ``statistic``); the policy
    and transitions parts are of the reward table. Returns ``(both, sources)``."""
    from ..evaluation import bootstrap_sources

    try:
        sources = bootstrap_sources(model, data, n_boot=config.bootstrap, both_statistic=statistic,
                                    n_jobs=config.n_jobs, random_state=config.seed,
                                    progress=False if config.quiet else None, fitted=model)
    except ValueError as exc:
        raise ValueError(f"a bootstrap replicate failed (resampled episodes): {exc}") from None
    return sources.both, sources


def sources_frame(model, sources, labels):
    """``reward_se_by_source.csv``: per (state, action) the logged rows, the observed transitions,
    the reward and its bootstrap SE from the policy, from the transitions and with both resampled."""
    visits = np.asarray(model.stage2_.counts, dtype=np.int64)
    moves = np.asarray(model.transition_counts_, dtype=np.int64)
    return sources.frame(labels=np.asarray(labels), visits=visits, transitions=moves)


def source_lines(frame, n_boot: int) -> list:
    """The console lines on where the reward's uncertainty comes from (``frame``: :func:`sources_frame`)."""
    logged = frame[(frame["visits"] > 0) & (frame["se_both"] > 0)]
    if logged.empty:
        return []
    p, t = float(np.median(logged["se_policy"])), float(np.median(logged["se_transitions"]))
    parts = logged["se_policy"] ** 2 + logged["se_transitions"] ** 2
    share = float(np.sum(logged["se_transitions"] ** 2) / max(float(np.sum(parts)), 1e-300))
    floor = 1e-9 * float(logged["se_both"].max())  # below: rounding of the re-solve (a given kernel)
    top = logged[logged["se_transitions"] > floor].sort_values("se_transitions", ascending=False, kind="stable")
    cells = ", ".join(f"(state_index {int(r.state_index)}, {r.action}: SE {r.se_transitions:.3g}, "
                      f"{int(r.transitions)} transitions)" for r in top.head(3).itertuples())
    if top.empty:
        t, share, where = 0.0, 0.0, "    no transition part: the kernel does not vary with the episodes (given)"
    else:
        where = f"    largest transition part at {cells}"
    return [f"  where the reward's uncertainty comes from ({n_boot} bootstrap replicates, one stage held fixed; "
            f"median over the {len(logged)} logged (state, action) cells):",
            f"    reward SE from the policy: {p:.3g}, from the transitions: {t:.3g} (both resampled: "
            f"{float(np.median(logged['se_both'])):.3g}); the transitions carry {share:.0%} of the summed variance",
            where,
            "    per cell: reward_se_by_source.csv"]


def _intervals(boot, level, size):
    lo, hi = boot.interval(level)
    return boot.std_error.ravel()[:size], np.ravel(lo)[:size], np.ravel(hi)[:size]


def tabular_rewards(model, index, data, labels, boot, level):
    """``rewards.csv`` of the tabular mode: one row per state (labels, visits, a reward column
    per action, a ``transitions_<label>`` column per action -- observed transitions from the
    cell, ``model.transition_counts_``, 0 for an action never taken there --, and with a
    bootstrap ``_se``/``_lo``/``_hi`` columns). The columns are built apart and joined once."""
    import pandas as pd

    table = np.asarray(model.stage2_.recovery.reward)
    S, K = table.shape
    rewards = index.labels()
    visits = np.bincount(data.states[:, 0].astype(np.int64), minlength=S)
    moves = np.asarray(getattr(model, "transition_counts_", np.zeros((S, K))), dtype=np.int64)
    # one block per kind of column (a frame per block, not a column each: K may be 1e5 items)
    blocks = [pd.DataFrame({"visits": visits, "visited": visits > 0}, index=rewards.index),  # False: not identified
              pd.DataFrame(table, index=rewards.index, columns=[f"reward_{label}" for label in labels]),
              pd.DataFrame(moves, index=rewards.index, columns=[f"transitions_{label}" for label in labels])]
    if boot is not None:
        se, lo, hi = (x.reshape(S, K) for x in _intervals(boot, level, S * K))
        parts = np.stack([se, lo, hi], axis=2).reshape(S, 3 * K)  # per action: _se, _lo, _hi
        names = [f"reward_{label}_{part}" for label in labels for part in ("se", "lo", "hi")]
        blocks.append(pd.DataFrame(parts, index=rewards.index, columns=names))
    extra = pd.concat(blocks, axis=1)
    return pd.concat([rewards.drop(columns=[c for c in extra.columns if c in rewards.columns]), extra], axis=1)


def row_rewards(model, frame, config, labels, boot):
    """``rewards.csv`` for continuous states: one row per data row (reward and continuation at
    the logged action, a reward column per action, and bootstrap columns for ``reward``)."""
    states = frame[config.state].to_numpy(dtype=np.float64)
    codes = np.searchsorted(labels, frame[config.action].to_numpy())
    rows = np.arange(len(frame))
    reward = model.reward(states)
    rewards = frame[[config.episode, config.time, *config.state, config.action]].copy()
    rewards["reward"] = reward[rows, codes]
    rewards["continuation"] = model.continuation(states)[rows, codes]
    for k, label in enumerate(labels):
        rewards[f"reward_{label}"] = reward[:, k]
    if boot is not None:
        rewards["reward_se"], rewards["reward_lo"], rewards["reward_hi"] = _intervals(boot, config.level, len(frame))
    return rewards


def projected_parameters(model, features, names, boot, level):
    """``(table, weighted R^2)`` of the WLS projection of the reward table on the features
    (weights: visits per state-action pair), with bootstrap intervals when given."""
    import pandas as pd

    theta, r2 = project(model.stage2_.recovery.reward, features, model.stage2_.counts)
    table = pd.DataFrame({"parameter": names, "estimate": theta})
    if boot is not None:
        p = len(names)
        lo, hi = boot.interval(level)
        table["std_error"] = boot.std_error[-p:]
        table["ci_low"], table["ci_high"] = np.ravel(lo)[-p:], np.ravel(hi)[-p:]
    return table, r2

