"""Population orthogonality (issue 34; debiased-inference notes Sec. 9.3): perturb the nuisances
by ``eps`` (``pi_eps ~ pi_0 exp(eps Z)``, ``P_eps ~ P_0 exp(eps Z')``, every other nuisance
recomputed exactly) and compute the bias ``B(eps) = psi(eta_eps) + E_0[chi(O; eta_eps)] - psi_0``
with no sampling noise. The one-step bias is second order: ``B/eps`` shrinks at least 2.5x when
``eps`` shrinks 3x. The plug-in's bias ``psi(eta_eps) - psi_0`` is first order: ``B/eps`` does not."""

import numpy as np
import pytest

from genpqr.inference import _algebra as alg

from .designs import full_kernel, joint, random_law
from .test_derivative import TARGETS


def perturbed(law, eps, seed=0):
    rng = np.random.default_rng(seed)
    S, K = law.shape
    pi = law.policy * np.exp(eps * rng.normal(size=(S, K)))
    pi /= pi.sum(axis=1, keepdims=True)
    P = full_kernel(law) * np.exp(eps * rng.normal(size=(S, K, S + 1)))
    P /= P.sum(axis=2, keepdims=True)
    return alg.TabularLaw.create(law.rho, pi, P[:, :, :S].reshape(S * K, S), law.gamma, law.mu, law.g)


def biases(target, law, eps):
    """``(one-step bias, plug-in bias)`` at nuisances perturbed by ``eps``."""
    truth = target(law).value
    law_e = perturbed(law, eps)
    pieces = target(law_e)
    chi = alg.population_influence(pieces, law_e)[0]
    correction = np.einsum("sat,satm->m", joint(law), chi)  # E_0 under the true law
    return pieces.value + correction - truth, pieces.value - truth


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_one_step_bias_is_second_order_and_plug_in_first_order(name):
    law = random_law(seed=11, anchor=True)
    (os1, pl1), (os2, pl2) = (biases(TARGETS[name], law, eps) for eps in (3e-3, 1e-3))
    ratio_one_step = np.abs(os1 / 3e-3) / np.maximum(np.abs(os2 / 1e-3), 1e-300)
    assert np.all(ratio_one_step > 2.5), ratio_one_step
    ratio_plug_in = np.abs(pl1 / 3e-3) / np.abs(pl2 / 1e-3)
    assert np.all(np.abs(ratio_plug_in - 1.0) < 0.1), ratio_plug_in
