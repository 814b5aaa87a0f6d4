"""`genpqr COMMAND --help` shows every option's default and marks the required ones.

Every sub-command's parser is walked: an optional action's help ends its sentence with
``(default: ...)`` -- the value argparse stores, ``off`` for a flag, or for ``genpqr fit``
(whose flags default to "not given" so that ``--config`` values are kept) the value
:class:`~genpqr.app.config.FitConfig` applies -- and a required one (a positional, an option with
``required=True``, or a setting ``genpqr fit`` refuses to run without) says ``(required``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import fields

import pytest

from genpqr.app.cli import build_parser
from genpqr.app.config import FitConfig

SKIP = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _fit_required() -> set:
    """The settings ``genpqr fit`` refuses to run without, from its own message."""
    with pytest.raises(ValueError, match="missing required setting") as info:
        FitConfig().check()
    flags = re.search(r"setting\(s\): (.*?) \(", str(info.value)).group(1).split(", ")
    return {"data" if f == "DATA" else f.removeprefix("--").replace("-", "_") for f in flags}


def _shown(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _cases():
    fit_defaults = {f.name: getattr(FitConfig(), f.name) for f in fields(FitConfig)}
    for command, sub in _subparsers().items():
        for action in sub._actions:
            if isinstance(action, SKIP):
                continue
            name = action.option_strings[0] if action.option_strings else action.dest
            default = action.default
            required = action.required or (not action.option_strings and action.nargs not in ("?", "*"))
            if command == "fit" and default is argparse.SUPPRESS:
                required = action.dest in _fit_required()
                default = fit_defaults.get(action.dest)
                default = None if default in ({}, [], None) else default
            yield pytest.param(command, name, action.help or "", required, default, id=f"{command} {name}")


@pytest.mark.parametrize("command, name, help_, required, default", list(_cases()))
def test_help_shows_the_default_or_says_required(command, name, help_, required, default):
    if required:
        assert "(required" in help_, f"genpqr {command} {name}: a required setting whose help does not say so"
        assert "(default:" not in help_
    elif default is None:
        assert "(default: " in help_, f"genpqr {command} {name}: help does not state the default"
    else:
        assert f"(default: {_shown(default)}" in help_, (
            f"genpqr {command} {name}: the default is {default!r} but the help says {help_!r}")


def test_every_sub_command_is_walked():
    assert set(_subparsers()) == {"fit", "counterfactual", "demo", "experiment", "report"}
    assert _fit_required() == {"data", "episode", "time", "state", "action", "gamma", "normalization", "out"}


def test_fit_usage_lists_the_required_settings_first(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "--help"])
    out = capsys.readouterr().out
    usage = out.split("\n\n")[0]
    assert "[--episode" not in usage and "--episode COL --time COL" in usage
    assert "required settings (as flags, or as keys of --config FILE.json):" in out
