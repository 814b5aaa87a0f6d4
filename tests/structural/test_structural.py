"""Structural estimation (genpqr.structural._estimation): the full likelihood's derivatives, NPL = NFXP
(estimates and standard errors), exact recovery at the population, and the CLI's
``--estimator`` path (parameters.csv, console, report)."""

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import genpqr
from genpqr.app import cli
from genpqr.structural import _ddc as ddc, _estimation as structural
from genpqr.envs._rust import bus_engine, simulate_buses

from ..doc_output import output_differences
from ..doc_warnings import check_warnings, printed, recording

RUST9999 = dict(n_states=90, beta=0.9999, rc=10.075, theta11=2.293, theta3=(0.3919, 0.5953, 0.0128))


def rust9999_case(seed=3):
    """The beta = 0.9999 bus design, one simulated panel (37 buses x 117 months): ``(model, kernel,
    counts)`` with the pooled increment kernel and the choice counts (shared by the structural tests)."""
    model = bus_engine(**RUST9999)
    panel = simulate_buses(model, n_buses=37, n_periods=117, random_state=seed).transitions
    kernel = ddc.increment_kernel(panel, model.n_states, 2, 2, "replace")
    counts = ddc.choice_counts(panel, model.n_states)
    return model, kernel, counts


@pytest.fixture(scope="module")
def rust_panel():
    return rust9999_case()


def test_relative_solve_is_exact_up_to_a_constant(rng):
    S = 12
    P = rng.dirichlet(np.ones(S), size=S)
    B = rng.normal(size=(S, 3))
    for gamma in (0.5, 0.9999, 1.0):
        h = structural.relative_solve(P, B, gamma)
        residual = h - gamma * P @ h - B  # = -k, one constant per column
        np.testing.assert_allclose(residual - residual[0], 0.0, atol=1e-10)
        if gamma < 1:
            exact = np.linalg.solve(np.eye(S) - gamma * P, B)
            np.testing.assert_allclose((exact - h) - (exact - h)[0], 0.0, atol=1e-7 * np.abs(exact).max())
            full = structural.relative_solve(P, B, gamma, add_constant=True)
            np.testing.assert_allclose(full, exact, rtol=1e-9, atol=1e-9 * np.abs(exact).max())


@pytest.mark.parametrize("beta", [0.95, 0.9999])
def test_score_and_hessian_match_finite_differences(rust_panel, beta):
    model, kernel, counts = rust_panel
    X = model.features("rust")
    theta = np.array([9.0, 2.0])
    d = structural.likelihood_derivatives(theta, X, counts, kernel, beta)
    eps = 1e-5
    for j in range(2):
        step = np.zeros(2)
        step[j] = eps
        up = structural.likelihood_derivatives(theta + step, X, counts, kernel, beta)
        down = structural.likelihood_derivatives(theta - step, X, counts, kernel, beta)
        np.testing.assert_allclose((up.loglik - down.loglik) / (2 * eps), d.grad[j], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose((up.grad - down.grad) / (2 * eps), d.hessian[j], rtol=1e-6, atol=1e-6)
    # the score per choice sums to the gradient; OPG is its outer product
    np.testing.assert_allclose(np.einsum("sa,sap->p", counts, d.scores), d.grad, rtol=1e-12)
    assert np.all(np.linalg.eigvalsh(d.opg) > 0)
    # the policy is the model's optimal choice probability (NFXP's inner solve)
    from genpqr.structural._nfxp import nfxp_loglik

    loglik, grad, _ = nfxp_loglik(theta, X, counts, kernel, beta)
    np.testing.assert_allclose(d.loglik, loglik, rtol=1e-10)
    np.testing.assert_allclose(d.grad, grad, rtol=1e-6, atol=1e-6)


def test_npl_equals_nfxp_estimates_and_standard_errors(rust_panel):
    model, kernel, counts = rust_panel
    X = model.features("anchor")
    freq = counts / counts.sum(axis=1, keepdims=True).clip(1)  # exact zeros: NPL's start is smoothed
    npl = structural.estimate_structural("npl", X, counts, kernel, model.beta, start_policy=freq)
    nfxp = structural.estimate_structural("nfxp", X, counts, kernel, model.beta)
    assert npl.converged and nfxp.converged
    np.testing.assert_allclose(npl.theta, nfxp.theta, atol=1e-6)
    np.testing.assert_allclose(npl.std_error, nfxp.std_error, rtol=1e-3)
    np.testing.assert_allclose(npl.std_error_robust, nfxp.std_error_robust, rtol=1e-3)
    assert npl.loglik == pytest.approx(nfxp.loglik, abs=1e-8)
    assert npl.gradient_norm < 1e-8 and nfxp.gradient_norm < 1e-8 and npl.n_choices == counts.sum()
    # any parametrization of the same behaviour: Rust's u(x, replace) = -RC gives the same MLE
    rust = structural.estimate_structural("npl", model.features("rust"), counts, kernel, model.beta)
    np.testing.assert_allclose(rust.theta, npl.theta, atol=1e-6)
    # from a uniform start (theta = 0) too
    uniform = structural.estimate_structural("npl", X, counts, kernel, model.beta)
    np.testing.assert_allclose(uniform.theta, npl.theta, atol=1e-6)
    # the safeguard: NPL stopped early (or at a spurious fixed point) is finished by Newton on the full
    # likelihood, loudly
    with pytest.warns(genpqr.ConvergenceWarning, match="continued with Newton"):
        cut = structural.estimate_structural("npl", X, counts, kernel, model.beta, max_iter=2)
    np.testing.assert_allclose(cut.theta, npl.theta, atol=1e-6)
    # PML's pseudo-likelihood SE is another quantity: named differently
    pml = structural.estimate_structural("pml", X, counts, kernel, model.beta, start_policy=freq)
    assert "pseudo-likelihood" in pml.se_kind and np.all(np.isnan(pml.std_error_robust))
    assert pml.loglik < npl.loglik


@pytest.mark.parametrize("estimator", ["npl", "nfxp"])
def test_population_choices_recover_the_truth_exactly(estimator):
    """Counts proportional to the model's own choice probabilities: the MLE is the truth."""
    model = bus_engine(n_states=40, beta=0.99, rc=6.0, theta11=30.0)
    counts = 1e5 * model.state_action_frequencies()
    fit = structural.estimate_structural(estimator, model.features("rust"), counts, model.kernel, model.beta,
                                         start_policy=np.full((40, 2), 0.5))
    np.testing.assert_allclose(fit.theta, model.theta, rtol=1e-8)
    np.testing.assert_allclose(fit.policy, model.policy, atol=1e-10)
    # the sandwich equals the OPG when the model is right (information equality)
    np.testing.assert_allclose(fit.std_error_robust, fit.std_error, rtol=1e-6)


def test_unidentified_features_warn(rust_panel):
    model, kernel, counts = rust_panel
    X = np.concatenate([model.features(), np.ones((90, 2, 1))], axis=2)  # equal on both actions: no effect
    with pytest.warns(genpqr.GenPQRWarning, match=r"not identified.*'c'"):
        structural.estimate_structural("projection", X, counts, kernel, model.beta, names=["RC", "theta11", "c"],
                                       reward_table=model.normalized_reward())


def test_few_choices_of_the_rare_action_warn(rust_panel):
    """Fewer than 10 choices of the rarest action per parameter: a WeakSupportWarning naming the
    count; at exactly 10 per parameter none."""
    import warnings

    model, kernel, counts = rust_panel
    X = model.features("anchor")
    assert structural.MIN_CHOICES_PER_PARAMETER == 10
    few = counts.copy()
    few[:, 1] = 0.0
    few[50:69, 1] = 1.0  # 19 replacements for 2 parameters
    with pytest.warns(genpqr.WeakSupportWarning, match=r"rest on 19 choice\(s\) of the rarest action \('replace'\) "
                                                        r"for 2 parameter\(s\), fewer than 10 per parameter"):
        structural.estimate_structural("pml", X, few, kernel, model.beta, names=["RC", "theta11"],
                                       action_labels=["keep", "replace"])
    few[69, 1] = 1.0  # 20: enough
    with warnings.catch_warnings():
        warnings.simplefilter("error", genpqr.WeakSupportWarning)
        structural.estimate_structural("pml", X, few, kernel, model.beta, names=["RC", "theta11"])


@pytest.mark.parametrize("estimator", ["npl", "nfxp", "pml"])
def test_perfectly_separated_choices_say_the_mle_does_not_exist(rust_panel, estimator):
    """One replacement, at the top state: the model can predict every choice with probability 1,
    the likelihood rises toward infinity. Each estimator warns (NFXP does not crash on the
    singular OPG) and no standard error is reported as 0."""
    import warnings

    model, kernel, counts = rust_panel
    sep = counts.copy()
    sep[:, 1] = 0.0
    sep[89] = [0.0, 1.0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = structural.estimate_structural(estimator, model.features("anchor"), sep, kernel, model.beta)
    messages = [str(w.message) for w in caught]
    assert any("maximum likelihood estimate does not exist" in m for m in messages), messages
    assert any("rest on 1 choice(s)" in m for m in messages)
    assert not np.any(fit.std_error == 0.0) and not np.any(fit.std_error_robust == 0.0)


def test_no_convergence_warns(rust_panel):
    model, kernel, counts = rust_panel
    with pytest.warns(genpqr.ConvergenceWarning, match="the nfxp estimator did not converge"):
        fit = structural.estimate_structural("nfxp", model.features("anchor"), counts, kernel, model.beta,
                                             max_iter=1)
    assert not fit.converged


def test_projection_and_bad_estimator(rust_panel):
    model, kernel, counts = rust_panel
    with pytest.raises(ValueError, match="estimator must be one of"):
        structural.estimate_structural("mle", model.features(), counts, kernel, model.beta)
    with pytest.raises(ValueError, match="reward table"):
        structural.estimate_structural("projection", model.features(), counts, kernel, model.beta)
    fit = structural.estimate_structural("projection", model.features(), counts, kernel, model.beta,
                                         reward_table=model.normalized_reward())
    np.testing.assert_allclose(fit.theta, model.theta, rtol=1e-10)
    assert np.all(np.isnan(fit.std_error))


# ---------------------------------------------------------------------------- the command line
def write_rust_panel(folder, model, n_buses, n_months, seed):
    frame = simulate_buses(model, n_buses=n_buses, n_periods=n_months, random_state=seed).frame
    pd.DataFrame({"bus": frame.bus, "month": frame.month, "mileage_bin": frame.mileage,
                  "replace": (frame.action == "replace").astype(int)}).to_csv(folder / "panel.csv", index=False)
    x = np.arange(model.n_states)
    pd.DataFrame({"mileage_bin": np.repeat(x, 2), "replace": np.tile([0, 1], model.n_states),
                  "RC": np.tile([1.0, 0.0], model.n_states),
                  "theta11": np.column_stack([-0.001 * x, np.zeros(x.size)]).ravel()}).to_csv(
        folder / "features.csv", index=False)


def rust_flags(folder, out, model):
    return [str(folder / "panel.csv"), "--episode", "bus", "--time", "month", "--state", "mileage_bin", "--action",
            "replace", "--gamma", f"{model.beta:g}", "--normalization", "anchor:1", "--transition",
            f"increment:{model.theta3.size - 1}:1", "--n-states", str(model.n_states), "--features",
            str(folder / "features.csv"), "--out", str(out), "--quiet"]


COLUMNS = ["parameter", "estimate", "std_error", "ci_low", "ci_high", "std_error_robust", "std_error_kind",
           "ci_kind", "z", "p_value", "identified", "estimator", "loglik", "n_choices", "iterations", "convergence", "converged"]


def test_cli_default_is_npl_with_mle_standard_errors(tmp_path, capsys):
    model = bus_engine(**RUST9999)
    write_rust_panel(tmp_path, model, 37, 117, seed=5)
    assert cli.main(["fit", *rust_flags(tmp_path, tmp_path / "npl", model)]) == 0
    out = capsys.readouterr().out
    assert "estimator npl" in out and "RC:" in out and "(SE " in out and "log-likelihood" in out
    params = pd.read_csv(tmp_path / "npl" / "parameters.csv")
    assert list(params.columns) == COLUMNS
    assert list(params.parameter) == ["RC", "theta11"] and set(params.estimator) == {"npl"}
    assert params.converged.all() and params.n_choices.iloc[0] == 37 * 117  # every month, each bus's last too
    assert params.std_error_kind.iloc[0].startswith("OPG: MLE") and params.ci_kind.iloc[0].startswith("Wald")
    np.testing.assert_allclose(params.ci_high - params.estimate, 1.959964 * params.std_error, rtol=1e-5)
    np.testing.assert_allclose(params.z, params.estimate / params.std_error, rtol=1e-12)
    assert "(SE " in out and ", OPG)" in out and re.search(r"iterations: NPL \d+, converged", out)
    assert params.convergence.iloc[0] == f"NPL {params.iterations.iloc[0]}, converged"
    # within 3 SE of the truth on this panel
    assert np.all(np.abs(params.estimate - model.theta) < 3 * params.std_error)
    config = json.loads((tmp_path / "npl" / "config.json").read_text())
    assert config["estimator"] == "npl"
    html = (tmp_path / "npl" / "report.html").read_text()
    assert "Structural parameters: NPL iterated to convergence" in html
    assert "Observed choice frequency per state" in html and "log-likelihood" in html
    assert "inverse outer product of the scores" in html
    assert int(re.search(r"choices in the likelihood</t[hd]>\s*<td>(\d+)", html).group(1)) == 37 * 117
    # NFXP through the CLI: the same estimates and standard errors
    assert cli.main(["fit", *rust_flags(tmp_path, tmp_path / "nfxp", model), "--estimator", "nfxp"]) == 0
    nfxp = pd.read_csv(tmp_path / "nfxp" / "parameters.csv")
    np.testing.assert_allclose(nfxp.estimate, params.estimate, atol=1e-6)
    np.testing.assert_allclose(nfxp.std_error, params.std_error, rtol=1e-3)
    assert nfxp.loglik.iloc[0] == pytest.approx(params.loglik.iloc[0], abs=1e-7)
    # the saved model is counterfactual-ready: its kernel and choices give the same MLE
    fitted = genpqr.load(tmp_path / "npl" / "model.joblib")
    X = pd.read_csv(tmp_path / "features.csv")[["RC", "theta11"]].to_numpy().reshape(90, 2, 2)
    assert not hasattr(fitted, "training_data_")  # a slim save keeps the choice counts, not the rows
    again = structural.estimate_structural("npl", X, fitted.stage2_.counts,
                                           fitted.stage2_.kernel, fitted.gamma_)
    np.testing.assert_allclose(again.theta, params.estimate, atol=1e-6)


def test_cli_mle_does_not_depend_on_clip_first_stage_or_normalization(tmp_path, capsys):
    """Issue 9, item 1 ("the clip never decides the answer") for the structural parameters: the
    old default clip (0.01, 0.99) on cell frequencies binds on most choices and moves the reward
    table, but NPL's estimates and standard errors are the same MLE; the console says so."""
    model = bus_engine(**RUST9999)
    write_rust_panel(tmp_path, model, 37, 117, seed=5)
    assert cli.main(["fit", *rust_flags(tmp_path, tmp_path / "a", model)]) == 0
    out_a = capsys.readouterr().out
    flags = rust_flags(tmp_path, tmp_path / "b", model)
    flags[flags.index("anchor:1")] = "anchor:0"
    assert cli.main(["fit", *flags, "--clip", "0.01,0.99", "--policy-model", "frequency"]) == 0
    out_b = capsys.readouterr().out
    assert "ClippingWarning" in out_b and "ClippingWarning" not in out_a
    for out in (out_a, out_b):
        assert "not on --normalization, --clip or the first stage" in " ".join(out.split())  # wrapped lines
    a, b = (pd.read_csv(tmp_path / name / "parameters.csv") for name in "ab")
    np.testing.assert_allclose(b.estimate, a.estimate, atol=1e-6)
    np.testing.assert_allclose(b.std_error, a.std_error, rtol=1e-6)
    assert "not on --normalization" in (tmp_path / "b" / "report.html").read_text()


def test_cli_other_estimators_bootstrap_and_config(tmp_path, capsys):
    model = bus_engine(n_states=60, beta=0.99, rc=6.0, theta11=30.0)
    write_rust_panel(tmp_path, model, 25, 60, seed=1)
    flags = rust_flags(tmp_path, tmp_path / "o", model)
    estimates = {}
    for name in ("pml", "projection"):
        assert cli.main(["fit", *flags[:-3], "--out", str(tmp_path / name), "--estimator", name, "--quiet"]) == 0
        params = pd.read_csv(tmp_path / name / "parameters.csv")
        assert list(params.columns) == COLUMNS and set(params.estimator) == {name}
        estimates[name] = params
    # the projection's standard errors are its efficient influence function's (issue 34), not a likelihood's
    assert np.all(np.isfinite(estimates["projection"].std_error)) and np.all(estimates["projection"].std_error > 0)
    assert estimates["pml"].std_error_kind.iloc[0].startswith("inverse Hessian of the pseudo-likelihood, "
                                                                "conditional on the first stage")
    assert estimates["projection"].std_error_kind.iloc[0].startswith("efficient influence function of the projection")
    out = capsys.readouterr().out
    assert "estimator projection" in out and "not the maximum likelihood estimator" in out
    assert "(SE " in out and ", inverse Hessian)" in out  # PML's SE with its kind
    # --bootstrap re-estimates the structural parameters per replicate; the SE printed beside the bootstrap
    # interval is the bootstrap's, the OPG SE keeps its own labelled column
    capsys.readouterr()
    assert cli.main(["fit", *flags[:-3], "--out", str(tmp_path / "b"), "--bootstrap", "3"]) == 0
    out = capsys.readouterr().out
    boot = pd.read_csv(tmp_path / "b" / "parameters.csv")
    assert list(boot.columns) == COLUMNS[:10] + ["std_error_analytic", "std_error_analytic_kind"] + COLUMNS[10:]
    assert boot.ci_kind.iloc[0].startswith("bootstrap percentile") and boot.std_error_kind.iloc[0].startswith(
        "bootstrap: standard deviation over 3 replicates")
    assert boot.std_error_analytic_kind.iloc[0].startswith("OPG")
    assert np.all(boot.std_error > 0) and np.all(boot.ci_low < boot.ci_high)
    for _, row in boot.iterrows():
        assert (f"{row.parameter}: {row.estimate:.4g} (SE {row.std_error:.4g}, bootstrap)  [{row.ci_low:.4g}, "
                f"{row.ci_high:.4g}]  (OPG SE {row.std_error_analytic:.4g})") in out
    # the config key, and a clear error for an unknown estimator
    (tmp_path / "c.json").write_text(json.dumps({"estimator": "NFXP"}))
    assert cli.main(["fit", *flags[:-3], "--out", str(tmp_path / "c"), "--config", str(tmp_path / "c.json"),
                     "--quiet"]) == 0
    nfxp = pd.read_csv(tmp_path / "c" / "parameters.csv")
    assert set(nfxp.estimator) == {"nfxp"}
    np.testing.assert_allclose(boot.std_error_analytic, nfxp.std_error, rtol=1e-3)  # the MLE's OPG SE
    assert cli.main(["fit", *flags, "--estimator", "mle"]) == 2
    assert "--estimator must be one of" in capsys.readouterr().err


@pytest.mark.usefixtures("checkout_unchanged")
def test_docs_page_main_command_runs(tmp_path, capsys, monkeypatch):
    """docs/structural_estimation.md: its Python blocks and its genpqr commands run as written
    (on the page's simulated panel), and print what the page shows: the fit's console output, the
    estimates in a code comment, the summary and likelihood-ratio test (tests/doc_output.py)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "structural_estimation.md").read_text()
    blocks = re.findall(r"```(python|bash|)\n(.*?)```", page, flags=re.S)
    runnable = [(kind, code) for kind, code in blocks if "# doc-test" in code]
    assert any(kind == "bash" for kind, _ in runnable) and any(kind == "python" for kind, _ in runnable)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    found = {"python": [], "shell": []}
    printed_by = []  # (block, what it printed)
    for kind, code in runnable:
        if kind == "python":
            with recording() as caught:
                exec(compile(code, "structural_estimation.md", "exec"), namespace)
            found["python"] += caught
            printed_by.append((code, capsys.readouterr().out))
            continue
        for command in code.replace("\\\n", " ").splitlines():
            command = command.split("#")[0].strip()
            if command.startswith("genpqr "):
                with recording() as caught:
                    assert cli.main(shlex.split(command)[1:] + ["--quiet"]) == 0, command
                console = capsys.readouterr()
                found["shell"] += caught + printed(console.out + console.err)
                printed_by.append((command, console.out))
                if command.startswith("genpqr fit "):  # the fit's own warnings apart from the structural step's,
                    # under a heading naming rewards.csv (and saying that parameters.csv is not concerned)
                    assert "warning(s) about rewards.csv, the nonparametric reward (not parameters.csv" in console.out
    assert (tmp_path / "fit" / "parameters.csv").exists()
    for part, caught in found.items():
        check_warnings("docs/structural_estimation.md", part, caught)
    shown = [code for kind, code in blocks if kind == ""]
    fit_out = next(out for source, out in printed_by if source.startswith("genpqr fit "))
    assert not output_differences(next(s for s in shown if s.startswith("genpqr fit: ")), fit_out)
    lr_out = next(out for source, out in printed_by if "compare_lr" in source)
    assert not output_differences(next(s for s in shown if "Structural estimation results" in s), lr_out)
    types_out = next(out for source, out in printed_by if "n_types=2" in source)
    assert not output_differences(next(s for s in shown if "full-information mixture MLE" in s), types_out)
    comment = re.search(r"print\(fit.names, fit.theta.round\(3\)\) +# (.*)", page).group(1)
    source, out = next((source, out) for source, out in printed_by if "print(fit.names" in source)
    assert not output_differences(comment, next(line for line in out.splitlines() if line.startswith("['RC'")))


@pytest.mark.slow
def test_npl_coverage_over_panels():
    """20 panels of the beta = 0.9999 design: Wald intervals from the MLE's OPG cover the truth."""
    model = bus_engine(**RUST9999)
    X = model.features("anchor")
    hits, estimates = [], []
    for seed in range(20):
        panel = simulate_buses(model, n_buses=37, n_periods=117, random_state=100 + seed).transitions
        kernel = ddc.increment_kernel(panel, 90, 2, 2, "replace")
        counts = ddc.choice_counts(panel, 90)
        fit = structural.estimate_structural("npl", X, counts, kernel, model.beta,
                                             start_policy=counts / counts.sum(axis=1, keepdims=True).clip(1))
        assert fit.converged and fit.n_iter < 100  # 8-50 NPL iterations from frequencies
        lo, hi = fit.wald_interval(0.95)
        hits.append((lo <= model.theta) & (model.theta <= hi))
        estimates.append(fit.theta)
    coverage = np.mean(hits, axis=0)
    assert np.all(coverage >= 0.8), coverage
    est = np.array(estimates)
    assert np.all(np.abs(est.mean(axis=0) - model.theta) < 0.5 * est.std(axis=0)), est.mean(axis=0)


def test_benchmark_script_runs_one_panel():
    """benchmarks/structural_fit.py (the docs' results table) still runs against the current code:
    one panel of issue 9's design, every bus-month a choice, NPL = NFXP."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "structural_fit.py"
    spec = importlib.util.spec_from_file_location("structural_fit_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    row = bench.run_panel("rust9999", bus_engine(**bench.DESIGNS["rust9999"]["model"]), 0)
    assert row["estimator"] == "npl" and row["converged"] and row["n_choices"] == 37 * 117
    assert row["npl_nfxp_diff"] < 1e-6 and row["se_rel_diff"] < 1e-3
