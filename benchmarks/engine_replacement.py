"""Engine replacement (Rust 1987; Su-Judd 2012 Monte Carlo design): GenPQR's structural
estimators against NFXP on the same simulated panels.

50 panels (seeds 0..49) of 50 buses x 120 months. On each panel:

* GenPQR first stage (timed as "first stage"): choice probabilities (a cubic-in-mileage
  logit, or cell frequencies), the increment kernel estimated from the panel, and the exact
  solve under the anchor normalization (replacement, g = 0);
* projection of the recovered keep-reward on (1, -0.001 x) -> (RC, theta11), and the same
  projection under the normalization mu = pi_hat (stage 2 re-solved, features normalized);
* structural steps on top (each timed alone): the fixed-v CCP step, the PML step, NPL;
* NFXP (Rust's nested fixed point, BHHH, Newton-Kantorovich inner loop) with the same
  estimated increment kernel, from theta = 0 like every other method.

Writes a tidy CSV (one row per seed x first stage x method) and prints the Markdown tables,
rebuilt from that file (``--table-only`` rebuilds them without re-running).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/engine_replacement.py \
        [--panels 50] [--out engine-replacement-results] [--table-only]

The tables of docs/engine_replacement.md are those of the run kept in
docs/results/engine_replacement/ (``--table-only --out docs/results/engine_replacement`` prints
them again; it only reads).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import scipy
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, PolynomialFeatures

from genpqr import GenPQR, normalization as N

from genpqr.structural import _ddc as ddc
from genpqr.structural._nfxp import NFXP
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.stage1 import FrequencyClassifier


def scale_mileage(x):
    return np.asarray(x, dtype=np.float64) / 175.0


FIRST_STAGES = {
    # a flexible logit of the choice probabilities in mileage (no clipping: P(replace) is 1e-5..0.08)
    "logit": lambda: (make_pipeline(FunctionTransformer(scale_mileage), PolynomialFeatures(3),
                                    LogisticRegression(C=1e6, max_iter=2000)), None),
    # cell frequencies; most cells see no replacement, so they need clipping
    "frequency": lambda: (FrequencyClassifier(n_states=175), (1e-3, 1 - 1e-3)),
}
STEPS = ("fixed-v", "pml", "npl")


def run_panel(model, seed, first_stages):
    rows = []
    panel = simulate_buses(model, n_buses=50, n_periods=120, random_state=seed).transitions
    kernel_model = ddc.IncrementKernel(4, "replace")
    X = model.features("anchor")
    counts = ddc.choice_counts(panel, model.n_states)
    for stage_name in first_stages:
        policy_model, clip = FIRST_STAGES[stage_name]()
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # clipping warnings for the frequency first stage
            fit = GenPQR(normalization=N.anchor_action("replace"), gamma=model.beta, q_model="exact",
                         n_states=model.n_states, policy_model=policy_model, clip=clip,
                         transition_model=kernel_model).fit(panel)
        first = time.perf_counter() - t0
        rec = fit.stage2_.recovery
        t0 = time.perf_counter()
        proj = ddc.project_reward(rec.reward, X, counts)
        t_proj = time.perf_counter() - t0
        rows.append(dict(seed=seed, first_stage=stage_name, method="projection", rc=proj.theta[0],
                         theta11=proj.theta[1], se_rc=np.nan, se_theta11=np.nan, seconds=t_proj,
                         first_stage_seconds=first, iterations=1))
        # the same projection under the normalization mu = pi_hat (g = 0): re-solve stage 2 only
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            weighted = fit.renormalize(N.weighted(np.exp(rec.log_policy)))
        rec_w = weighted.stage2_.recovery
        X_mu, off_mu = ddc.normalize_features(X, weighted.stage2_.kernel, model.beta, rec_w.mu, rec_w.g)
        proj_w = ddc.project_reward(rec_w.reward, X_mu, counts, offset=off_mu)
        rows.append(dict(seed=seed, first_stage=stage_name, method="projection-pi", rc=proj_w.theta[0],
                         theta11=proj_w.theta[1], se_rc=np.nan, se_theta11=np.nan,
                         seconds=time.perf_counter() - t0, first_stage_seconds=first, iterations=1))
        for method in STEPS:
            step = ddc.StructuralStep(X, method=method).fit(fit)
            rows.append(dict(seed=seed, first_stage=stage_name, method=method, rc=step.theta_[0],
                             theta11=step.theta_[1], se_rc=step.se_[0], se_theta11=step.se_[1],
                             seconds=step.fit_time_, first_stage_seconds=first, iterations=step.n_iter_))
    nfxp = NFXP(model.features("rust"), gamma=model.beta, transition_model=kernel_model).fit(panel)
    rows.append(dict(seed=seed, first_stage="-", method="nfxp", rc=nfxp.theta_[0], theta11=nfxp.theta_[1],
                     se_rc=nfxp.se_[0], se_theta11=nfxp.se_[1], seconds=nfxp.fit_time_, first_stage_seconds=0.0,
                     iterations=nfxp.result_.n_evaluations))
    return rows


LABELS = {
    "projection": "GenPQR projection, anchor normalization",
    "projection-pi": "GenPQR projection, normalization mu = pi_hat",
    "fixed-v": "structural step, v fixed, anchor normalization (`fixed-v`)",
    "pml": "structural step, v fixed, mu = pi_hat (= Hotz-Miller PML, `pml`)",
    "npl": "NPL on GenPQR's solve (`npl`)",
    "nfxp": "NFXP (BHHH + Newton-Kantorovich)",
}


def table(df, truth):
    lines = ["| first stage | method | RC mean | RC bias | RC sd | theta11 mean | theta11 bias | theta11 sd "
             "| mean SE (RC, theta11) | time per panel (ms) | iterations |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    order = [(stage, m) for stage in ("logit", "frequency") for m in ("projection", "projection-pi", *STEPS)]
    order += [("-", "nfxp")]
    for stage, method in order:
        d = df[(df.first_stage == stage) & (df.method == method)]
        if d.empty:
            continue
        se = "" if d.se_rc.isna().all() else f"{d.se_rc.mean():.2f}, {d.se_theta11.mean():.2f}"
        lines.append(
            f"| {stage} | {LABELS[method]} | {d.rc.mean():.3f} | {d.rc.mean() - truth[0]:+.3f} | {d.rc.std():.3f} "
            f"| {d.theta11.mean():.3f} | {d.theta11.mean() - truth[1]:+.3f} | {d.theta11.std():.3f} | {se} "
            f"| {1000 * d.seconds.mean():.1f} | {d.iterations.mean():.1f} |")
    return "\n".join(lines)


def timing(df):
    nfxp = df[df.method == "nfxp"].set_index("seed").seconds
    out = ["| first stage | (i) first stage (ms) | step | (ii) step (ms) | (iii) NFXP (ms) | NFXP / (i + ii) "
           "| NFXP / (ii) |", "|---|---|---|---|---|---|---|"]
    for stage in ("logit", "frequency"):
        for method in STEPS:
            d = df[(df.first_stage == stage) & (df.method == method)].set_index("seed")
            if d.empty:
                continue
            first, step = d.first_stage_seconds.reindex(nfxp.index), d.seconds.reindex(nfxp.index)
            out.append(f"| {stage} | {1000 * first.mean():.1f} | {method} | {1000 * step.mean():.1f} "
                       f"| {1000 * nfxp.mean():.1f} | {nfxp.mean() / (first.mean() + step.mean()):.1f} "
                       f"| {nfxp.mean() / step.mean():.1f} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--panels", type=int, default=50)
    ap.add_argument("--first-stages", default="logit,frequency")
    ap.add_argument("--out", default="engine-replacement-results",
                    help="results folder (default: engine-replacement-results)")
    ap.add_argument("--table-only", action="store_true", help="rebuild the tables from the saved CSV")
    args = ap.parse_args()
    model = bus_engine()
    path = Path(args.out) / "engine_replacement.csv"
    if not args.table_only:
        stages = args.first_stages.split(",")
        run_panel(model, 10_000, stages)  # warm-up: imports and first-call overheads are not timed
        start = time.perf_counter()
        rows = []
        for seed in range(args.panels):
            rows.extend(run_panel(model, seed, stages))
        total = time.perf_counter() - start
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(path, index=False)
        print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, python "
              f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}; "
              f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
        print(f"{args.panels} panels of 50 buses x 120 months; total {total:.1f} s; results in {path}")
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    print(f"truth RC = {model.rc}, theta11 = {model.theta11}; {df.seed.nunique()} panels\n")
    print(table(df, model.theta))
    print()
    print(timing(df))


if __name__ == "__main__":
    main()
