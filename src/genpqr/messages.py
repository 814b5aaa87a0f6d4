"""Messages that name a parameter: the library speaks of its Python arguments, a front end of its own.

An error or a warning that tells the user which setting to change names it as the caller wrote
it. In Python that is the argument (``n_iterations``, ``clip=None``); on the command line it is
the flag (``--n-iterations``, ``--clip none``). The library writes the message once, as a
:class:`Message` whose :class:`Mention` parts name the Python argument; ``str(message)`` reads
them so, and a front end renders the same message with its own names
(:meth:`Message.render`, :func:`render`). The library never names a command-line flag.

    >>> from genpqr.messages import Mention, Message
    >>> text = Message("raise ", Mention("n_iterations"), " and inspect the convergence plot")
    >>> str(text)
    'raise n_iterations and inspect the convergence plot'
    >>> text.render(lambda m: "--n-iterations" if m.param == "n_iterations" else None)
    'raise --n-iterations and inspect the convergence plot'

A :class:`Message` is a ``str`` (so ``pytest.raises(match=...)``, ``warnings`` filters and
``str(exc)`` see the Python wording); joining it to other text with ``+`` or an f-string gives a
plain ``str``, so compose messages from parts (:class:`Message` accepts messages as parts).
This module imports nothing beyond the standard library.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["Mention", "Message", "render"]

_UNSET = object()


class Mention:
    """A parameter named in a message.

    Parameters
    ----------
    param : str
        The library's argument (``"n_iterations"``, ``"policy_model"``, ``"action_space"``).
    value : object, optional
        The value the message suggests or refers to; shown as ``param=value``.
    python : str, optional
        The Python wording when it is not ``param`` or ``param=value`` (e.g.
        ``"save(path, include_data=True)"``).
    key : bool
        The message is about the setting itself (where it was given): a front end may add
        where it comes from (the command line: the flag and the config key).
    """

    __slots__ = ("param", "value", "python", "key")

    def __init__(self, param: str, value=_UNSET, *, python: str | None = None, key: bool = False):
        self.param, self.value, self.python, self.key = param, value, python, key

    @property
    def has_value(self) -> bool:
        return self.value is not _UNSET

    def __str__(self) -> str:
        if self.python is not None:
            return self.python
        return self.param if not self.has_value else f"{self.param}={self.value!r}"

    def __repr__(self) -> str:
        return f"Mention({self.param!r}{'' if not self.has_value else f', {self.value!r}'})"

    def __reduce__(self):
        return (_mention, (self.param, self.has_value, self.value if self.has_value else None, self.python, self.key))


def _mention(param, has_value, value, python, key):
    return Mention(param, value if has_value else _UNSET, python=python, key=key)


class Message(str):
    """A message whose :class:`Mention` parts a front end may name its own way.

    ``Message(*parts)``: each part a ``str``, a :class:`Mention` or a :class:`Message` (its
    parts are kept). The string value is the Python wording.
    """

    def __new__(cls, *parts):
        flat = []
        for part in parts:
            if isinstance(part, Message):
                flat.extend(part.parts)
            elif isinstance(part, Mention):
                flat.append(part)
            else:
                flat.append(str(part))
        obj = super().__new__(cls, "".join(map(str, flat)))
        obj.parts = tuple(flat)
        return obj

    def render(self, name: Callable[[Mention], str | None]) -> str:
        """The message with each mention named by ``name(mention)`` (None: its Python wording)."""
        return "".join(part if isinstance(part, str) else (name(part) or str(part)) for part in self.parts)

    @property
    def mentions(self) -> list:
        """The :class:`Mention` parts, in order."""
        return [part for part in self.parts if isinstance(part, Mention)]

    def __reduce__(self):
        return (Message, tuple(self.parts))


def render(obj, name: Callable[[Mention], str | None]) -> str:
    """The text of ``obj`` (an exception, a warning or a message) with its mentions named by
    ``name``; other objects as ``str(obj)``."""
    if isinstance(obj, BaseException) and len(obj.args) == 1:
        obj = obj.args[0]
    return obj.render(name) if isinstance(obj, Message) else str(obj)
