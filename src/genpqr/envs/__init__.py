"""Benchmark problems with ground truth: random finite MDPs and the paper's synthetic
environment (continuous states, K actions, closed-form reward)."""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

from ..lazy import attach

if TYPE_CHECKING:  # imported on first use (genpqr.lazy): readers and type checkers see them here
    from .rust import BusEngine, bus_engine, simulate_buses
    from .synthetic import SyntheticData, SyntheticEnv, make_synthetic_data, make_synthetic_env
    from .tabular import random_mdp, simulate_tabular

__all__ = ["bus_engine", "BusEngine", "simulate_buses", "random_mdp", "simulate_tabular", "SyntheticEnv", "SyntheticData", "make_synthetic_env",
           "make_synthetic_data"]

__getattr__, __dir__ = attach(__name__, __file__, __all__)
