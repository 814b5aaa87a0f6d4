"""Counterfactual scenarios solved through a kernel given only by products (genpqr.stage2.KernelOperator)."""

import numpy as np

from genpqr.stage2._kernels import as_kernel
from genpqr.counterfactuals._scenarios import solve_scenario
from genpqr.envs import random_mdp

from ..stage2.test_kernels import three_forms


def test_counterfactual_scenario_with_a_product_only_kernel(monkeypatch):
    """The soft-optimal solution and its state distributions are the same for a product-only kernel
    above the dense limit (matrix-free P_pi; the limit lowered to keep the test fast) as for the sparse one."""
    from genpqr.stage2 import _kernels

    monkeypatch.setattr(_kernels, "_OPERATOR_DENSE_MAX_STATES", 50)
    S, K, gamma = 300, 3, 0.9
    mdp = random_mdp(S, K, n_next=3, gamma=gamma, random_state=2)
    initial = np.full(S, 1.0 / S)
    base = solve_scenario(mdp.reward, mdp.kernel, gamma, initial=initial)
    operator = as_kernel(three_forms(mdp)["products"])
    assert not isinstance(operator.under(base.policy), np.ndarray)  # the matrix-free path
    free = solve_scenario(mdp.reward, operator, gamma, initial=initial)
    np.testing.assert_allclose(free.policy, base.policy, rtol=0, atol=1e-9)
    np.testing.assert_allclose(free.occupancy, base.occupancy, rtol=0, atol=1e-9)
    np.testing.assert_allclose(free.stationary, base.stationary, rtol=0, atol=1e-9)
