"""Benchmark problems with ground truth: random finite MDPs (and, as they land, the
paper's synthetic environment and continuous-action cases)."""

from .tabular import random_mdp, simulate_tabular

__all__ = ["random_mdp", "simulate_tabular"]
