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
rank) chooses them once on all moves; the fold fits then hold them fixed. The counts' and
shrinkage's fold statistics are the totals less the held-out fold's. The low-rank model's own
cross-validation (``n_splits`` = 3 episode folds) already holds fold fits at the chosen settings:
its held-out probabilities from them come from fits on two thirds of the episodes, not four
fifths, and so give it a lower score than refits on the selection's folds would (a held-out score
rises with the training data). Where the low-rank model is the choice even on that lower score,
leading counts by twice the rule's threshold in standard errors and the other candidates by the
threshold, the refits would not change the choice and are not made; where it is not the choice
and even its in-sample log-likelihood on every move (its fit on all of them, above any held-out
score) trails the choice's held-out one by the threshold, they would not make it the choice and
are not made either. The summary then says its score comes from its own
folds. Otherwise it is refitted on the selection's folds with its settings fixed, and compared on
those.

The low-rank model is fitted after the others and its rank search races the leader among them
(``race``): after each rank step, where the gap to the leader on its own folds, less ``RACE_Z``
standard errors, exceeds ``RACE_STEPS`` times the ranks left times the last step's gain, the
search stops there and the concentration and group searches are skipped (``LowRankKernel._raced``;
the summary says so). Returns diminishing along the grid, the ranks left could not close the gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data._progress import bar_width
from ._transition_models import CountKernel, KernelModel, ShrinkageKernel, as_moves
from ._transition_lowrank import RACE_STEPS, LowRankKernel

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
        ``unexplained`` (share of held-out moves given probability 0), ``settings``,
        ``n_splits`` and ``folds`` (the episode folds its held-out probabilities come from:
        ``"selection"``, the selection's, or ``"fewer"``, its own cross-validation's where that
        already decides; see the module docstring), ``raced`` (where the low-rank model's rank
        search stopped racing the leader and why: its ``cv_raced_``; empty otherwise).
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
            lines += _wrapped_note(f"{row['name']:<10} {row['log_likelihood']:.4f}{diff}; {row['unexplained']:.1%} of "
                                   f"held-out moves unexplained{row['settings']}", indent=4)
            if row.get("folds", "selection") != "selection" and "in_sample" in row:
                lines += _wrapped_note(f"(held out over its own {row['n_splits']} episode folds, fits on fewer "
                                       f"episodes; not refitted: even\N{NO-BREAK SPACE}in-sample, "
                                       f"{row['in_sample']:.4f}, it is below the choice's held-out score)")
            elif row.get("folds", "selection") != "selection":
                lines += _wrapped_note(f"(held out over its own {row['n_splits']} episode folds, fits on fewer "
                                       "episodes: a lower bound that decides)")
            if row.get("raced"):
                r = row["raced"]
                lines += _wrapped_note(f"(its search stopped at rank {r['rank']}: the last rank step gained "
                                       f"{r['gain']:.4f} per move, it trails {r['leader']} by {r['gap']:.4f} "
                                       f"(SE {r['standard_error']:.2g}) on its own folds, more than "
                                       f"{RACE_STEPS:g} x {r['ranks_left']} ranks left x that gain)")
        return "\n".join(lines)


#: The widest line of :meth:`TransitionSelection.summary` (the console's width).
SUMMARY_WIDTH = 100


def _wrapped_note(text: str, indent: int = 15) -> list:
    """A candidate's row or note as lines of at most :data:`SUMMARY_WIDTH` columns, wrapped at word
    boundaries under ``indent`` spaces with a hanging indent of four more (as the console wraps
    every long line: ``genpqr.app.console.fit_width``); words joined by a no-break space stay on
    one line (a phrase read as one: "even in-sample")."""
    import textwrap

    return [line.replace("\N{NO-BREAK SPACE}", " ") for line in
            textwrap.wrap(text, SUMMARY_WIDTH, initial_indent=" " * indent, subsequent_indent=" " * (indent + 4),
                          break_long_words=False, break_on_hyphens=False)]


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
                            threshold=2.0, floor=1e-4, max_missing_mass=0.05, settled_mass=0.01,
                            thin_only=("lowrank",), race=True, progress=None) -> TransitionSelection:
    r"""Choose a transition model by held-out next-state log-likelihood over episode folds.

    Parameters
    ----------
    transitions : :class:`~genpqr.data.Transitions` (tabular states) or ``TransitionMoves``
    candidates : None or dict of name -> unfitted transition model
        None: ``default_candidates``. Must hold ``"counts"`` for the rule below (else the best held-out one wins).
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
        Cells count as well filled when counts give probability 0 to at most this share of the held-out
        moves (the Good-Turing estimate of the probability mass counts miss); then the candidates are
        compared with counts on the held-out moves counts explain, else on every held-out move.
    settled_mass, thin_only : float, tuple of str
        The shortcuts of the module docstring (``singleton_share``): counts kept without a
        comparison up to ``settled_mass``; ``thin_only`` candidates tried above ``max_missing_mass``.
    race : bool
        The low-rank model's rank search races the leader (module docstring); False where its whole
        search is wanted whatever the comparison says (``genpqr fit --transition lowrank``).
    progress : bool or None
        A progress bar over the candidates on stderr, shown once the comparison has run for 2
        seconds (None: only on a terminal; False: never).

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
    fitted = {name: type(m)(**m.get_params()) for name, m in candidates.items()}
    folds = moves.folds(n_splits, random_state)
    held = _Held(moves, floor)
    with _bar(len(fitted), progress) as bar:
        _fit_candidates(fitted, moves, folds, held, bar, race)
        missing = float(held.zeros["counts"].mean()) if "counts" in held.lls else np.nan
        compared = ~held.zeros["counts"] if missing <= max_missing_mass else np.ones(moves.n, bool)
        scores = _scores(held, fitted, codes, episodes.size, compared)
        chosen, reason = _choose(scores, threshold, missing, max_missing_mass)
        if not _settled_on_own_folds(chosen, scores, threshold, held, fitted, compared, codes, episodes.size):
            _refit_on_selection_folds(scores, fitted, moves, folds, held, bar)
            scores = _scores(held, fitted, codes, episodes.size, compared)
            chosen, reason = _choose(scores, threshold, missing, max_missing_mass)
    reason += skipped
    return TransitionSelection(chosen, fitted[chosen], fitted, scores, reason, moves.n, int(episodes.size), n_splits,
                               missing <= max_missing_mass)


def _fit_candidates(fitted, moves, folds, held, bar, race=True):
    """Each candidate fitted on every move (in place), its held-out probabilities put in ``held``:
    from its own cross-validation's folds where it offers them (``_fit_own_held_out``), else from
    fits on the selection's ``folds`` (``_fit_held_out``)."""
    own_last = sorted(fitted, key=lambda name: hasattr(fitted[name], "_fit_own_held_out"))  # the cheap ones first
    for name in own_last:
        model = fitted[name]
        _note(bar, name)
        own = getattr(model, "_fit_own_held_out", None)
        if own is not None:  # its own cross-validation says which setting and fold it fits
            model._progress_note = lambda text, name=name: _note(bar, f"{name}: {text}")
            if race:
                model._race = _Leader(held, fitted, moves)
        try:
            p, splits = own(moves) if own is not None else (None, None)
        finally:
            model.__dict__.pop("_progress_note", None)
            model.__dict__.pop("_race", None)
        if p is None:
            p, splits = model._fit_held_out(moves, folds), folds
        held.add(name, p, splits, folds)
        bar.update()


class _Leader:
    """The candidate that leads so far (the highest held-out log-likelihood per move on the
    selection's folds), for a candidate's own cross-validation to race against
    (``LowRankKernel``'s rank search): ``name`` (None when none is scored yet), and
    ``log_lik(splits)``: its held-out log-likelihood of every move (floored as the selection's)
    from fits with its settings fixed on other folds, ``splits`` (the racer's own; computed once)."""

    def __init__(self, held, fitted, moves):
        self.held, self.moves, self._cache = held, moves, None
        scored = [name for name in held.lls if held.folds[name] == "selection"]
        self.name = max(scored, key=lambda name: held.lls[name].mean()) if scored else None
        self.model = fitted.get(self.name)

    def floored(self, p):
        return np.log((1 - self.held.floor) * np.clip(p, 0, 1) + self.held.floor / (self.moves.n_states + 1))

    def log_lik(self, splits):
        if self._cache is None:
            self._cache = self.floored(self.model._held_out_on(self.moves, splits))
        return self._cache


def _refit_on_selection_folds(scores, fitted, moves, folds, held, bar):
    """The candidates scored on their own folds, refitted on the selection's with settings fixed."""
    for name in [row["name"] for row in scores if row["folds"] != "selection"]:
        _note(bar, f"{name} on {len(folds)} folds")
        held.add(name, fitted[name]._refit_held_out(moves, folds), folds, folds)


class _Held:
    """Per candidate: the held-out log-likelihood of every move (floored), whether its held-out
    probability is 0, the number of episode folds they come from, and which folds those are:
    ``"selection"`` (the selection's), ``"fewer"`` (a candidate's own, fewer than the
    selection's: fits on fewer episodes, a lower score) or ``"other"``."""

    def __init__(self, moves, floor):
        self.moves, self.floor = moves, floor
        self.lls, self.zeros, self.n_splits, self.folds = {}, {}, {}, {}

    def add(self, name, p, splits, folds):
        self.zeros[name] = p <= 0
        self.lls[name] = np.log((1 - self.floor) * np.clip(p, 0, 1) + self.floor / (self.moves.n_states + 1))
        self.n_splits[name] = len(splits)
        same = len(splits) == len(folds) and all(np.array_equal(a[1], b[1]) for a, b in zip(splits, folds))
        self.folds[name] = "selection" if same else "fewer" if len(splits) < len(folds) else "other"


def _paired(a, b, codes, n_episodes, compared):
    """The mean difference ``a - b`` per move compared and its standard error, paired over episodes."""
    d = np.bincount(codes[compared], (a - b)[compared], n_episodes)
    return d.sum() / compared.sum(), d.std(ddof=1) * np.sqrt(d.size) / compared.sum()


def _scores(held, fitted, codes, n_episodes, compared):
    scores = []
    for name, ll in ((name, held.lls[name]) for name in fitted if name in held.lls):  # the candidates' order
        diff, se = np.nan, np.nan
        if "counts" in held.lls and name != "counts":
            diff, se = _paired(ll, held.lls["counts"], codes, n_episodes, compared)
        scores.append(dict(name=name, log_likelihood=float(ll.mean()), difference=diff, standard_error=se,
                           unexplained=float(held.zeros[name].mean()), settings=_settings(fitted[name]),
                           n_splits=held.n_splits[name], folds=held.folds[name],
                           raced=dict(getattr(fitted[name], "cv_raced_", None) or {})))
    return scores


def _settled_on_own_folds(chosen, scores, threshold, held, fitted, compared, codes, n_episodes):
    """Whether the choice stands without refitting, on the selection's folds, the candidates scored
    on their own cross-validation's folds. Fits on more of the episodes raise a held-out score
    (the learning curve), and a held-out score stays below a model's in-sample one on every move
    (its fit on all of them). So an own-fold candidate that is the choice on its score from fewer
    folds, leading counts by twice the rule's threshold in standard errors and every other
    candidate by the threshold, keeps it; and one that is not the choice cannot become it when
    even its in-sample log-likelihood trails the choice's held-out one by the threshold in
    standard errors (its row then gets ``in_sample``). Otherwise (counts kept, or an own-fold
    candidate on as many folds as the selection's or more): refits."""
    own = [row for row in scores if row["folds"] != "selection"]
    if not own:
        return True
    if chosen == "counts" or any(row["folds"] != "fewer" for row in own):
        return False
    lls = held.lls
    mine = next(row for row in scores if row["name"] == chosen)
    if mine["folds"] != "selection":
        if not (np.isnan(mine["difference"]) or mine["difference"] > 2 * threshold * mine["standard_error"]):
            return False
        for name in lls:
            if name not in (chosen, "counts"):
                lead, se = _paired(lls[chosen], lls[name], codes, n_episodes, compared)
                if not lead > threshold * se:
                    return False
    for row in own:
        if row["name"] == chosen:
            continue
        p = fitted[row["name"]].move_proba(held.moves)
        in_sample = np.log((1 - held.floor) * np.clip(p, 0, 1) + held.floor / (held.moves.n_states + 1))
        row["in_sample"] = float(in_sample[compared].mean())
        lead, se = _paired(lls[chosen], in_sample, codes, n_episodes, compared)
        if not lead > threshold * se:
            return False
    return True


PROGRESS_DELAY = 2.0
"""Seconds the comparison runs before its progress bar shows (a quick one stays silent)."""


def _bar(total, progress):
    """The comparison's bar: the candidates done and what it fits now, no percentage (the candidates'
    costs differ by orders of magnitude: the low-rank model's cross-validation is most of it)."""
    if progress is False:  # never shown: no tqdm (its lock imports multiprocessing)
        from ..data._progress import SilentBar

        return SilentBar(total=total, desc="transition selection")
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="transition selection", unit="model", delay=PROGRESS_DELAY, leave=False,
                ncols=bar_width(), bar_format="{desc}: {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
                disable=None if progress is None else not progress)


def _note(bar, text: str) -> None:
    """What the comparison fits now, on its bar: drawn at once once the bar shows (past
    :data:`PROGRESS_DELAY`), else with its next update (a quick comparison stays silent)."""
    bar.set_postfix_str(text, refresh=False)
    if not bar.disable and bar._time() >= bar.start_t + bar.delay:
        bar.refresh()


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
    progress : bool or None
    """

    _param_names = ("candidates", "n_splits", "random_state", "threshold", "progress")

    def __init__(self, candidates=None, n_splits=5, random_state=None, threshold=2.0, progress=None):
        self.candidates = candidates
        self.n_splits = n_splits
        self.random_state = random_state
        self.threshold = threshold
        self.progress = progress

    def _fit(self, moves):
        self.selection_ = select_transition_model(moves, self.candidates, n_splits=self.n_splits,
                                                  random_state=self.random_state, threshold=self.threshold,
                                                  progress=self.progress)
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
