"""Evaluation: metrics under a shared normalization (EPIC and friends), method comparison,
bootstrap over episodes, plots.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._metrics import policy_nll, reward_correlation, reward_mse
    from ._comparison import compare_normalized, epic_distance, epic_distance_tabular
    from ._inference import BootstrapResult, bootstrap
    from ._sources import bootstrap_sources
    from ._plotting import plot_reward_recovery, plot_reward_table

__all__ = ["reward_mse", "reward_correlation", "policy_nll", "epic_distance", "epic_distance_tabular",
           "compare_normalized", "bootstrap", "BootstrapResult", "bootstrap_sources", "plot_reward_recovery",
           "plot_reward_table"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
