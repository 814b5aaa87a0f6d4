r"""Sufficient statistics of the out-of-core fits, per chunk and per pass.

Per-chunk statistics are pure functions of one :class:`~genpqr.data.Transitions` chunk of
whole episodes; their results add up (``+`` or ``merge``), so the same code serves the
streamed fit (:func:`genpqr.scale.fit_parquet`, one pass over the whole dataset) and the
distributed one (:func:`genpqr.scale.fit_dask`, one task per partition of episodes,
partial results summed on the workers and the client):

* ``tabular_chunk_counts`` -- choice counts ``n(s, a)`` and transition counts
  ``n(s, a, s')`` (sparse) for the exact tabular path (``TabularCounts``, ``+``);
* ``bellman_chunk`` -- the ``genpqr.stage2._lstd.BellmanProblem`` of a chunk for a fitted
  policy and normalization, to feed ``LSTDQ.partial_fit`` (or
  ``BellmanStatistics.accumulate*`` / ``merge``);
* ``choice_summary`` -- the sums behind GenPQR's diagnostics (``ChoiceSummary``, ``+``);
* ``clip_chunk`` -- the auto clip rule's three numbers (``ClipSummary``, ``+``).

The *passes* read a :class:`genpqr.scale.ParquetSource`, or only one of its
``genpqr.scale._scan.Partition`` objects, chunk by chunk and return the summed statistic
(None when there is no row). They are top-level functions of picklable arguments, so that a
Dask worker can run them: ``tabular_pass``, ``row_count_pass``, ``sample_pass``,
``clip_pass``, ``lstd_pass``, ``fqe_pass`` (one Bellman iteration of streamed FQE
and its evaluation sums) and ``choice_frame`` (states and action codes, for a distributed
first stage).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..data import Transitions
from ..stage2._qmodels import BellmanTargets, predict_at

__all__ = ["TabularCounts", "ChoiceSummary", "ClipSummary", "LSTDPart", "RowDraws", "tabular_chunk_counts",
           "bellman_chunk", "choice_summary", "chunk_choice_summary", "clip_chunk", "concatenate_chunks",
           "tabular_pass", "row_count_pass", "sample_pass", "clip_pass", "lstd_pass", "fqe_pass", "choice_frame",
           "add_parts"]


# ============================================================================ tabular counts
@dataclass
class TabularCounts:
    """Sufficient statistics of the exact tabular path; ``a + b`` adds two partial sums.

    Attributes
    ----------
    choices : ndarray of shape (S*K,)
        ``n_choice(s, a)``: every observed choice (stage 1, the visited states).
    visits : ndarray of shape (S*K,)
        ``n(s, a)``: complete transitions (terminated included), the kernel's denominators.
    moves : scipy.sparse.csr_matrix of shape (S*K, S)
        ``n(s, a, s')``: non-terminated complete transitions.
    live_next : ndarray of shape (S,), bool
        States reached as a non-terminated next state (the auto clip reads the policy there).
    n_rows, n_episodes, n_choice_only : int
    """

    choices: np.ndarray
    visits: np.ndarray
    moves: sp.csr_matrix
    live_next: np.ndarray
    n_rows: int = 0
    n_episodes: int = 0
    n_choice_only: int = 0

    @property
    def n_states(self) -> int:
        return int(self.moves.shape[1])

    def resized(self, n_states: int) -> "TabularCounts":
        """The same counts on ``n_states >= S`` states (chunks may see fewer states)."""
        S, K = self.n_states, self.moves.shape[0] // max(self.n_states, 1)
        if n_states == S:
            return self
        grow = n_states - S
        moves = sp.csr_matrix((self.moves.data, self.moves.indices, self.moves.indptr), shape=(S * K, n_states))
        moves = sp.vstack([moves, sp.csr_matrix((grow * K, n_states))]).tocsr()
        pad = np.zeros(grow * K)
        return TabularCounts(np.concatenate([self.choices, pad]), np.concatenate([self.visits, pad]), moves,
                             np.concatenate([self.live_next, np.zeros(grow, dtype=bool)]), self.n_rows,
                             self.n_episodes, self.n_choice_only)

    def __add__(self, other: "TabularCounts") -> "TabularCounts":
        S = max(self.n_states, other.n_states)
        a, b = self.resized(S), other.resized(S)
        return TabularCounts(a.choices + b.choices, a.visits + b.visits, (a.moves + b.moves).tocsr(),
                             a.live_next | b.live_next, a.n_rows + b.n_rows, a.n_episodes + b.n_episodes,
                             a.n_choice_only + b.n_choice_only)


def tabular_chunk_counts(chunk: Transitions, n_states: int | None = None) -> TabularCounts:
    """The ``TabularCounts`` of one chunk of whole episodes (states are indices in one
    column); ``n_states`` default: max index + 1 in the chunk. Sum chunks with ``+``."""
    from ..data._validation import check_state_indices
    from ..stage2._tabular import transition_counts

    if chunk.state_dim != 1:
        raise ValueError(f"the tabular path needs tabular states (one index column), got {chunk.state_dim} columns")
    trans = chunk.subset(chunk.next_observed | chunk.terminated)
    next_states = trans.next_states  # a terminated row's (absorbing) next state is its own: a valid index
    if n_states is None:
        n_states = int(max(chunk.states.max(), next_states.max() if trans.n else 0)) + 1
    K = chunk.n_actions
    s = check_state_indices(chunk.states, n_states, "states")
    choices = np.bincount(s * K + chunk.actions, minlength=n_states * K).astype(np.float64)
    moves, visits = transition_counts(trans.states, trans.actions, next_states, n_states, K,
                                      terminated=trans.terminated)
    live = np.zeros(n_states, dtype=bool)
    live[check_state_indices(next_states[~trans.terminated], n_states, "next_states")] = True
    return TabularCounts(choices, visits, moves, live, chunk.n, chunk.n_episodes, chunk.n_choice_only)


# ============================================================================ closed-form chunks
def bellman_chunk(chunk: Transitions, policy, normalization, offset, gamma: float, raw=None):
    """The ``genpqr.stage2._lstd.BellmanProblem`` of a chunk's complete transitions, as GenPQR's
    closed-form stage 2 builds it: ``reward = u(s, a) - g(s)`` with ``u = log pi_hat``
    (clipped), ``next_mu = mu(.|s')`` and ``next_reward = sum_a' mu(a'|s') (u(s', a') - g(s'))``.

    Parameters
    ----------
    chunk : Transitions
    policy : genpqr.stage1.FittedPolicy
        Fitted stage 1 (clip resolved).
    normalization : genpqr.normalization.Normalization
        Bound to the action codes; ``offset`` is its ``g`` as a callable ``states -> (m,)``.
    gamma : float
    raw : ndarray of shape (n, K), optional
        ``policy.raw_proba(chunk.states)`` if already computed.

    Returns
    -------
    genpqr.stage2.BellmanProblem or None
        None when the chunk has no complete transition.
    """
    from ..stage1._clipping import mu_expectation, safe_log
    from ..stage2._lstd import BellmanProblem
    from ..stage1._policy import clip_proba

    if chunk.n_choice_only == chunk.n:
        return None
    keep = chunk.next_observed
    trans = chunk.with_next()
    K = chunk.n_actions
    raw = policy.raw_proba(trans.states) if raw is None else np.asarray(raw)[keep]
    proba = clip_proba(raw, policy.clip)[0]
    next_proba = clip_proba(policy.raw_proba(trans.next_states), policy.clip)[0]
    next_mu = normalization.weights(trans.next_states, K, next_proba)
    g_rows = np.asarray(offset(trans.states), dtype=np.float64)
    g_next = np.asarray(offset(trans.next_states), dtype=np.float64)
    u_rows = safe_log(proba[np.arange(trans.n), trans.actions])
    next_reward = mu_expectation(next_mu, next_proba, g_next)
    return BellmanProblem(trans.states, trans.actions, trans.next_states, trans.continues, u_rows - g_rows, next_mu,
                          gamma, next_reward=next_reward, log_policy=policy.log_proba, offset=offset,
                          policy_models=list(policy.models))


# ============================================================================ diagnostics sums
@dataclass
class ChoiceSummary:
    """Sums over observed choices behind GenPQR's diagnostics (``+`` adds partial sums).

    Attributes
    ----------
    n, n_episodes, n_choice_only : int
    action_counts, trans_action_counts : ndarray of shape (K,)
        Choices per action; complete transitions per action.
    mu_max, trans_mu_max : ndarray of shape (K,)
        ``max_i mu(a|s_i)`` over the choices; over the complete transitions.
    support, log_loss, clipped, floored : float
        Rows with ``mu(a_i|s_i) > 0``; ``-sum log pi_hat(a_i|s_i)``; rows whose observed action
        hits a clip bound; rows where some action is below the lower bound.
    max_mu_over_pi : float
    poorly_covered : float
        Rows at whose state ``mu/pi_hat`` exceeds the coverage limit for some action
        (``genpqr.estimator._diagnostic_checks.poorly_covered``).
    """

    n: float
    n_episodes: int
    n_choice_only: int
    action_counts: np.ndarray
    trans_action_counts: np.ndarray
    mu_max: np.ndarray
    trans_mu_max: np.ndarray
    support: float
    log_loss: float
    clipped: float
    floored: float
    max_mu_over_pi: float
    poorly_covered: float = 0.0

    def __add__(self, o: "ChoiceSummary") -> "ChoiceSummary":
        return ChoiceSummary(self.n + o.n, self.n_episodes + o.n_episodes, self.n_choice_only + o.n_choice_only,
                             self.action_counts + o.action_counts, self.trans_action_counts + o.trans_action_counts,
                             np.maximum(self.mu_max, o.mu_max), np.maximum(self.trans_mu_max, o.trans_mu_max),
                             self.support + o.support, self.log_loss + o.log_loss, self.clipped + o.clipped,
                             self.floored + o.floored, max(self.max_mu_over_pi, o.max_mu_over_pi),
                             self.poorly_covered + o.poorly_covered)


def choice_summary(raw, actions, mu, clip, *, has_next, weights=None, n_episodes: int = 0) -> ChoiceSummary:
    """The ``ChoiceSummary`` of rows with unclipped stage-1 probabilities ``raw`` (m, K),
    observed ``actions`` (m,), normalization weights ``mu`` (m, K), ``clip`` bounds,
    ``has_next`` (m,) bool (a complete transition) and optional row ``weights`` (m,) (counts,
    for the tabular path's one row per (s, a))."""
    from ..estimator._diagnostic_checks import poorly_covered
    from ..stage1._policy import clip_proba

    raw = np.asarray(raw, dtype=np.float64)
    m, K = raw.shape
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    rows = np.arange(m)
    proba, clipped = clip_proba(raw, clip)
    low, high = clip
    hit = ((raw < low) | (raw > high))[rows, actions]
    floored = np.any(raw < low, axis=1)
    counts = np.bincount(actions, weights=w, minlength=K)
    trans_counts = np.bincount(actions[has_next], weights=w[has_next], minlength=K)
    zero = np.zeros(K)
    with np.errstate(divide="ignore"):
        log_p = np.log(proba[rows, actions])
    return ChoiceSummary(float(w.sum()), n_episodes, int(np.sum(w[~has_next])), counts, trans_counts,
                         mu.max(axis=0) if m else zero, mu[has_next].max(axis=0) if has_next.any() else zero,
                         float(np.sum(w[mu[rows, actions] > 0])), float(-np.sum(w * log_p)),
                         float(np.sum(w[hit])), float(np.sum(w[floored])),
                         float(np.max(mu / proba)) if m else 0.0, float(np.sum(w[poorly_covered(mu, proba)])))


def concatenate_chunks(parts: Sequence[Transitions]) -> Transitions:
    """One :class:`~genpqr.data.Transitions` from chunks of whole episodes sharing one encoder
    (episode ids renumbered so that chunks never share one)."""
    from dataclasses import replace

    if not parts:
        raise ValueError("no chunk to concatenate")
    first = parts[0]
    if any(p.encoder.labels.tolist() != first.encoder.labels.tolist() for p in parts):
        raise ValueError("chunks must share one action encoder (pass the full action_labels)")
    ids, offset = [], 0
    for p in parts:
        codes = np.unique(p.episode_ids, return_inverse=True)[1].reshape(-1)
        ids.append(codes + offset)
        offset += int(codes.max()) + 1 if codes.size else 0
    values = {}
    for name in Transitions._ROW_FIELDS:
        arrays = [getattr(p, name) for p in parts]
        values[name] = None if any(a is None for a in arrays) else np.concatenate(arrays)
    values["episode_ids"] = np.concatenate(ids).astype(np.int64)
    return replace(first, **values)


# ============================================================================ auto clip
@dataclass
class ClipSummary:
    """The auto clip rule's inputs over rows (``+`` adds partial results).

    Attributes
    ----------
    smallest : float
        ``min pi_hat(a|s)`` over every action at the choices and at the live next states.
    observed_min : float
        ``min pi_hat(a_i|s_i) > 0`` over the choices (inf when there is none).
    zero_rows, n : int
        Choices where some action has probability 0; choices.
    """

    smallest: float
    observed_min: float
    zero_rows: int
    n: int

    def __add__(self, o: "ClipSummary") -> "ClipSummary":
        return ClipSummary(min(self.smallest, o.smallest), min(self.observed_min, o.observed_min),
                           self.zero_rows + o.zero_rows, self.n + o.n)

    def rule_inputs(self) -> tuple:
        """``(smallest, smallest_observed or None, zero fraction)`` for
        ``genpqr.stage1._clipping.auto_clip_from_summary``."""
        observed = None if not np.isfinite(self.observed_min) else float(self.observed_min)
        return float(self.smallest), observed, self.zero_rows / max(self.n, 1)


def clip_chunk(chunk: Transitions, policy, raw=None) -> ClipSummary:
    """The ``ClipSummary`` of a chunk under a fitted (unclipped) policy."""
    raw = policy.raw_proba(chunk.states) if raw is None else raw
    live = chunk.next_observed & ~chunk.terminated
    smallest = min(float(raw.min()), float(policy.raw_proba(chunk.next_states[live]).min()) if live.any() else np.inf)
    obs = raw[np.arange(chunk.n), chunk.actions]
    observed_min = float(obs[obs > 0].min()) if np.any(obs > 0) else np.inf
    return ClipSummary(smallest, observed_min, int(np.count_nonzero(np.any(raw <= 0, axis=1))), chunk.n)


def chunk_choice_summary(chunk: Transitions, raw, policy, normalization) -> ChoiceSummary:
    """``choice_summary`` of a chunk's rows under a fitted policy (clip resolved) and a
    normalization bound to the action codes; ``raw = policy.raw_proba(chunk.states)``."""
    from ..stage1._policy import clip_proba

    proba = clip_proba(raw, policy.clip)[0]
    mu = normalization.weights(chunk.states, chunk.n_actions, proba)
    return choice_summary(raw, chunk.actions, mu, policy.clip, has_next=chunk.next_observed,
                          n_episodes=chunk.n_episodes)


# ============================================================================ random sample
class RowDraws:
    """Uniform draws indexed by row position: row ``i`` of a dataset (rows in the order of its
    :class:`~genpqr.data.Transitions` chunks) gets the ``i``-th draw of
    ``numpy.random.default_rng(random_state)``, whoever reads it. A worker reading rows from
    position ``offset`` on jumps there (``PCG64.advance``), so a sample drawn partition by
    partition is the sample drawn in one pass.

    Parameters
    ----------
    random_state : None, int, SeedSequence or numpy Generator on PCG64
        A Generator is not advanced (its state is copied).
    """

    def __init__(self, random_state=None):
        if isinstance(random_state, np.random.Generator):
            if not isinstance(random_state.bit_generator, np.random.PCG64):
                raise ValueError("random_state: a numpy Generator must use the PCG64 bit generator (np.random."
                                 f"default_rng), got {type(random_state.bit_generator).__name__}")
            self.state = random_state.bit_generator.state
        else:
            try:
                self.state = np.random.default_rng(random_state).bit_generator.state
            except TypeError as exc:
                raise ValueError(f"random_state must be None, an int or a numpy Generator, got "
                                 f"{type(random_state).__name__}: {exc}") from None

    def generator(self, offset: int = 0) -> np.random.Generator:
        """A Generator whose draws start at row ``offset``."""
        bit = np.random.PCG64()
        bit.state = self.state
        bit.advance(int(offset))
        return np.random.Generator(bit)


# ============================================================================ passes
def tabular_pass(source, labels, n_states=None, partition=None, progress=None) -> TabularCounts | None:
    """Sum of ``tabular_chunk_counts`` over ``source`` (or its ``partition``)."""
    total = None
    for chunk in source.chunks(labels, progress, "counting", partition=partition):
        part = tabular_chunk_counts(chunk, n_states)
        total = part if total is None else total + part
    return total


def row_count_pass(source, labels, partition=None, progress=None) -> int:
    """Rows of the :class:`~genpqr.data.Transitions` chunks (differs from the file rows with
    ``keep_last=False``: a last choice without a next state is dropped)."""
    return sum(chunk.n for chunk in source.chunks(labels, progress, "counting rows", partition=partition))


def sample_pass(source, labels, probability: float, draws: RowDraws, offset: int = 0, partition=None,
                progress=None) -> Transitions | None:
    """Every row (``probability >= 1``) or a Bernoulli sample: row ``offset + i`` of the pass
    is kept when its draw (:class:`RowDraws`) is below ``probability``."""
    rng = draws.generator(offset)
    parts = []
    for chunk in source.chunks(labels, progress, "stage-1 sample", partition=partition):
        parts.append(chunk if probability >= 1.0 else chunk.subset(rng.random(chunk.n) < probability))
    parts = [p for p in parts if p.n]
    return concatenate_chunks(parts) if parts else None


def clip_pass(source, labels, policy, partition=None, progress=None) -> ClipSummary | None:
    """Sum of ``clip_chunk`` over ``source`` (or its ``partition``)."""
    total = None
    for chunk in source.chunks(labels, progress, "policy clip", partition=partition):
        part = clip_chunk(chunk, policy)
        total = part if total is None else total + part
    return total


@dataclass
class LSTDPart:
    """The LSTD statistics and the diagnostics sums of some rows (``+`` adds into new objects)."""

    statistics: object
    summary: ChoiceSummary

    def __add__(self, o: "LSTDPart") -> "LSTDPart":
        from ..stage2._lstd import BellmanStatistics

        if self.statistics is None or o.statistics is None:
            stats = self.statistics if o.statistics is None else o.statistics
        else:
            stats = BellmanStatistics(self.statistics.n_features).merge(self.statistics).merge(o.statistics)
        return LSTDPart(stats, self.summary + o.summary)


def lstd_pass(source, labels, q_model, policy, normalization, gamma: float, partition=None,
              progress=None) -> LSTDPart | None:
    """Accumulate the LSTD statistics of ``source`` (or its ``partition``) into ``q_model``
    (an :class:`~genpqr.stage2.LSTDQ` after ``init_features``; on a Dask worker, the task's own
    copy) by ``LSTDQ.partial_fit`` in ``q_model.chunk_size`` rows, with the diagnostics sums.
    ``normalization`` is bound to the action codes (its ``g`` the offset)."""
    summary = None
    for chunk in source.chunks(labels, progress, "LSTD statistics", partition=partition):
        raw = policy.raw_proba(chunk.states)
        problem = bellman_chunk(chunk, policy, normalization, normalization.g, gamma, raw=raw)
        step = q_model.chunk_size
        for start in range(0, 0 if problem is None else problem.n, step):
            q_model.partial_fit(problem.rows(start, start + step))
        part = chunk_choice_summary(chunk, raw, policy, normalization)
        summary = part if summary is None else summary + part
    if summary is None:
        return None
    return LSTDPart(getattr(q_model, "statistics_", None), summary)


def _bellman(problem, continuation: bool) -> BellmanTargets:
    """The chunk's targets of the regressed quantity (Q, or ``f = P mu Q`` with ``continuation``)."""
    return BellmanTargets(problem.reward, problem.continues, problem.next_mu,
                          problem.next_reward if continuation else None, problem.gamma)


def _targets(bellman: BellmanTargets, next_states, model):
    """The targets from ``model`` (None: ``Q = 0`` / ``f = 0``)."""
    return bellman.first() if model is None else bellman.targets(model, next_states)


def fqe_pass(source, labels, policy, normalization, gamma, live, previous, before, n_actions, *, fit=True,
             summarize=False, progress=None, desc="FQE", continuation=False):
    """One Bellman iteration over ``source``: per chunk, the targets from the frozen ``previous``
    model (None: ``Q = 0``), ``live.fit_q`` on them (when ``fit``), and the evaluation sums of
    ``previous`` (with ``before``, the model one iteration older, for the target change).
    ``continuation``: the models regress ``f = P mu Q``; the sums are on the scale of Q
    (``gamma`` times those of f).

    Returns ``(sums, summary)``: ``sums = [rows, sum (Q_prev(s,a) - y)^2, sum (y - y_old)^2,
    max |y - y_old|]`` and the ``genpqr.scale._statistics.ChoiceSummary`` (when ``summarize``).
    """
    sums, summary = [0, 0.0, 0.0, 0.0], None
    for chunk in source.chunks(labels, progress, desc):
        raw = policy.raw_proba(chunk.states)
        if summarize:
            part = chunk_choice_summary(chunk, raw, policy, normalization)
            summary = part if summary is None else summary + part
        problem = bellman_chunk(chunk, policy, normalization, normalization.g, gamma, raw=raw)
        if problem is None:
            continue
        bellman = _bellman(problem, continuation)
        y = _targets(bellman, problem.next_states, previous)
        if previous is not None:
            diff = bellman.q_scale(y - _targets(bellman, problem.next_states, before))
            resid = bellman.q_scale(predict_at(previous, problem.states, problem.actions) - y)
            sums = [sums[0] + problem.n, sums[1] + float(resid @ resid), sums[2] + float(diff @ diff),
                    max(sums[3], float(np.max(np.abs(diff))))]
        if fit:
            live.fit_q(problem.states, problem.actions, y, n_actions)
    return sums, summary


def choice_frame(partition, source, labels):
    """A pandas frame of the partition's choices: the state columns and ``_genpqr_action``
    (action codes), for a first stage fitted on a Dask dataframe (``dask.dataframe.from_map``)."""
    import pandas as pd

    parts = [pd.DataFrame(chunk.states, columns=source.state).assign(_genpqr_action=chunk.actions)
             for chunk in source.chunks(labels, False, partition=partition)]
    if not parts:
        return pd.DataFrame({**{c: pd.Series(dtype="float64") for c in source.state},
                             "_genpqr_action": pd.Series(dtype="int64")})
    return pd.concat(parts, ignore_index=True)


def add_parts(a, b):
    """``a + b`` where either may be None (an empty partition)."""
    if a is None:
        return b
    return a if b is None else a + b
