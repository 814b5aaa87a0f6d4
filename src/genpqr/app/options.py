"""The options of a ``genpqr`` command, each declared once (:class:`Option`): its name (the config
key), flag, parser, default, help and the fits that accept it. From the declarations come the
argparse flags (:meth:`Options.add_arguments`), the typed config with its JSON file
(:meth:`Options.config_class`), the checks (:meth:`Options.check`, :meth:`Options.refused`) and
the names the command line gives the library's parameters in messages (:data:`ALL_OPTIONS`,
read by :mod:`genpqr.app.flags`).

A value is parsed once, where it enters: the config class parses every field when it is made
(from flags, a JSON file or Python), into a library object or a :class:`~genpqr.registry.Spec`
that builds one when the data are read. Parsed values stay strings (the text as typed), so a
config is written back to JSON as it was given.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field, fields, make_dataclass, replace
from pathlib import Path
from typing import Callable


__all__ = ["Option", "Options", "Parsed", "REQUIRED", "ALL_OPTIONS", "ConfigBase"]

REQUIRED = "(required, here or in --config)"
#: Every declared option by library parameter (for messages): filled by :class:`Options`.
ALL_OPTIONS: dict = {}


class Parsed(str):
    """A value as typed (a ``str``) with what it was parsed into (``value``)."""

    def __new__(cls, text: str, value):
        obj = super().__new__(cls, text)
        obj.value = value
        return obj

    def __reduce__(self):
        return (Parsed, (str(self), self.value))


def _shown(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


@dataclass(frozen=True)
class Option:
    """One option of a command.

    Parameters
    ----------
    name : str
        The config key (``policy_model``); the flag is ``--policy-model`` unless ``flag`` says.
    help : str or callable
        The help sentence, without the default (a callable: built when the parser is, e.g. from
        a registry's names).
    default : object
        The value when neither a flag nor the config file gives one.
    parse : callable ``(value, values) -> value``, optional
        Turns a flag's text or a JSON value into the field's value (``values``: the fields
        parsed so far, e.g. the action type). A ``TypeError`` or ``ValueError`` becomes
        "config key 'NAME': cannot use VALUE"; a ``ValueError`` of
        :class:`~genpqr.messages.Message` is raised as it is.
    shown_default : str, optional
        The default as the help states it, when not ``str(default)``.
    required : bool
        Required (as a flag or in the config file).
    metavar, choices, cli_type, action, flag
        argparse's (``action``: ``"store_true"`` or ``"append"``).
    positional : bool
        A positional argument (named by ``metavar`` in messages).
    json : bool
        A key of the command's JSON file.
    check : callable ``(value, config) -> None``, optional
        Raises ``ValueError`` for a value out of range (after every field is parsed).
    refused : frozenset of str
        The fits that refuse the option when it is given (see :meth:`Options.refused`).
    inert : callable ``value -> bool``, optional
        Values that count as not given for ``refused`` (the default always does).
    shown_value : bool
        Name it with its value when refused (``--action-type continuous``).
    params : tuple of str
        The library parameters this option sets: a message naming one names this flag.
    values : dict
        Library values of those parameters -> the value typed here (``{"box": "continuous"}``).
    path : bool
        A file or folder: written absolute to ``config.json``.
    """

    name: str
    help: str | Callable
    default: object = None
    parse: Callable | None = None
    shown_default: str | None = None
    required: bool = False
    metavar: str | None = None
    choices: tuple | None = None
    cli_type: Callable | None = None
    action: str | None = None
    flag: str | None = None
    positional: bool = False
    json: bool = True
    check: Callable | None = None
    refused: frozenset = frozenset()
    inert: Callable | None = None
    shown_value: bool = False
    params: tuple = ()
    values: dict = field(default_factory=dict)
    path: bool = False

    @property
    def cli(self) -> str:
        """The flag (a positional argument: its metavar, e.g. ``DATA``)."""
        if self.positional:
            return self.metavar or self.name.upper()
        return self.flag or f"--{self.name.replace('_', '-')}"

    def help_text(self, required: str = REQUIRED) -> str:
        text = self.help() if callable(self.help) else self.help
        if self.required:
            return f"{text} {required}"
        return f"{text} (default: {self.shown_default or _shown(self.default)})"

    def coerce(self, value, values: dict):
        """``value`` as the field holds it (None stays the default's empty form)."""
        if value is None:
            return {} if isinstance(self.default, dict) else [] if isinstance(self.default, list) else None
        if self.parse is None:
            return value
        from ..messages import Message

        try:
            return self.parse(value, values)
        except (TypeError, ValueError) as exc:
            if exc.args and isinstance(exc.args[0], Message):
                raise
            raise ValueError(f"config key {self.name!r}: cannot use {value!r} ({exc})") from None

    def is_given(self, value) -> bool:
        """Whether ``value`` asks for something (not the default, not inert)."""
        if value in (None, "", [], {}, False) or value == self.default:
            return False
        return not (self.inert is not None and self.inert(value))

    def named(self, value) -> str:
        return f"{self.cli} {value}" if self.shown_value else self.cli

    def cli_value(self, value) -> str:
        """A library value of one of :attr:`params` as it is typed here."""
        if _hashable(value) and value in self.values:
            return str(self.values[value])
        return "none" if value is None else str(value)


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class Options:
    """The declared options of one command, in order."""

    def __init__(self, options, *, command: str, required_text: str = REQUIRED):
        self.options = tuple(options)
        self.command, self.required_text = command, required_text
        self.by_name = {o.name: o for o in self.options}
        for option in self.options:
            for param in (option.name, *option.params):
                ALL_OPTIONS.setdefault(param, option)

    def __iter__(self):
        return iter(self.options)

    # -------------------------------------------------------------- argparse
    def add_arguments(self, parser, required_group=None, suppress: bool = True) -> None:
        """One argparse argument per option; required options in ``required_group``. With
        ``suppress`` an option not given is absent from the namespace (so that a config
        file's value is kept)."""
        for option in self.options:
            target = required_group if option.required and required_group is not None else parser
            kwargs = dict(help=option.help_text(self.required_text), default=argparse.SUPPRESS if suppress else option.default)
            if option.positional:
                target.add_argument(option.name, nargs="?" if suppress else None, metavar=option.metavar, **kwargs)
                continue
            if option.action:
                kwargs["action"] = option.action
            if option.action != "store_true":
                kwargs.update(metavar=option.metavar, type=option.cli_type)
            if option.choices:
                kwargs.update(choices=option.choices, metavar=None)
            target.add_argument(option.cli, dest=option.name, **kwargs)

    # -------------------------------------------------------------- the config
    def config_class(self, name: str, base: type, doc: str):
        """A dataclass with one field per option (their defaults), parsing its fields when made."""
        specs = [(o.name, object, field(default_factory=_copy_of(o.default))) for o in self.options]
        cls = make_dataclass(name, specs, bases=(base,), namespace={"__doc__": doc + self._parameters_doc(),
                                                                   "OPTIONS": self})
        cls.__module__ = base.__module__
        return cls

    def _parameters_doc(self) -> str:
        lines = ["", "", "    Parameters", "    ----------"]
        for option in self.options:
            text = option.help() if callable(option.help) else option.help
            lines += [f"    {option.name}", f"        {text} (flag ``{option.cli}``)."]
        return "\n".join(lines) + "\n"

    def parse_fields(self, config) -> None:
        """Parse every field of ``config`` in declaration order (in place)."""
        values = {}
        for option in self.options:
            value = option.coerce(getattr(config, option.name), values)
            object.__setattr__(config, option.name, value)
            values[option.name] = value

    # -------------------------------------------------------------- checks
    def missing(self, config) -> list:
        return [o for o in self.options if o.required and getattr(config, o.name) in (None, "", [])]

    def check(self, config) -> None:
        """Each option's own check, in declaration order."""
        for option in self.options:
            if option.check is not None:
                option.check(getattr(config, option.name), config)

    def refused(self, config, fit: str) -> list:
        """The flags given (as :meth:`Option.named`) that ``fit`` refuses, in declaration order."""
        return [o.named(getattr(config, o.name)) for o in self.options
                if fit in o.refused and o.is_given(getattr(config, o.name))]

    def flags_of(self, fit: str) -> list:
        """Every option ``fit`` refuses."""
        return [o.cli for o in self.options if fit in o.refused]


def _copy_of(default):
    return (lambda: type(default)(default)) if isinstance(default, (list, dict)) else (lambda: default)


# ------------------------------------------------------------------------------ config base
class ConfigBase:
    """Construction, JSON and checks of a config class made by :meth:`Options.config_class`."""

    OPTIONS: Options

    def __post_init__(self):
        self.OPTIONS.parse_fields(self)

    @classmethod
    def from_dict(cls, values: dict):
        """A config from a mapping with the field names as keys (unknown keys are refused)."""
        return cls().updated(values)

    @classmethod
    def from_json(cls, path):
        """A config from a JSON file holding one object (paths in it are relative to the
        working directory, as on the command line)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"config file {str(path)!r} does not exist")
        try:
            values = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"config file {str(path)!r} is not valid JSON: {exc}") from None
        if not isinstance(values, dict):
            raise ValueError(f"config file {str(path)!r} must hold a JSON object, got {type(values).__name__}")
        return cls.from_dict(values)

    def updated(self, values: dict):
        """A copy with ``values`` (field name -> value) applied and parsed."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; valid keys are {sorted(names)}")
        return replace(self, **values)

    def to_dict(self) -> dict:
        return {k: (str(v) if isinstance(v, str) else v) for k, v in asdict(self).items()}

    def to_json(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def with_absolute_paths(self, base=None):
        """A copy whose file and folder settings are absolute, resolved against ``base`` (default:
        the working directory), so that the saved config reruns from any folder."""
        base = Path.cwd() if base is None else Path(base)

        def absolute(p):
            return None if p in (None, "") else str((base / Path(p).expanduser()).resolve())

        changes = {o.name: absolute(getattr(self, o.name)) for o in self.OPTIONS
                   if o.path and _is_path(getattr(self, o.name))}
        return replace(self, **changes)


def _is_path(value) -> bool:
    from ..registry import INPUT_FILE, Spec

    return not isinstance(value, Spec) or value.can(INPUT_FILE)
