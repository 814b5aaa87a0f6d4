"""Cost of debiased inference for one target relative to the fit it debiases (the goal: at most 3x).

For each design: fit the model as a user does (``model.fit(data)``), then ``infer(model, target,
data, cross_fit=K)`` for K = 2, 3 and 5 (the fitted model is the full-sample fit: infer refits one
model per fold with the full fit's data-driven choices held, and solves the target's linear
systems). Reports the median over ``--repeats`` of fit seconds, infer seconds and their ratio,
measured in one process on the same machine. Each infer call is a first call: the factorizations
that later calls find again by content (a given kernel under a fixed policy) are dropped before it.

* ``bus``: the bus engine (Su-Judd, 50 buses x 120 months), GenPQR's defaults on the exact path
  (the first stage chosen by the tabular rule, the transition model by ``"auto"``), anchor on
  replace; target: the value difference of "always keep" and the behaviour under u.
* ``bus-increment``: the same with ``transition_model=IncrementKernel(4, "replace")``; target: the
  reward projection on (RC, theta11).
* ``ring30``: the ring-30 design at n = 16,000 (a trivial first stage: the ratio measures overhead).
* ``exp2``: the synthetic environment, 1,000 trajectories, a boosted first stage and LSTD; target:
  the reward projection (8 parameters).
* ``paper`` / ``paper-10k``: the paper's continuous design (``inference_coverage.py paper``: 31 x 31
  grid, kernel known, logistic first stage on cubic polynomials, Riesz regression on tensor splines
  with the ridge chosen by held-out loss) at n = 2,500 / 10,000; targets 1a, 1b and 2 together
  (``paper-1a``, ``paper-1b``, ``paper-2``: one target alone, n = 2,500).

    OMP_NUM_THREADS=1 python benchmarks/inference_cost.py [--repeats 3]
        [--designs bus,bus-increment,ring30,exp2,paper,paper-10k,paper-1a,paper-1b,paper-2]
        [--clock cpu]

``--clock cpu`` times CPU seconds of the process (``time.process_time``) instead of wall seconds:
steadier on a loaded machine for the millisecond-scale ring-30 case.
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
from genpqr import normalization as N  # noqa: E402
from genpqr.inference import infer, policy_value, reward_projection, value_difference  # noqa: E402
from genpqr.inference._algebra import clear_kept_factorizations  # noqa: E402


def bus(increment: bool):
    from genpqr.envs._rust import bus_engine, simulate_buses
    from genpqr.structural._kernels import IncrementKernel

    truth = bus_engine()
    data = simulate_buses(truth, n_buses=50, n_periods=120, random_state=0).transitions
    kw = dict(transition_model=IncrementKernel(4, "replace")) if increment else {}
    model = genpqr.GenPQR(N.anchor_action("replace"), gamma=truth.beta, q_model="exact", n_states=truth.n_states, **kw)
    target = (reward_projection(truth.features("anchor"), names=["RC", "theta11"]) if increment else
              value_difference({"keep": 1.0}, "behavior"))
    return model, data, target


def ring30():
    from inference_designs import RingSmoother, ring30 as design, simulate_rows

    law, pi_fix, _ = design()
    n = 16000
    s, a, s2 = simulate_rows(law, n, np.random.default_rng(0))
    data = genpqr.from_arrays(s[:, None].astype(float), a, s2[:, None].astype(float), episode_ids=np.arange(n))
    model = genpqr.GenPQR(q_model="exact", normalization=N.anchor_action(0), gamma=0.9, n_states=30,
                          policy_model=RingSmoother(30, 20 * n ** -0.2), transition_model="counts", clip=(1e-3, 1.0))
    return model, data, policy_value(pi_fix, reward="log_policy")


def exp2():
    from sklearn.ensemble import HistGradientBoostingClassifier

    from genpqr.envs._synthetic import SyntheticEnv
    from inference_designs import EXP2_NAMES, exp2_features

    env = SyntheticEnv.from_seed(0, anchor_shift=0.0)
    data = env.simulate(1000, 10, random_state=np.random.default_rng(0))
    model = genpqr.GenPQR(normalization=N.anchor_action(0), gamma=0.9, q_model="lstd",
                          policy_model=HistGradientBoostingClassifier(max_iter=60, max_leaf_nodes=15, random_state=0))
    return model, data, reward_projection(exp2_features, names=EXP2_NAMES)


def paper(n: int, which=None):
    from inference_coverage import paper_setup

    targets, _, make, riesz = paper_setup()
    model, data = make(n, np.random.default_rng(0))
    return model, data, targets if which is None else [targets[which]], riesz


DESIGNS = {"bus": lambda: bus(False), "bus-increment": lambda: bus(True), "ring30": ring30, "exp2": exp2,
           "paper": lambda: paper(2500), "paper-10k": lambda: paper(10000), "paper-1a": lambda: paper(2500, 0),
           "paper-1b": lambda: paper(2500, 1), "paper-2": lambda: paper(2500, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--designs", default="bus,bus-increment,ring30,exp2")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    warnings.simplefilter("ignore")
    rows = []
    for name in args.designs.split(","):
        model, data, target, *riesz = DESIGNS[name]()
        riesz = riesz[0] if riesz else None
        for _ in range(args.repeats):
            t0 = clock()
            model.fit(data)
            fit = clock() - t0
            for k in (2, 3, 5):
                clear_kept_factorizations()
                t0 = clock()
                infer(model, target, data, cross_fit=k, random_state=0, warn=False, riesz=riesz)
                rows.append(dict(design=name, cross_fit=k, fit_s=fit, infer_s=clock() - t0))
    frame = pd.DataFrame(rows)
    frame["ratio"] = frame.infer_s / frame.fit_s
    table = frame.groupby(["design", "cross_fit"], sort=False).median().reset_index()
    print(f"{platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, {args.repeats} repeats (median), "
          f"{args.clock} seconds")
    digits = 4 if args.clock == "cpu" else 2
    print(table.to_string(index=False, float_format=lambda x: f"{x:.{digits}f}"))


if __name__ == "__main__":
    main()
