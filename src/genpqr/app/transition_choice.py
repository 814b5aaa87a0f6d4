"""The tabular transition model of ``genpqr fit`` (``--transition auto``, the default, or a named
model): chosen by held-out next-state log-likelihood over episode folds
(:func:`genpqr.stage2.select_transition_model`), printed with the reason, and handed to the
estimator as a model with its cross-validated settings fixed (so the bootstrap refits it on each
replicate); counts are handed over as None, the estimator's counts. The choice is the one
``GenPQR(transition_model="auto")`` makes on the same data (the same function, folds and seed)."""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import COMPARED, SELECTED

__all__ = ["TransitionChoice", "choose_transition"]


@dataclass(frozen=True)
class TransitionChoice:
    """What ``genpqr fit`` used for the transitions and why (``summary``: the held-out table)."""

    name: str
    summary: str

    def describe(self) -> str:
        """The summary, indented as the lines of the model's summary it follows: its wrapped lines
        joined back, indented, and wrapped again at the console's width (wrapping the indented
        lines as they stand would leave a word or two on lines of their own)."""
        from .console import fit_width, unwrap

        return fit_width("\n".join("  " + line for line in unwrap(self.summary).splitlines()))


def choose_transition(config, data, index):
    """``(transition model for GenPQR or None (counts), TransitionChoice or None)`` for the
    ``--transition`` models chosen from the data: :data:`~genpqr.registry.SELECTED` (``auto``:
    GenPQR's own rule, on the same data and seed) and :data:`~genpqr.registry.COMPARED` (a named
    model, always fitted and compared with counts); ``(None, None)`` for the others (counts, or a
    model given before the states were numbered: :func:`genpqr.app.states.tabular_states`)."""
    from ..stage2 import CountKernel, select_transition_model

    spec, S = config.transition, index.n_states
    progress = False if config.quiet else None
    if spec.can(SELECTED):
        model, selection = spec.build(data=data, n_states=S, seed=config.seed, progress=progress)
        return (None if model is None else model.fixed_copy()), TransitionChoice(selection.chosen,
                                                                                 selection.summary())
    if not spec.can(COMPARED):
        return None, None
    if data.n_episodes < 2:
        return None, TransitionChoice("counts", f"transition model: counts, overriding the requested --transition "
                                                f"{spec.name} (one episode: no held-out episodes to fit its settings "
                                                f"on; rewards.csv uses counts)")
    name = spec.name
    candidates = {"counts": CountKernel(), name: spec.build(seed=config.seed, state_features=index.keys)}
    selection = select_transition_model(data, candidates, random_state=config.seed, n_states=S, settled_mass=0.0,
                                        thin_only=(), race=False, progress=progress)  # its fit as asked
    summary = selection.summary()
    if selection.chosen != name:
        summary = summary.replace(f"transition model: {selection.chosen} (", f"transition model: {name} (requested; "
                                  f"by held-out likelihood: {selection.chosen}, ", 1)
    return selection.models[name].fixed_copy(), TransitionChoice(name, summary)
