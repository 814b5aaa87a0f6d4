r"""Choosing a tabular transition model by held-out next-state log-likelihood over episodes.

Each candidate is fitted on the training episodes of every fold and scored on the moves of
the held-out episodes, never in-sample. Counts give probability 0 to a move never seen from
its cell, so every candidate is scored on the same footing: its held-out probability mixed
with a uniform outcome, ``(1 - floor) P(s'|s,a) + floor / (S + 1)``; the share of held-out
moves a candidate gives probability 0 is reported beside it.

Counts are kept unless another candidate's held-out log-likelihood beats theirs by more than
``threshold`` standard errors of the paired per-episode difference. Where counts miss few
held-out moves (at most ``max_missing_mass``, by default 5%: the Good-Turing estimate of the
probability mass the counts kernel leaves out), cells are well filled and the comparison is made
on the held-out moves counts explain, so that a smoothed model does not displace counts merely
by covering rare moves; otherwise it is made on every held-out move.

Two shortcuts read the share of moves that are the only move from their cell to their outcome
(the in-sample Good-Turing estimate of the mass counts miss): at most ``settled_mass`` (1%)
keeps counts without a comparison; at most ``max_missing_mass`` leaves out the models that pay
only on thin cells (``thin_only``: the low-rank model).

A candidate whose hyperparameters are chosen by its own cross-validation (concentrations,
rank) chooses them once on all moves with the same folds; the fold fits then hold them fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._transition_models import CountKernel, KernelModel, ShrinkageKernel, as_moves
from ._transition_lowrank import LowRankKernel

__all__ = ["TransitionSelection", "select_transition_model", "default_candidates", "AutoTransition",
           "singleton_share"]


def default_candidates(random_state=None) -> dict:
    """``{"counts", "shrinkage", "lowrank"}`` with their default settings."""
    return {"counts": CountKernel(), "shrinkage": ShrinkageKernel(random_state=random_state),
            "lowrank": LowRankKernel(random_state=random_state)}


@dataclass(frozen=True)
class TransitionSelection:
    """The outcome of :func:`select_transition_model`.

    Attributes
    ----------
    chosen : str
        The chosen candidate's name.
    model : fitted transition model
        The chosen candidate fitted on every move.
    models : dict of name -> fitted transition model
        Every candidate fitted on every move.
    scores : list of dict
        Per candidate: ``name``, ``log_likelihood`` (mean held-out log-likelihood per move),
        ``difference`` and ``standard_error`` (versus counts, per move; paired over episodes),
        ``unexplained`` (share of held-out moves given probability 0) and ``settings``.
    reason : str
    n_moves, n_episodes, n_splits : int
    well_filled : bool
        Whether counts missed at most ``max_missing_mass`` of the held-out moves.
    """

    chosen: str
    model: object
    models: dict = field(default_factory=dict)
    scores: list = field(default_factory=list)
    reason: str = ""
    n_moves: int = 0
    n_episodes: int = 0
    n_splits: int = 0
    well_filled: bool = False

    def summary(self) -> str:
        """A few lines: the held-out log-likelihood of every candidate and the choice."""
        lines = [f"transition model: {self.chosen} ({self.reason})"]
        if not self.scores:
            return lines[0]
        lines.append(f"  held-out next-state log-likelihood per move ({self.n_splits} episode folds, {self.n_moves} "
                     f"moves):")
        for row in self.scores:
            diff = ("" if row["name"] == "counts" or not np.isfinite(row["standard_error"]) else
                    f", {row['difference']:+.4f} vs counts on the moves compared (SE {row['standard_error']:.2g})")
            lines.append(f"    {row['name']:<10} {row['log_likelihood']:.4f}{diff}; {row['unexplained']:.1%} of "
                         f"held-out moves unexplained{row['settings']}")
        return "\n".join(lines)


def _settings(model) -> str:
    if isinstance(model, ShrinkageKernel):
        return "; concentrations " + ", ".join(f"{c:.3g}" for c in model.concentrations_)
    if isinstance(model, LowRankKernel):
        capped = (f" (EM stopped at max_iter={model.max_iter} before its tol={model.tol:g})"
                  if model.n_iter_ >= model.max_iter else "")
        return (f"; rank {model.rank_}, concentration {model.concentration_:.3g}, {model.n_groups_} state "
                f"groups{capped}")
    return ""


def singleton_share(moves) -> float:
    """Share of the moves that are the only move from their cell to their outcome: the
    Good-Turing estimate of the probability mass the counts kernel gives to no observed move."""
    pairs = moves.rows.astype(np.int64) * (moves.n_states + 1) + moves.outcomes
    return float(np.count_nonzero(np.bincount(np.unique(pairs, return_inverse=True)[1]) == 1) / max(moves.n, 1))


def select_transition_model(transitions, candidates=None, *, n_splits=5, random_state=None, n_states=None,
                            threshold=2.0, floor=1e-4, max_missing_mass=0.05,
                            settled_mass=0.01, thin_only=("lowrank",)) -> TransitionSelection:
    r"""Choose a transition model by held-out next-state log-likelihood over episode folds.

    Parameters
    ----------
    transitions : :class:`~genpqr.data.Transitions` (tabular states) or :class:`TransitionMoves`
    candidates : None or dict of name -> unfitted transition model
        None: :func:`default_candidates`. Must hold ``"counts"`` for the rule below; without
        it the best held-out candidate is chosen.
    n_splits : int
        Episode folds (fewer when there are fewer episodes; at least 2).
    random_state : None, int or Generator
        The folds.
    n_states : int, optional
    threshold : float
        Another candidate replaces counts when its mean held-out log-likelihood beats
        theirs by more than ``threshold`` standard errors of the paired per-episode difference.
    floor : float
        Weight of the uniform outcome mixed into every held-out probability.
    max_missing_mass : float
        Cells count as well filled when counts give probability 0 to at most this share of
        the held-out moves (the Good-Turing estimate of the probability mass counts miss);
        then the candidates are compared with counts on the held-out moves counts explain,
        else on every held-out move.

    settled_mass, thin_only : float, tuple of str
        The shortcuts of the module docstring (:func:`singleton_share`): counts kept without a
        comparison up to ``settled_mass``; ``thin_only`` candidates tried above ``max_missing_mass``.

    Returns
    -------
    TransitionSelection
    """
    moves = as_moves(transitions, n_states)
    candidates = default_candidates(random_state) if candidates is None else dict(candidates)
    if not candidates:
        raise ValueError("candidates must name at least one transition model")
    settled, candidates, skipped = _shortcuts(moves, candidates, settled_mass, max_missing_mass, thin_only)
    if settled is not None:
        return settled
    episodes, codes = np.unique(moves.episodes, return_inverse=True)
    n_splits = min(int(n_splits), episodes.size)
    if n_splits < 2:
        raise ValueError(f"choosing a transition model needs at least 2 episodes, got {episodes.size}")
    fitted = {name: type(m)(**m.get_params()).fit(moves) for name, m in candidates.items()}
    lls, zeros = _held_out(fitted, moves, moves.folds(n_splits, random_state), floor)
    missing = float(zeros["counts"].mean()) if "counts" in lls else np.nan
    compared = ~zeros["counts"] if missing <= max_missing_mass else np.ones(moves.n, bool)
    scores = []
    for name, ll in lls.items():
        diff, se = np.nan, np.nan
        if "counts" in lls and name != "counts":
            d = np.bincount(codes[compared], (ll - lls["counts"])[compared], episodes.size)
            diff = d.sum() / compared.sum()
            se = d.std(ddof=1) * np.sqrt(d.size) / compared.sum()
        scores.append(dict(name=name, log_likelihood=float(ll.mean()), difference=diff, standard_error=se,
                           unexplained=float(zeros[name].mean()), settings=_settings(fitted[name])))
    chosen, reason = _choose(scores, threshold, missing, max_missing_mass)
    reason += skipped
    return TransitionSelection(chosen, fitted[chosen], fitted, scores, reason, moves.n, int(episodes.size), n_splits,
                               missing <= max_missing_mass)


def _held_out(fitted, moves, folds, floor):
    """Per candidate: the held-out log-likelihood of every move (floored) and whether its held-out
    probability is 0, each (n,), from fold fits with the candidate's settings fixed."""
    lls, zeros = {}, {}
    for name, model in fitted.items():
        ll, zero = np.empty(moves.n), np.zeros(moves.n, bool)
        for train, test in folds:
            p = model.fixed_copy().fit(moves.subset(train)).move_proba(moves.subset(test))
            zero[test] = p <= 0
            ll[test] = np.log((1 - floor) * np.clip(p, 0, 1) + floor / (moves.n_states + 1))
        lls[name], zeros[name] = ll, zero
    return lls, zeros


def _shortcuts(moves, candidates, settled_mass, max_missing_mass, thin_only):
    """``(selection or None, candidates, note)``: counts kept outright on settled cells, else the
    candidates to compare (``thin_only`` ones left out on well-filled cells, said in ``note``)."""
    if "counts" not in candidates:
        return None, candidates, ""
    singletons = singleton_share(moves)
    share = f"{singletons:.1%} of the moves are the only one from their cell to their next state"
    if singletons <= settled_mass:
        counts = type(candidates["counts"])(**candidates["counts"].get_params()).fit(moves)
        reason = f"{share}, at most {settled_mass:.0%}: cells are well filled, no held-out comparison"
        return (TransitionSelection("counts", counts, {"counts": counts}, [], reason, moves.n,
                                    int(np.unique(moves.episodes).size), 0, True), candidates, "")
    skipped = [name for name in candidates if name in thin_only] if singletons <= max_missing_mass else []
    if not skipped:
        return None, candidates, ""
    kept = {name: m for name, m in candidates.items() if name not in skipped}
    return None, kept, f"; {', '.join(skipped)} not tried: {share}, at most {max_missing_mass:.0%}"


def _choose(scores, threshold, missing, max_missing_mass):
    if np.isnan(missing):
        best = max(scores, key=lambda r: r["log_likelihood"])
        return best["name"], "the highest held-out log-likelihood"
    where = (f"counts miss {missing:.1%} of held-out moves (at most {max_missing_mass:.0%}: cells are well filled), "
             f"compared on the moves counts explain" if missing <= max_missing_mass else
             f"counts miss {missing:.1%} of held-out moves (over {max_missing_mass:.0%}: cells are thin), compared on "
             f"every held-out move")
    better = [r for r in scores if r["name"] != "counts" and r["difference"] > threshold * r["standard_error"]]
    if not better:
        return "counts", f"{where}; no other model beats them by {threshold:g} standard errors"
    top = max(better, key=lambda r: r["difference"])
    return top["name"], (f"{where}; it beats counts by {top['difference']:+.4f} per move = "
                         f"{top['difference'] / top['standard_error']:.1f} standard errors, the most")


class AutoTransition(KernelModel):
    """:func:`select_transition_model` as a transition model: ``fit`` chooses among the
    candidates and fits the choice (``selection_``); the protocol forwards to it.

    Parameters
    ----------
    candidates : None or dict of name -> unfitted transition model
    n_splits : int
    random_state : None, int or Generator
    threshold : float
    """

    _param_names = ("candidates", "n_splits", "random_state", "threshold")

    def __init__(self, candidates=None, n_splits=5, random_state=None, threshold=2.0):
        self.candidates = candidates
        self.n_splits = n_splits
        self.random_state = random_state
        self.threshold = threshold

    def _fit(self, moves):
        self.selection_ = select_transition_model(moves, self.candidates, n_splits=self.n_splits,
                                                  random_state=self.random_state, threshold=self.threshold)
        self.model_ = self.selection_.model

    def kernel(self):
        self._check_fitted()
        return self.model_.kernel()

    def _rows(self, flat_rows):
        return self.model_._rows(flat_rows)

    def expect(self, values):
        self._check_fitted()
        return self.model_.expect(values)

    def push(self, weights):
        self._check_fitted()
        return self.model_.push(weights)

    def _move_proba(self, moves):
        return self.model_._move_proba(moves)
