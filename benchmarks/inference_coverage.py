"""Coverage of genpqr.inference's debiased intervals, with the plug-in and its episode
bootstrap side by side (docs/inference.md).

Design ``ring30``: the ring-30 reference design (30 states on a ring, stay / -1 / +1 with
slips, gamma = 0.9, behaviour soft-optimal, rows i.i.d. from its stationary law). Nuisances
*estimated*: the first stage is a deliberately biased (but consistent) smoother (action counts smoothed
over ring neighbours, bandwidth 20 n^(-1/5) states, clipped at 1e-3), the kernel the counts
(``transition_model="counts"``). Targets: 1a the value of pi_fix under u at gamma = 0.9, 1b the
softmax over {stay, +1} at tau = 0.5 under u, 2 the value of pi_fix under the anchor-normalized
reward (anchor stay, g = 0) at gamma' = 0.8. True values from the exact algebra.

Per replication and sample size n: ``infer(model, targets, data, cross_fit=K)`` (one-step,
influence-function SE, Wald 95%), the plug-in at the full-sample fit, and (on the first
``--boot-reps`` replications) the percentile interval of ``--boot`` episode-bootstrap refits of the
plug-in. Prints, per n, target and method: coverage (with its binomial SE), bias, SD, RMSE, mean
interval width, mean SE / SD, seconds per replication.

Design ``paper``: the paper's continuous design (its Sec. 7: 4 actions, the dynamics,
reward, behaviour at temperature 0.8 and pi_fix of its code) on a 31 x 31 grid of the state box
(the paper solved on 61 x 61; the coarser grid keeps the runs within this machine), rows
i.i.d. from the behaviour's stationary law. As in the paper the kernel is known; the first stage is
a multinomial logit on cubic polynomials of the cells' coordinates, clipped to [1e-3, 0.999]
(``paper-boosted``: gradient-boosted trees instead); the Riesz representers are *estimated* (Riesz regression on tensor cubic splines of the coordinates; the paper's were
oracle). Targets: 1a (pi_fix, gamma 0.9, under u), 1b (softmax over actions {0, 1, 3}, tau 0.6,
under u), 2 (pi_fix under the anchor-normalized reward, anchor 0, at gamma' = 0.92).

    OMP_NUM_THREADS=1 python benchmarks/inference_coverage.py ring30 [--reps 500] [--sizes 1000,4000,16000]
        [--cross-fit 5] [--boot 100] [--boot-reps 100] [--out /tmp/ring30.csv]
    OMP_NUM_THREADS=1 python benchmarks/inference_coverage.py paper --sizes 1000,2500,5000,10000 ...

Design ``exp2``: the paper's Experiment 2 environment with a neural first stage (weight decay;
``exp2-paper-bc``: the paper's network without it; see ``exp2_setup``).

    OMP_NUM_THREADS=1 python benchmarks/inference_coverage.py exp2 --reps 100 --sizes 10000 --cross-fit 5 --boot 0
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import genpqr  # noqa: E402
from genpqr.evaluation import bootstrap  # noqa: E402
from genpqr.inference import infer, policy_value, softmax_value
from genpqr.inference._infer import plug_in
from genpqr.inference import _algebra as alg  # noqa: E402
from genpqr.normalization import anchor_action  # noqa: E402
from inference_designs import RingSmoother, ring30, simulate_rows  # noqa: E402


def ring30_setup():
    law, pi_fix, _ = ring30()
    targets = [policy_value(pi_fix, reward="log_policy", name="1a"),
               softmax_value([0, 2], 0.5, reward="log_policy", name="1b"),
               policy_value(pi_fix, gamma=0.8, name="2")]
    mask = np.zeros((30, 3), dtype=bool)
    mask[:, [0, 2]] = True
    truth = np.concatenate([alg.log_policy_map(law, alg.policy_value_functional(pi_fix)).value,
                            alg.log_policy_map(law, alg.softmax_value_functional(mask, 0.5)).value,
                            alg.normalized_map(law, alg.policy_value_functional(pi_fix), 0.8).value])

    def make(n, rng):
        s, a, s2 = simulate_rows(law, n, rng)
        data = genpqr.from_arrays(s[:, None].astype(float), a, s2[:, None].astype(float), episode_ids=np.arange(n))
        model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=30,
                              policy_model=RingSmoother(30, 20 * n ** -0.2), transition_model="counts",
                              clip=(1e-3, 1.0))
        return model, data

    return targets, truth, make, None


def paper_setup(n_grid: int = 31, cross_riesz: bool = True, first_stage: str = "logistic"):
    """The paper's continuous design on an ``n_grid`` x ``n_grid`` grid: the kernel
    known (as in the paper), the first stage a multinomial logit on cubic polynomials of the cells'
    coordinates (``"logistic"``; ``"boosted"``: gradient-boosted trees), the Riesz representers by
    Riesz regression on tensor splines of the coordinates."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    from inference_designs import GridCoordinates, TensorSplines, paper_grid

    law, coords, pi_fix = paper_grid(n_grid)
    S = coords.shape[0]
    mask = np.zeros((S, 4), dtype=bool)
    mask[:, [0, 1, 3]] = True
    targets = [policy_value(pi_fix, reward="log_policy", name="1a"),
               softmax_value([0, 1, 3], 0.6, reward="log_policy", name="1b"),
               policy_value(pi_fix, gamma=0.92, name="2")]
    truth = np.concatenate([alg.log_policy_map(law, alg.policy_value_functional(pi_fix)).value,
                            alg.log_policy_map(law, alg.softmax_value_functional(mask, 0.6)).value,
                            alg.normalized_map(law, alg.policy_value_functional(pi_fix), 0.92).value])
    kernel = law.kernel.matrix
    riesz = TensorSplines(GridCoordinates(coords), n_knots=6) if cross_riesz else None

    def make(n, rng):
        s, a, s2 = simulate_rows(law, n, rng)
        data = genpqr.from_arrays(s[:, None].astype(float), a, s2[:, None].astype(float), episode_ids=np.arange(n))
        policy = (make_pipeline(GridCoordinates(coords), HistGradientBoostingClassifier(max_iter=100, random_state=0))
                  if first_stage == "boosted" else
                  make_pipeline(GridCoordinates(coords), StandardScaler(), PolynomialFeatures(3),
                                LogisticRegression(C=10.0, max_iter=3000)))
        model = genpqr.GenPQR(q_model="exact", normalization=anchor_action(0), gamma=0.9, n_states=S,
                              policy_model=policy, transition_model=kernel, clip=(1e-3, 0.999))
        return model, data

    return targets, truth, make, riesz


def exp2_setup(first_stage: str = "bc-wd"):
    """The paper's Experiment 2 environment (genpqr.envs.make_synthetic_env, seed 0, anchor shift 0: 5
    state coordinates, 5 actions, deterministic moves, gamma 0.9, anchor 0 with g = 0); 1,000
    trajectories of 10 steps per replication (the sample size is the number of rows).

    First stage: neural behaviour cloning (genpqr.models._nn.MLPClassifier, (64, 64)) clipped to
    [0.01, 0.99]; ``"bc-wd"`` (design ``exp2``) with weight decay 1e-3 and 10 epochs, the settings of
    the registered method "GenPQR (BC wd, LSTD, RFF)" (lower held-out log loss on this environment
    than the paper's); ``"bc"`` (design ``exp2-paper-bc``) the paper's network, 40 epochs without
    weight decay. Stage 2 LSTD on the network's last hidden layer. Riesz features
    ``inference_designs.exp2_riesz_features()``: quantile cubic splines of each state coordinate
    (the library's default) and of the mean state coordinate (the quantity the target's features
    are built from, and the direction every move shifts the state along), *not* the network's
    hidden layer (``riesz="policy"``): a representer learned on the first stage's own
    representation errs along the first stage's errors and the one-step overcorrects
    (docs/benchmarks.md). Run with the library's folds for a flexible first stage (``--cross-fit
    5``). Target: the projection of the normalized reward on an intercept and the mean state
    coordinate per non-anchor action (8 parameters); truth by Monte Carlo over 200,000 trajectories
    with the true reward and policy."""
    from genpqr.envs._synthetic import SyntheticEnv
    from genpqr.inference import reward_projection
    from genpqr.models._nn import MLPClassifier

    from inference_designs import EXP2_NAMES, exp2_features, exp2_riesz_features, exp2_truth

    env = SyntheticEnv.from_seed(0, anchor_shift=0.0)
    truth = exp2_truth(env)
    network = (dict(weight_decay=1e-3, max_epochs=10) if first_stage == "bc-wd" else {})

    def make(n, rng):
        data = env.simulate(n // 10, 10, random_state=rng)
        model = genpqr.GenPQR(normalization=anchor_action(0), gamma=0.9, q_model="lstd", clip=(0.01, 0.99),
                              policy_model=MLPClassifier(random_state=0, **network))
        return model, data

    return [reward_projection(exp2_features, names=EXP2_NAMES)], truth, make, exp2_riesz_features()


DESIGNS = {"ring30": ring30_setup, "paper": paper_setup, "exp2": exp2_setup,
           "exp2-paper-bc": lambda: exp2_setup(first_stage="bc"),
           "paper-boosted": lambda: paper_setup(first_stage="boosted")}


def one(make, targets, truth, n, seed, cross_fit, n_boot, riesz=None, one_step=True):
    rng = np.random.default_rng(seed)
    model, data = make(n, rng)
    t0 = time.perf_counter()
    model.fit(data)
    t_fit = time.perf_counter() - t0
    rows = []
    if one_step:
        res = infer(model, targets, data, cross_fit=cross_fit, random_state=seed, warn=False, riesz=riesz)
        names, plug = res.names, res.plug_in
        lo, hi = res.conf_int().to_numpy().T
        for j, name in enumerate(names):
            rows.append(dict(n=n, seed=seed, target=name, method="one-step (EIF)", estimate=res.estimate[j],
                             se=res.std_error[j], lo=lo[j], hi=hi[j], truth=truth[j], seconds=res.seconds,
                             fit_seconds=t_fit, warned=bool(res.warnings)))
    else:  # the bootstrap alone (its rows join an earlier run's one-step rows of the same seeds)
        names, plug = [t.name for t in targets], plug_in(model, targets)
    for j, name in enumerate(names):
        rows.append(dict(n=n, seed=seed, target=name, method="plug-in", estimate=plug[j], se=np.nan,
                         lo=np.nan, hi=np.nan, truth=truth[j], seconds=t_fit, fit_seconds=t_fit))
    if n_boot:
        t0 = time.perf_counter()
        boot = bootstrap(model, data, n_boot=n_boot, statistic=lambda m: plug_in(m, targets), fitted=model,
                         random_state=seed)
        t_boot = time.perf_counter() - t0
        blo, bhi = boot.interval(0.95)
        for j, name in enumerate(names):
            rows.append(dict(n=n, seed=seed, target=name, method=f"plug-in + bootstrap ({n_boot})",
                             estimate=plug[j], se=boot.std_error[j], lo=blo[j], hi=bhi[j], truth=truth[j],
                             seconds=t_boot + t_fit, fit_seconds=t_fit))
    return rows


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (n, target, method), f in frame.groupby(["n", "target", "method"], sort=False):
        err = f.estimate - f.truth
        cover = ((f.lo <= f.truth) & (f.truth <= f.hi)).astype(float) if f.lo.notna().all() else pd.Series([np.nan])
        sd = f.estimate.std(ddof=1)
        out.append(dict(n=n, target=target, method=method, reps=len(f), coverage=cover.mean(),
                        cov_se=np.sqrt(cover.mean() * (1 - cover.mean()) / len(f)), bias=err.mean(), sd=sd,
                        rmse=np.sqrt((err ** 2).mean()), width=(f.hi - f.lo).mean(), se_over_sd=f.se.mean() / sd,
                        seconds=f.seconds.mean(), cost_vs_fit=(f.seconds / f.fit_seconds).median()))
    return pd.DataFrame(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("design", choices=sorted(DESIGNS))
    parser.add_argument("--summarize", default=None, help="print the table of a results file (no runs)")
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--sizes", default="1000,4000,16000")
    parser.add_argument("--cross-fit", type=int, default=5)
    parser.add_argument("--boot", type=int, default=100)
    parser.add_argument("--boot-reps", type=int, default=100)
    parser.add_argument("--seed0", type=int, default=0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--no-one-step", action="store_true",
                        help="the plug-in and its bootstrap only (to join an earlier run's one-step rows)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.summarize:
        table = summarize(pd.read_csv(args.summarize))
        with pd.option_context("display.width", 100, "display.max_columns", 20, "display.float_format",
                               "{:.3f}".format):
            print(table.drop(columns=["cov_se"]).to_string(index=False))
        return table
    targets, truth, make, riesz = DESIGNS[args.design]()
    rows, start = [], time.time()
    for n in [int(x) for x in args.sizes.split(",")]:
        for i in range(args.reps):
            rows += one(make, targets, truth, n, args.seed0 + i, args.cross_fit, args.boot if i < args.boot_reps else 0,
                        riesz, one_step=not args.no_one_step)
            if args.out and (i + 1) % 5 == 0:
                pd.DataFrame(rows).to_csv(args.out, index=False)
    frame = pd.DataFrame(rows)
    if args.out:
        frame.to_csv(args.out, index=False)
    table = summarize(frame)
    print(f"design {args.design}, cross_fit={args.cross_fit}, {args.reps} replications, {time.time() - start:.0f} s, "
          f"{platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}")
    with pd.option_context("display.width", 100, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(table.drop(columns=["cov_se"]).to_string(index=False))
    return table


if __name__ == "__main__":
    main()
