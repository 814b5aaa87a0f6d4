"""The ``genpqr fit`` parser: one flag per option of :data:`genpqr.app.config.FIT_OPTIONS`.

A module of its own so that ``genpqr --help`` and ``genpqr fit --help`` import only the option
declarations and the registries' names, not the fit (:mod:`genpqr.app.workflow`, imported when
the command runs).
"""

from __future__ import annotations

import argparse

from .config import FIT_OPTIONS

__all__ = ["add_fit_parser", "fit_command", "EXAMPLE", "USAGE"]


EXAMPLE = """examples (the data files of a source checkout; an installed genpqr ships them too:
`python -m genpqr.datasets` prints their paths):
  genpqr fit examples/data/choices.csv --episode episode --time time --state state \\
      --action action --gamma 0.9 --normalization anchor:a --bootstrap 50 --out fit-output
  genpqr fit examples/data/lqg.csv --episode episode --time time --state s --action a \\
      --action-type continuous --gamma 0.9 --normalization anchor:0 --out fit-lqg
"""


USAGE = """genpqr fit DATA --episode COL --time COL --state COL[,COL...] --action COL --gamma GAMMA
                  --normalization SPEC --out DIR [options]
       genpqr fit --config FILE.json [options]"""


def add_fit_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``fit`` sub-command to an ``argparse`` sub-parsers object; returns it.

    One flag per option of :data:`genpqr.app.config.FIT_OPTIONS`. Every flag defaults to "not
    given" so that ``--config FILE.json`` values are kept unless a flag overrides them; its help
    states the default ``FitConfig`` applies, or that it is required (as a flag or in the
    config file). ``args.func`` is :func:`fit_command`.
    """
    p = subparsers.add_parser(
        "fit", help="fit GenPQR to a CSV/Parquet file: model, rewards table and HTML report", usage=USAGE,
        description="Recover a normalized reward from logged choices in a long-format file (one row per episode "
                    "and time step). Writes model.joblib, rewards.csv, parameters.csv (with --features), "
                    "config.json and report.html to --out. States are tabular (each distinct value of the state "
                    "columns is a state; exact solve) when every state column holds integers, with --bins, or with "
                    "--q-model exact; otherwise they are continuous (fitted Q evaluation, --q-model).",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    required = p.add_argument_group("required settings (as flags, or as keys of --config FILE.json)")
    p.add_argument("--config", default=argparse.SUPPRESS, metavar="FILE.json", help="JSON config (same keys as the "
                   "flags, with underscores); flags override it (default: none)")
    FIT_OPTIONS.add_arguments(p, required)
    p.set_defaults(func=fit_command)
    return p


def fit_command(args) -> int:
    """Run ``genpqr fit`` (:func:`genpqr.app.workflow.fit_command`); 0 on success, 2 with a
    one-line message on bad input."""
    from .workflow import fit_command as run

    return run(args)
