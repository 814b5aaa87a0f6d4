"""How the command line names what the library names: each library parameter a message mentions
(:class:`~genpqr.messages.Mention`) is named by the flag of the option that sets it, as the
option declarations say (:attr:`genpqr.app.options.Option.params`); :func:`cli_text` and
:func:`console_text` render errors, warnings and messages so. The library never names a flag;
every console message names the flag the user typed.
"""

from __future__ import annotations

from ..messages import Mention, render
from . import config, counterfactual_options  # noqa: F401  (their declarations name the flags)
from .options import ALL_OPTIONS

__all__ = ["flag_of", "cli_text", "console_text"]


def flag_of(mention: Mention) -> str | None:
    """How the command line names a library parameter: its flag (with the value as typed)."""
    option = ALL_OPTIONS.get(mention.param)
    if option is None:
        return None
    if mention.key:
        return f"{option.cli} (config key {option.name})"
    if not mention.has_value or (option.action == "store_true" and mention.value is True):
        return option.cli
    return f"{option.cli} {option.cli_value(mention.value)}"


def cli_text(obj) -> str:
    """An error, warning or message with its mentions named as the command line's flags."""
    return render(obj, flag_of)


def console_text(obj) -> str:
    """An error, warning or message as the command line prints it: its mentions named as flags,
    on one line."""
    return " ".join(cli_text(obj).split())
