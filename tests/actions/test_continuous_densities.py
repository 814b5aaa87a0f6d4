"""Stage-1 conditional densities: one interface, stated support, normalization checks."""

import numpy as np
import pytest
from sklearn.base import clone

from genpqr.actions import FixedGaussianDensity, KnownDensity, LinearGaussianDensity, SquashedDensity
from genpqr.actions._densities import check_normalized
from genpqr.models._neural_densities import FlowDensity, MLPGaussianDensity, MixtureDensityNetwork
from genpqr.exceptions import NotFittedError


def _hetero(rng, n=4000):
    X = rng.normal(size=(n, 1))
    A = 0.5 - 0.8 * X + np.exp(-0.7 + 0.4 * X) * rng.normal(size=(n, 1))
    return X, A


def _true_hetero_logp(X, A):
    mean, sd = 0.5 - 0.8 * X[:, 0], np.exp(-0.7 + 0.4 * X[:, 0])
    return -0.5 * ((A[:, 0] - mean) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)


def test_linear_gaussian_recovers_parameters(rng):
    X, A = _hetero(rng)
    homo = LinearGaussianDensity().fit(X, A)
    het = LinearGaussianDensity(heteroscedastic=True).fit(X, A)
    grid = np.array([[-1.0], [0.0], [1.0]])
    np.testing.assert_allclose(het.mean(grid)[:, 0], 0.5 - 0.8 * grid[:, 0], atol=0.05)
    np.testing.assert_allclose(het.scale(grid)[:, 0], np.exp(-0.7 + 0.4 * grid[:, 0]), rtol=0.06)
    assert np.ptp(homo.scale(grid)) == 0.0
    Xt, At = _hetero(np.random.default_rng(7), 2000)
    nll = {name: -np.mean(d.log_prob(Xt, At)) for name, d in (("homo", homo), ("het", het))}
    assert nll["het"] < nll["homo"]
    assert nll["het"] == pytest.approx(-np.mean(_true_hetero_logp(Xt, At)), abs=0.02)
    assert het.reference_measure == "Lebesgue measure on R^1"


def test_weighted_fit_equals_repeated_rows(rng):
    X, A = _hetero(rng, 300)
    w = rng.integers(1, 4, size=300)
    a = LinearGaussianDensity(degree=2, heteroscedastic=True).fit(X, A, sample_weight=w)
    b = LinearGaussianDensity(degree=2, heteroscedastic=True).fit(np.repeat(X, w, 0), np.repeat(A, w, 0))
    np.testing.assert_allclose(a.log_prob(X[:20], A[:20]), b.log_prob(X[:20], A[:20]), atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: LinearGaussianDensity(degree=2, heteroscedastic=True),
    lambda: SquashedDensity(LinearGaussianDensity(), low=-3.0, high=4.0),
    lambda: MixtureDensityNetwork(n_components=2, hidden_layer_sizes=(16,), max_epochs=15, random_state=0),
    lambda: MLPGaussianDensity(hidden_layer_sizes=(16,), max_epochs=15, random_state=0),
])
def test_interface_and_normalization(make, rng):
    X, A = _hetero(rng, 1500)
    A = np.clip(A, -2.9, 3.9)
    density = make()
    with pytest.raises(NotFittedError):
        density.log_prob(X[:2], A[:2])
    clone(density).fit(X, A)
    density.fit(X, A)
    assert density.log_prob(X[:5], A[:5]).shape == (5,)
    draws = density.sample(X[:5], 7, random_state=0)
    assert draws.shape == (5, 7, 1)
    np.testing.assert_array_equal(draws, density.sample(X[:5], 7, random_state=0))
    assert density.support_.contains(draws).all()
    integrals = check_normalized(density, X[:6])
    np.testing.assert_allclose(integrals, 1.0, atol=5e-3)
    with pytest.raises(ValueError, match="action dimension"):
        density.log_prob(X[:2], np.zeros((2, 2)))


def test_squashed_density_support_and_jacobian(rng):
    X = rng.normal(size=(2000, 1))
    A = np.tanh(0.3 * X + 0.5 * rng.normal(size=(2000, 1)))  # in (-1, 1)
    density = SquashedDensity(LinearGaussianDensity(), low=-1.0, high=1.0).fit(X, A)
    assert density.reference_measure == "Lebesgue measure on [-1, 1]"
    # the Jacobian makes it a density on the box: compare with the latent density by change of variables
    x = np.arctanh(A[:5])
    expected = density.base_.log_prob(X[:5], x) - np.log1p(-A[:5, 0] ** 2)
    np.testing.assert_allclose(density.log_prob(X[:5], A[:5]), expected)
    with pytest.raises(ValueError, match=r"outside the stated support \[-1, 1\]"):
        density.fit(X, A * 2.0)
    with pytest.raises(ValueError, match=r"outside the stated support"):
        density.log_prob(X[:1], [[1.5]])
    with pytest.raises(ValueError, match="finite low and high"):
        SquashedDensity(low=None, high=1.0).fit(X, A)


def test_mixture_density_network_fits_a_bimodal_policy(rng):
    n = 3000
    X = rng.uniform(-1, 1, size=(n, 1))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    A = (sign * (1.0 + 0.5 * X[:, 0]) + 0.2 * rng.normal(size=n))[:, None]
    mdn = MixtureDensityNetwork(n_components=3, hidden_layer_sizes=(32,), max_epochs=80, random_state=0).fit(X, A)
    gauss = LinearGaussianDensity(degree=2, heteroscedastic=True).fit(X, A)
    Xt = rng.uniform(-1, 1, size=(1000, 1))
    st = np.where(rng.random(1000) < 0.5, -1.0, 1.0)
    At = (st * (1.0 + 0.5 * Xt[:, 0]) + 0.2 * rng.normal(size=1000))[:, None]
    true_nll = 0.5 + np.log(0.2 * np.sqrt(2 * np.pi)) + np.log(2.0)  # about 0.50 (modes well separated)
    assert -np.mean(mdn.log_prob(Xt, At)) < true_nll + 0.15
    assert -np.mean(gauss.log_prob(Xt, At)) > true_nll + 0.5
    np.testing.assert_allclose(check_normalized(mdn, Xt[:4]), 1.0, atol=5e-3)


def test_known_densities_and_unnormalized_ones_are_caught(rng):
    X = rng.normal(size=(10, 1))
    fixed = FixedGaussianDensity(gain=[[0.5]], offset=0.1, cov=[[0.25]])
    np.testing.assert_allclose(check_normalized(fixed, X), 1.0, atol=1e-6)
    bad = KnownDensity(log_prob_fn=lambda s, a: -0.5 * a[:, 0] ** 2,  # missing -log sqrt(2 pi)
                       sample_fn=lambda s, J, r: r.normal(size=(len(s), J, 1)))
    with pytest.raises(ValueError, match=r"not a normalized density .* integrates to 2.50"):
        check_normalized(bad, X)


def test_flow_density_fits_and_is_normalized(rng):
    X, A = _hetero(rng, 600)
    flow = FlowDensity(transforms=1, hidden_features=(16,), max_epochs=5, random_state=0)
    flow.fit(X, A)
    assert flow.sample(X[:3], 4, random_state=0).shape == (3, 4, 1)
    np.testing.assert_allclose(check_normalized(flow, X[:3]), 1.0, atol=1e-2)


def test_flow_density_without_zuko_says_how_to_install(rng, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "zuko", None)  # import zuko -> ImportError
    X, A = _hetero(rng, 50)
    with pytest.raises(ImportError, match="pip install zuko"):
        FlowDensity(transforms=1, hidden_features=(8,), max_epochs=1, random_state=0).fit(X, A)
