"""What is done with a recovered reward: counterfactuals (new primitives, new parameters,
scenarios), identification and support checks, the optimal policy under the reward (soft
FQI), the reward in a new environment (transfer).
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._counterfactual import ROUTE_GAP_WARN, ROUTES, STRUCTURAL_RULE, counterfactual
    from ._counterfactual_result import CounterfactualResult, load_counterfactual
    from ._counterfactual_summary import CounterfactualSummary
    from ._welfare import WelfareResult
    from ._parametric_counterfactual import (DeltaResult, ParameterChange, REQUIRED_ATTRIBUTES, delta_method,
                                             delta_method_unit, parse_parameter_change)
    from ._scenarios import (ScenarioSolution, initial_distribution, new_kernel, reward_delta, solve_scenario,
                             state_occupancy, stationary_distribution)
    from ._support import (MATERIAL_SHARE, MIN_VISITS, OFF_SUPPORT_RATE, SupportReport, off_support, support_report,
                           support_statistics, warn_if_material)
    from ._identification import IdentificationWarning, identification_rule, shaping_preserved
    from ._soft_fqi import SoftFQI, soft_counterfactual
    from ._transfer import RecoveredRewardWrapper, RewardFunction, to_imitation_reward_net

__all__ = ["counterfactual", "ROUTES", "STRUCTURAL_RULE", "ROUTE_GAP_WARN", "CounterfactualResult",
           "CounterfactualSummary", "WelfareResult",
           "load_counterfactual", "parse_parameter_change", "ParameterChange", "delta_method", "delta_method_unit",
           "DeltaResult", "REQUIRED_ATTRIBUTES", "ScenarioSolution", "solve_scenario", "stationary_distribution",
           "state_occupancy", "reward_delta", "new_kernel", "initial_distribution", "MIN_VISITS", "MATERIAL_SHARE",
           "OFF_SUPPORT_RATE", "SupportReport", "support_report", "off_support", "support_statistics",
           "warn_if_material", "IdentificationWarning", "shaping_preserved", "identification_rule", "SoftFQI",
           "soft_counterfactual", "RewardFunction", "to_imitation_reward_net", "RecoveredRewardWrapper"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
