"""Counterfactuals on the structural model (the structural route), parameter changes, the
delta method, the other route's gap and support shares (:mod:`genpqr.counterfactuals`,
:mod:`genpqr.counterfactuals`, :mod:`genpqr.counterfactuals`)."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit, logsumexp
from scipy.stats import norm

import genpqr
from genpqr import GenPQR, normalization as N
from genpqr.app.cli import main
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.exceptions import ExtrapolationWarning
from genpqr.counterfactuals import support_report
from genpqr.counterfactuals._parametric_counterfactual import delta_method, parse_parameter_change
from genpqr.counterfactuals._support import off_support
from genpqr.counterfactuals._scenarios import solve_scenario
from genpqr.structural._estimation import fit_structural
from genpqr.structural._kernels import IncrementKernel
from genpqr.stage2._tabular import TransitionKernel

RATE = ("stationary", "rate[replace]")
CLI_RATE = ("stationary", "rate[1]")  # the CSV codes replacement as 1


def bus_features(n_states):
    """u(x, keep) = RC - 0.001 theta11 x, u(x, replace) = 0 (the docs' parametrization)."""
    X = np.zeros((n_states, 2, 2))
    X[:, 0, 0] = 1.0
    X[:, 0, 1] = -0.001 * np.arange(n_states)
    return X


def fit_panel(beta, n_states=90, seed=0, n_buses=37, n_periods=117, rc=10.075, theta11=2.293):
    truth = bus_engine(n_states=n_states, beta=beta, rc=rc, theta11=theta11, theta3=(0.3919, 0.5953, 0.0128))
    panel = simulate_buses(truth, n_buses=n_buses, n_periods=n_periods, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GenPQR(N.anchor_action("replace"), gamma=beta, q_model="exact", n_states=n_states,
                       transition_model=IncrementKernel(2, "replace")).fit(panel.transitions)
        sf = fit_structural(model, bus_features(n_states), names=["RC", "theta11"])
    return truth, panel, model, sf


@pytest.fixture(scope="module")
def bus():
    return fit_panel(0.9999)


@pytest.fixture(scope="module")
def bus95():
    """beta = 0.95, 40 bins, a steeper cost: about 240 replacements, mileage up to bin 25."""
    return fit_panel(0.95, n_states=40, rc=5.0, theta11=30.0)


def numpy_rate(u, P, beta):
    """Long-run replacement rate of the soft-optimal policy of ``(u, P, beta)``: Newton's method
    on the soft Bellman equation written out in dense numpy (each step solves for the correction
    ``(I - beta P_pi) dV = T V - V``, which keeps V at the rounding floor of its size even at
    beta = 0.9999) and the stationary law as the left eigenvector of eigenvalue 1 --
    independent of genpqr's solvers."""
    S = u.shape[0]
    V = logsumexp(u, axis=1)
    best = np.inf
    for _ in range(100):
        Q = u + beta * P @ V
        TV = logsumexp(Q, axis=1)
        residual = np.max(np.abs(TV - V))
        if residual >= best and residual < 1e-9 * np.max(np.abs(TV)):
            break  # at the rounding floor
        best = min(best, residual)
        pi = np.exp(Q - TV[:, None])
        V = V + np.linalg.solve(np.eye(S) - beta * np.einsum("sa,sat->st", pi, P), TV - V)
    Q = u + beta * P @ V
    pi = np.exp(Q - logsumexp(Q, axis=1, keepdims=True))
    P_pi = np.einsum("sa,sat->st", pi, P)
    w, vecs = np.linalg.eig(P_pi.T)
    d = np.real(vecs[:, np.argmin(np.abs(w - 1))])
    d = d / d.sum()
    return float(d @ pi[:, 1])


# ============================================================================ the structural route
def test_structural_route_equals_an_independent_solve(bus95):
    """RC x 2 on the structural route: the rate of the soft-optimal policy of x @ theta' under the fit's
    kernel, solved again in plain numpy, to 1e-9."""
    _, _, model, sf = bus95
    res = model.counterfactual(parameter_change={"RC": "*2"}, structural=sf, check_normalization=False)
    frame = res.to_frame().set_index(["distribution", "statistic"])
    theta = sf.theta * [2.0, 1.0]
    P = sf.kernel.dense()
    assert frame.loc[RATE, "counterfactual"] == pytest.approx(numpy_rate(sf.features @ theta, P, 0.95),
                                                              abs=1e-9)
    assert frame.loc[RATE, "baseline"] == pytest.approx(numpy_rate(sf.features @ sf.theta, P, 0.95), abs=1e-9)
    assert res.route == "structural" and res.parameter_change == "RC multiply by 2"
    np.testing.assert_allclose(res.baseline.policy, sf.policy, atol=1e-8)  # the fitted structural model


def test_structural_route_at_beta_near_one_matches_numpy(bus):
    """beta = 0.9999 (Rust's): the genpqr solve and the numpy one agree to 1e-6 relative. Values
    are of order 1 / (1 - beta); both solves take Newton steps for the correction, which leaves the
    rates within 5e-8 relative of an 80-bit long-double solve (measured on AVX-512 and on SSE-only
    numpy/OpenBLAS kernels). Solving for V itself, as both did before, stalled 1e-4 away, and the
    two machines disagreed at that level."""
    _, _, model, sf = bus
    res = sf.counterfactual({"RC": "*1.5"}, check_normalization=False)
    rate = res.to_frame().set_index(["distribution", "statistic"]).loc[RATE, "counterfactual"]
    expected = numpy_rate(bus_features(90) @ (sf.theta * [1.5, 1.0]), sf.kernel.dense(), 0.9999)
    assert rate == pytest.approx(expected, rel=1e-6)


def test_auto_route_answers_structurally_and_reports_the_nonparametric_gap(bus95):
    """With a structural fit the default route is structural; the nonparametric answer is the
    reward table changed by the same flow payoffs x @ (theta' - theta_hat), and route_gap is the
    difference."""
    _, _, model, sf = bus95
    res = model.counterfactual(parameter_change={"RC": "*1.5"}, structural=sf, check_normalization=False, warn=False)
    delta = sf.features @ (sf.theta * [1.5, 1.0]) - sf.features @ sf.theta
    nonparametric = model.counterfactual(reward_change=delta, route="nonparametric", check_normalization=False,
                                         warn=False)
    frame = res.to_frame()
    np.testing.assert_allclose(frame["nonparametric_counterfactual"], nonparametric.to_frame()["counterfactual"],
                               atol=1e-12)
    np.testing.assert_allclose(frame["route_gap"], frame["counterfactual"] - frame["nonparametric_counterfactual"],
                               atol=1e-15)
    assert res.alternative["route"] == "nonparametric" and np.isfinite(res.route_gap())
    alone = sf.counterfactual({"RC": "*1.5"}, check_normalization=False, warn=False)
    assert alone.alternative is None
    np.testing.assert_allclose(alone.counterfactual.policy, res.counterfactual.policy, atol=1e-12)


def test_model_structural_attribute_is_the_default(bus95):
    _, _, model, sf = bus95
    with_fit = model.with_structural(sf)  # a copy holding the structural fit (genpqr fit --features saves one)
    a = with_fit.counterfactual(parameter_change={"theta11": "+0.5"}, check_normalization=False, warn=False)
    b = model.counterfactual(parameter_change={"theta11": "+0.5"}, structural=sf, check_normalization=False,
                             warn=False)
    assert a.route == "structural"
    np.testing.assert_allclose(a.counterfactual.policy, b.counterfactual.policy, atol=0)
    assert model.counterfactual(reward_change={"replace": -1.0}, warn=False).route == "nonparametric"


@pytest.mark.parametrize("spec, theta", [({"RC": "*2"}, [20.0, 3.0]), ({"RC": "+1.5"}, [11.5, 3.0]),
                                         ({"RC": "-1", "theta11": 0.5}, [9.0, 0.5]), ({"theta11": "=4"}, [10.0, 4.0]),
                                         ({"RC": "2"}, [2.0, 3.0])])
def test_parameter_change_specs(spec, theta):
    change = parse_parameter_change(spec, ["RC", "theta11"])
    original = np.array([10.0, 3.0])
    np.testing.assert_array_equal(change(original), theta)
    np.testing.assert_array_equal(original, [10.0, 3.0])  # not modified in place


@pytest.mark.parametrize("spec, error, message", [
    ({"rc": "*2"}, ValueError, "parameters are ['RC', 'theta11']"),
    ({"RC": "*two"}, ValueError, "expected a number"),
    ({"RC": True}, TypeError, "got a bool"),
    ({"RC": [2]}, TypeError, "got list"),
    ({"RC": "*inf"}, ValueError, "not finite"),
    (["RC"], TypeError, "must be a dict"),
])
def test_parameter_change_errors(spec, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_parameter_change(spec, ["RC", "theta11"])


def test_route_and_argument_errors(bus95):
    _, _, model, sf = bus95
    with pytest.raises(ValueError, match="needs a structural fit"):
        model.counterfactual(parameter_change={"RC": "*2"})
    with pytest.raises(ValueError, match="needs a structural fit"):
        model.counterfactual(route="structural")
    with pytest.raises(ValueError, match="route must be one of"):
        model.counterfactual(route="parametric", structural=sf)
    for level in (0, 1, 1.5, -0.1, True, "0.9"):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            model.counterfactual(reward_change={"replace": -1.0}, level=level)
    with pytest.raises(ValueError, match="non-negative number"):
        model.counterfactual(reward_change={"replace": -1.0}, n_boot=-1)
    with pytest.raises(TypeError, match="lacks"):
        model.counterfactual(structural=object())
    with pytest.raises(TypeError, match=r"reward_change\['replace'\] must be a number"):
        model.counterfactual(reward_change={"replace": "-1"})
    with pytest.raises(TypeError, match="reward_change must be a dict"):
        model.counterfactual(reward_change="replace=-1")


# ============================================================================ the delta method
def test_delta_method_is_exact_for_a_linear_statistic():
    A = np.array([[1.0, -2.0], [0.5, 3.0], [0.0, 1.0]])
    c = np.array([0.2, 1.0, -4.0])
    cov = np.array([[0.3, 0.1], [0.1, 0.2]])
    theta = np.array([0.4, 0.1])
    res = delta_method(lambda t: A @ t + c, theta, cov, level=0.9)
    se = np.sqrt(np.diag(A @ cov @ A.T))
    np.testing.assert_allclose(res.std_error, se, rtol=1e-9)
    np.testing.assert_allclose(res.low, A @ theta + c - norm.ppf(0.95) * se, rtol=1e-9)


def test_delta_method_on_the_logit_scale_stays_inside_zero_one():
    cov = np.array([[4.0]])
    """logit(h) is theta itself, so the interval is expit(theta -+ z sd(theta)); central differences
    with a step of 1% of a standard error are exact to about (0.01 sd)^2 / 6 relative."""
    res = delta_method(lambda t: np.array([expit(t[0])]), np.array([-6.0]), cov, logit=[True])
    h = expit(-6.0)
    se = h * (1 - h) * 2.0
    assert res.std_error[0] == pytest.approx(se, rel=1e-3)
    z = norm.ppf(0.975)
    assert res.low[0] == pytest.approx(expit(-6.0 - z * 2.0), rel=1e-3)
    assert res.high[0] == pytest.approx(expit(-6.0 + z * 2.0), rel=1e-3)
    assert 0 < res.low[0] < h < res.high[0] < 1
    assert logit(res.high[0]) - logit(h) == pytest.approx(z * 2.0, rel=1e-3)


def test_structural_route_intervals_are_the_delta_method(bus95):
    _, _, model, sf = bus95
    res = sf.counterfactual({"RC": "*2"}, check_normalization=False, warn=False)
    frame = res.to_frame().set_index(["distribution", "statistic"])
    assert res.interval_kind == "delta"
    assert frame.loc[RATE, "interval_kind"].startswith("delta method")
    assert "OPG" in frame.loc[RATE, "interval_kind"]
    lo, est, hi = frame.loc[RATE, ["counterfactual_lo", "counterfactual", "counterfactual_hi"]]
    assert 0 < lo < est < hi < 1


# ============================================================================ support
def tiny_solution():
    """A 3-state, 2-action chain with a known stationary law."""
    P = np.zeros((3, 2, 3))
    P[:, 0] = [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]]
    P[:, 1] = [[1.0, 0.0, 0.0]] * 3
    kernel = TransitionKernel(P.reshape(6, 3), 3, 2)
    reward = np.array([[1.0, 0.0], [0.5, 0.0], [0.0, 0.5]])
    return solve_scenario(reward, kernel, 0.9, initial=np.array([1.0, 0.0, 0.0]))


def test_support_shares_by_hand():
    sol = tiny_solution()
    counts = np.array([[30, 12], [5, 9], [0, 0]])
    report = support_report(sol, sol, counts, min_visits=10, threshold=0.05)
    for name, d in (("stationary", sol.stationary), ("initial", sol.occupancy)):
        thin_state = d[2]  # visits 42, 14, 0: only state 2 is below 10
        cells = d[:, None] * sol.policy
        thin_cell = cells[1, 0] + cells[1, 1] + cells[2].sum()  # cells with 5, 9, 0, 0 choices
        assert report.counterfactual[name] == pytest.approx((thin_state, d[2], thin_cell), abs=1e-12)
    assert report.share == pytest.approx(max(sol.stationary[2], sol.occupancy[2]), abs=1e-12)
    assert report.material == (report.share > 0.05)
    assert list(report.thin_states) == [2]
    assert set(report.to_frame().columns) >= {"scenario", "distribution", "thin_state_share", "thin_cell_share"}
    with pytest.raises(ValueError, match="min_visits"):
        support_report(sol, sol, counts, min_visits=0)


def test_off_support_flags_an_absorbed_or_silent_solution():
    sol = tiny_solution()
    assert not off_support(sol, np.array([[30, 12], [20, 9], [15, 3]]))
    assert off_support(sol, np.array([[30, 12], [20, 9], [0, 0]])) == bool(sol.stationary[2] > 0.5 or
                                                                         sol.occupancy[2] > 0.5)
    P = np.zeros((2, 2, 2))
    P[:, 0] = [[0.0, 1.0], [0.0, 1.0]]
    P[:, 1] = [[1.0, 0.0], [1.0, 0.0]]
    silent = solve_scenario(np.array([[0.0, -40.0], [0.0, -40.0]]), TransitionKernel(P.reshape(4, 2), 2, 2), 0.5)
    assert off_support(silent, np.array([[10, 3], [10, 3]]))  # action 1 is no longer chosen


def test_extrapolation_warning_fires_only_when_the_share_is_material(bus):
    _, _, model, sf = bus
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet = sf.counterfactual({"RC": "*0.5"}, check_normalization=False)
    assert not quiet.support.material and not [w for w in caught if w.category is ExtrapolationWarning]
    with pytest.warns(ExtrapolationWarning, match="functional form"):
        loud = sf.counterfactual({"RC": "*1.5"}, check_normalization=False)
    assert loud.support.material and "support:" in loud.describe()


# ============================================================================ bootstrap
def test_structural_bootstrap_reestimates_each_replicate(bus95):
    truth, panel, _, _ = bus95
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GenPQR(N.anchor_action("replace"), gamma=0.95, q_model="exact", n_states=40,
                       transition_model=IncrementKernel(2, "replace")).fit(panel.transitions)
        sf = fit_structural(model, bus_features(40), names=["RC", "theta11"])
        res = model.counterfactual(parameter_change={"RC": "*2"}, structural=sf, n_boot=6, random_state=3,
                                   check_normalization=False, progress=False)
    assert res.interval_kind == "bootstrap" and res.bootstrap.shape[:2] == (6, 2)
    assert res.off_support.shape == (6, 2) and res.off_support.dtype == bool
    frame = res.to_frame()
    assert "re-estimated each" in frame["interval_kind"].iloc[0] and "left the data's support" in \
        frame["interval_kind"].iloc[0]
    assert np.ptp(res.bootstrap[:, 1, 1]) > 0  # replicates differ
    delta = res.intervals("delta")  # both sources, each labelled
    assert delta["interval_kind"].iloc[0].startswith("delta method")
    with pytest.raises(ValueError, match="kind must be"):
        res.intervals("wald")


# ============================================================================ the command line
@pytest.fixture(scope="module")
def bus_files(tmp_path_factory, bus):
    _, panel, _, _ = bus
    folder = tmp_path_factory.mktemp("bus")
    sim = panel.frame
    pd.DataFrame({"bus": sim.bus, "month": sim.month, "mileage_bin": sim.mileage,
                  "replace": (sim.action == "replace").astype(int)}).to_csv(folder / "panel.csv", index=False)
    x = np.arange(90)
    pd.DataFrame({"mileage_bin": np.repeat(x, 2), "replace": np.tile([0, 1], 90), "RC": np.tile([1.0, 0.0], 90),
                  "theta11": np.column_stack([-0.001 * x, np.zeros(90)]).ravel()}).to_csv(folder / "features.csv",
                                                                                         index=False)
    out = folder / "fit"
    argv = ["fit", str(folder / "panel.csv"), "--episode", "bus", "--time", "month", "--state", "mileage_bin",
            "--action", "replace", "--gamma", "0.9999", "--normalization", "anchor:1", "--transition",
            "increment:2:1", "--n-states", "90", "--features", str(folder / "features.csv"), "--out", str(out),
            "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    return folder, out


def test_cli_counterfactual_answers_on_the_structural_model(bus_files, tmp_path, capsys):
    """RC x 2 through the command reproduces the structural model's rate (parameters.csv, the fit's
    kernel) and prints the nonparametric answer, the gap and the support share."""
    folder, fit = bus_files
    capsys.readouterr()
    assert main(["counterfactual", str(fit), "--parameter-change", "RC=*2", "--out", str(tmp_path / "cf"),
                 "--quiet"]) == 0
    printed = " ".join(capsys.readouterr().out.split())  # the summary() table (issue 32), lines of <= 100
    assert "Route: structural: the estimated flow utility" in printed and "the nonparametric route puts" in printed
    assert "Thin support:" in printed
    summary = pd.read_csv(tmp_path / "cf" / "summary.csv").set_index(["distribution", "statistic"])
    model = genpqr.load(fit / "model.joblib")
    theta = pd.read_csv(fit / "parameters.csv").set_index("parameter").loc[["RC", "theta11"], "estimate"].to_numpy()
    expected = numpy_rate(bus_features(90) @ (theta * [2.0, 1.0]), model.stage2_.kernel.dense(), 0.9999)
    assert summary.loc[CLI_RATE, "counterfactual"] == pytest.approx(expected, rel=1e-6)  # beta 0.9999: see above
    assert summary.loc[CLI_RATE, "route"] == "structural"
    assert np.isfinite(summary.loc[CLI_RATE, "nonparametric_counterfactual"])
    ident = json.loads((tmp_path / "cf" / "identification.json").read_text())
    assert ident["route"] == "structural" and ident["other_route"] == "nonparametric"
    assert ident["interval_kind"] == "delta" and ident["route_gap"] is not None
    support = pd.read_csv(tmp_path / "cf" / "support.csv")
    assert set(support["scenario"]) == {"baseline", "counterfactual"}
    assert main(["counterfactual", str(fit), "--parameter-change", "RC=*2", "--route", "nonparametric", "--out",
                 str(tmp_path / "np"), "--quiet"]) == 0
    nonparametric = pd.read_csv(tmp_path / "np" / "summary.csv").set_index(["distribution", "statistic"])
    assert nonparametric.loc[CLI_RATE, "counterfactual"] == pytest.approx(summary.loc[CLI_RATE, "nonparametric_counterfactual"],
                                                                      abs=1e-12)


@pytest.mark.parametrize("argv, message", [
    (["--parameter-change", "XX=*2"], "parameters are ['RC', 'theta11']"),
    (["--parameter-change", "RC"], "NAME=SPEC"),
    (["--parameter-change", "RC=*two"], "expected a number"),
    (["--level", "1.5"], "strictly between 0 and 1"),
    (["--level", "0"], "strictly between 0 and 1"),
    (["--level", "1"], "strictly between 0 and 1"),
    (["--reward-change", "1=abc"], "the amount must be a number"),
])
def test_cli_counterfactual_bad_inputs(bus_files, tmp_path, capsys, argv, message):
    _, fit = bus_files
    assert main(["counterfactual", str(fit), *argv, "--bootstrap", "0", "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ({"reward_change": [1.0, 2.0]}, "reward_change must be an object"),
    ({"reward_change": {"1": "x"}}, "reward_change['1'] must be a number"),
    ({"parameter_change": "RC=*2"}, "parameter_change must be an object"),
    ({"level": 2}, "strictly between 0 and 1"),
])
def test_cli_spec_of_the_wrong_type_is_named(bus_files, tmp_path, capsys, spec, message):
    _, fit = bus_files
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert main(["counterfactual", str(fit), "--spec", str(path), "--bootstrap", "0"]) == 2
    assert message in capsys.readouterr().err


def test_cli_parameter_change_needs_a_structural_fit(tmp_path, capsys):
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "examples" / "data" / "choices.csv"
    assert main(["fit", str(data), "--episode", "episode", "--time", "time", "--state", "state", "--action",
                 "action", "--gamma", "0.9", "--normalization", "anchor:a", "--cross-fit", "0", "--out",
                 str(tmp_path / "fit"), "--quiet"]) == 0
    assert main(["counterfactual", str(tmp_path / "fit"), "--parameter-change", "RC=*2", "--bootstrap", "0"]) == 2
    assert "without --features" in capsys.readouterr().err


def test_cli_reread_data_is_compared_by_content(tmp_path, capsys):
    """Reversing the time order inside every episode keeps the choice counts but not the data:
    the bootstrap refuses to refit on it."""
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "examples" / "data" / "choices.csv"
    frame = pd.read_csv(source)
    data = tmp_path / "choices.csv"
    frame.to_csv(data, index=False)
    fit = tmp_path / "fit"
    assert main(["fit", str(data), "--episode", "episode", "--time", "time", "--state", "state", "--action", "action",
                 "--gamma", "0.9", "--normalization", "anchor:a", "--bootstrap", "4", "--cross-fit", "0", "--out",
                 str(fit), "--quiet"]) == 0
    reversed_time = frame.assign(time=frame.groupby("episode")["time"].transform(lambda t: t.max() + t.min() - t))
    reversed_time.to_csv(data, index=False)
    capsys.readouterr()
    assert main(["counterfactual", str(fit), "--reward-change", "b=-0.5", "--out", str(tmp_path / "cf"),
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "has changed since the fit (its content differs)" in err and "no bootstrap intervals" in err


def test_delta_method_keeps_a_bounded_statistic_inside_its_range():
    """A statistic in (2, 12): its interval is the logit one of (h - 2) / 10, mapped back."""
    cov = np.array([[9.0]])
    res = delta_method(lambda t: np.array([2.0 + 10.0 * expit(t[0]), t[0]]), np.array([3.0]), cov,
                       bounds=[[2.0, 12.0], [np.nan, np.nan]])
    z = norm.ppf(0.975)
    assert res.low[0] == pytest.approx(2.0 + 10.0 * expit(3.0 - z * 3.0), rel=1e-3)
    assert res.high[0] == pytest.approx(2.0 + 10.0 * expit(3.0 + z * 3.0), rel=1e-3)
    assert 2.0 < res.low[0] < res.high[0] < 12.0
    np.testing.assert_allclose([res.low[1], res.high[1]], [3.0 - z * 3.0, 3.0 + z * 3.0], rtol=1e-9)
