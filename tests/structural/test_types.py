"""Latent types in structural estimation: the mixture MLE, the sequential CCP-EM, their
agreement with the single-type estimators, the known-types M-step, scores and warnings."""

import warnings
from dataclasses import replace

import numpy as np
import pytest

from genpqr.envs._rust import TYPED_RC, bus_engine, simulate_typed_buses
from genpqr.exceptions import ConvergenceWarning, GenPQRWarning
from genpqr.structural import estimate_structural, type_counterfactuals
from genpqr.structural._type_counterfactuals import type_fit
from genpqr.structural._kernels import choice_counts
from genpqr.structural._type_model import Mixing, as_episode_choices, build_type_space, evaluate_mixture
from genpqr.structural._types import LatentTypeWarning, TypedStructuralFit, check_types, estimate_types, m_step

S = 60
NAMES = ["RC", "theta11"]


def engines(rcs=TYPED_RC):
    return tuple(bus_engine(n_states=S, rc=rc, cost_scale=0.005) for rc in rcs)


def panel(n_buses=60, months=150, seed=0, rcs=TYPED_RC, **kwargs):
    return simulate_typed_buses(engines(rcs), n_buses, months, random_state=seed, **kwargs)


def episodes_of(p):
    tr = p.transitions
    return (tr.episode_ids, tr.states, tr.actions)


@pytest.fixture(scope="module")
def typed_panel():
    return panel()


@pytest.fixture(scope="module")
def mle(typed_panel):
    m = engines()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        return estimate_types("npl", m.features("rust"), episodes_of(typed_panel), m.kernel, m.beta, n_types=2,
                              type_specific=["RC"], names=NAMES)


def test_simulated_types_per_bus():
    p = panel(n_buses=40, months=5, seed=3, mixing=(0.25, 0.75))
    assert p.types.shape == (40,)
    assert set(np.unique(p.types)) <= {0, 1}
    assert np.array_equal(p.frame.groupby("bus")["type"].first().to_numpy(), p.types)
    rewards = np.asarray(p.transitions.rewards)
    replace = p.frame.action.to_numpy() == "replace"
    assert np.allclose(rewards[replace], -np.asarray(TYPED_RC)[p.frame.type.to_numpy()[replace]])
    with pytest.raises(ValueError, match="mixing"):
        simulate_typed_buses(engines(), 5, 5, mixing=(0.5, 0.6))


@pytest.mark.parametrize("estimator", ["npl", "nfxp", "ccp-em"])
def test_one_type_equals_the_single_type_estimator(typed_panel, estimator):
    m = engines()[0]
    X, tr = m.features("rust"), typed_panel.transitions
    reference = estimate_structural("npl" if estimator == "ccp-em" else estimator, X, choice_counts(tr, S), m.kernel,
                                    m.beta, names=NAMES)
    typed = estimate_structural(estimator, X, None, m.kernel, m.beta, names=NAMES, episodes=tr, n_types=1,
                                em_tol=1e-12)
    assert isinstance(typed, TypedStructuralFit)
    assert typed.names == NAMES
    np.testing.assert_allclose(typed.theta, reference.theta, rtol=0, atol=1e-8)
    assert typed.loglik == pytest.approx(reference.loglik, abs=1e-8)
    np.testing.assert_allclose(typed.mixing_proportions, [1.0])


def test_known_types_m_step_equals_separate_fits(typed_panel):
    m = engines()[0]
    X, tr = m.features("rust"), typed_panel.transitions
    space = build_type_space(X, m.kernel, m.beta, 2, type_specific="all", names=NAMES)
    data = as_episode_choices(tr, S, 2)
    weights = np.eye(2)[typed_panel.types]  # the true types, fixed
    theta = m_step(space, data, weights)
    for t in range(2):
        rows = typed_panel.types[tr.episode_ids] == t
        counts = choice_counts(tr.subset(rows), S)
        alone = estimate_structural("npl", X, counts, m.kernel, m.beta, names=NAMES)
        np.testing.assert_allclose(space.type_params(theta)[t], alone.theta, rtol=0, atol=1e-8)


def test_mixture_scores_are_the_gradient(typed_panel):
    m = engines()[0]
    space = build_type_space(m.features("rust"), m.kernel, m.beta, 2, type_specific=["RC"], names=NAMES)
    data = as_episode_choices(typed_panel.transitions, S, 2)
    mixing = Mixing.of(data.n_episodes, 2, covariates=np.arange(data.n_episodes) % 3)
    params = np.array([9.5, 12.5, 2.2, 0.3, -0.1])
    ev = evaluate_mixture(space, data, mixing, params)
    for j in range(params.size):
        h = 1e-5
        up, down = params.copy(), params.copy()
        up[j] += h
        down[j] -= h
        numeric = (evaluate_mixture(space, data, mixing, up).loglik
                   - evaluate_mixture(space, data, mixing, down).loglik) / (2 * h)
        assert ev.grad[j] == pytest.approx(numeric, rel=1e-5, abs=1e-5)
    np.testing.assert_allclose(ev.episode_scores.sum(axis=0), ev.grad)


def test_types_stay_in_order_on_a_small_panel():
    m = engines()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        fit = estimate_types("npl", m.features("rust"), episodes_of(panel(n_buses=20, months=50)), m.kernel, m.beta,
                             n_types=2, type_specific=["RC"], names=NAMES)
    assert fit.theta[0] <= fit.theta[1]
    space, lp = fit.space, np.log(fit.mixing_proportions)
    assert fit.mixing_params[0] == pytest.approx(lp[1] - lp[0])


def test_mixture_mle_is_a_maximum_and_ccp_em_reaches_it(typed_panel, mle):
    assert mle.converged
    assert mle.names == ["RC[type 0]", "RC[type 1]", "theta11"]
    assert mle.theta[0] < mle.theta[1]  # types labelled by RC, ascending
    truth = evaluate_mixture(mle.space, mle.data, Mixing.of(mle.n_episodes, 2), [*TYPED_RC, 2.4569, 0.0])
    assert mle.loglik >= truth.loglik
    assert np.all(np.isfinite(mle.std_error)) and np.all(np.isfinite(mle.std_error_robust))
    assert np.all(np.abs(mle.theta - [*TYPED_RC, 2.4569]) < 4 * mle.std_error)
    assert mle.mixing_proportions.sum() == pytest.approx(1.0)
    assert mle.aic == pytest.approx(2 * 4 - 2 * mle.loglik)
    assert mle.bic == pytest.approx(4 * np.log(60) - 2 * mle.loglik)
    m = engines()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        ccp = estimate_types("ccp-em", m.features("rust"), episodes_of(typed_panel), m.kernel, m.beta, n_types=2,
                             type_specific=["RC"], names=NAMES, em_tol=1e-9)
    assert ccp.converged
    assert np.all(np.abs(ccp.theta - mle.theta) < 1e-3 * mle.std_error)
    assert np.all(np.isnan(ccp.std_error))


def test_results_tables(mle):
    frame = mle.posterior_frame()
    assert list(frame.columns) == ["episode", "posterior_type_0", "posterior_type_1"]
    np.testing.assert_allclose(frame.iloc[:, 1:].sum(axis=1), 1.0)
    table = mle.to_frame()
    assert list(table.index) == mle.names + mle.mixing_names
    types = mle.type_params()
    assert list(types.columns) == ["RC", "theta11", "mixing_proportion"]
    assert types.theta11.nunique() == 1
    text = str(mle.summary())
    assert "AIC" in text and "mixing proportions" in text and "RC[type 1]" in text
    # statsmodels' names cover every parameter, the mixing ones included; the observations are episodes
    assert list(mle.params.index) == mle.names + mle.mixing_names and mle.nobs == mle.n_episodes
    np.testing.assert_array_equal(mle.params, table.estimate)
    np.testing.assert_array_equal(mle.bse, table.std_error)
    np.testing.assert_allclose(mle.pvalues, table.p_value, rtol=1e-12)
    assert mle.df_model == mle.n_params and mle.df_resid == mle.n_episodes - mle.n_params and mle.llf == mle.loglik
    assert mle.aic == 2 * mle.n_params - 2 * mle.loglik
    assert mle.bic == mle.n_params * np.log(mle.n_episodes) - 2 * mle.loglik
    np.testing.assert_array_equal(mle.cov_params().to_numpy(), mle.cov)
    ci = mle.conf_int(alpha=0.1)
    np.testing.assert_allclose(ci.upper - mle.params, 1.6448536269514722 * mle.bse, rtol=1e-12)
    assert max(len(line) for line in text.splitlines()) <= 100 and "\\begin{tabular}" in mle.summary().as_latex()
    assert mle.type_policy(1).shape == (S, 2)


def test_counterfactual_per_type(mle):
    base = [type_fit(mle, m) for m in range(2)]
    for m, fit in enumerate(base):
        assert fit.names == NAMES and fit.theta[0] == mle.theta[m] and fit.theta[1] == mle.theta[2]
        np.testing.assert_allclose(fit.std_error, mle.std_error[[m, 2]])
        # the type's fitted policy is the soft-optimal policy of its flow utility under its kernel
        from genpqr.stage2 import soft_optimal_solution
        solved = soft_optimal_solution(fit.flow_utility(), fit.kernel, fit.gamma, tol=1e-13).policy
        np.testing.assert_allclose(fit.policy, solved, atol=1e-8)
    table = type_counterfactuals(mle, parameter_change={"RC": "*2"})
    per_type = table[table.type != "mixture"]
    mixture = table[table.type == "mixture"].set_index(["distribution", "statistic"])
    for key, rows in per_type.groupby(["distribution", "statistic"]):
        for column in ("baseline", "counterfactual", "difference"):
            expected = float(np.sum(rows[column] * mle.mixing_proportions[rows.type.astype(int)]))
            assert mixture.loc[key, column] == pytest.approx(expected, abs=1e-12)
    rate = per_type[per_type.statistic == "rate[1]"]  # action code 1: replace
    assert len(rate) == 2 and np.all(rate.difference < 0)  # doubling the replacement cost lowers it for each type
    with pytest.raises(ValueError, match="type"):
        type_fit(mle, 2)


def test_bootstrap_over_episodes(mle):
    boot = mle.bootstrap(2, random_state=0)
    assert boot.replicates.shape == (2, 4) and boot.failed == 0
    assert np.all(np.isfinite(boot.std_error))


def test_mixing_covariates_and_type_kernels():
    m = engines()[0]
    tr = panel(n_buses=30, months=100, seed=2).transitions
    first = tr.states[np.r_[0, np.flatnonzero(np.diff(tr.episode_ids)) + 1], 0] / S
    kw = dict(n_types=2, type_specific=["RC"], names=NAMES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        fit = estimate_types("npl", m.features("rust"), tr, m.kernel, m.beta, mixing_covariates=first,
                             covariate_names=["initial mileage"], **kw)
        shared = estimate_types("npl", m.features("rust"), tr, m.kernel, m.beta, **kw)
        typed_kernels = estimate_types("npl", m.features("rust"), tr, [m.kernel, m.kernel], m.beta, **kw)
    assert fit.mixing_names == ["mixing[type 1]: const", "mixing[type 1]: initial mileage"]
    assert fit.loglik >= shared.loglik - 1e-8
    # equal known kernels: the transitions' likelihood is the same under both types and cancels
    np.testing.assert_allclose(typed_kernels.theta, shared.theta, atol=1e-5)


def test_warns_when_types_are_not_separated_or_empty(mle):
    with warnings.catch_warnings():
        warnings.simplefilter("error", LatentTypeWarning)
        check_types(mle)  # the simulated types are separated: no warning
    flat = np.broadcast_to(np.exp(mle.log_prior), mle.posteriors.shape)  # posteriors at the prior
    with pytest.warns(LatentTypeWarning, match="barely separate the 2 latent types.*per-type parameters"):
        check_types(replace(mle, posteriors=flat))
    n = mle.posteriors.shape[0]
    emptied = np.column_stack([np.ones(n), np.zeros(n)])
    emptied[0] = [0.5, 0.5]  # type 1: half an episode
    with pytest.warns(LatentTypeWarning, match="latent type 1 is empty.*per-type parameters"):
        check_types(replace(mle, posteriors=emptied, log_prior=np.log([0.99, 0.01])))


def test_one_warning_class_and_rule():
    """Both estimators warn with genpqr.LatentTypeWarning by the same rule and threshold."""
    import genpqr
    from genpqr.estimator import _latent_types as estimator_types
    from genpqr.estimator._latent_types import type_warnings
    from genpqr.stage1._latent_types import SEPARATION_WARN, latent_type_warnings
    from genpqr.structural import _estimation as estimation, _types as types

    assert genpqr.LatentTypeWarning is genpqr.exceptions.LatentTypeWarning is estimator_types.LatentTypeWarning \
        is types.LatentTypeWarning
    assert types.MIN_SEPARATION == estimator_types.SEPARATION_WARN == SEPARATION_WARN
    assert types.std_errors is estimation.std_errors  # one standard-error function for every fit
    # separated types at a 0.9/0.1 prior: separation share 0.158 of its ceiling 1 - sum prior^2 = 0.193, no warning
    q = np.array([[0.98, 0.02]] * 36 + [[0.1, 0.9]] * 4)
    lp = np.log(q.mean(axis=0))
    assert latent_type_warnings(q, lp, "x") == []
    assert type_warnings(q, lp) == []
    weak = 0.9 * np.exp(lp) + 0.1 * q  # 10% of the way: both warn, each naming its own outputs
    assert "per-type rewards" in type_warnings(weak, lp)[0]
    assert "x are in doubt" in latent_type_warnings(weak, lp, "x")[0]


def test_errors_name_their_argument(typed_panel):
    m = engines()[0]
    X, tr = m.features("rust"), typed_panel.transitions
    with pytest.raises(ValueError, match="episodes"):
        estimate_structural("npl", X, choice_counts(tr, S), m.kernel, m.beta, n_types=2)
    with pytest.raises(ValueError, match="type_specific"):
        estimate_types("npl", X, tr, m.kernel, m.beta, type_specific=["cost"], names=NAMES)
    with pytest.raises(ValueError, match="estimator"):
        estimate_types("pml", X, tr, m.kernel, m.beta)
    with pytest.raises(TypeError, match="episodes"):
        estimate_types("npl", X, 3, m.kernel, m.beta)


@pytest.mark.slow
def test_mixture_mle_unbiased_over_panels():
    """12 panels of 60 buses x 150 months (60 states): the mean estimate of each type's RC and of
    theta11 within 3 Monte Carlo standard errors of the truth (a loose tolerance for 12 panels)."""
    m = engines()[0]
    estimates = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        for seed in range(100, 112):
            fit = estimate_types("npl", m.features("rust"), episodes_of(panel(seed=seed)), m.kernel, m.beta,
                                 n_types=2, type_specific=["RC"], names=NAMES)
            estimates.append(fit.theta)
    estimates = np.array(estimates)
    bias = estimates.mean(axis=0) - [*TYPED_RC, 2.4569]
    mc_se = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    assert np.all(np.abs(bias) < 3 * mc_se + 1e-3), (bias, mc_se)


@pytest.mark.parametrize("estimator, postfix", [("npl", "gain"), ("ccp-em", "theta change")])
def test_progress_of_the_em(typed_panel, estimator, postfix, capsys, monkeypatch):
    """A bar over the EM's iterations (then Newton's, the full MLE) on stderr, with the log
    likelihood and its gain (CCP-EM: the change of theta), redrawn at every step here (no
    2-second delay, no 0.1-second interval); nothing with ``progress=False``."""
    import functools

    from genpqr.stage1 import _stage1

    monkeypatch.setattr(_stage1, "PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(_stage1, "tqdm", functools.partial(_stage1.tqdm, mininterval=0, miniters=1))
    m = engines()[0]
    args = (estimator, m.features("rust"), episodes_of(typed_panel), m.kernel, m.beta)
    kw = dict(n_types=2, type_specific=["RC"], names=NAMES, warn=False)
    estimate_types(*args, **kw, progress=False)
    assert capsys.readouterr().err == ""
    fit = estimate_types(*args, **kw, progress=True)
    err = capsys.readouterr().err
    assert f"latent types ({estimator}, 2 types): EM: 1it" in err and f"{postfix} " in err
    if estimator == "npl":
        assert f"Newton: {fit.iterations['Newton'] - 1}it" in err and "loglik -" in err


def test_parameters_without_a_standard_error_are_named(typed_panel):
    """A feature equal to RC's (``dup``): RC and dup of each type move no episode's likelihood
    apart, so the OPG is singular in their directions. The fit says which parameters have no
    standard error and what to do; the others keep theirs, and each type's RC + dup is the RC of
    the fit without dup, with its standard error (the generalized inverse on the identified
    directions)."""
    m = engines()[0]
    X = m.features("rust")
    X_dup = np.concatenate([X, X[..., :1]], axis=-1)
    kw = dict(n_types=2, type_specific=["RC"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        ref = estimate_types("nfxp", X, episodes_of(typed_panel), m.kernel, m.beta, names=NAMES, **kw)
    with pytest.warns(LatentTypeWarning) as caught:
        fit = estimate_types("nfxp", X_dup, episodes_of(typed_panel), m.kernel, m.beta, names=NAMES + ["dup"],
                             **dict(kw, type_specific=["RC", "dup"]))
    text = " ".join(str(w.message) for w in caught)
    assert fit.loglik == pytest.approx(ref.loglik, abs=1e-6)  # the same maximum, along another split
    for phrase in ("4 of 6 parameters of the nfxp fit with 2 latent types have no standard error: RC[type 0], "
                   "RC[type 1], dup[type 0], dup[type 1]", "the information matrix", "is singular in their directions",
                   "the data identify RC[type 0] + dup[type 0]", "fewer types (n_types)", "more episodes",
                   "type_specific=[...]"):
        assert phrase in text, text
    frame = fit.to_frame()
    assert frame.loc[["RC[type 0]", "RC[type 1]", "dup[type 0]", "dup[type 1]"], ["estimate", "std_error"]].isna().all().all()
    assert not frame.loc["RC[type 0]", "identified"] and frame.loc["theta11", "identified"]
    combos = frame.loc[["RC[type 0] + dup[type 0]", "RC[type 1] + dup[type 1]"]].sort_values("estimate")
    order = np.argsort(ref.theta[:2])  # the types in the order of RC (the split may order them otherwise)
    np.testing.assert_allclose(combos.estimate, ref.theta[order], rtol=1e-5)
    np.testing.assert_allclose(combos.std_error, ref.std_error[order], rtol=1e-5)
    assert frame.loc["theta11", "std_error"] == pytest.approx(ref.std_error[2], rel=1e-5)
    assert np.isfinite(fit.mixing_proportions_se).all() and fit.df_model == ref.df_model
    assert np.isnan(fit.bse["dup[type 1]"]) and np.isfinite(fit.aic)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LatentTypeWarning)
        check_types(ref)  # every parameter has a standard error: no such warning


@pytest.fixture(scope="module")
def no_dup(typed_panel):
    """The typed fit of the collinear tests' design without the copied column."""
    m = engines()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        return estimate_types("nfxp", m.features("rust"), episodes_of(typed_panel), m.kernel, m.beta, names=NAMES,
                              n_types=2, type_specific=["RC"])


def with_dup(typed_panel, estimator, **kw):
    """The fit with ``dup``, a copy of RC's column, type-specific like RC (the flat directions
    RC[type m] - dup[type m])."""
    m = engines()[0]
    X = m.features("rust")
    return estimate_types(estimator, np.concatenate([X, X[..., :1]], axis=-1), episodes_of(typed_panel), m.kernel,
                          m.beta, names=NAMES + ["dup"], n_types=2, type_specific=["RC", "dup"], **kw)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("estimator", ["npl", "nfxp"])
def test_collinear_type_specific_features_reach_the_maximum(typed_panel, no_dup, estimator, threads):
    """Exactly collinear type-specific features leave the mixture's Hessian and the M-step's logit
    singular along RC[type m] - dup[type m]: the EM's M-step and the Newton steps are taken on the
    identified directions, so npl (whose M-step once ran off to 6e15 along them, after which the EM
    stopped 94 below the maximum and reported "converged by Newton") and nfxp (which stopped 2e-4
    short, its answer depending on the BLAS threads) reach the maximum of the fit without dup, and
    say so, at any thread count."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", LatentTypeWarning)  # the parameters without a standard error
        warnings.simplefilter("error", ConvergenceWarning)
        fit = with_dup(typed_panel, estimator)
    assert fit.converged and fit.convergence.endswith("converged by Newton")
    assert fit.loglik == pytest.approx(no_dup.loglik, abs=1e-6)
    combos = fit.to_frame().loc[["RC[type 0] + dup[type 0]", "RC[type 1] + dup[type 1]"]].sort_values("estimate")
    order = np.argsort(no_dup.theta[:2])
    np.testing.assert_allclose(combos.estimate, no_dup.theta[order], rtol=1e-5)
    np.testing.assert_allclose(combos.std_error, no_dup.std_error[order], rtol=1e-5)
    np.testing.assert_allclose(fit.theta[2], no_dup.theta[2], rtol=1e-5)  # theta11, shared and identified
    assert np.all(np.abs(fit.theta) < 100)  # nothing ran off along the flat directions
    np.testing.assert_allclose(np.sort(fit.mixing_proportions), np.sort(no_dup.mixing_proportions), atol=1e-6)


def test_a_fit_stopped_early_says_not_converged(typed_panel, no_dup):
    """A fit stopped before the maximum (one EM step, one Newton step) reports NOT CONVERGED with a
    ConvergenceWarning naming it, never "converged by Newton"; the one on the collinear design too."""
    for estimator in ("npl", "nfxp"):
        with pytest.warns(ConvergenceWarning, match=f"the {estimator} fit with 2 types did not converge") as caught:
            warnings.simplefilter("ignore", LatentTypeWarning)
            fit = with_dup(typed_panel, estimator, em_max_iter=1, max_iter=1)
        assert fit.loglik < no_dup.loglik - 1e-3  # short of the maximum
        assert not fit.converged and "NOT CONVERGED" in fit.convergence and "converged by" not in fit.convergence
        assert any("NOT CONVERGED" in str(w.message) for w in caught)


def test_a_covariate_that_separates_the_types_is_named(typed_panel):
    """A mixing covariate equal to each bus's simulated type: every episode's prior type probability
    goes to 0 or 1 and the mixing logit's coefficients run off (to 1e6 here, 4e16 elsewhere) while
    Newton's decrement is at rounding level -- once reported "converged by Newton" with a warning that
    the types were barely separated. The fit names the covariate, says the coefficients are not
    finite (+-inf, no standard error), that it did not converge, and nothing else; a covariate that
    does not separate the types (the type plus noise) converges with finite standard errors."""
    m = engines()[0]
    kw = dict(n_types=2, type_specific=["RC"], names=NAMES, covariate_names=["fleet"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = estimate_types("npl", m.features("rust"), episodes_of(typed_panel), m.kernel, m.beta,
                             mixing_covariates=typed_panel.types.astype(float), **kw)
    messages = [str(w.message) for w in caught]
    assert [w.category for w in caught] == [LatentTypeWarning], messages
    for phrase in ("the mixing covariate fleet separates the latent types perfectly", "prior type probability is 0 "
                   "or 1", "mixing[type 1]: const, mixing[type 1]: fleet", "not finite",
                   "no standard error", "did not converge", "mixing_covariates"):
        assert phrase in messages[0], (phrase, messages[0])
    assert not fit.converged and "the MLE is at infinity" in fit.convergence and "converged by" not in fit.convergence
    assert fit.mixing_separated == ("mixing[type 1]: const", "mixing[type 1]: fleet")
    frame = fit.to_frame()
    assert frame.loc["mixing[type 1]: fleet", "estimate"] == np.inf
    assert frame.loc["mixing[type 1]: const", "estimate"] == -np.inf
    assert frame.loc[list(fit.mixing_separated), ["std_error", "ci_low", "ci_high", "p_value"]].isna().all().all()
    assert np.isnan(fit.mixing_proportions_se).all()
    # the proportions are those of the covariate's groups, the structural parameters finite with standard errors
    np.testing.assert_allclose(fit.mixing_proportions, np.bincount(typed_panel.types) / typed_panel.types.size)
    assert np.all(np.isfinite(fit.std_error)) and np.all(np.abs(fit.theta) < 100)
    noisy = typed_panel.types + np.random.default_rng(1).normal(size=typed_panel.types.size)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GenPQRWarning)
        overlap = estimate_types("npl", m.features("rust"), episodes_of(typed_panel), m.kernel, m.beta,
                                 mixing_covariates=noisy, **kw)
    assert overlap.converged and overlap.mixing_separated == ()
    assert np.all(np.isfinite(overlap.mixing_std_error)) and np.all(np.isfinite(overlap.to_frame().estimate))
