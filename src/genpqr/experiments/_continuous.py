r"""The ``continuous`` experiment: reward recovery on the LQG benchmark as n grows.

For each seed and each ``n`` in ``n_values``: draw ``n`` i.i.d. transitions of the default
1-D LQG problem (:func:`genpqr.envs.make_lqg`), fit each method under each
normalization, and measure the reward MSE and Pearson correlation against the closed-form
normalized reward at ``n_eval`` fresh pairs ``s ~ rho``, ``a ~ pi(.|s)``. One row per
(seed, n, normalization, method) goes to ``results.csv``; ``results.md`` (mean ± 95% CI over
seeds) and ``figure.png`` are rebuilt from that file by :func:`write_report`.

Methods (stage 2 always: continuous FQE, continuation structure, polynomial features of
degree 2 in ``(s, a)`` + least squares; ``mu``-integrals by stratified antithetic Monte Carlo,
8 draws per next state in the targets, 1024 in the read-off):

* ``oracle-policy`` -- the true Gaussian policy plugged in (stage-2 error only);
* ``linear-gaussian`` -- :class:`LinearGaussianDensity` (degree 1; well specified);
* ``mdn`` -- ``MixtureDensityNetwork`` (3 components, 32x32 tanh), for ``n <= mdn_max_n``.

Normalizations: ``gaussian`` (``mu = N(0, 1)``, g = 0; Monte Carlo integrals) and ``anchor``
(point mass at ``a0 = 0``, g = 0; exact).

``run_discretization_check`` adds the cross-check of the ring problem
(``genpqr.envs._nonlinear``): the continuous pipeline with the true policy and exact
integrals against the tabular solver on a K-point action grid.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..evaluation import reward_correlation, reward_mse
from ..evaluation._metrics import mean_ci
from .. import normalization as CN
from ..actions import GaussLegendre, LinearGaussianDensity, MonteCarlo
from ..estimator import ContinuousOptions, GenPQR
from ..envs._lqg import make_lqg
from ..models._neural_densities import MixtureDensityNetwork
from ..stage2 import FQE

__all__ = ["run_continuous_experiment", "run_discretization_check", "write_report", "write_outputs", "METHODS",
           "NORMALIZATIONS", "KIND"]

KIND = "continuous-experiment"  # the manifest's kind of a `genpqr experiment continuous` folder

METHODS = ("oracle-policy", "linear-gaussian", "mdn")
NORMALIZATIONS = {"gaussian": lambda: CN.gaussian(0.0, 1.0), "anchor": lambda: CN.point_anchor(0.0)}


def _q_model():
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    return make_pipeline(PolynomialFeatures(2), LinearRegression())


def _policy(method, problem, seed):
    if method == "oracle-policy":
        return problem.policy_density(), True
    if method == "linear-gaussian":
        return LinearGaussianDensity(degree=1), False
    if method == "mdn":
        return MixtureDensityNetwork(n_components=3, hidden_layer_sizes=(32, 32), max_epochs=60, batch_size=512,
                                     random_state=seed), False
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def run_continuous_experiment(n_values=(1_000, 10_000, 100_000), seeds=range(5), out_dir=None, *,
                              methods=METHODS, normalizations=tuple(NORMALIZATIONS), n_eval=2_000,
                              mdn_max_n=10_000, n_samples=8, readoff_samples=1024, progress=False) -> pd.DataFrame:
    """Run the sweep; returns the tidy results (and writes ``results.csv``, ``results.md``,
    ``figure.png`` and ``config.json`` under ``out_dir`` when given).

    Parameters
    ----------
    n_values : iterable of int
        Training sizes.
    seeds : iterable of int
    out_dir : path or None
        Written in place, file by file (the benchmark script adds ``discretization.csv`` beside
        them); ``genpqr experiment continuous`` writes a whole folder instead (:func:`write_outputs`).
        The settings are also in ``frame.attrs["config"]``.
    methods : subset of ``METHODS``
    normalizations : subset of :data:`NORMALIZATIONS` keys
    n_eval : int
        Evaluation pairs per seed.
    mdn_max_n : int
        The MDN runs only for ``n <= mdn_max_n`` (its training dominates the run time).
    n_samples, readoff_samples : Monte Carlo draws in the targets and in the read-off.
    """
    problem = make_lqg()
    rows = []
    unknown = [m for m in methods if m not in METHODS] + [k for k in normalizations if k not in NORMALIZATIONS]
    if unknown:
        raise ValueError(f"unknown method(s)/normalization(s) {unknown}; methods: {METHODS}, normalizations: "
                         f"{tuple(NORMALIZATIONS)}")
    for seed in seeds:
        eval_s, eval_a = problem.evaluation_pairs(n_eval, random_state=10_000 + int(seed))
        for n in n_values:
            data = problem.sample(int(n), random_state=int(seed) * 1_000_003 + int(n))
            for norm_name in normalizations:
                norm = NORMALIZATIONS[norm_name]()
                truth = problem.evaluate(problem.normalized_reward(norm), eval_s, eval_a)
                for method in methods:
                    if method == "mdn" and n > mdn_max_n:
                        continue
                    rows.append(_fit_one(problem, data, norm, norm_name, method, int(seed), int(n), eval_s,
                                         eval_a, truth, n_samples, readoff_samples))
                    fit_time = rows[-1]["fit_time"]
                    if progress:
                        print(f"seed={seed} n={n} {norm_name} {method}: mse={rows[-1]['reward_mse']:.3g} "
                              f"({fit_time:.1f}s)", flush=True)
    frame = pd.DataFrame(rows)
    frame.attrs["config"] = dict(n_values=[int(n) for n in n_values], seeds=[int(s) for s in seeds],
                                 methods=list(methods), normalizations=list(normalizations), n_eval=n_eval,
                                 mdn_max_n=mdn_max_n, n_samples=n_samples, readoff_samples=readoff_samples,
                                 problem="make_lqg() defaults")
    if out_dir is not None:
        write_outputs(frame, Path(out_dir))
    return frame


def _fit_one(problem, data, norm, norm_name, method, seed, n, eval_s, eval_a, truth, n_samples, readoff_samples):
    """One run of :func:`run_continuous_experiment`: fit, evaluate, and the result row."""
    policy, prefit = _policy(method, problem, seed)
    est = GenPQR(normalization=norm, gamma=problem.gamma, policy_model=policy, policy_prefit=prefit,
                 q_model=FQE(_q_model(), n_iterations=500, tol=1e-6), random_state=seed,
                 continuous=ContinuousOptions(integration=MonteCarlo(n_samples, readoff_samples=readoff_samples)))
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(data)
        fit_time = time.perf_counter() - start
        estimate = est.reward(eval_s, eval_a)
    return dict(
        experiment="continuous", problem="lqg-1d", n=n, seed=seed, normalization=norm_name, method=method,
        reward_mse=reward_mse(estimate, truth), reward_corr=reward_correlation(estimate, truth),
        true_reward_var=float(np.var(truth)), policy_nll=float(-np.mean(est.log_policy(eval_s, eval_a))),
        fqe_iterations=est.diagnostics_.n_iterations, converged=est.diagnostics_.converged,
        support_ess=est.diagnostics_.support_ess, fit_time=fit_time,
        warnings="; ".join(sorted({str(w.message)[:120] for w in caught})))


def write_outputs(frame, out) -> None:
    """``results.csv``, ``config.json`` (the sweep's settings, ``frame.attrs["config"]``) and the
    report (``results.md``, ``figure.png``) under ``out``. ``genpqr experiment continuous``
    writes them into the temporary folder of ``genpqr.estimator._manifest.output_folder`` (kind
    :data:`KIND`), which replaces ``--out`` as a whole."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "results.csv", index=False)
    (out / "config.json").write_text(json.dumps(frame.attrs.get("config", {}), indent=2))
    write_report(out)


def run_discretization_check(n_actions=(11, 21, 41, 81), out_dir=None, degree=20) -> pd.DataFrame:
    """Ring problem: max ``|r_tabular(K) - r_continuous|`` and max ``|r_tabular(K) - r_true|`` on the
    K-point grid, for a uniform and a point-mass ``mu`` (true policy, exact integrals)."""
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline

    from .. import stage2
    from ..envs._nonlinear import RingProblem, StateActionBasis

    problem = RingProblem()
    data = problem.exact_design(24)
    rows = []
    for name, norm in (("uniform", CN.uniform()), ("anchor", CN.point_anchor(0.0))):
        est = GenPQR(normalization=norm, gamma=problem.gamma, policy_model=problem.policy_density(), policy_prefit=True,
                     q_model=FQE(make_pipeline(StateActionBasis(problem.n_states, degree),
                                               LinearRegression(fit_intercept=False)), n_iterations=1000, tol=1e-13),
                     continuous=ContinuousOptions(integration=GaussLegendre(48))).fit(data)
        truth = problem.normalized_reward(norm)
        for K in n_actions:
            log_policy, P, grid = problem.discretized(K)
            rec = stage2.recover_reward(log_policy, P, problem.gamma, problem.tabular_normalization(norm, K))
            s = np.repeat(np.arange(problem.n_states), K)
            a = np.tile(grid, problem.n_states)
            r_cont = est.reward(s.astype(np.float64), a).reshape(problem.n_states, K)
            r_true = truth(s, a).reshape(problem.n_states, K)
            rows.append(dict(problem="ring", normalization=name, n_actions=K,
                             tabular_vs_continuous=float(np.max(np.abs(rec.reward - r_cont))),
                             tabular_vs_truth=float(np.max(np.abs(rec.reward - r_true))),
                             continuous_vs_truth=float(np.max(np.abs(r_cont - r_true)))))
    frame = pd.DataFrame(rows)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        frame.to_csv(Path(out_dir) / "discretization.csv", index=False)
    return frame


def _fmt(values, digits=3, fixed=False):
    mean, ci = mean_ci(np.asarray(values, dtype=np.float64))
    if not np.isfinite(mean):
        return "n/a"
    spec = f".{digits}f" if fixed else f".{digits}g"
    return f"{mean:{spec}}" if not np.isfinite(ci) else f"{mean:{spec}} ± {ci:{spec if fixed else '.2g'}}"


def write_report(out_dir) -> None:
    """``results.md`` and ``figure.png`` from ``results.csv`` (and ``discretization.csv`` if present)."""
    out = Path(out_dir)
    frame = pd.read_csv(out / "results.csv")
    config = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    k, r = config.get("n_samples", "?"), config.get("readoff_samples", "?")
    lines = ["# Continuous actions: LQG reward recovery", "",
             "Reward MSE and Pearson correlation against the closed-form normalized reward (1-D LQG, "
             "`make_lqg()` defaults, gamma = 0.9) at fresh pairs s ~ rho, a ~ pi; mean ± 95% CI over seeds. "
             "Stage 2: continuous FQE (continuation structure), degree-2 polynomial features + least squares, "
             f"Monte Carlo mu-integrals (stratified, antithetic; {k} draws per next state in the targets, {r} in the "
             "read-off; exact for the point mass).", "",
             "Produced by `OMP_NUM_THREADS=1 python benchmarks/continuous_experiment.py --out continuous-results` "
             "(settings in `config.json`, one row per seed x n x normalization x method in `results.csv`; "
             "`--report-only` rebuilds this page and `figure.png` from the CSV files).", "",
             "| normalization | method | n | seeds | reward MSE | reward corr | policy NLL | FQE iterations |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (norm, method, n), grp in frame.groupby(["normalization", "method", "n"], sort=True):
        lines.append(f"| {norm} | {method} | {n:,} | {len(grp)} | {_fmt(grp.reward_mse)} | {_fmt(grp.reward_corr, 5, True)} "
                     f"| {_fmt(grp.policy_nll, 3, True)} | {grp.fqe_iterations.mean():.0f} |")
    lines += ["", f"Variance of the true reward at the evaluation pairs: gaussian "
              f"{frame[frame.normalization == 'gaussian'].true_reward_var.mean():.3g}, anchor "
              f"{frame[frame.normalization == 'anchor'].true_reward_var.mean():.3g}." if "gaussian" in
              set(frame.normalization) and "anchor" in set(frame.normalization) else ""]
    disc = out / "discretization.csv"
    if disc.exists():
        d = pd.read_csv(disc)
        lines += ["", "## Discretized-action cross-check (ring problem, 1-D bounded action)", "",
                  "Max absolute difference over the K-point midpoint grid between the tabular solver's exact GenPQR "
                  "reward (`genpqr.stage2.recover_reward`) and the continuous pipeline (true policy, Gauss-Legendre "
                  "mu-integrals, exact-design FQE), and each against the truth (Gauss-Legendre, 256 nodes).", "",
                  "| normalization | K | tabular vs continuous | tabular vs truth | continuous vs truth |",
                  "|---|---:|---:|---:|---:|"]
        for _, r in d.iterrows():
            lines.append(f"| {r.normalization} | {r.n_actions} | {r.tabular_vs_continuous:.3g} | "
                         f"{r.tabular_vs_truth:.3g} | {r.continuous_vs_truth:.3g} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    _figure(frame, out / "figure.png")


def _figure(frame, path):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    norms = sorted(frame.normalization.unique())
    fig, axes = plt.subplots(1, len(norms), figsize=(4.6 * len(norms), 3.8), squeeze=False)
    for ax, norm in zip(axes[0], norms):
        sub = frame[frame.normalization == norm]
        for method, grp in sub.groupby("method"):
            stats = grp.groupby("n").reward_mse.apply(lambda v: mean_ci(v.to_numpy())).sort_index()
            ns = stats.index.to_numpy()
            means = np.array([m for m, _ in stats])
            cis = np.nan_to_num(np.array([c for _, c in stats]))
            ax.errorbar(ns, means, yerr=np.minimum(cis, 0.999 * means), marker="o", capsize=3, label=method)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training transitions n")
        ax.set_ylabel("reward MSE")
        ax.set_title(f"LQG, mu = {'N(0, 1)' if norm == 'gaussian' else 'point mass at 0' if norm == 'anchor' else norm}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
