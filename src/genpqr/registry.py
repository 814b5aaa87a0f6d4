"""The names users type, one registry per kind: each name with its factory and its capabilities.

A user picks a policy model, a Q model, a normalization, a transition model, an integration
rule or a structural estimator by a short name (``"anchor:a"``, ``"increment:4:replace"``,
``"mc:32"``). Each name is an :class:`Entry` of the :class:`Registry` of its kind, declared
once, beside the class it builds, in a light ``_specs`` module of that class's wing::

    from ..registry import NORMALIZATIONS, STREAMS, Argument

    @NORMALIZATIONS.register("anchor", argument=Argument("ACTION"), capabilities=(STREAMS,),
                             help="mu puts all weight on ACTION in every state: r(s, ACTION) = 0")
    def _anchor(action, *, label, **context):
        from ._normalization import anchor_action  # lazily: declaring an entry imports nothing heavy

        return anchor_action(label(action, "anchor action"))

A text is parsed once, where it enters, by :meth:`Registry.parse`, into a :class:`Spec`: a
``str`` (the text as typed, so it is written back to a config file as such) that knows its
entry and its parsed argument, and builds the object later with what only the data tell
(:meth:`Spec.build`: the action labels, the states, a seed). Callers ask capabilities
(:meth:`Spec.can`, :meth:`Registry.names`), never concrete classes.

The registries of the package are at the bottom of this module; each loads the modules that
declare its entries (``providers``) the first time it is read. Registering is cheap and this
module imports only the standard library: listing the names (``genpqr fit --help``) imports no
scikit-learn, SciPy, pandas or torch. Errors name the library's parameter (``policy_model``) by
:class:`~genpqr.messages.Mention`, which the command line renders as its flag.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from .messages import Mention, Message

__all__ = ["Registry", "Entry", "Argument", "Spec", "import_learner", "STREAMS", "STREAMS_ON_CLUSTER", "TABULAR",
           "CONTINUOUS_STATES",
           "ACTION_FEATURES", "MANY_ACTIONS", "CHOSEN", "TYPES", "ORDERED", "GIVEN", "COMPARED", "SELECTED",
           "INPUT_FILE", "ANCHORED", "COLUMN", "OUTCOME", "POLICY_MODELS", "DENSITIES", "Q_MODELS",
           "CONTINUOUS_Q_MODELS", "NORMALIZATIONS", "CONTINUOUS_NORMALIZATIONS", "TRANSITION_MODELS",
           "INTEGRATION_RULES", "STRUCTURAL_ESTIMATORS"]

# ------------------------------------------------------------------------------ capabilities
STREAMS = "streams"  #: usable out of core (Parquet streamed in chunks, or on a Dask cluster)
STREAMS_ON_CLUSTER = "streams on a cluster"  #: out of core only on a Dask cluster
TABULAR = "tabular"  #: needs tabular states (a Q model: the tabular mode itself)
CONTINUOUS_STATES = "continuous states"  #: needs states as feature vectors, not a tabular index
ACTION_FEATURES = "action features"  #: scores actions by their features (needs an action table)
MANY_ACTIONS = "many actions"  #: scales to thousands of actions (sampled softmax, blocked sums)
CHOSEN = "chosen from the data"  #: the factory chooses from the data and returns ``(model, choice)``
TYPES = "types"  #: estimates latent agent types
ORDERED = "ordered states"  #: transitions: the state's index must be its value (one integer column)
GIVEN = "given"  #: transitions: a kernel given, not estimated (built before the states are numbered)
COMPARED = "compared"  #: transitions: fitted and compared with counts by held-out likelihood
SELECTED = "selected"  #: the library's own rule picks the model (``"auto"``: transitions, the Q model)
INPUT_FILE = "input file"  #: the argument names a file the fit reads
ANCHORED = "anchored"  #: a normalization putting all weight on anchor actions
COLUMN = "column"  #: a normalization reading a per-row column of the data named by its argument
OUTCOME = "outcome"  #: that column is the outcome ``y`` (``g(s) = E[y | s]``)


@dataclass(frozen=True)
class Argument:
    """What follows ``NAME:`` in a typed name.

    ``metavar`` is shown in forms (``anchor:ACTION``); ``parse(text)`` turns the argument text
    into the value the factory receives and raises ``ValueError(what is needed)`` otherwise;
    ``optional``: the name may also be typed alone (the factory then receives None)."""

    metavar: str
    parse: Callable[[str], object] = str
    optional: bool = False


@dataclass(frozen=True, eq=False)
class Entry:
    """One name of a :class:`Registry`: ``factory(value, **context)`` builds the object.

    Attributes
    ----------
    name, help : str
    factory : callable
    argument : Argument or None
        None: the name takes no argument.
    capabilities : frozenset of str
        The capability constants of this module that hold for it.
    aliases : tuple of str
    match : callable or None
        ``match(text) -> bool`` for a pattern entry (a file path), tried before the names.
    notes : dict
        Facts particular to the kind (e.g. what a normalization's column holds).
    """

    name: str
    help: str
    factory: Callable
    argument: Argument | None = None
    capabilities: frozenset = frozenset()
    aliases: tuple = ()
    match: Callable | None = None
    notes: dict = field(default_factory=dict)
    shown: str | None = None

    @property
    def form(self) -> str:
        """How it is typed: ``anchor:ACTION``, ``mean-zero``, ``behavior[:OUTCOME_COLUMN]``."""
        if self.shown is not None:
            return self.shown
        if self.argument is None:
            return self.name
        return f"{self.name}[:{self.argument.metavar}]" if self.argument.optional else \
            f"{self.name}:{self.argument.metavar}"

    def can(self, *capabilities) -> bool:
        """Whether every one of ``capabilities`` holds."""
        return all(c in self.capabilities for c in capabilities)


class Spec(str):
    """A typed name, parsed: the text as typed (a ``str``) with its entry and argument value."""

    def __new__(cls, text: str, registry: "Registry", entry: Entry, value=None):
        obj = super().__new__(cls, text)
        obj.registry, obj.entry, obj.value = registry, entry, value
        return obj

    @property
    def name(self) -> str:
        return self.entry.name

    def can(self, *capabilities) -> bool:
        return self.entry.can(*capabilities)

    def build(self, **context):
        """The object named: ``entry.factory(value, **context)``."""
        return self.entry.factory(self.value, **context)

    def __reduce__(self):  # by text: a pickled spec is parsed again by its registry
        return (_reparse, (self.registry.kind, str(self)))


def _load_providers() -> None:
    """Import every registry's providers, lower wings first (so each registry lists its entries
    in one order, whichever registry is read first)."""
    modules = dict.fromkeys(m for registry in _BY_KIND.values() for m in registry.providers)
    for module in sorted(modules, key=lambda m: (_LOAD_ORDER.index(m) if m in _LOAD_ORDER else len(_LOAD_ORDER))):
        importlib.import_module(module)


def _provider_rank(entry) -> int:
    """Where the module declaring ``entry`` comes in ``_LOAD_ORDER`` (lower wings first, then the
    rest), so a registry lists its entries in one order whichever provider was imported first."""
    module = getattr(entry.factory, "__module__", None)
    return _LOAD_ORDER.index(module) if module in _LOAD_ORDER else len(_LOAD_ORDER)


def _reparse(kind: str, text: str):
    return _BY_KIND[kind].parse(text)


_BY_KIND: dict = {}


def _key(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


class Registry:
    """The names of one kind.

    Parameters
    ----------
    kind : str
        What an entry is, in messages (``"normalization"``).
    param : str
        The library parameter its objects fill (``"normalization"``), named in errors.
    providers : tuple of str
        Modules that declare its entries, imported the first time the registry is read.
    actions : {"discrete", "continuous"}, optional
        The actions its entries serve; with ``counterpart`` (the other kind's registry) a name of
        the other one gets a message saying so.
    lead : str
        How the unknown-name error lists the forms (``"must be one of"``).
    noun : str
        What an entry is called when it is named for the other actions (``"a density"``).
    learner : tuple (what, methods[, settings]), optional
        Import paths ``package.module:Class`` are accepted: a class with ``methods``
        (:func:`import_learner`); ``settings(learner, **context)`` wraps the instance as the
        registry's factories return their objects.
    """

    def __init__(self, kind: str, *, param: str, providers=(), actions=None, lead: str = "must be one of",
                 noun: str = "", learner=None):
        self.kind, self.param, self.providers, self.actions = kind, param, tuple(providers), actions
        self.lead, self.noun, self.learner = lead, noun, learner
        self.counterpart = None
        self._entries: dict = {}
        self._loaded = False
        _BY_KIND[kind] = self

    # -------------------------------------------------------------- declaring
    def add(self, name: str, *, help: str, factory: Callable, argument: Argument | None = None, capabilities=(),
            aliases=(), match=None, form=None, **notes) -> Entry:
        """Declare the entry ``name``; returns it. A name (or alias) declared twice is an error."""
        entry = Entry(name, help, factory, argument, frozenset(capabilities), tuple(aliases), match, dict(notes), form)
        for key in (name, *aliases):
            if _key(key) in self._entries:
                raise ValueError(f"the {self.kind} {key!r} is declared twice")
        for key in (name, *aliases):
            self._entries[_key(key)] = entry
        return entry

    def register(self, name: str, **declaration):
        """Decorator form of :meth:`add`: the decorated function is the factory."""
        def declare(factory):
            self.add(name, factory=factory, **declaration)
            return factory
        return declare

    def remove(self, name: str) -> None:
        """Forget the entry ``name`` and its aliases (e.g. one a test declared)."""
        entry = self._entries[_key(name)]
        for key in [k for k, e in self._entries.items() if e is entry]:
            del self._entries[key]

    # -------------------------------------------------------------- reading
    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            _load_providers()

    def entries(self, *capabilities, without=()) -> list:
        """The entries (in declaration order) with every one of ``capabilities`` and none of ``without``."""
        self._load()
        unique = sorted(dict.fromkeys(self._entries.values()), key=_provider_rank)  # stable: declaration order
        return [e for e in unique if e.can(*capabilities) and not any(c in e.capabilities for c in without)]

    def names(self, *capabilities, without=()) -> list:
        return [e.name for e in self.entries(*capabilities, without=without)]

    def find(self, name: str) -> Entry | None:
        """The entry of ``name`` (or of an alias), else None."""
        self._load()
        return self._entries.get(_key(name))

    def forms(self, *capabilities, without=(), conjunction: str = "or") -> str:
        """``"anchor:ACTION, mean-zero or behavior:OUTCOME_COLUMN"`` (import paths included)."""
        forms = [e.form for e in self.entries(*capabilities, without=without)]
        if self.learner is not None:
            forms.append("package.module:Class")
        return forms[0] if len(forms) == 1 else f"{', '.join(forms[:-1])} {conjunction} {forms[-1]}"

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __iter__(self):
        return iter(self.entries())

    # -------------------------------------------------------------- parsing
    def parse(self, text) -> Spec:
        """``text`` as a :class:`Spec` of this registry; ``ValueError`` naming ``param`` otherwise."""
        if isinstance(text, Spec) and text.registry is self:
            return text
        if not isinstance(text, str):
            raise ValueError(Message(Mention(self.param), f" {self.lead} {self.forms()}, got {text!r}"))
        raw = text.strip()
        self._load()
        for entry in self.entries():
            if entry.match is not None and entry.match(raw):
                return Spec(text, self, entry, self._argument(entry, raw, text))
        name, sep, arg = raw.partition(":")
        entry = self.find(name)
        if entry is None or entry.match is not None:
            if self.learner is not None and sep:  # package.module:Class
                return Spec(text, self, self._import_entry(), raw)
            raise ValueError(self._unknown(name, text))
        return Spec(text, self, entry, self._argument(entry, arg if sep else None, text))

    def _argument(self, entry: Entry, arg, text: str):
        if entry.match is not None:
            return entry.argument.parse(arg) if entry.argument is not None else arg
        if entry.argument is None:
            if arg:
                raise ValueError(Message(Mention(self.param), f" {entry.name} takes no argument, got {text!r}"))
            return None
        if not arg:
            if entry.argument.optional:
                return None
            raise ValueError(Message(Mention(self.param), f" {entry.name} needs an argument: {entry.form}"))
        try:
            return entry.argument.parse(arg.strip())
        except ValueError as exc:
            raise ValueError(Message(Mention(self.param), f" {entry.form} needs ", exc.args[0] if exc.args else "",
                                     f", got {text!r}")) from None

    def _unknown(self, name: str, text) -> Message:
        other = self.counterpart
        elsewhere = other.find(name) if other is not None and name else None
        if elsewhere is not None and self.find(name) is None:
            hint = elsewhere.notes.get("elsewhere", "")
            space = "box" if other.actions == "continuous" else "finite"
            return Message(Mention(self.param), f" {elsewhere.name} is not supported for {self.actions} actions: it is "
                           f"{other.noun + ' ' if other.noun else ''}for {other.actions} actions (",
                           Mention("action_space", space), f"){hint}; use one of {self.forms()}")
        return Message(Mention(self.param), f" {self.lead} {self.forms()}, got {text!r}")

    def _import_entry(self) -> Entry:
        what, methods, *settings = self.learner
        return Entry("package.module:Class", f"a {what} class, made with no arguments",
                     _ImportFactory(self.param, what, tuple(methods), settings[0] if settings else None))


@dataclass(frozen=True)
class _ImportFactory:
    param: str
    what: str
    methods: tuple
    settings: Callable | None = None

    def __call__(self, path, **context):
        learner = import_learner(path, self.what, self.methods, self.param)
        return learner if self.settings is None else self.settings(learner, **context)


def import_learner(path: str, what: str, methods, param: str):
    """An instance of the learner class at ``package.module:Class``, made with no arguments.

    Only a class with every one of ``methods`` (what genpqr calls on a ``what``: a policy model
    ``fit`` and ``predict_proba``; a Q model ``fit`` and ``predict``; a density ``fit``,
    ``log_prob`` and ``sample``) is accepted, checked before anything is instantiated or called:
    a function, a module or any other object is refused (``os:getcwd`` is never called). Importing
    the module runs its top-level code, as any import does: name modules you trust.

    Raises
    ------
    ValueError
        Naming ``param``, when the path is malformed, cannot be imported, or names something
        other than such a class.
    """
    import inspect

    where = Mention(param, key=True)
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(Message(where, f": a {what} import path must look like package.module:Class, got {path!r}"))
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(Message(where, f": cannot import {what} {path!r}: {exc}")) from None
    needs = " and ".join(f"{m}()" for m in methods)
    if not inspect.isclass(obj):
        kind = ("a function" if inspect.isroutine(obj) else "a module" if inspect.ismodule(obj)
                else f"an object of type {type(obj).__name__}")
        raise ValueError(Message(where, f": {path!r} is {kind}, not a class; a {what} import path must name a class "
                                        f"with {needs} (made with no arguments)"))
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise ValueError(Message(where, f": class {path!r} lacks {', '.join(f'{m}()' for m in missing)}; a {what} "
                                        f"must have {needs}"))
    try:
        return obj()
    except TypeError as exc:
        raise ValueError(Message(where, f": class {path!r} cannot be made with no arguments ({exc}); write a subclass "
                                        "whose defaults are the settings you want")) from None


def _pair(discrete: Registry, continuous: Registry) -> None:
    discrete.counterpart, continuous.counterpart = continuous, discrete


# ------------------------------------------------------------------------------ the registries
_CLASSIFIER = ("policy model", ("fit", "predict_proba"))


def _q_settings(learner, *, n_iterations=None, **context) -> dict:
    """A Q model named by its import path: FQE with 100 iterations unless told otherwise."""
    return dict(q_model=learner, n_iterations=n_iterations or 100)


_REGRESSOR = ("Q model", ("fit", "predict"), _q_settings)

POLICY_MODELS = Registry("policy model", param="policy_model", actions="discrete", noun="a classifier",
                         learner=_CLASSIFIER, providers=("genpqr.stage1._specs", "genpqr.models._specs"))
"""Stage-1 classifiers over finite actions. Factories: ``(value, *, tabular, n_states, seed, ...)``;
:data:`CHOSEN` ones also take ``data, ordered`` and return ``(classifier, FirstStageChoice)``."""

DENSITIES = Registry("density", param="policy_model", actions="continuous", noun="a density",
                     learner=("density", ("fit", "log_prob", "sample")),
                     providers=("genpqr.actions._specs", "genpqr.models._specs"))
"""Stage-1 conditional densities over a box. Factories: ``(value, *, space, seed)``."""

Q_MODELS = Registry("Q model", param="q_model", actions="discrete", learner=_REGRESSOR,
                    providers=("genpqr.stage2._specs", "genpqr.models._specs"))
"""Stage-2 models over finite actions. Factories: ``(value, *, seed, n_iterations)`` -> ``q_model`` and
FQE's settings, which ``genpqr.app.build.q_model`` makes one ``GenPQR(q_model=)``."""

CONTINUOUS_Q_MODELS = Registry("continuous-action Q model", param="q_model", actions="continuous",
                               learner=_REGRESSOR, providers=("genpqr.stage2._specs", "genpqr.models._specs"))
"""Regressors on ``[s, a]``. Factories: ``(value, *, seed, n_iterations)`` -> ``q_model`` and
FQE's settings, which ``genpqr.app.build.q_model`` makes one ``GenPQR(q_model=)``."""

NORMALIZATIONS = Registry("normalization", param="normalization", actions="discrete",
                          providers=("genpqr.normalization._specs",))
"""Normalizations over finite actions. Factories: ``(value, *, label, state_column)``: ``label(text,
what)`` is the data's action label typed as ``text``; ``state_column(name, what)`` the per-state
values (or a lookup at new states) of a data column."""

CONTINUOUS_NORMALIZATIONS = Registry("continuous-action normalization", param="normalization",
                                     actions="continuous", providers=("genpqr.normalization._specs",))
"""Reference kernels over a box. Factories: ``(value, *, space, actions)`` (the logged actions)."""

TRANSITION_MODELS = Registry("transition model", param="transition_model", lead="must be",
                             providers=("genpqr.stage2._specs", "genpqr.structural._specs"))
"""Tabular transition models. Factories: ``(value, *, seed, n_actions, label, state_features)``;
:data:`GIVEN` ones are built before the states are numbered (``state_features`` None)."""

INTEGRATION_RULES = Registry("integration rule", param="integration", lead="must be",
                             providers=("genpqr.actions._specs",))
"""Rules for the mu-integrals over a box. Factories: ``(n)``."""

STRUCTURAL_ESTIMATORS = Registry("structural estimator", param="estimator", providers=("genpqr.structural._specs",))
"""Estimators of the flow utility's parameters. Factories: ``()`` -> the estimator's name."""

_LOAD_ORDER = ("genpqr.actions._specs", "genpqr.normalization._specs", "genpqr.stage1._specs", "genpqr.stage2._specs",
               "genpqr.structural._specs", "genpqr.models._specs")

_pair(POLICY_MODELS, DENSITIES)
_pair(Q_MODELS, CONTINUOUS_Q_MODELS)
_pair(NORMALIZATIONS, CONTINUOUS_NORMALIZATIONS)
