"""Evaluation: metrics under a shared normalization (EPIC and friends), method comparison,
bootstrap over episodes, plots.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._metrics import SeedSummary, Z_95, anchor_count, mean_ci, policy_nll, reward_correlation, reward_mse, summarize
    from ._comparison import compare_normalized, epic_distance, epic_distance_tabular
    from ._inference import (BootstrapResult, MIN_BOOTSTRAP_EPISODES, bootstrap, check_bootstrap_args,
                             check_bootstrap_episodes, resample_episodes)
    from ._count_replicates import CountPlan, EpisodeCounts, count_plan, multiplicities, reads_tables
    from ._sources import RESAMPLE_SOURCES, BootstrapSources, bootstrap_sources, reward_table_statistic
    from ._plotting import (RESIDUAL_FLOOR_NOTE, legend_outside, plain_text, plot_bellman_residuals, plot_reward_recovery,
                            plot_reward_table)
    from ._tables import MAX_WIDTH, CombinedSummary, SummaryLayout, TableSummary, format_number, latex_escape

__all__ = ["reward_mse", "reward_correlation", "policy_nll", "anchor_count", "mean_ci", "SeedSummary", "summarize",
           "Z_95", "compare_normalized", "epic_distance", "epic_distance_tabular", "BootstrapResult", "bootstrap",
           "resample_episodes", "check_bootstrap_episodes", "check_bootstrap_args", "MIN_BOOTSTRAP_EPISODES", "BootstrapSources", "bootstrap_sources",
           "RESAMPLE_SOURCES", "CountPlan", "EpisodeCounts", "count_plan", "multiplicities", "reads_tables",
           "reward_table_statistic", "plot_reward_recovery",
           "plot_reward_table", "plot_bellman_residuals", "legend_outside", "plain_text", "RESIDUAL_FLOOR_NOTE",
           "MAX_WIDTH", "SummaryLayout", "TableSummary", "CombinedSummary", "format_number", "latex_escape"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
