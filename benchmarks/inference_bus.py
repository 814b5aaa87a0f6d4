"""The reward projection's influence-function intervals on the bus engine, beside the MLE
(docs/inference.md).

Design: Rust's bus engine in the Su-Judd (2012) Monte Carlo design (175 mileage bins, beta = 0.975,
RC = 11.7257, theta11 = 2.4569; 50 buses x 120 months, stationary starts; genpqr.envs._rust). Per
panel, the path a user takes in Python:

    model = GenPQR(anchor_action("replace"), gamma=0.975, q_model="exact", n_states=175,
                   transition_model=IncrementKernel(4, "replace")).fit(panel)
    mle = fit_structural(model, X)                                   # NPL: the MLE, OPG SE
    proj = fit_structural(model, X, estimator="projection")          # projection, its EIF SE
    deb = infer(model, reward_projection(X, names=...), panel)       # cross-fitted one-step

with X the anchor-normalized features (keep: (1, -0.001 x), replace: 0), so the normalized reward is
exactly linear: the projection's target is the true (RC, theta11). Reported per estimator and
parameter: coverage of the 95% Wald interval (binomial SE), bias, SD, mean SE / SD, and the mean SE
relative to the MLE's; plus the population ratio of influence-function SD to the MLE's (exact
algebra at the truth), for the counts weights, for inverse-variance weights ``pi(1 - pi)`` and for
the efficient (optimal minimum-distance) projection, ``reward_projection(X, weights="efficient")``
at the full-sample nuisances, whose overidentification statistic J is summarized too (its mean
against its degrees of freedom, and how often it rejects at 5%).

Also ``--design frequent``: a bus engine whose replacements are common (40 bins, beta = 0.9, RC = 2,
theta11 = 60: 24% of months), where the anchor action is not rare.

    OMP_NUM_THREADS=1 python benchmarks/inference_bus.py [--panels 200] [--seed0 0] [--cross-fit 5]
        [--design su-judd|frequent]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import pandas as pd
from scipy.stats import chi2

from genpqr import GenPQR
from genpqr import normalization as N
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.inference import _algebra as alg
from genpqr.inference import infer, reward_projection
from genpqr.inference._targets import efficient_pieces
from genpqr.structural import fit_structural
from genpqr.structural._estimation import likelihood_derivatives
from genpqr.structural._kernels import IncrementKernel

NAMES = ["RC", "theta11"]


def population_ratios(truth) -> dict:
    """Influence-function SD of the projection over the MLE's (per observation, at the truth)."""
    S = truth.n_states
    rho = truth.stationary_distribution()
    mu = np.zeros((S, 2))
    mu[:, 1] = 1.0
    law = alg.TabularLaw.create(rho, truth.policy, truth.kernel, truth.beta, mu, np.zeros(S))
    X = truth.features("anchor")
    opg = likelihood_derivatives(truth.theta, X, rho[:, None] * truth.policy, truth.kernel, truth.beta).opg
    mle = np.sqrt(np.diag(np.linalg.inv(opg)))
    out = {}
    inv_var = np.repeat((truth.policy[:, 0] * truth.policy[:, 1])[:, None], 2, axis=1)
    for name, w in [("counts", None), ("pi(1-pi)", inv_var)]:
        pieces = alg.normalized_map(law, alg.projection_functional(X, None, w), truth.beta)
        chi, prob = alg.population_influence(pieces, law)
        out[name] = np.sqrt(np.einsum("sat,satm->m", prob, chi ** 2)) / mle
    pieces = efficient_pieces(law, X)
    out["efficient (OMD)"] = np.sqrt(np.diag(alg.influence_covariance(pieces, law))) / mle
    return out


def inverse_variance(model):
    """Weights ``pi_hat(keep|x) pi_hat(replace|x)`` of the fitted first stage (both actions): the inverse
    variance of a log-odds, held fixed as the projection's weights."""
    pi = np.exp(model.stage2_.recovery.log_policy)
    return np.repeat((pi[:, 0] * pi[:, 1])[:, None], 2, axis=1)


def one(truth, seed, cross_fit, n_buses=50, n_periods=120):
    panel = simulate_buses(truth, n_buses=n_buses, n_periods=n_periods, random_state=seed).transitions
    X = truth.features("anchor")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = GenPQR(N.anchor_action("replace"), gamma=truth.beta, q_model="exact", n_states=truth.n_states,
                       transition_model=IncrementKernel(truth.theta3.size - 1, "replace")).fit(panel)
        t_fit = time.perf_counter() - t0
        mle = fit_structural(model, X, names=NAMES)
        proj = fit_structural(model, X, names=NAMES, estimator="projection")
        deb = infer(model, reward_projection(X, names=NAMES), panel, cross_fit=cross_fit, random_state=seed, warn=False)
        wdeb = infer(model, reward_projection(X, names=NAMES, weights=inverse_variance(model)), panel,
                     cross_fit=cross_fit, random_state=seed, warn=False)
        omd = infer(model, reward_projection(X, names=NAMES, weights="efficient"), panel, cross_fit=None, warn=False)
    spec = omd.diagnostics.iloc[0]
    for label, est, se, secs, res in [("MLE (NPL, OPG SE)", mle.theta, mle.std_error, np.nan, None),
                                      ("projection (EIF SE)", proj.theta, proj.std_error, np.nan, None),
                                      (f"one-step, {cross_fit}-fold (EIF SE)", deb.estimate, deb.std_error,
                                       deb.seconds, deb),
                                      ("one-step, pi(1-pi) weights", wdeb.estimate, wdeb.std_error, wdeb.seconds, wdeb),
                                      ("projection, efficient (OMD)", omd.estimate, omd.std_error, omd.seconds, omd)]:
        for j, name in enumerate(NAMES):
            rows.append(dict(seed=seed, method=label, parameter=name, estimate=est[j], se=se[j],
                             mle_se=mle.std_error[j], truth=truth.theta[j], seconds=secs, fit_seconds=t_fit,
                             warned=bool(res.warnings) if res is not None else False,
                             J=spec.J if res is omd else np.nan, J_dof=spec.J_dof if res is omd else np.nan))
    return rows


def summarize(frame):
    out = []
    for (method, parameter), f in frame.groupby(["method", "parameter"], sort=False):
        err = f.estimate - f.truth
        cover = (np.abs(err) <= 1.959964 * f.se).astype(float)
        sd = f.estimate.std(ddof=1)
        out.append(dict(method=method, parameter=parameter, panels=len(f), coverage=cover.mean(),
                        cov_se=np.sqrt(cover.mean() * (1 - cover.mean()) / len(f)), bias=err.mean(), sd=sd,
                        se_over_sd=f.se.mean() / sd, se_over_mle_se=(f.se / f.mle_se).mean(),
                        infer_over_fit=(f.seconds / f.fit_seconds).median(), warned=f.warned.mean(),
                        J_mean=f.J.mean(), J_dof=f.J_dof.mean(),
                        J_reject5=(chi2.sf(f.J, f.J_dof) < 0.05).mean() if f.J.notna().any() else np.nan))
    return pd.DataFrame(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panels", type=int, default=200)
    parser.add_argument("--seed0", type=int, default=0)
    parser.add_argument("--cross-fit", type=int, default=5)
    parser.add_argument("--out", default=None)
    parser.add_argument("--design", choices=["su-judd", "frequent"], default="su-judd",
                        help="su-judd: Su and Judd's design (replacement in 1%% of months); frequent: 40 bins, "
                             "beta 0.9, RC 2, theta11 60 (cost scale 0.001; replacement 24%% of months)")
    args = parser.parse_args(argv)
    truth = bus_engine() if args.design == "su-judd" else bus_engine(n_states=40, beta=0.9, rc=2.0, theta11=60.0)
    start, rows = time.time(), []
    for i in range(args.panels):
        rows += one(truth, args.seed0 + i, args.cross_fit)
        if args.out and (i + 1) % 10 == 0:
            pd.DataFrame(rows).to_csv(args.out, index=False)
    frame = pd.DataFrame(rows)
    if args.out:
        frame.to_csv(args.out, index=False)
    print(f"bus engine ({args.design}), {args.panels} panels of 50 x 120, {time.time() - start:.0f} s, "
          f"{platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}")
    for name, ratio in population_ratios(truth).items():
        print(f"population SD ratio projection / MLE, weights {name}: RC {ratio[0]:.2f}, theta11 {ratio[1]:.2f}")
    with pd.option_context("display.width", 100, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(summarize(frame).drop(columns=["cov_se"]).to_string(index=False))


if __name__ == "__main__":
    main()
