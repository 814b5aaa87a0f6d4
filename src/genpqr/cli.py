"""The ``genpqr`` command."""

from __future__ import annotations

import argparse
import sys


def _demo(args) -> int:
    from .demo import run_demo

    run_demo(args.out, n_states=args.states, n_actions=args.actions, gamma=args.gamma, n_episodes=args.episodes,
             seed=args.seed)
    return 0


def split_methods(text: str) -> list[str]:
    """Split ``"a,b"`` on commas outside parentheses (method names such as "GenPQR (BC, NN)" hold commas)."""
    names, depth, current = [], 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            names.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    names.append("".join(current).strip())
    return [n for n in names if n]


def _continuous_experiment(args) -> int:
    """``genpqr experiment continuous``: the LQG sweep of :mod:`genpqr.continuous.experiment`
    (n = 1e3, 1e4, 1e5; tiny: n = 200, 500) with its own table and figure."""
    from .continuous.experiment import run_continuous_experiment

    n_values = (200, 500) if args.tiny else (1_000, 10_000, 100_000)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    frame = run_continuous_experiment(n_values=n_values, seeds=seeds, out_dir=args.out, progress=not args.quiet,
                                      **({"methods": ("linear-gaussian",)} if args.tiny else {}))
    print(f"continuous: {len(frame)} row(s) written to {args.out}/results.csv (table: {args.out}/results.md)")
    return 0


def _experiment(args) -> int:
    from .experiments import get_config, run_experiment

    if args.name == "continuous":
        return _continuous_experiment(args)

    try:
        config = get_config(args.name, tiny=args.tiny)
        if args.methods:
            config = config.with_methods(split_methods(args.methods))
        if args.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        summary = run_experiment(config, seeds, args.out, n_jobs=args.n_jobs, backend=args.backend,
                                 scheduler=args.scheduler, progress=not args.quiet)
    except ValueError as exc:
        print(f"genpqr experiment: error: {exc}", file=sys.stderr)
        return 2
    print(f"{config.name}: {len(summary.executed)} task(s) run, {len(summary.skipped)} already in "
          f"{summary.out}/results.csv, {len(summary.failures)} failed")
    for failure in summary.failures:
        print(f"  FAILED {failure.short()}", file=sys.stderr)
    if summary.failures:
        print("  rerun the same command to retry the failed tasks (finished rows are kept)", file=sys.stderr)
    return 0 if summary.ok else 1


def _report(args) -> int:
    from .experiments import write_report

    for path in write_report(args.dir):
        print(path)
    return 0


def _add_experiment_parsers(sub) -> None:
    from .experiments.configs import EXPERIMENTS

    exp = sub.add_parser("experiment", help="run (or resume) one of the paper's experiments over seeds",
                         description="Run seeds x settings x methods in parallel; rows are appended to "
                                     "OUT/results.csv as tasks finish, and a rerun skips finished rows.")
    exp.add_argument("name", choices=sorted([*EXPERIMENTS, "continuous"]),
                     help="experiment configuration (continuous: the continuous-action LQG sweep)")
    exp.add_argument("--seeds", type=int, default=10, help="number of seeds (default: 10)")
    exp.add_argument("--first-seed", type=int, default=0, help="first seed (default: 0)")
    exp.add_argument("--n-jobs", type=int, default=1,
                     help="parallel loky processes, -1: one per core (default: 1); dask uses every worker thread")
    exp.add_argument("--out", required=True, help="results folder")
    exp.add_argument("--tiny", action="store_true", help="tiny smoke-test variant (seconds; numbers meaningless)")
    exp.add_argument("--backend", choices=("loky", "dask"), default="loky",
                     help="loky: local processes (default); dask: a Dask cluster (needs --scheduler)")
    exp.add_argument("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    exp.add_argument("--methods", default=None,
                     help='comma-separated subset of methods, e.g. "GenPQR (BC, NN),DeepPQR"')
    exp.add_argument("--quiet", action="store_true", help="no progress bar")
    exp.set_defaults(func=_experiment)
    rep = sub.add_parser("report", help="write the Markdown table and figures of a results folder")
    rep.add_argument("dir", help="results folder (holding results.csv)")
    rep.set_defaults(func=_report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="genpqr", description="Reward recovery from behaviour (GenPQR).")
    sub = parser.add_subparsers(dest="command", required=True)
    from .workflow import add_fit_parser

    add_fit_parser(sub)
    from .counterfactual_cli import add_counterfactual_parser

    add_counterfactual_parser(sub)
    demo = sub.add_parser("demo", help="recover a reward on a built-in random tabular MDP and plot it")
    demo.add_argument("--out", default="demo-output", help="output folder for the figure (default: demo-output)")
    demo.add_argument("--states", type=int, default=40)
    demo.add_argument("--actions", type=int, default=4)
    demo.add_argument("--gamma", type=float, default=0.9)
    demo.add_argument("--episodes", type=int, default=2000)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    _add_experiment_parsers(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
