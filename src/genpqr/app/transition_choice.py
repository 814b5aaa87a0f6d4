"""The tabular transition model of ``genpqr fit`` (``--transition auto``, the default, or a named
model): chosen by held-out next-state log-likelihood over episode folds
(:func:`genpqr.stage2.select_transition_model`), printed with the reason, and handed to the
estimator as a model with its cross-validated settings fixed (so the bootstrap refits it on each
replicate); counts are handed over as None, the estimator's counts. The choice is the one
``GenPQR(transition_model="auto")`` makes on the same data (the same function, folds and seed)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TransitionChoice", "choose_transition", "parse_transition"]


@dataclass(frozen=True)
class TransitionChoice:
    """What ``genpqr fit`` used for the transitions and why (``summary``: the held-out table)."""

    name: str
    summary: str

    def describe(self) -> str:
        """The summary, indented as the lines of the model's summary it follows."""
        return "\n".join("  " + line for line in self.summary.splitlines())


def _candidates(arg, seed, state_features):
    from ..stage2 import ClassifierKernel, CountKernel, LowRankKernel, ShrinkageKernel

    models = {"shrinkage": ShrinkageKernel(random_state=seed), "lowrank": LowRankKernel(random_state=seed),
              "classifier": ClassifierKernel(state_features=state_features)}
    return {"counts": CountKernel(), arg: models[arg]}


def choose_transition(config, data, index):
    """``(transition_model for GenPQR or None (counts), TransitionChoice or None)`` for the
    ``--transition`` kinds ``auto``, ``shrinkage``, ``lowrank`` and ``classifier``; ``(None, None)``
    for the others (counts, increments, a kernel file: handled by the state index)."""
    from ..stage2 import resolve_transition_model, select_transition_model

    kind, arg = parse_transition(config.transition)
    if kind not in ("auto", "model"):
        return None, None
    S = index.n_states
    if kind == "auto":  # GenPQR(transition_model="auto")'s own rule, on the same data and seed
        model, selection = resolve_transition_model("auto", data, S, random_state=config.seed,
                                                    progress=False if config.quiet else None)
        return (None if model is None else model.fixed_copy()), TransitionChoice(selection.chosen,
                                                                                 selection.summary())
    if data.n_episodes < 2:
        return None, TransitionChoice("counts", "transition model: counts (one episode: no held-out comparison)")
    candidates = _candidates(arg, config.seed, index.keys)  # a named model is always fitted and compared
    selection = select_transition_model(data, candidates, random_state=config.seed, n_states=S, settled_mass=0.0,
                                        thin_only=(), progress=False if config.quiet else None)
    summary = selection.summary()
    name = selection.chosen
    if kind == "model" and name != arg:
        name = arg
        summary = summary.replace(f"transition model: {selection.chosen} (", f"transition model: {arg} (requested; "
                                  f"by held-out likelihood: {selection.chosen}, ", 1)
    if name == "counts":
        return None, TransitionChoice("counts", summary)
    return selection.models[name].fixed_copy(), TransitionChoice(name, summary)


def parse_transition(spec: str):
    """``auto`` | ``counts`` | ``shrinkage`` | ``lowrank`` | ``classifier`` | ``increment:MAX[:RESET_ACTION]`` |
    ``FILE.npy`` | ``FILE.npz`` -> (kind, argument): ``("model", name)`` for the three models."""
    spec = str(spec)
    if spec in ("auto", "counts"):
        return spec, None
    if spec in ("shrinkage", "lowrank", "classifier"):
        return "model", spec
    if spec.startswith("increment:"):
        parts = spec.split(":", 2)
        try:
            max_inc = int(parts[1])
        except ValueError:
            max_inc = -1
        if max_inc < 0:
            raise ValueError(f"--transition increment:MAX needs a non-negative integer MAX, got {spec!r}")
        return "increment", (max_inc, parts[2] if len(parts) > 2 and parts[2] != "" else None)
    if spec.endswith((".npy", ".npz")):
        return "file", spec
    raise ValueError(f"--transition must be auto, counts, shrinkage, lowrank, classifier, increment:MAX[:RESET] or "
                     f"a .npy/.npz file, got {spec!r}")
