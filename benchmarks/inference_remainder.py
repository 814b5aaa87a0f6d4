"""Where the one-step's error comes from: target 1a of the paper's continuous design
(docs/benchmarks.md, "The paper's continuous design"; docs/inference.md).

Target 1a is ``psi = sum_s eta0(s) sum_a sigma(a|s) log pi0(a|s)`` with ``eta0`` the occupancy of
``pi_fix = sigma`` from the rows' state law ``rho0`` (the kernel known). With the kernel known the
target is linear in the state law, so the one-step estimator of a fold ``k`` (first stage
``pi_k`` fitted on the other folds, representer ``alpha_k`` from a Riesz regression on them) has,
given the other folds, the mean ``psi0 + R_log + R_rep`` exactly:

* ``R_log = sum eta0 sigma (x - 1 - log x)``, ``x = pi0 / pi_k``: the remainder of the log
  functional with the exact representer at the fold's law, ``alpha*_k = eta0 sigma / (rho0 pi_k)``
  (non-negative by convexity: the one-step with the exact representer overshoots);
* ``R_rep = sum rho0 (pi0 - pi_k) (alpha_k - alpha*_k)``: the product of the first stage's error and
  the estimated representer's. A Riesz regression on the rows' cells estimates ``eta sigma / (rho0
  pi0)``, the representer at the true law, not at ``pi_k``; at that limit ``R_log + R_rep =
  sum eta0 sigma (1 - y + log y) <= 0``, ``y = pi_k / pi0``.

Per replication: the library's one-step and plug-in (``infer``), the cross-fit rebuilt here fold by
fold (checked against ``infer`` to 1e-9), ``R_log`` and ``R_rep`` (averaged over the folds by their
rows), the plug-in at the folds' first stages, and two one-steps with one nuisance true: the exact
representer ``alpha*_k`` with the fold's first stage (the paper's oracle occupancy ratios), and the
true first stage with the estimated representer. Prints bias (with its MC SE), SD, RMSE of each, and
the remainder terms' means.

    OMP_NUM_THREADS=1 python benchmarks/inference_remainder.py --reps 100 --size 2500 --seed0 5000
        [--alone] [--out /tmp/remainder.csv]

``--alone``: ask 1a alone (default: with 1b and 2, as ``inference_coverage.py paper`` does; the
answer must not differ, tests/inference/test_shared_solves.py).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from genpqr.inference import _algebra as alg  # noqa: E402
from genpqr.inference import infer  # noqa: E402
from genpqr.inference._nuisances import (STATE_PRIOR, Rows, context_of, fit_quietly, fold_template,  # noqa: E402
                                         tabular_law)
from inference_coverage import paper_setup  # noqa: E402
from inference_designs import paper_grid  # noqa: E402


def truth_parts():
    law0, _, sigma = paper_grid(31)
    res = alg.Resolvent(law0.kernel, sigma, law0.gamma)
    eta0 = res.solve_t(law0.rho)
    return law0, sigma, res, eta0


def one(make, targets, parts, n, seed, riesz, folds=5):
    law0, sigma, res0, eta0 = parts
    rho0, pi0 = law0.rho, law0.policy
    model, data = make(n, np.random.default_rng(seed))
    model.fit(data)
    result = infer(model, targets, data, cross_fit=folds, random_state=seed, warn=False, riesz=riesz)
    bound = [t.bind(context_of(model, data)) for t in targets]
    rows = Rows.of(data, tabular=True)
    template = fold_template(model)
    value = lambda pi, eta: eta @ np.sum(sigma * np.log(pi), axis=1)  # noqa: E731
    V0 = res0.solve(np.sum(sigma * np.log(pi0), axis=1))
    out = dict(seed=seed, truth=value(pi0, eta0), onestep=result.estimate[0], se=result.std_error[0],
               plugin=result.plug_in[0])
    acc = dict(rebuilt=0.0, R_log=0.0, R_rep=0.0, plugin_folds=0.0, exact_representer=0.0, true_first_stage=0.0)
    for train, test in data.episode_folds(folds, seed):
        fitted = fit_quietly(template, data.subset(train))
        held = rows.take(test)
        law = replace(tabular_law(fitted, rows.take(train), STATE_PRIOR, False, riesz, states=rows.s),
                      kernel_given=True)
        pieces = alg.Pieces.stack([t.pieces(law) for t in bound])
        alpha = alg.representers(pieces, law)[0][0]  # 1a's representer (S, K)
        pk = law.policy
        Vk = res0.solve(np.sum(sigma * np.log(pk), axis=1))  # V of pi_fix under log pi_k (the known kernel)
        s, a, w = held.s, held.a, test.size / data.n
        score = alpha[s, a] - np.sum(pk[s] * alpha[s], axis=1)
        acc["rebuilt"] += w * np.mean(Vk[s] + score)
        x = pi0 / pk
        exact = eta0[:, None] * sigma / (rho0[:, None] * pk)  # alpha*_k: the exact representer at pi_k
        acc["R_log"] += w * np.sum(eta0[:, None] * sigma * (x - 1 - np.log(x)))
        acc["R_rep"] += w * np.sum(rho0[:, None] * (pi0 - pk) * (alpha - exact))
        acc["plugin_folds"] += w * value(pk, eta0)
        acc["exact_representer"] += w * np.mean(Vk[s] + exact[s, a] - np.sum(pk[s] * exact[s], axis=1))
        acc["true_first_stage"] += w * np.mean(V0[s] + alpha[s, a] - np.sum(pi0[s] * alpha[s], axis=1))
    if abs(acc["rebuilt"] - out["onestep"]) > 1e-9 * max(1.0, abs(out["onestep"])):
        raise AssertionError(f"seed {seed}: the rebuilt cross-fit {acc['rebuilt']} is not infer's {out['onestep']}")
    return {**out, **acc}


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    n = len(frame)
    rows = []
    for col, what in [("onestep", "one-step (infer)"), ("plugin", "plug-in (full fit)"),
                      ("plugin_folds", "plug-in at the folds' first stages"),
                      ("exact_representer", "one-step, exact representer alpha*_k"),
                      ("true_first_stage", "one-step, true first stage")]:
        err = frame[col] - frame.truth
        rows.append(dict(quantity=what, mean=err.mean(), mc_se=err.std(ddof=1) / np.sqrt(n), sd=err.std(ddof=1),
                         rmse=np.sqrt((err ** 2).mean())))
    for col in ("R_log", "R_rep"):
        rows.append(dict(quantity=col, mean=frame[col].mean(), mc_se=frame[col].std(ddof=1) / np.sqrt(n),
                         sd=frame[col].std(ddof=1), rmse=np.nan))
    total = frame.R_log + frame.R_rep
    rows.append(dict(quantity="R_log + R_rep", mean=total.mean(), mc_se=total.std(ddof=1) / np.sqrt(n),
                     sd=total.std(ddof=1), rmse=np.nan))
    half = 1.959964 * frame.se
    cover = (frame.onestep - half <= frame.truth) & (frame.truth <= frame.onestep + half)
    rows.append(dict(quantity="one-step coverage / SE over SD", mean=cover.mean(),
                     mc_se=np.sqrt(cover.mean() * (1 - cover.mean()) / n), sd=frame.se.mean() / frame.onestep.std(),
                     rmse=np.nan))
    return pd.DataFrame(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--size", type=int, default=2500)
    parser.add_argument("--seed0", type=int, default=5000)
    parser.add_argument("--alone", action="store_true", help="ask 1a alone (default: with 1b and 2)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    targets, _, make, riesz = paper_setup()
    targets = targets[:1] if args.alone else targets
    parts = truth_parts()
    start, rows = time.time(), []
    for i in range(args.reps):
        rows.append(one(make, targets, parts, args.size, args.seed0 + i, riesz))
        if args.out and (i + 1) % 5 == 0:
            pd.DataFrame(rows).to_csv(args.out, index=False)
    frame = pd.DataFrame(rows)
    if args.out:
        frame.to_csv(args.out, index=False)
    print(f"paper design, target 1a{' alone' if args.alone else ' with 1b and 2'}, n = {args.size}, {args.reps} "
          f"replications (seeds {args.seed0}-{args.seed0 + args.reps - 1}), {time.time() - start:.0f} s, "
          f"{platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}")
    print("error = estimate - truth; R_log, R_rep: the remainder's terms given the other folds (module docstring)")
    with pd.option_context("display.width", 100, "display.float_format", "{:.4f}".format):
        print(summarize(frame).to_string(index=False))


if __name__ == "__main__":
    main()
