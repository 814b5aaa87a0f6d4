"""The ``continuous`` experiment: LQG reward recovery as n grows, plus the ring problem's
discretized-action cross-check. Writes results.csv, discretization.csv, results.md,
figure.png and config.json.

    OMP_NUM_THREADS=1 python benchmarks/continuous_experiment.py --out continuous-results

Rebuild the table and figure from the saved CSV files only:

    python benchmarks/continuous_experiment.py --out continuous-results --report-only

docs/results/continuous/ holds the files of such a run.
"""

from __future__ import annotations

import argparse
import time

from genpqr.experiments._continuous import run_continuous_experiment, run_discretization_check, write_report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="continuous-results", help="results folder (default: continuous-results)")
    parser.add_argument("--n", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="training sizes")
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0..seeds-1)")
    parser.add_argument("--mdn-max-n", type=int, default=10_000)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if not args.report_only:
        run_discretization_check(out_dir=args.out)
        run_continuous_experiment(args.n, range(args.seeds), args.out, mdn_max_n=args.mdn_max_n, progress=True)
    write_report(args.out)
    print(f"wrote {args.out}/results.md and figure.png in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
