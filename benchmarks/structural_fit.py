"""Structural estimation with ``genpqr fit`` on simulated engine-replacement panels.

Two designs (``genpqr.envs._rust``):

* ``rust9999``: the design of docs/structural_estimation.md, after Rust's (1987) data -- 90 mileage bins, beta = 0.9999,
  RC = 10.075, theta11 = 2.293, increments (0.3919, 0.5953, 0.0128), 37 buses x 117 months;
* ``sujudd``: Su and Judd's (2012) design of docs/engine_replacement.md -- 175 bins,
  beta = 0.975, RC = 11.7257, theta11 = 2.4569, increments 0..4, 50 buses x 120 months.

Each panel is written as the long-format CSV ``bus, month, mileage_bin, replace`` (one row per
bus-month, ``replace`` 0/1; the last month of a bus has no next state in the file) with
``features.csv`` (``mileage_bin, replace, RC, theta11``: RC = 1 and theta11 = -0.001 x on the
keep rows, 0 on the replace rows) and fitted by the command of docs/structural_estimation.md, with no further flags
(run in-process through ``genpqr.app.cli.main``, the code path of ``genpqr fit``):

    genpqr fit panel.csv --episode bus --time month --state mileage_bin --action replace \\
        --gamma BETA --normalization anchor:1 --transition increment:J:1 --n-states S \\
        --features features.csv --out fit --quiet

The estimates, standard errors and 95% intervals are read back from ``fit/parameters.csv``;
NFXP is then run on the same choices and kernel (``genpqr.load("fit/model.joblib")``) for the
NPL-vs-NFXP difference (NFXP as ``--estimator nfxp`` runs it: BHHH finished by Newton steps; and BHHH
alone, ``genpqr.structural._nfxp.fit_nfxp``). Seconds per panel: the whole command (reading, GenPQR, the structural
step and writing model, tables and the HTML report).

    OMP_NUM_THREADS=1 python benchmarks/structural_fit.py [--panels 50] [--designs rust9999,sujudd]
        [--out structural-fit-results] [--table-only]

The table of docs/structural_estimation.md is that of the run kept in docs/results/structural_fit/
(``--table-only --out docs/results/structural_fit`` prints it again; it only reads).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import genpqr
from genpqr.app import cli
from genpqr.structural import _ddc as ddc
from genpqr.structural._nfxp import fit_nfxp
from genpqr.envs._rust import bus_engine, simulate_buses
from genpqr.structural._estimation import estimate_structural

DESIGNS = {
    "rust9999": dict(model=dict(n_states=90, beta=0.9999, rc=10.075, theta11=2.293, theta3=(0.3919, 0.5953, 0.0128)),
                     buses=37, months=117),
    "sujudd": dict(model=dict(), buses=50, months=120),
}


def write_panel(model, n_buses, n_months, seed, folder):
    """``panel.csv`` and ``features.csv`` of one simulated panel into ``folder``; returns paths."""
    frame = simulate_buses(model, n_buses=n_buses, n_periods=n_months, random_state=seed).frame
    panel = pd.DataFrame({"bus": frame.bus, "month": frame.month, "mileage_bin": frame.mileage,
                          "replace": (frame.action == "replace").astype(int)})
    x = np.arange(model.n_states)
    features = pd.DataFrame({"mileage_bin": np.repeat(x, 2), "replace": np.tile([0, 1], model.n_states),
                             "RC": np.tile([1.0, 0.0], model.n_states),
                             "theta11": np.column_stack([-0.001 * x, np.zeros_like(x, dtype=float)]).ravel()})
    folder = Path(folder)
    panel.to_csv(folder / "panel.csv", index=False)
    features.to_csv(folder / "features.csv", index=False)
    return folder / "panel.csv", folder / "features.csv"


def command(model, panel, features, out):
    return [str(panel), "--episode", "bus", "--time", "month", "--state", "mileage_bin", "--action", "replace",
            "--gamma", f"{model.beta:g}", "--normalization", "anchor:1",
            "--transition", f"increment:{model.theta3.size - 1}:1", "--n-states", str(model.n_states),
            "--features", str(features), "--out", str(out), "--quiet"]


def run_panel(design, model, seed):
    spec = DESIGNS[design]
    with tempfile.TemporaryDirectory() as tmp:
        panel, features = write_panel(model, spec["buses"], spec["months"], seed, tmp)
        out = Path(tmp) / "fit"
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["fit", *command(model, panel, features, out)])
        seconds = time.perf_counter() - start
        if code != 0:
            raise RuntimeError(f"genpqr fit failed on {design} seed {seed}")
        params = pd.read_csv(out / "parameters.csv")
        fitted = genpqr.load(out / "model.joblib")
        X = pd.read_csv(features)[["RC", "theta11"]].to_numpy().reshape(model.n_states, 2, 2)
        counts = fitted.stage2_.counts  # every observed choice (a slim model keeps the counts, not the rows)
        nfxp = estimate_structural("nfxp", X, counts, fitted.stage2_.kernel, fitted.gamma_)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BHHH alone may stop at the rounding floor near beta = 1
            bhhh = fit_nfxp(counts, X, fitted.stage2_.kernel, fitted.gamma_, tol=1e-10)
    row = dict(design=design, seed=seed, seconds=seconds, estimator=params.estimator[0],
               converged=bool(params.converged.all()), iterations=int(params.iterations[0]),
               n_choices=int(params.n_choices[0]), replacements=int(counts[:, 1].sum()),
               npl_nfxp_diff=float(np.max(np.abs(params.estimate.to_numpy() - nfxp.theta))),
               npl_bhhh_diff=float(np.max(np.abs(params.estimate.to_numpy() - bhhh.theta))),
               se_rel_diff=float(np.max(np.abs(params.std_error.to_numpy() / nfxp.std_error - 1))))
    for j, name in enumerate(("rc", "theta11")):
        row.update({name: params.estimate[j], f"se_{name}": params.std_error[j],
                    f"lo_{name}": params.ci_low[j], f"hi_{name}": params.ci_high[j],
                    f"se_robust_{name}": params.std_error_robust[j]})
    return row


def table(df):
    lines = ["| design | parameter | truth | mean estimate | sampling SD | bias / SD | mean SE (OPG) | mean SE "
             "(sandwich) | 95% coverage | max abs NPL - NFXP | max abs NPL - BHHH alone | max rel. SE diff "
             "| seconds per panel (median, max) | panels |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for design, d in df.groupby("design", sort=False):
        model = bus_engine(**DESIGNS[design]["model"])
        for name, truth in (("rc", model.rc), ("theta11", model.theta11)):
            est = d[name]
            cover = np.mean((d[f"lo_{name}"] <= truth) & (truth <= d[f"hi_{name}"]))
            lines.append(
                f"| {design} (beta {model.beta:g}) | {'RC' if name == 'rc' else name} | {truth:g} | {est.mean():.3f} "
                f"| {est.std():.3f} | {(est.mean() - truth) / est.std():+.3f} | {d[f'se_{name}'].mean():.3f} "
                f"| {d[f'se_robust_{name}'].mean():.3f} | {cover:.0%} | {d.npl_nfxp_diff.max():.1e} "
                f"| {d.npl_bhhh_diff.max():.1e} "
                f"| {d.se_rel_diff.max():.1e} | {d.seconds.median():.2f}, {d.seconds.max():.2f} | {len(d)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--panels", type=int, default=50)
    ap.add_argument("--designs", default="rust9999,sujudd")
    ap.add_argument("--out", default="structural-fit-results", help="results folder (default: structural-fit-results)")
    ap.add_argument("--table-only", action="store_true", help="rebuild the table from the saved CSV")
    args = ap.parse_args()
    path = Path(args.out) / "structural_fit.csv"
    if not args.table_only:
        rows = []
        for design in args.designs.split(","):
            model = bus_engine(**DESIGNS[design]["model"])
            run_panel(design, model, 10_000)  # warm-up (imports, first calls) is not timed
            for seed in range(args.panels):
                rows.append(run_panel(design, model, seed))
                print(f"{design} seed {seed}: {rows[-1]['seconds']:.2f} s", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(path, index=False)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {load:.2f}, python "
              f"{platform.python_version()}; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    df = pd.read_csv(path)
    print(f"estimator: {df.estimator.iloc[0]}; all converged: {bool(df.converged.all())}; mean choices per panel "
          + ", ".join(f"{k} {v:.0f}" for k, v in df.groupby('design', sort=False).n_choices.mean().items())
          + "; mean replacements " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                df.groupby('design', sort=False).replacements.mean().items()))
    print(table(df))


if __name__ == "__main__":
    main()
