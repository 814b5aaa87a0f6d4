"""Latent types on simulated bus panels: the full-information mixture MLE, the sequential CCP-EM
and the one-type fit.

Design: Su and Judd's (2012) bus engine (175 mileage bins, beta = 0.975, theta11 = 2.4569,
their increments) with two types of bus differing in the replacement cost, RC = 10 and 13
(``genpqr.envs._rust.TYPED_RC``), mixing 0.5/0.5; each panel ``--buses`` buses x ``--months``
months (``genpqr.envs._rust.simulate_typed_buses`` with seed ``seed0 + i``, initial mileage from
each type's stationary distribution). The kernel is the true one (every likelihood and standard
error here is conditional on the kernel). Flow utility ``u(x, keep) = -0.001 theta11 x``,
``u(x, replace) = -RC``, RC type-specific, theta11 shared.

Per panel:

    fit = estimate_types("npl", X, episodes, kernel, beta, n_types=2, type_specific=["RC"])    # the MLE
    ccp = estimate_types("ccp-em", ..., ccp_update="model" / "frequency")                     # CCP-EM
    one = estimate_structural("npl", X, counts, kernel, beta)                                   # one type

Reported: for each parameter of the MLE, the mean estimate, bias, Monte Carlo SE of the bias
(sd / sqrt(panels)), the bias in units of that SE, the mean OPG SE against the Monte Carlo sd,
and the share of panels whose 95% Wald interval (OPG) holds the truth; for each CCP-EM, the
median and largest distance to the MLE in units of the MLE's SE; for the one-type fit, its
mean estimate and bias against the types' mean RC (11.5) and theta11. One row per panel and
method goes to ``--out`` (CSV); the tables are rebuilt from it.

The timing target (a 2-type structural fit on a 5,000-bus-month panel): ``--timing N`` times the
mixture MLE (``"npl"``, RC type-specific) on N panels of 50 buses x 100 months (seeds 1000..),
from the call to the result (the pooled one-type start included); ``--panels 0`` runs only that.

    OMP_NUM_THREADS=1 python benchmarks/rust_types.py [--panels 100] [--buses 100] [--months 300] [--seed0 0]
        [--out rust_types.csv] [--timing 5]

The kept run: ``docs/results/rust_types/rust_types.csv``; ``--table-only --out FILE`` prints the
tables from a results file without fitting.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import pandas as pd

from genpqr.envs._rust import TYPED_RC, bus_engine, simulate_typed_buses
from genpqr.exceptions import GenPQRWarning
from genpqr.structural import estimate_structural
from genpqr.structural._kernels import choice_counts
from genpqr.structural._types import estimate_types

NAMES = ["RC", "theta11"]


def one_panel(seed: int, buses: int, months: int) -> list[dict]:
    """The four fits on one panel, one row per method and parameter."""
    truth = bus_engine()
    X = truth.features("rust")
    panel = simulate_typed_buses(n_buses=buses, n_periods=months, random_state=seed)
    tr = panel.transitions
    episodes = (tr.episode_ids, tr.states, tr.actions)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GenPQRWarning)
        start = time.perf_counter()
        mle = estimate_types("npl", X, episodes, truth.kernel, truth.beta, n_types=2, type_specific=["RC"],
                             names=NAMES)
        mle_seconds = time.perf_counter() - start
        fits = {"mle": (mle, mle_seconds)}
        for update in ("model", "frequency"):
            start = time.perf_counter()
            fit = estimate_types("ccp-em", X, episodes, truth.kernel, truth.beta, n_types=2, type_specific=["RC"],
                                 names=NAMES, ccp_update=update)
            fits[f"ccp-em ({update})"] = (fit, time.perf_counter() - start)
        start = time.perf_counter()
        one = estimate_structural("npl", X, choice_counts(tr, truth.n_states), truth.kernel, truth.beta, names=NAMES)
        one_seconds = time.perf_counter() - start
    true_values = {"RC[type 0]": TYPED_RC[0], "RC[type 1]": TYPED_RC[1], "theta11": truth.theta11,
                   "mixing proportion[type 1]": 0.5}
    for method, (fit, seconds) in fits.items():
        values = list(fit.theta) + [fit.mixing_proportions[1]]
        ses = list(fit.std_error) + [fit.mixing_proportions_se[1]]
        for name, value, se, mle_value, mle_se in zip(list(fit.names) + ["mixing proportion[type 1]"], values, ses,
                                                      list(mle.theta) + [mle.mixing_proportions[1]],
                                                      list(mle.std_error) + [mle.mixing_proportions_se[1]]):
            rows.append(dict(seed=seed, method=method, parameter=name, estimate=value, std_error=se,
                             truth=true_values[name], mle=mle_value, mle_std_error=mle_se, loglik=fit.loglik,
                             converged=fit.converged, seconds=seconds))
    for name, value, se in zip(NAMES, one.theta, one.std_error):
        rows.append(dict(seed=seed, method="one type", parameter=name, estimate=value, std_error=se,
                         truth=float(np.mean(TYPED_RC)) if name == "RC" else truth.theta11, mle=np.nan,
                         mle_std_error=np.nan, loglik=one.loglik, converged=one.converged, seconds=one_seconds))
    return rows


def mle_table(frame: pd.DataFrame) -> pd.DataFrame:
    d = frame[frame.method == "mle"]
    rows = []
    for name, g in d.groupby("parameter", sort=False):
        n, sd = len(g), g.estimate.std(ddof=1)
        bias = g.estimate.mean() - g.truth.iloc[0]
        lo, hi = g.estimate - 1.959964 * g.std_error, g.estimate + 1.959964 * g.std_error
        cover = ((lo <= g.truth) & (g.truth <= hi)).mean()
        rows.append(dict(parameter=name, truth=g.truth.iloc[0], mean=g.estimate.mean(), bias=bias,
                         mc_se_of_bias=sd / np.sqrt(n), bias_in_mc_se=bias / (sd / np.sqrt(n)), mc_sd=sd,
                         mean_opg_se=g.std_error.mean(), coverage_95=cover,
                         coverage_se=np.sqrt(cover * (1 - cover) / n)))
    return pd.DataFrame(rows)


def ccp_table(frame: pd.DataFrame) -> pd.DataFrame:
    d = frame[frame.method.str.startswith("ccp-em")].copy()
    d["distance_in_mle_se"] = (d.estimate - d.mle).abs() / d.mle_std_error
    return (d.groupby(["method", "parameter"], sort=False)
            .agg(median_distance_in_mle_se=("distance_in_mle_se", "median"),
                 max_distance_in_mle_se=("distance_in_mle_se", "max"), mean_estimate=("estimate", "mean"),
                 converged=("converged", "mean"), mean_seconds=("seconds", "mean")).reset_index())


def one_type_table(frame: pd.DataFrame) -> pd.DataFrame:
    d = frame[frame.method == "one type"]
    return (d.groupby("parameter", sort=False)
            .apply(lambda g: pd.Series(dict(truth=g.truth.iloc[0], mean=g.estimate.mean(),
                                            bias=g.estimate.mean() - g.truth.iloc[0],
                                            mc_se_of_bias=g.estimate.std(ddof=1) / np.sqrt(len(g)),
                                            mean_opg_se=g.std_error.mean())), include_groups=False)
            .reset_index())


def timing(n: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (process) seconds of the 2-type mixture MLE on ``n`` panels of 50 buses x
    100 months (on a shared machine the CPU time is what the fit itself costs)."""
    truth = bus_engine()
    seconds, cpu = [], []
    for i in range(n):
        tr = simulate_typed_buses(n_buses=50, n_periods=100, random_state=1000 + i).transitions
        start, start_cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GenPQRWarning)
            estimate_types("npl", truth.features("rust"), (tr.episode_ids, tr.states, tr.actions), truth.kernel,
                           truth.beta, n_types=2, type_specific=["RC"], names=NAMES)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return seconds, cpu


def print_tables(frame: pd.DataFrame) -> None:
    """The three tables and the mean seconds per fit, from the results file."""
    print(f"{frame.seed.nunique()} panels; RC = {TYPED_RC}, mixing 0.5/0.5")
    print("\nfull-information mixture MLE (EM + Newton, NPL M-step):")
    print(mle_table(frame).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print("\nsequential CCP-EM, distance to the MLE in units of the MLE's OPG SE:")
    print(ccp_table(frame).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print("\none-type fit on the same panels (RC against the types' mean 11.5):")
    print(one_type_table(frame).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    seconds = frame.groupby("method").seconds.mean()
    print("\nmean seconds per fit: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panels", type=int, default=100)
    parser.add_argument("--buses", type=int, default=100)
    parser.add_argument("--months", type=int, default=300)
    parser.add_argument("--seed0", type=int, default=0)
    parser.add_argument("--out", default="rust_types.csv")
    parser.add_argument("--timing", type=int, default=5)
    parser.add_argument("--table-only", dest="table_only", action="store_true")
    args = parser.parse_args()
    from tqdm.auto import tqdm

    if args.table_only:
        print_tables(pd.read_csv(args.out))
        return
    if args.timing:
        seconds, cpu = timing(args.timing)
        print(f"2-type mixture MLE on 50 buses x 100 months (5,000 bus-months), {args.timing} panels: wall median "
              f"{np.median(seconds):.1f} s, max {np.max(seconds):.1f} s; CPU median {np.median(cpu):.1f} s, max "
              f"{np.max(cpu):.1f} s (load {os.getloadavg()[0]:.1f})")
    if args.panels < 1:
        return
    start = time.perf_counter()
    rows = []
    for i in tqdm(range(args.panels), desc="panels"):
        rows += one_panel(args.seed0 + i, args.buses, args.months)
        pd.DataFrame(rows).to_csv(args.out, index=False)
    print_tables(pd.read_csv(args.out))
    print(f"total {time.perf_counter() - start:.0f} s on {platform.machine()} ({os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
