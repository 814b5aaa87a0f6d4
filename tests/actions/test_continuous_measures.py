"""Reference kernels, reference measures and integration rules."""

import numpy as np
import pytest

from genpqr.data import BoxActions
from genpqr.actions import (BehaviorKernel, GaussHermite, GaussLegendre, GaussianKernel, GaussianReference,
                            LinearGaussianDensity, MonteCarlo, PointMass, UniformKernel)
from genpqr.actions._measures import DensityKernel

R1 = BoxActions.create(1)
BOX = BoxActions.create(1, -1.0, 2.0)
STATES = np.linspace(-2, 2, 7)[:, None]


def _gauss():
    return GaussianKernel(mean=0.3, scale=0.7, gain=[[0.5]]).bind(R1)


def _poly(a, s):
    return 1.0 - 2.0 * a + 0.5 * a ** 2 * s - 0.1 * a ** 3 + 0.05 * a ** 5


def _exact_gauss_poly(mean, sd):
    # E[_poly] under N(mean, sd^2), moments up to 5
    m1 = mean
    m2 = mean ** 2 + sd ** 2
    m3 = mean ** 3 + 3 * mean * sd ** 2
    m5 = mean ** 5 + 10 * mean ** 3 * sd ** 2 + 15 * mean * sd ** 4
    return m1, m2, m3, m5


def test_gauss_hermite_is_exact_for_polynomials():
    kernel = _gauss()
    nodes = GaussHermite(4).nodes(kernel, STATES)
    assert nodes.actions.shape == (7, 4, 1) and np.allclose(nodes.weights.sum(1), 1.0)
    s = STATES[:, 0]
    got = nodes.integrate(_poly(nodes.actions[..., 0], s[:, None]))
    m1, m2, m3, m5 = _exact_gauss_poly(0.3 + 0.5 * s, 0.7)
    np.testing.assert_allclose(got, 1 - 2 * m1 + 0.5 * m2 * s - 0.1 * m3 + 0.05 * m5, rtol=0, atol=1e-12)


def test_gauss_legendre_is_exact_for_polynomials_under_uniform_mu():
    kernel = UniformKernel().bind(BOX)
    nodes = GaussLegendre(5).nodes(kernel, STATES)
    a = np.linspace(-1, 2, 200001)
    exact = np.trapezoid(_poly(a, 1.0), a) / 3.0 if hasattr(np, "trapezoid") else np.trapz(_poly(a, 1.0), a) / 3.0
    np.testing.assert_allclose(nodes.integrate(_poly(nodes.actions[..., 0], 1.0)), exact, atol=1e-8)


def test_point_mass_has_one_exact_node_under_every_rule():
    kernel = PointMass(0.2, gain=[[-1.0]]).bind(R1)
    for rule in (MonteCarlo(16), GaussHermite(5), GaussLegendre(5)):
        nodes = rule.nodes(kernel, STATES, np.random.default_rng(0), support=BOX)
        assert nodes.n_nodes == 1
        np.testing.assert_allclose(nodes.actions[:, 0, 0], 0.2 - STATES[:, 0])


def test_monte_carlo_is_unbiased_stratified_and_reproducible():
    kernel = _gauss()
    rule = MonteCarlo(64, readoff_samples=512)
    a = rule.nodes(kernel, STATES, np.random.default_rng(1))
    b = rule.nodes(kernel, STATES, np.random.default_rng(1))
    np.testing.assert_array_equal(a.actions, b.actions)  # common random numbers: same draws for the same seed
    assert rule.nodes(kernel, STATES, np.random.default_rng(1), readoff=True).n_nodes == 512
    # antithetic: the mean of the draws is the kernel mean exactly; stratified: the variance is close
    mean = 0.3 + 0.5 * STATES[:, 0]
    np.testing.assert_allclose(a.integrate(a.actions[..., 0]), mean, atol=1e-12)
    wide = rule.nodes(kernel, STATES, np.random.default_rng(1), readoff=True)
    np.testing.assert_allclose(wide.integrate((wide.actions[..., 0] - mean[:, None]) ** 2), 0.49, rtol=0.05)
    plain = MonteCarlo(64, antithetic=False, stratified=False).nodes(kernel, STATES, np.random.default_rng(2))
    assert abs(plain.integrate(plain.actions[..., 0]) - mean).max() > 1e-6


def test_stratified_error_is_much_smaller_than_plain():
    kernel = GaussianKernel(0.0, 1.0).bind(R1)
    X = np.zeros((500, 1))
    errs = {}
    for strat in (False, True):
        nodes = MonteCarlo(256, stratified=strat).nodes(kernel, X, np.random.default_rng(3))
        errs[strat] = np.mean((nodes.integrate(nodes.actions[..., 0] ** 2) - 1.0) ** 2)
    # antithetic plain: variance 4/J; stratified: O(1/J^2) (the tails dominate)
    assert errs[False] == pytest.approx(4 / 256, rel=0.3)
    assert errs[True] < errs[False] / 10


def test_rule_errors():
    with pytest.raises(ValueError, match="GaussHermite needs a Gaussian"):
        GaussHermite(5).nodes(UniformKernel().bind(BOX), STATES)
    with pytest.raises(ValueError, match="GaussLegendre needs a bounded support"):
        GaussLegendre(5).nodes(_gauss(), STATES)
    with pytest.raises(ValueError, match="positive integer"):
        MonteCarlo(0)


def test_kernel_support_errors():
    with pytest.raises(ValueError, match="not dominated by the reference measure"):
        GaussianKernel().bind(BOX)
    with pytest.raises(ValueError, match="needs a bounded box"):
        UniformKernel().bind(R1)
    with pytest.raises(ValueError, match="extends outside the action space"):
        UniformKernel(-2.0, 1.0).bind(BOX)
    with pytest.raises(ValueError, match="needs the fitted policy density"):
        BehaviorKernel().bind(R1)
    with pytest.raises(ValueError, match="mean callable must return shape"):
        GaussianKernel(mean=lambda s: np.zeros((len(s), 3))).bind(R1).mean_at(STATES)


def test_unnormalized_density_kernel_is_caught_by_gauss_legendre():
    kernel = DensityKernel(sampler=lambda s, J, rng: rng.uniform(-1, 2, size=(len(s), J, 1)),
                           log_density=lambda s, a: np.zeros(len(a)), low=-1.0, high=2.0)  # integrates to 3
    with pytest.raises(ValueError, match="integrates to 3"):
        GaussLegendre(8).nodes(kernel, STATES)


def test_behavior_kernel_uses_the_policy_mixture(rng):
    X = rng.normal(size=(500, 1))
    A = 0.5 * X + 0.3 * rng.normal(size=(500, 1))
    density = LinearGaussianDensity().fit(X, A)
    kernel = BehaviorKernel().bind(R1, density)
    nodes = GaussHermite(6).nodes(kernel, STATES)
    np.testing.assert_allclose(nodes.integrate(nodes.actions[..., 0]), density.mean(STATES)[:, 0], atol=1e-12)
    assert MonteCarlo(8).nodes(kernel, STATES, rng).actions.shape == (7, 8, 1)


def test_gaussian_reference_log_density():
    ref = GaussianReference(mean=1.0, scale=2.0)
    a = np.array([[1.0], [3.0]])
    np.testing.assert_allclose(ref.log_density(a), -np.log(2.0) - 0.5 * np.log(2 * np.pi) - 0.5 * np.array([0, 1]))
