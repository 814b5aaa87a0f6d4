"""Coverage of the structural counterfactual's delta-method intervals on simulated bus panels.

Design: the version of Rust's (1987) data in docs/structural_estimation.md -- 90 mileage
bins, beta = 0.9999, RC = 10.075, theta11 = 2.293, increments (0.3919, 0.5953, 0.0128),
37 buses x 117 months per panel, initial mileage from the stationary distribution.

Per panel (``genpqr.envs._rust.simulate_buses`` with seed ``seed0 + i``), the path a user takes
in Python (the same code ``genpqr counterfactual`` runs on a ``genpqr fit --features`` folder):

    model = GenPQR(anchor_action("replace"), gamma=0.9999, q_model="exact", n_states=90,
                   transition_model=IncrementKernel(2, "replace")).fit(panel)
    structural = fit_structural(model, X, names=["RC", "theta11"])          # NPL: the MLE
    res = model.counterfactual(parameter_change={"RC": "*F"}, structural=structural)

for F in 0.5, 1.5 and 2. The statistic is the long-run (stationary) replacement rate per
bus-month, ``rate[replace]``; its 95% interval is the structural route's default (delta method
from the MLE's OPG covariance, on the logit scale, conditional on the estimated kernel). The
truth is the same statistic of the true model with the changed parameter on the true kernel
(``BusEngine.with_parameters(rc=F * RC).replacement_rate()``). Reported per change: mean
estimate and truth, bias and RMSE in relative terms, mean interval width, coverage (share of
panels whose interval holds the truth, with its binomial standard error), the nonparametric
route's median gap to the structural answer and the mean share of the counterfactual occupancy on
states seen fewer than 10 times.

    OMP_NUM_THREADS=1 python benchmarks/rust_counterfactual_coverage.py [--panels 100] [--seed0 0]
        [--factors 0.5,1.5,2] [--level 0.95]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import pandas as pd

from genpqr import GenPQR
from genpqr import normalization as N
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.exceptions import GenPQRWarning
from genpqr.structural import fit_structural
from genpqr.structural._kernels import IncrementKernel

DESIGN = dict(n_states=90, beta=0.9999, rc=10.075, theta11=2.293, theta3=(0.3919, 0.5953, 0.0128))
BUSES, MONTHS = 37, 117


def features(n_states: int) -> np.ndarray:
    """``(S, 2, 2)``: keep ``(1, -0.001 x)``, replace ``(0, 0)`` -- u(x, keep) = RC - 0.001 theta11 x."""
    X = np.zeros((n_states, 2, 2))
    X[:, 0, 0], X[:, 0, 1] = 1.0, -0.001 * np.arange(n_states)
    return X


def true_rates(truth, factors) -> dict[float, float]:
    """The true counterfactual replacement rate at ``RC * F`` for each factor."""
    return {f: truth.with_parameters(rc=f * truth.rc).replacement_rate() for f in factors}


def one_panel(truth, seed: int, factors, level: float) -> list[dict]:
    """Fit one simulated panel and return one row per factor."""
    panel = simulate_buses(truth, n_buses=BUSES, n_periods=MONTHS, random_state=seed).transitions
    with warnings.catch_warnings():
        # the reward table's coverage warnings concern the nonparametric column, not the rates checked here
        warnings.simplefilter("ignore", GenPQRWarning)
        model = GenPQR(N.anchor_action("replace"), gamma=truth.beta, q_model="exact", n_states=truth.n_states,
                       transition_model=IncrementKernel(truth.theta3.size - 1, "replace")).fit(panel)
        structural = fit_structural(model, features(truth.n_states), names=["RC", "theta11"])
        rows = []
        for f in factors:
            res = model.counterfactual(parameter_change={"RC": f"*{f:g}"}, structural=structural, level=level)
            t = res.to_frame().set_index(["distribution", "statistic"]).loc[("stationary", "rate[replace]")]
            rows.append(dict(seed=seed, factor=f, rc_hat=structural.theta[0], theta11_hat=structural.theta[1],
                             estimate=t.counterfactual, lo=t.counterfactual_lo, hi=t.counterfactual_hi,
                             nonparametric=t.nonparametric_counterfactual,
                             off_support_share=res.support.counterfactual["stationary"][0] if res.support else np.nan))
    return rows


def summarize(runs: pd.DataFrame, truths: dict[float, float]) -> pd.DataFrame:
    """One row per factor: truth, mean estimate, relative bias/RMSE, width, coverage (+- its SE)."""
    out = []
    for f, g in runs.groupby("factor"):
        truth = truths[f]
        rel = g.estimate / truth - 1
        covered = (g.lo <= truth) & (truth <= g.hi)
        cov = covered.mean()
        out.append({"RC x": f"{f:g}", "truth %": 100 * truth, "mean estimate %": 100 * g.estimate.mean(),
                    "rel. bias": rel.mean(), "rel. RMSE": np.sqrt((rel ** 2).mean()),
                    "mean width %": 100 * (g.hi - g.lo).mean(), "coverage": cov,
                    "coverage SE": np.sqrt(cov * (1 - cov) / len(g)),
                    "median |gap| nonparam.": (g.nonparametric / g.estimate - 1).abs().median(),
                    "off-support share": g.off_support_share.mean(), "panels": len(g)})
    return pd.DataFrame(out)


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panels", type=int, default=100)
    parser.add_argument("--seed0", type=int, default=0)
    parser.add_argument("--factors", default="0.5,1.5,2")
    parser.add_argument("--level", type=float, default=0.95)
    args = parser.parse_args(argv)
    factors = [float(f) for f in args.factors.split(",")]
    truth = bus_engine(**DESIGN)
    truths = true_rates(truth, factors)
    start = time.perf_counter()
    rows = []
    for i in range(args.panels):
        rows += one_panel(truth, args.seed0 + i, factors, args.level)
    seconds = time.perf_counter() - start
    table = summarize(pd.DataFrame(rows), truths)
    print(f"Structural counterfactual coverage: {args.panels} panels of {BUSES} buses x {MONTHS} months, "
          f"{DESIGN['n_states']} bins, beta {DESIGN['beta']}, RC {DESIGN['rc']}, theta11 {DESIGN['theta11']}; "
          f"{100 * args.level:g}% delta-method intervals of the stationary replacement rate")
    print(f"baseline rate: truth {100 * truth.replacement_rate():.4f}%")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"{seconds:.1f} s in all ({seconds / args.panels:.2f} s per panel: fit, NPL, {len(factors)} counterfactuals); "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    return table


if __name__ == "__main__":
    main()
