"""Benchmark problems with ground truth: random finite MDPs and the paper's synthetic
environment (continuous states, K actions, closed-form reward)."""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from ._rust import BusEngine, bus_engine, increment_matrix, simulate_buses, simulate_typed_buses
    from ._tabular import random_mdp, simulate_tabular
    from ._synthetic import make_synthetic_data, make_synthetic_env
    from ._lqg import make_lqg

__all__ = ["bus_engine", "BusEngine", "simulate_buses", "simulate_typed_buses", "increment_matrix", "random_mdp",
           "simulate_tabular", "make_synthetic_env", "make_synthetic_data", "make_lqg"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
