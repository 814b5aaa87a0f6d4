"""First stage and probability clip on simulated engine-replacement panels (the design of
docs/structural_estimation.md: 90 mileage bins, beta 0.9999, RC 10.075, theta11 2.293, increments (0.3919, 0.5953, 0.0128),
37 buses x 117 months). Prints one table: per first stage / clip, the share of observed
actions at a clip bound, the error of log pi_hat against the true policy, and the WLS
projection and Hotz-Miller PML estimates of (RC, theta11); plus the time of the automatic
first-stage choice (spline knots and penalty by episode-grouped cross-validation).

    OMP_NUM_THREADS=1 python benchmarks/first_stage_clip.py --seeds 10
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from genpqr import GenPQR, normalization as N
from genpqr.stage1 import FrequencyClassifier
from genpqr.stage1._clipping import PAPER_CLIP
from genpqr.data import from_pandas
from genpqr.structural._ddc import IncrementKernel, StructuralStep, project_reward
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.models._first_stage import choose_tabular_policy

DESIGN = dict(n_states=90, beta=0.9999, rc=10.075, theta11=2.293, theta3=(0.3919, 0.5953, 0.0128))


def one_panel(model, seed):
    panel = simulate_buses(model, n_buses=37, n_periods=117, random_state=seed)
    data = from_pandas(panel.frame.drop(columns="next_mileage"), episode="bus", time="month", state="mileage",
                       action="action")
    start = time.perf_counter()
    spline, choice = choose_tabular_policy(data, 90, ordered=True, random_state=0)
    choose_s = time.perf_counter() - start
    visited = np.bincount(data.states[:, 0].astype(int), minlength=90) > 0
    X = model.features("anchor")
    rows = []
    for name, policy_model, clip in (("spline (auto)", spline, "auto"),
                                     ("frequency, clip auto", FrequencyClassifier(n_states=90), "auto"),
                                     ("frequency, clip (0.01, 0.99)", FrequencyClassifier(n_states=90), PAPER_CLIP)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = GenPQR(N.anchor_action("replace"), gamma=model.beta, q_model="exact", n_states=90,
                         policy_model=policy_model, clip=clip, cross_fit=5,
                         transition_model=IncrementKernel(2, "replace"), random_state=0).fit(data)
            pml = StructuralStep(features=X).fit(est).theta_
        err = np.abs(est.log_policy(np.arange(90.0)) - np.log(model.policy))[visited]
        wls = project_reward(est.stage2_.recovery.reward, X, est.stage2_.counts).theta
        d = est.diagnostics_
        rows.append(dict(first_stage=name, chosen=choice.name, clipped=d.fraction_clipped, floored=d.fraction_floored,
                         err_keep=err[:, 0].max(), err_replace=np.median(err[:, 1]), wls_rc=wls[0], wls_t11=wls[1],
                         pml_rc=pml[0], pml_t11=pml[1], choose_s=choose_s))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    model = bus_engine(**DESIGN)
    import pandas as pd

    table = pd.DataFrame([r for seed in range(args.seeds) for r in one_panel(model, seed)])
    summary = table.groupby("first_stage", sort=False).agg(
        spline_chosen=("chosen", lambda c: f"{np.mean(c == 'spline'):.0%}"),
        obs_at_bound=("clipped", "mean"), rows_floored=("floored", "mean"),
        max_err_log_keep=("err_keep", "mean"), median_err_log_replace=("err_replace", "mean"),
        wls_rc=("wls_rc", "mean"), wls_theta11=("wls_t11", "mean"), pml_rc=("pml_rc", "mean"),
        pml_theta11=("pml_t11", "mean"), choose_s=("choose_s", "mean"))
    print(f"{args.seeds} panels; truth RC {DESIGN['rc']}, theta11 {DESIGN['theta11']}; log(99) = {np.log(99):.3f}")
    with pd.option_context("display.width", 250, "display.float_format", "{:.3f}".format):
        print(summary.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
