r"""Bootstrap replicates of the exact tabular path from reweighted cell counts (no refit).

A replicate of :func:`genpqr.evaluation.bootstrap` draws ``E`` episodes with replacement
(``genpqr.evaluation._inference.resample_episodes``): episode ``e`` enters ``m_e`` times. On the exact
tabular path every quantity the fit estimates from the rows is a sum over rows of (state,
action) and (state, action, next state) indicators, so the replicate's sums are ``sum_e m_e
c_e``, with ``c_e`` the episode's own counts, counted once for all replicates
(``EpisodeCounts``):

- the cell-frequency first stage (:class:`~genpqr.stage1.FrequencyClassifier`, the tabular
  default) is its own fit on the replicate's weighted (state, action) cells -- the same
  closed form ``(n(s, a) + smoothing) / (n(s) + K smoothing)`` from the same integer counts;
- the automatic clip reads the replicate's visited states, observed cells and live next
  states (``genpqr.stage1._clipping.auto_clip_from_summary``, the three numbers of the rows);
- the kernel is ``genpqr.stage2._tabular.kernel_from_counts`` of the replicate's transition counts;
- the reward is :func:`~genpqr.stage2.recover_reward`, one sparse solve, as in the fit.

The counts are integers held exactly in float64, so each replicate's first stage, clip and
kernel equal those of the refit on the resampled episodes entry for entry, and its reward
table is the same solve of the same system (tests/evaluation/test_count_replicates.py compares
every replicate with the refit to 1e-10). What the refit computes for nothing here -- the
cross-fitted folds of the out-of-fold diagnostics, the diagnostics, the resampled rows -- is
not computed: a count replicate is a shallow copy of the full-sample fit with the fitted
state of stage 1 and stage 2 replaced (no ``training_data_``, ``diagnostics_`` or ``policy_folds_``).

``count_plan`` says whether a fit qualifies: the exact path with a cell-frequency first
stage (given, or the default on an unordered state; not prefit), count transitions (``transition_model`` None or ``"counts"``, also when
``"auto"`` kept the counts), no row weights, no action table, no outcome offset, one type, and
a statistic that reads only the fitted tables (``statistic.reads_tables = True``: the reward
table, the command line's tabular and structural statistics). A replicate where the refit
would raise or take another branch (one action left, an anchor action never drawn, a zero
probability without a clip) is refitted instead, so it raises as before.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import scipy.sparse as sp

from ..data._progress import bar_width
from ..normalization import mean_zero
from ..stage1._clipping import auto_clip_from_summary, check_bounds, safe_log
from ..stage1._policy import FittedPolicy, clip_proba
from ..stage2 import recover_reward
from ..stage2._stages import ExactStage2
from ..stage2._tabular import kernel_from_counts

__all__ = ["EpisodeCounts", "CountPlan", "count_plan", "reads_tables", "multiplicities"]

#: Episodes x cells at most this many entries: the episodes' counts are held dense.
DENSE_COUNTS = 2_000_000


def reads_tables(statistic) -> bool:
    """Whether ``statistic(model)`` reads only the fitted tables of an exact-path model
    (``stage2_``, ``policy_``, ``normalization_``, ``transition_counts_``, ``gamma_``,
    ``encoder_``), so that a count replicate gives it what a refit would: marked by a
    ``reads_tables = True`` attribute."""
    return getattr(statistic, "reads_tables", False) is True


def multiplicities(n_episodes: int, rng: np.random.Generator) -> np.ndarray:
    """How often each episode (in sorted id order) enters the replicate that
    ``genpqr.evaluation._inference.resample_episodes`` draws with ``rng``: the same single draw."""
    draw = rng.integers(0, n_episodes, size=n_episodes)
    return np.bincount(draw, minlength=n_episodes).astype(np.float64)


class EpisodeCounts:
    """Each episode's counts on the exact tabular path, as sparse ``(E, cells)`` matrices (rows:
    episodes in sorted id order, as ``genpqr.evaluation._inference.resample_episodes`` numbers them).

    Attributes
    ----------
    choices : csr (E, S*K)
        Choices per (state, action), every row.
    moves : csr (E, S*K)
        Complete transitions (rows with an observed next state, terminated ones included) per (s, a).
    flows : csr (E, S*K*S)
        Non-terminated transitions per (s, a, s').
    live_next : csr (E, S)
        Non-terminated transitions per next state (the states the automatic clip also reads).
    top_state : ndarray (E,)
        The largest state index an episode visits (its states and its complete transitions' next states).
    """

    def __init__(self, data, n_states: int, n_actions: int):
        S, K = int(n_states), int(n_actions)
        ids, episode = np.unique(data.episode_ids, return_inverse=True)
        episode = episode.reshape(-1)
        E = ids.size
        s = np.asarray(data.states, dtype=np.float64).reshape(-1).astype(np.int64)
        a = np.asarray(data.actions, dtype=np.int64)
        nxt = np.asarray(data.next_observed, dtype=bool)
        term = np.asarray(data.terminated, dtype=bool)
        s2 = np.asarray(data.next_states, dtype=np.float64).reshape(-1)
        live = nxt & ~term
        s2i = np.where(nxt, s2, 0).astype(np.int64)

        def counts(rows, cols, width):  # dense while small: a dense product is cheaper than a sparse one
            matrix = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(E, width))
            return matrix.toarray() if E * width <= DENSE_COUNTS else matrix

        self.n_states, self.n_actions, self.n_episodes = S, K, E
        self.choices = counts(episode, s * K + a, S * K)
        self.moves = counts(episode[nxt], (s * K + a)[nxt], S * K)
        self.flows = counts(episode[live], ((s * K + a) * S + s2i)[live], S * K * S)
        self.live_next = counts(episode[live], s2i[live], S)
        top = np.maximum(s, np.where(nxt, s2i, 0))
        self.top_state = np.full(E, -1, dtype=np.int64)
        np.maximum.at(self.top_state, episode, top)

    def weighted(self, m: np.ndarray):
        """``(choices (S*K,), moves (S*K,), flows csr (S*K, S), live_next (S,), top)`` of a replicate
        with episode multiplicities ``m`` (E,)."""
        S, K = self.n_states, self.n_actions

        def total(counts):  # integer counts times integer multiplicities: exact in float64
            return np.asarray(counts.T @ m).reshape(-1)

        flows = total(self.flows)
        flat = np.flatnonzero(flows)
        matrix = sp.csr_matrix((flows[flat], (flat // S, flat % S)), shape=(S * K, S))
        matrix.sum_duplicates()
        top = int(self.top_state[m > 0].max())
        return total(self.choices), total(self.moves), matrix, total(self.live_next), top


class CountPlan:
    """What every count replicate of one bootstrap shares: the template's settings, the
    full-sample fit and the episodes' counts (``count_plan``)."""

    def __init__(self, template, full, data):
        self.template, self.full = template, full
        self.encoder = data.encoder
        self.counts = EpisodeCounts(data, full.n_states_, full.n_actions_)
        from ..data._validation import clone_learner
        from ..stage1 import FrequencyClassifier

        model = template.policy_model  # None: the tabular rule's cell frequencies (count_plan)
        self.classifier = clone_learner(model if model is not None else FrequencyClassifier(n_states=full.n_states_))

    def replicate(self, m: np.ndarray):
        """The replicate model of multiplicities ``m``, or None where the refit must decide
        (it would raise, or take a branch this path does not follow)."""
        template, full = self.template, self.full
        S, K = self.counts.n_states, self.counts.n_actions
        choices, moves, flows, live_next, top = self.counts.weighted(m)
        table = choices.reshape(S, K)
        action_counts = table.sum(axis=0)
        if np.count_nonzero(action_counts) < 2:  # the refit raises: one action
            return None
        if template.n_states is None and top + 1 != S:  # the refit infers another number of states
            return None
        cells = np.flatnonzero(choices)
        X = (cells // K).astype(np.float64)[:, None]
        classifier = copy.copy(self.classifier).fit(X, cells % K, sample_weight=choices[cells])
        policy = FittedPolicy([classifier], None, K, (0.0, 1.0))
        grid = np.arange(S, dtype=np.float64)[:, None]
        raw = policy.raw_proba(grid)
        state_counts = table.sum(axis=1)
        visited = state_counts > 0
        clip = template.clip
        if isinstance(clip, str) and clip.strip().lower() == "auto":
            observed = raw[cells // K, cells % K]
            positive = observed[observed > 0]
            rows = int(round(float(state_counts.sum())))
            zero_rows = float(state_counts[visited].astype(np.int64) @ np.any(raw[visited] <= 0, axis=1) / rows)
            smallest = float(raw[visited].min())
            if np.any(live_next > 0):
                smallest = min(smallest, float(raw[live_next > 0].min()))
            policy.clip, policy.clip_rule = auto_clip_from_summary(
                smallest, float(positive.min()) if positive.size else None, zero_rows)
        else:
            policy.clip, policy.clip_rule = check_bounds(clip), ("given" if clip is not None else "none (no clip)")
        normalization = template.normalization if template.normalization is not None else mean_zero()
        norm = normalization.bind(self.encoder.encode)
        proba = clip_proba(raw[visited], policy.clip)[0]
        mu = norm.weights(grid[visited], K, proba)
        if np.any((mu.max(axis=0) > 0) & (action_counts == 0)):  # the refit raises: mu on an unseen action
            return None
        move_states = moves.reshape(S, K).sum(axis=1) > 0
        if moves.sum() != choices.sum():  # choice-only rows: mu's actions must be seen with a next state
            seen = moves.reshape(S, K).sum(axis=0) > 0
            mu_moves = mu[move_states[visited]]
            if mu_moves.size and np.any((mu_moves.max(axis=0) > 0) & ~seen):
                return None
        kernel, transition_counts = kernel_from_counts(flows, moves)
        full_proba = policy.proba(grid)
        if np.any(full_proba <= 0):  # safe_log raises in the refit
            return None
        u = safe_log(full_proba)
        recovery = recover_reward(u, kernel, full.gamma_, norm, solver=template.solver)
        import dataclasses

        state = full.fitted_.replace(
            normalization=norm, policy=policy, policy_folds=None, stage2=ExactStage2(recovery, kernel, table.copy()),
            diagnostics=None, training_data=None, structural=None,
            tabular=dataclasses.replace(full.fitted_.tabular, visited_states=visited, transition_counts=transition_counts,
                                        transition_model=None, transition_selection=None))
        rep = full._fitted_copy(state)  # the estimator with the replicate's fitted state (GenPQR.fitted_)
        return rep


def count_plan(template, full, data, statistic):
    """A :class:`CountPlan` when the bootstrap of ``template`` (fitted as ``full`` on ``data``)
    with ``statistic`` can run on reweighted counts (module docstring), else None."""
    from ..normalization._normalization import OutcomeOffset
    from ..stage1 import FrequencyClassifier
    from ..stage1._first_stage import state_is_ordered
    from ..stage2._stages import ExactStage2
    from ..stage2._transition_spec import is_count_spec

    if not reads_tables(statistic):
        return None
    params = getattr(template, "get_params", lambda deep=False: {})(deep=False)
    if params.get("q_model") != "exact" or params.get("policy_prefit") or params.get("n_types", 1) != 1:
        return None
    if not is_count_spec(params.get("transition_model")):
        return None
    policy_model = params.get("policy_model")
    if policy_model is None:  # the tabular rule: cell frequencies whatever the cells unless the state is ordered
        if state_is_ordered(params.get("transition_model"), params.get("n_states")):
            return None
    elif type(policy_model) is not FrequencyClassifier:
        return None
    if params.get("type_covariates") is not None:
        return None
    if type(getattr(full, "stage2_", None)) is not ExactStage2 or getattr(full, "transition_model_", None) is not None:
        return None
    norm = getattr(full, "normalization_", None)
    if norm is None or isinstance(norm.g, OutcomeOffset):
        return None
    if data.sample_weight is not None or data.action_table is not None or data.state_dim != 1:
        return None
    return CountPlan(template, full, data)


#: What starting the workers of a parallel bootstrap costs (seconds): each imports the stages and
#: unpickles the fit. Count replicates run in this process unless the workers save more than that
#: (the examples/README.md bootstrap: 200 replicates of about 20 ms, 7.3 s in process, 12.1 s with
#: two workers on two cores).
WORKER_START_SECONDS = 5.0


def run_replicates(one, seeds, args, *, n_jobs: int, progress, plan=None) -> list:
    """``[one(seed, *args) for seed in seeds]``, in order, with joblib workers and a tqdm bar
    (``progress`` None: on a terminal only; False: silent). Count replicates (``plan``) cost
    milliseconds: the first two are timed here, and the rest go to the workers (in a few chunks
    rather than one task each) only where that saves more than ``WORKER_START_SECONDS``."""
    from joblib import Parallel, delayed, effective_n_jobs
    from tqdm.auto import tqdm

    disable = None if progress is None else not progress
    seeds = [int(s) for s in seeds]
    if plan is None or effective_n_jobs(n_jobs) == 1:
        results = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(one)(s, *args) for s in seeds)
        return list(tqdm(results, total=len(seeds), desc="bootstrap", disable=disable, ncols=bar_width()))
    jobs = effective_n_jobs(n_jobs)
    with tqdm(total=len(seeds), desc="bootstrap", disable=disable, ncols=bar_width()) as bar:
        out, costs = [], []
        for seed in seeds[:2]:  # timed in this process: workers pay only where they save time
            start = time.perf_counter()
            out.append(one(seed, *args))
            costs.append(time.perf_counter() - start)
            bar.update()
        rest = seeds[len(out):]
        if min(costs) * len(rest) * (1 - 1 / jobs) < WORKER_START_SECONDS:
            for seed in rest:
                out.append(one(seed, *args))
                bar.update()
            return out
        size = max(1, -(-len(rest) // (4 * jobs)))
        chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
        results = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(_chunk)(one, chunk, args) for chunk in chunks)
        for part in results:
            out.extend(part)
            bar.update(len(part))
    return out


def _chunk(one, seeds, args):
    return [one(s, *args) for s in seeds]
