"""Welfare of a counterfactual in utility and in money (issue 32, item 4), and the compact table.

The check the issue asks for: the bus engine's welfare of doubling the replacement cost, in units
of RC, with its intervals, against a plain-numpy log-sum computation. The reference here solves
the soft Bellman equation by Newton-Kantorovich steps on dense matrices, takes the baseline's stationary
distribution from its balance equations, averages the log-sums ``V = log sum_a exp Q`` over it,
and reruns the same arithmetic for the delta method (the library's steps, a hundredth of a
standard error) and for each bootstrap replicate (the library's re-estimates, drawn again with
the same seed).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from genpqr import GenPQR, normalization as N
from genpqr.counterfactuals import WelfareResult, counterfactual, load_counterfactual
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.exceptions import ExtrapolationWarning
from genpqr.evaluation import bootstrap
from genpqr.stage1 import FrequencyClassifier
from genpqr.structural import fit_structural
from genpqr.structural._kernels import IncrementKernel

NAMES = ["RC", "theta11"]


def dense(kernel):
    S, K = kernel.n_states, kernel.n_actions
    return kernel.matrix.toarray().reshape(S, K, S).transpose(1, 0, 2)


def plain_solve(u, P, beta):
    """``(V, policy)`` with ``V = logsumexp_a (u + beta P V)``, in dense numpy: Newton-Kantorovich
    steps ``V <- V + (I - beta P_pi)^-1 (T V - V)`` (Rust's NFXP polish), until the residual of
    the soft Bellman equation stops falling (values of order 1 / (1 - beta) make the correction
    form the precise one)."""
    S = u.shape[0]
    V, best, stalled = np.zeros(S), np.inf, 0
    for _ in range(200):
        Q = u + beta * np.einsum("ast,t->sa", P, V)
        TV = logsumexp(Q, axis=1)
        residual = np.max(np.abs(TV - V))
        stalled = stalled + 1 if residual >= 0.5 * best else 0
        best = min(best, residual)
        if residual == 0.0 or (stalled >= 2 and residual <= 1e-9 * max(1.0, np.max(np.abs(TV)))):
            break
        pi = np.exp(Q - TV[:, None])
        V = V + np.linalg.solve(np.eye(S) - beta * np.einsum("sa,ast->st", pi, P), TV - V)
    Q = u + beta * np.einsum("ast,t->sa", P, V)
    return logsumexp(Q, axis=1), np.exp(Q - logsumexp(Q, axis=1, keepdims=True))


def plain_stationary(policy, P):
    M = np.einsum("sa,ast->st", policy, P)
    A = np.vstack([np.eye(M.shape[0]) - M.T, np.ones(M.shape[0])])
    b = np.zeros(M.shape[0] + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(A, b, rcond=None)[0]


def plain_welfare(theta, X, P, beta):
    """``[W, W', W' - W, (the same) / RC]`` of doubling RC at ``theta``: the baseline's
    stationary distribution, the log-sums of both scenarios."""
    V, policy = plain_solve(X @ theta, P, beta)
    V2, _ = plain_solve(X @ (theta * [2.0, 1.0]), P, beta)
    d = plain_stationary(policy, P)
    w = np.array([d @ V, d @ V2, d @ V2 - d @ V])
    return np.concatenate([w, w / theta[0]])


@pytest.fixture(scope="module")
def bus():
    """The panel of docs/counterfactuals.md (90 bins, beta = 0.9999, 37 buses x 117 months) with
    Rust's flow utility: replacing costs RC, u(x, replace) = -RC. The first stage is smoothed cell
    frequencies (quick to refit per bootstrap replicate; the MLE does not depend on it)."""
    truth = bus_engine(n_states=90, beta=0.9999, rc=10.075, theta11=2.293, theta3=(0.3919, 0.5953, 0.0128))
    panel = simulate_buses(truth, n_buses=37, n_periods=117, random_state=0).transitions
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GenPQR(N.anchor_action("replace"), gamma=0.9999, q_model="exact", n_states=90,
                       policy_model=FrequencyClassifier(90, smoothing=0.5),
                       transition_model=IncrementKernel(2, "replace")).fit(panel)
        fit = fit_structural(model, truth.features("rust"), names=NAMES)
    return truth, model, fit


def _quiet(fun, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fun(*args, **kwargs)


def test_welfare_of_doubling_rc_in_rc_units_matches_plain_numpy(bus):
    truth, model, fit = bus
    res = _quiet(fit.counterfactual, {"RC": "*2"}, model=model, money_parameter="RC")
    w = res.welfare
    P, X, beta = dense(fit.kernel), fit.features, fit.gamma
    ref = plain_welfare(fit.theta, X, P, beta)
    assert w.distribution == "stationary" and w.money_parameter == "RC" and w.money_value == fit.theta[0]
    got = np.array([w.baseline, w.counterfactual, w.change, w.baseline / w.money_value,
                    w.counterfactual / w.money_value, w.money_change])
    np.testing.assert_allclose(got, ref, rtol=1e-8)
    # the delta method: the same steps and covariance, plain arithmetic
    se = np.sqrt(np.diag(fit.cov))
    J = np.empty((6, 2))
    for j in range(2):
        h = np.zeros(2)
        h[j] = 1e-2 * se[j]
        J[:, j] = (plain_welfare(fit.theta + h, X, P, beta) - plain_welfare(fit.theta - h, X, P, beta)) / (2 * h[j])
    ref_se = np.sqrt(np.einsum("ij,jk,ik->i", J, fit.cov, J))
    z = norm.ppf(0.975)
    np.testing.assert_allclose(w.delta.std_error, ref_se, rtol=1e-8)
    np.testing.assert_allclose(w.delta.low, ref - z * ref_se, rtol=1e-8)
    np.testing.assert_allclose(w.delta.high, ref + z * ref_se, rtol=1e-8)
    frame = w.to_frame().set_index(["unit", "horizon"])
    money = frame.loc[("RC units", "lump sum")]
    assert money.change == w.money_change and money.change_lo_delta == pytest.approx(ref[5] - z * ref_se[5], rel=1e-8)
    per = frame.loc[("RC units", "per period")]
    assert per.change == pytest.approx((1 - beta) * ref[5], rel=1e-8)
    # doubling the cost is a loss, and by the envelope theorem (V convex in RC) per bus-month it is
    # at most the baseline's long-run replacement rate times RC
    rate = res.to_frame().set_index(["distribution", "statistic"]).loc[("stationary", "rate[replace]"), "baseline"]
    assert -rate < per.change < 0 and money.change_hi_delta < 0


@pytest.fixture(scope="module")
def boot(bus):
    """Doubling RC with 3 bootstrap replicates over buses."""
    _, model, fit = bus
    return _quiet(fit.counterfactual, {"RC": "*2"}, model=model, money_parameter="RC", n_boot=3, random_state=7)


def test_bootstrap_welfare_replicates_match_plain_numpy(bus, boot):
    truth, model, fit = bus
    res = boot
    reps = res.welfare.bootstrap
    assert reps.shape == (3, 2, 2) and res.interval_kind == "bootstrap"

    def plain(replicate):  # the library's re-estimate on the same resample, then plain-numpy welfare
        refit = fit.refit(replicate)
        return plain_welfare(refit.theta, refit.features, dense(refit.kernel), refit.gamma)

    ref = _quiet(bootstrap, model, model.training_data_, n_boot=3, statistic=plain, random_state=7,
                 fitted=model).replicates
    np.testing.assert_allclose(reps[:, :, 0], ref[:, :2], rtol=1e-8)
    np.testing.assert_allclose(reps[:, 0, 1] * ref[:, 5], ref[:, 2], rtol=1e-8)  # each replicate's own RC
    _, low, high = res.welfare.intervals("bootstrap")[("RC units", "lump sum")]
    np.testing.assert_allclose([low[2], high[2]], np.quantile(ref[:, 5], [0.025, 0.975]), rtol=1e-8)
    # both kinds are there; the summary shows the bootstrap's
    assert res.welfare.kinds() == ["delta", "bootstrap"]
    table = res.conf_int().loc["welfare (RC units)"]
    assert table.kind == "bootstrap percentile" and table.change_lower == pytest.approx(low[2], rel=1e-12)


def test_welfare_level_depends_on_where_the_utility_is(bus):
    """u(x, replace) = 0 (keeping earns RC each month) chooses as Rust's u(x, replace) = -RC, but
    adds RC to every action: doubling RC is then a gain of exactly RC / (1 - beta) more."""
    truth, model, fit = bus
    anchor = _quiet(fit_structural, model, truth.features("anchor"), names=NAMES)
    np.testing.assert_allclose(anchor.theta, fit.theta, rtol=1e-7)
    rust = _quiet(fit.counterfactual, {"RC": "*2"}, model=model).welfare
    gain = _quiet(anchor.counterfactual, {"RC": "*2"}, model=model).welfare
    assert rust.change < 0 < gain.change
    assert gain.change - rust.change == pytest.approx(anchor.theta[0] / (1 - fit.gamma), rel=1e-6)


def test_known_reward_change_welfare_is_the_same_under_every_normalization(bus):
    """The nonparametric route: a known change of the flow payoff moves V by the same amount under
    every normalization (shaping shifts V and V' alike), so its welfare change is identified."""
    _, model, _ = bus
    one = _quiet(counterfactual, model, {"replace": -2.0}, route="nonparametric").welfare
    other = _quiet(counterfactual, _quiet(model.renormalize, N.mean_zero()), {"replace": -2.0},
                   route="nonparametric").welfare
    assert one.identified and one.money_parameter is None and np.isnan(one.money_change)
    assert one.change == pytest.approx(other.change, rel=1e-8)
    assert abs(one.baseline - other.baseline) > 1.0  # the levels are not identified
    assert one.change < 0


def test_initial_distribution_welfare_is_the_initial_value(bus):
    _, model, fit = bus
    res = _quiet(fit.counterfactual, {"RC": "*2"}, model=model, initial=0, money_parameter="RC")
    w = res.welfare
    assert w.distribution == "initial"
    assert w.baseline == res.baseline.initial_value and w.counterfactual == res.counterfactual.initial_value
    row = res.to_frame().set_index(["distribution", "statistic"]).loc[("initial", "value")]
    assert row.difference == pytest.approx(w.change, rel=1e-12)
    assert row.difference_lo == pytest.approx(w.delta.low[2], rel=1e-6)


def test_money_parameter_errors_name_the_argument(bus):
    _, model, fit = bus
    with pytest.raises(ValueError, match="money_parameter must name a parameter of the structural fit"):
        fit.counterfactual({"RC": "*2"}, model=model, money_parameter="price")
    with pytest.raises(ValueError, match="needs the structural route"):
        counterfactual(model, {"replace": -1.0}, structural=fit, route="nonparametric", money_parameter="RC")
    flipped = fit.with_cov_type("opg")
    object.__setattr__(flipped, "theta", fit.theta * [-1.0, 1.0])
    with pytest.raises(ValueError, match="must be positive; write its feature as money received"):
        flipped.counterfactual({"RC": "*2"}, money_parameter="RC")


def test_summary_fits_100_columns_and_conf_int_says_its_kind(bus, tmp_path):
    _, model, fit = bus
    res = _quiet(fit.counterfactual, {"RC": "*2"}, model=model, money_parameter="RC")
    summary = res.summary()
    text = summary.as_text()
    assert max(len(line) for line in text.splitlines()) <= 100 and str(summary) == text
    for needle in ("Counterfactual results", "RC multiply by 2", "delta method (95%", "Thin support:",
                   "stationary rate[replace]", "welfare (RC units)", "per period (RC units)", "[0.025"):
        assert needle in text
    table = summary.to_frame()
    frame = res.to_frame().set_index(["distribution", "statistic"])
    rate = table.loc["stationary rate[replace]"]
    assert rate.counterfactual == frame.loc[("stationary", "rate[replace]"), "counterfactual"]
    assert rate.change_lower == frame.loc[("stationary", "rate[replace]"), "difference_lo"]
    assert table.loc["welfare (RC units)", "change"] == res.welfare.money_change
    ci = res.conf_int()
    assert list(ci.columns) == ["baseline_lower", "baseline_upper", "counterfactual_lower", "counterfactual_upper",
                                "change_lower", "change_upper", "kind"] and set(ci.kind) == {"delta method"}
    with pytest.raises(ValueError, match="computed at level 0.95"):
        res.conf_int(alpha=0.1)
    assert summary.as_html().count("<table") == 2 and "\\begin{tabular}" in summary.as_latex()
    # saved and loaded, the welfare comes back
    res.save(tmp_path / "cf.npz")
    back = load_counterfactual(tmp_path / "cf.npz")
    assert isinstance(back.welfare, WelfareResult) and back.welfare.money_change == res.welfare.money_change
    assert back.summary().as_text() == text


def test_bootstrap_intervals_can_be_read_at_another_level(boot):
    res = boot
    ci = res.conf_int(alpha=0.2)
    reps = res.bootstrap[:, 1] - res.bootstrap[:, 0]
    keys = res.summary_keys()
    np.testing.assert_allclose(ci.change_lower.iloc[:len(keys)], np.quantile(reps, 0.1, axis=0), rtol=1e-12)
    assert "bootstrap percentile over episodes (80%" in res.summary(level=0.8).as_text()
    with pytest.raises(ValueError, match="give alpha or level"):
        res.summary(alpha=0.1, level=0.9)


def test_a_change_that_pushes_a_rate_to_a_corner_shows_no_zero_width_interval(bus):
    """RC multiplied by 1e3: nobody replaces any more. The delta method's interval of that rate
    collapses to a point; the summary shows none, says why, and a warning names the rate (issue 33)."""
    truth, model, fit = bus
    with pytest.warns(ExtrapolationWarning, match=r"corner \(.*stationary rate\[replace\]"):
        res = fit.counterfactual({"RC": "*1e3"}, model=model)
    table = res.summary().table
    row = table.loc["stationary rate[replace]"]
    assert row["counterfactual"] < 1e-6 and np.isnan(row["counterfactual_lower"]) and np.isnan(row["change_upper"])
    kept = table.loc["welfare (utility)"]  # rows that are not rates keep their intervals
    assert kept["counterfactual_lower"] < kept["counterfactual_upper"]
    assert "pushes the model to a corner" in res.summary().as_text()
    modest = _quiet(fit.counterfactual, {"RC": "*2"}, model=model)  # no corner: every interval shown
    assert np.isfinite(modest.summary().table.loc["stationary rate[replace]", "counterfactual_lower"])
    assert "corner" not in modest.summary().as_text()
