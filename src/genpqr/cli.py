"""The ``genpqr`` command."""

from __future__ import annotations

import argparse
import sys


def _demo(args) -> int:
    from .demo import run_demo

    run_demo(args.out, n_states=args.states, n_actions=args.actions, gamma=args.gamma, n_episodes=args.episodes,
             seed=args.seed)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="genpqr", description="Reward recovery from behaviour (GenPQR).")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="recover a reward on a built-in random tabular MDP and plot it")
    demo.add_argument("--out", default="demo-output", help="output folder for the figure (default: demo-output)")
    demo.add_argument("--states", type=int, default=40)
    demo.add_argument("--actions", type=int, default=4)
    demo.add_argument("--gamma", type=float, default=0.9)
    demo.add_argument("--episodes", type=int, default=2000)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
