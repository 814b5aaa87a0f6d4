"""What is done with a recovered reward: counterfactuals (new primitives, new parameters,
scenarios), identification and support checks, the optimal policy under the reward (soft
FQI), the reward in a new environment (transfer).
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._counterfactual import counterfactual
    from ._counterfactual_result import CounterfactualResult, load_counterfactual
    from ._welfare import WelfareResult
    from ._identification import IdentificationWarning, shaping_preserved
    from ._scenarios import stationary_distribution
    from ._support import support_report
    from ._soft_fqi import SoftFQI, soft_counterfactual
    from ._transfer import RecoveredRewardWrapper, RewardFunction, to_imitation_reward_net

__all__ = ["counterfactual", "CounterfactualResult", "WelfareResult", "load_counterfactual", "IdentificationWarning",
           "stationary_distribution", "shaping_preserved", "support_report", "SoftFQI", "soft_counterfactual",
           "RewardFunction", "RecoveredRewardWrapper", "to_imitation_reward_net"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
