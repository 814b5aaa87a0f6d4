"""The ``genpqr`` command.

``genpqr --version`` imports nothing but this module; ``--help`` (and each command's) imports the
option declarations and the registries' names, not the library: each command imports what it
runs when it runs (``python -X importtime -m genpqr fit --help`` shows it).
"""

from __future__ import annotations

import _thread
import argparse
import signal
import sys
import threading

from .config_checks import check_output_folder


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
    """``genpqr experiment continuous``: the LQG sweep of ``genpqr.experiments._continuous``
    (n = 1e3, 1e4, 1e5; tiny: n = 200, 500) with its own table and figure."""
    from ..experiments._continuous import KIND, run_continuous_experiment, write_outputs
    from ..estimator._manifest import check_target, output_folder

    check_target(args.out, kind=KIND)  # before the sweep; the folder is then written as a whole
    n_values = (200, 500) if args.tiny else (1_000, 10_000, 100_000)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    frame = run_continuous_experiment(n_values=n_values, seeds=seeds, progress=not args.quiet,
                                      **({"methods": ("linear-gaussian",)} if args.tiny else {}))
    with output_folder(args.out, kind=KIND) as staging:
        write_outputs(frame, staging)
    print(f"continuous: {len(frame)} row(s) written to {args.out}/results.csv (table: {args.out}/results.md)")
    return 0


def _experiment(args) -> int:
    from ..experiments import get_config, run_experiment
    from .flags import console_text

    try:
        check_output_folder(args.out, "--out")
        if args.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
        if args.n_jobs == 0:
            raise ValueError("--n-jobs must be a positive number of workers or -1 (one per core), got 0")
        if args.name == "continuous":
            return _continuous_experiment(args)
        config = get_config(args.name, tiny=args.tiny)
        if args.methods:
            config = config.with_methods(split_methods(args.methods))
        if args.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        summary = run_experiment(config, seeds, args.out, n_jobs=args.n_jobs, backend=args.backend,
                                 scheduler=args.scheduler, progress=not args.quiet)
    except (ValueError, OSError) as exc:
        print(f"genpqr experiment: error: {console_text(exc)}", file=sys.stderr)
        return 2
    unsaved = f", {len(summary.unsaved)} finished but not saved" if summary.unsaved else ""
    print(f"{config.name}: {summary.n_tasks} task(s): {len(summary.executed)} run, {len(summary.skipped)} already in "
          f"{summary.out}/results.csv, {len(summary.failures)} failed{unsaved}")
    for failure in summary.failures:
        print(f"  FAILED {failure.short()}", file=sys.stderr)
    for failure in summary.unsaved:
        print(f"  NOT SAVED {failure.short()}", file=sys.stderr)
    if not summary.ok:
        print("  rerun the same command to retry the failed and unsaved tasks (saved rows are kept)", file=sys.stderr)
    return 0 if summary.ok else 1


def _report(args) -> int:
    from pathlib import Path

    from ..experiments import write_report
    from ..estimator._manifest import read_manifest, verify_folder
    from .flags import console_text

    folder = Path(args.dir)
    try:
        if not folder.is_dir():
            raise ValueError(f"results folder {args.dir!r} " + ("is a file" if folder.exists() else "does not exist")
                             + "; give the --out folder of `genpqr experiment`")
        if (folder / "results.csv").exists():  # (none: write_report says so)
            kind = (read_manifest(folder) or {}).get("kind")  # a continuous sweep's folder: load_results says why not
            verify_folder(folder, kind=kind if kind == "continuous-experiment" else "experiment",
                          require=["results.csv"])
        paths = write_report(folder)
    except (ValueError, OSError) as exc:
        print(f"genpqr report: error: {console_text(exc)}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def _methods_epilog() -> str:
    """The ``experiment --help`` epilog: every experiment's methods (the --methods names)."""
    from ..experiments._configs import EXPERIMENTS
    from ..experiments._methods import METHODS

    lines = ["methods of each experiment (default: all of them; --methods picks a subset):"]
    for name, config in EXPERIMENTS.items():
        lines.append(f"  {name}: " + "; ".join(config.methods))
    lines.append("  continuous: the LQG sweep's own methods (see docs/results/continuous/)")
    lines.append("every registered method: " + "; ".join(METHODS))
    return "\n".join(lines)


def _add_experiment_parsers(sub) -> None:
    from ..experiments._configs import EXPERIMENTS

    exp = sub.add_parser("experiment", help="run (or resume) one of the paper's experiments over seeds",
                         description="Run seeds x settings x methods in parallel; rows are appended to "
                                     "OUT/results.csv as tasks finish, and a rerun skips finished rows.",
                         epilog=_methods_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter,
                         allow_abbrev=False)
    exp.add_argument("name", choices=sorted([*EXPERIMENTS, "continuous"]),
                     help="experiment configuration (continuous: the continuous-action LQG sweep) (required)")
    exp.add_argument("--seeds", type=int, default=10, help="number of seeds (default: 10)")
    exp.add_argument("--first-seed", type=int, default=0, help="first seed (default: 0)")
    exp.add_argument("--n-jobs", type=int, default=1,
                     help="parallel loky processes, -1: one per core; dask uses every worker thread (default: 1)")
    exp.add_argument("--out", required=True, help="results folder (required)")
    exp.add_argument("--tiny", action="store_true", help="tiny smoke-test variant (seconds; numbers meaningless) (default: off)")
    exp.add_argument("--backend", choices=("loky", "dask"), default="loky",
                     help="loky: local processes; dask: a Dask cluster (needs --scheduler) (default: loky)")
    exp.add_argument("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: none)")
    exp.add_argument("--methods", default=None,
                     help='comma-separated subset of methods, e.g. "GenPQR (BC, NN),DeepPQR" (default: all of the '
                          "experiment's methods)")
    exp.add_argument("--quiet", action="store_true", help="no progress bar (default: off)")
    exp.set_defaults(func=_experiment)
    rep = sub.add_parser("report", help="write the Markdown table and figures of a results folder",
                         description="Read DIR/results.csv (written by `genpqr experiment ... --out DIR`) and write "
                                     "DIR/results.md (mean and spread over seeds per setting and method) and one "
                                     "figure per experiment (DIR/<experiment>_*.png), each written to a temporary "
                                     "name and renamed, and lists them in DIR/manifest.json. Nothing else is "
                                     "changed; a DIR whose files do not match its manifest.json is refused.",
                         allow_abbrev=False)
    rep.add_argument("dir", help="results folder holding results.csv (the --out of genpqr experiment) (required)")
    rep.set_defaults(func=_report)


def _add_demo_parser(sub) -> None:
    demo = sub.add_parser("demo", help="recover a reward on a built-in random tabular MDP and plot it",
                          description="Simulate logged episodes from the soft-optimal policy of a random tabular MDP, "
                                      "recover the reward by GenPQR (exact tabular solve, anchor normalization), "
                                      "print its error against the true normalized reward and write OUT/demo.png.",
                          allow_abbrev=False)
    demo.add_argument("--out", default="demo-output", help="output folder for the figure (default: demo-output)")
    demo.add_argument("--states", type=int, default=40, help="number of states (default: 40)")
    demo.add_argument("--actions", type=int, default=4, help="number of actions (default: 4)")
    demo.add_argument("--gamma", type=float, default=0.9, help="discount factor in [0, 1) (default: 0.9)")
    demo.add_argument("--episodes", type=int, default=2000, help="simulated episodes (default: 2000)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    demo.set_defaults(func=_demo)


def _version() -> str:
    """The package's version (``genpqr.__version__``, which the installed metadata is built from)."""
    from .. import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    """The ``genpqr`` parser; no parser accepts abbreviated flags (``allow_abbrev=False``)."""
    parser = argparse.ArgumentParser(prog="genpqr", description="Reward recovery from behaviour (GenPQR).",
                                     allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"genpqr {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    from .fit_parser import add_fit_parser

    add_fit_parser(sub)
    from .counterfactual import add_counterfactual_parser

    add_counterfactual_parser(sub)
    _add_demo_parser(sub)
    _add_experiment_parsers(sub)
    return parser


def _check_demo(args) -> str | None:
    from ..estimator._manifest import check_target
    from .flags import console_text

    try:
        check_output_folder(args.out, "--out")
        check_target(args.out, kind="demo")
    except ValueError as exc:
        return console_text(exc)
    if args.states < 2 or args.actions < 2 or args.episodes < 1:
        return "--states and --actions must be at least 2 and --episodes at least 1"
    if not 0 <= args.gamma < 1:
        return f"--gamma must be in [0, 1), got {args.gamma}"
    return None


class _CtrlC:
    """Ctrl-C that is not lost: Python raises ``KeyboardInterrupt`` where the main thread is, and
    one raised inside a ``__del__`` or a callback is printed and dropped, leaving a long command
    running. The handler raises it, then raises it again every ``AGAIN`` seconds (a daemon thread
    calling ``_thread.interrupt_main``) until :func:`main` returns."""

    AGAIN = 2.0

    def __init__(self):
        self.done, self.again, self.previous = threading.Event(), None, None

    def __call__(self, signum, frame):
        if self.again is None:
            self.again = threading.Thread(target=self._again, daemon=True)
            self.again.start()
        raise KeyboardInterrupt

    def _again(self):
        while not self.done.wait(self.AGAIN):
            _thread.interrupt_main()

    def __enter__(self):
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self)
        return self

    def __exit__(self, *exc):
        self.done.set()
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--version"]:  # as the parser would answer, before building it (that imports the options)
        print(f"genpqr {_version()}")
        return 0
    with _CtrlC():
        return _run(argv)


def _run(argv) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "demo" and _check_demo(args):
            print(f"genpqr demo: error: {_check_demo(args)}", file=sys.stderr)
            return 2
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C before a command's own handler (while importing, parsing): one line
        print("genpqr: interrupted; nothing was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
