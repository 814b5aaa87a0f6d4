"""With the true nuisances the correction has mean zero and the one-step estimator's Monte Carlo
variance is the influence function's (issue 34). Statistical: 2,000 samples of n = 400 rows
from a small exact MDP; tolerances stated with each assertion."""

import numpy as np
import pytest

from genpqr.inference import _algebra as alg

from .designs import full_kernel, random_law
from .test_derivative import TARGETS

R, N = 2000, 400


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softmax value under u (1b)", "policy value under rbar (2)", "projection of rbar"])
def test_true_nuisances_mean_zero_and_influence_variance(name):
    law = random_law(seed=21, anchor=True)
    S, K = law.shape
    pieces = TARGETS[name](law)
    chi, prob = alg.population_influence(pieces, law)
    var = np.einsum("sat,satm->m", prob, chi ** 2)
    rng = np.random.default_rng(0)
    flat = prob.ravel()
    draws = rng.choice(flat.size, size=R * N, p=flat / flat.sum())
    s, a, s2 = np.unravel_index(draws, prob.shape)  # s2 == S: terminated
    rows_chi = alg.influence(pieces, law, s, a, np.minimum(s2, S - 1), (s2 < S).astype(float))
    estimates = pieces.value + rows_chi.reshape(R, N, -1).mean(axis=1)  # (R, m): psi_0 + mean chi_0 at the rows
    # mean zero: within 4 Monte Carlo standard errors
    assert np.all(np.abs(estimates.mean(axis=0) - pieces.value) < 4 * np.sqrt(var / N / R))
    # the Monte Carlo variance equals Var(chi) / n: the ratio's sampling sd is sqrt(2 / R) ~ 0.032;
    # allow 4 of them (0.13)
    ratio = estimates.var(axis=0, ddof=1) / (var / N)
    assert np.all(np.abs(ratio - 1.0) < 4 * np.sqrt(2.0 / R)), ratio
