r"""Boosted fitted Q evaluation on a Dask cluster: the ``BoostedQModel`` path of
:func:`genpqr.scale.fit_dask`, each Bellman iteration trained by LightGBM's Dask
interface (``lightgbm.DaskLGBMRegressor``).

The algorithm is the in-memory one of :class:`genpqr.stage2.FQE` with a
:class:`genpqr.models.BoostedQModel`: ``Q_0 = 0``, and iteration ``k`` adds
``trees_per_iteration`` trees on the features ``[s, onehot(a)]`` fitted to the targets
``y_k = u - g + gamma * continues * sum_a' mu(a'|s') Q_{k-1}(s', a')``, boosting from
``Q_{k-1}`` (L2 loss; the first iteration starts from the mean of ``y_1``).

How the cluster runs it:

* **one read** -- one task per partition reads its Parquet rows
  (``bellman_block_pass``) into a ``BellmanBlock`` kept in the worker's memory: the
  partition's complete transitions as ``genpqr.scale._statistics.bellman_chunk`` builds them
  (stage 1 broadcast to the workers, as in the closed-form path), the running values
  ``Q(s_i, a_i)`` and ``Q(s'_i, .)`` and the current targets, plus the diagnostics sums. The
  features ``[s, onehot(a)]`` are built once per block and persisted (a Dask array with one
  chunk per partition);
* **per iteration** -- ``DaskLGBMRegressor.fit(X, y_k, init_score=Q_{k-1}(s, a))`` (no
  ``init_score`` at ``k = 1``) grows the iteration's trees data-parallel on the workers
  holding the blocks; then one task per block (``advance_block``) receives the new
  trees (the booster's model string), adds their predictions to ``Q(s_i, a_i)`` and
  ``Q(s'_i, .)`` and computes ``y_{k+1}`` and the evaluation sums of ``Q_k`` (Bellman
  residual, target change), which the client reduces. Only the label and init-score columns
  are new at each iteration.

``init_score`` is LightGBM's documented way to boost from given scores in its Dask interface
(``init_model`` is passed through by it but not tested upstream), so the ensemble is kept as
the list of per-iteration boosters: :class:`ClusterBoostedQ` predicts their sum, which is
the function one LightGBM model with the trees appended (``BoostedQModel``) would compute.
Each block gets only the newest trees, so an iteration costs one prediction of
``trees_per_iteration`` trees per row and next state (not of the whole ensemble), and no
Parquet read.

Memory: the blocks and the persisted features hold ``(2 d + 3 K + 5) x 8`` bytes per
transition on the workers (``d`` state columns, ``K`` actions) -- LightGBM's Dask training
needs its data in the workers' memory. The distributed training is LightGBM's data-parallel
tree learner: the split histograms are summed over the workers, but the bin boundaries of a
continuous feature are found on one worker's rows, so the trees are not bit-equal to a
one-machine fit (they are when every feature has few distinct values; tests:
``tests/scale/test_distributed_fqe.py``).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import numpy as np

from ..data._progress import bar_width
from ..data._validation import as_float_array, seed_from
from ..estimator._options import fqe_spec
from ._fit import StreamedFQE, check_actions, check_structure, finish_fqe
from ._statistics import add_parts, bellman_chunk, chunk_choice_summary

__all__ = ["BellmanBlock", "ClusterBoostedQ", "bellman_block_pass", "advance_block", "block_features",
           "is_boosted_q_model"]


def is_boosted_q_model(q_model) -> bool:
    """Whether ``q_model`` is a :class:`genpqr.models.BoostedQModel` (or a subclass),
    recognised by its class path: this core module does not import the models layer."""
    return any(c.__name__ == "BoostedQModel" and c.__module__ == "genpqr.models._boosting"
               for c in type(q_model).__mro__)


def lightgbm_regressor_params(q_model) -> dict:
    """``DaskLGBMRegressor`` keyword arguments of one Bellman iteration of ``q_model`` (a
    BoostedQModel): its learning rate, leaves, rows per leaf, ``trees_per_iteration`` trees
    and seed, deterministic column-wise training as in ``BoostedQModel``; its ``n_jobs`` is not
    used (LightGBM's Dask interface trains with each worker's threads)."""
    p = q_model.get_params()

    def number(name, integer, minimum, strict=False):
        value = p[name]
        kind = numbers.Integral if integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not (value > minimum if strict else
                                                                           value >= minimum):
            raise ValueError(f"q_model.{name} must be {'an integer' if integer else 'a number'} "
                             f"{'>' if strict else '>='} {minimum}, got {value!r}")
        return int(value) if integer else float(value)

    params = dict(objective="regression", learning_rate=number("learning_rate", False, 0, strict=True),
                  num_leaves=number("num_leaves", True, 2), min_child_samples=number("min_child_samples", True, 1),
                  n_estimators=number("trees_per_iteration", True, 1), deterministic=True, force_col_wise=True,
                  verbose=-1)
    seed = seed_from(p["random_state"])
    if seed is not None:
        params["random_state"] = seed
    return params


def check_boosted(est) -> tuple:
    """``(params, n_iterations)`` of the boosted path of ``est`` (its q_model a BoostedQModel, bare
    or in an FQE; ValueError naming a bad parameter; ImportError without LightGBM's Dask
    interface), before any work on the cluster."""
    spec = fqe_spec(est.q_model)
    params = lightgbm_regressor_params(spec.regressor)
    n_iter = spec.n_iterations
    if isinstance(n_iter, bool) or not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
        raise ValueError(f"n_iterations must be a positive int, got {n_iter!r}")
    try:
        import dask.array  # noqa: F401
        from lightgbm import DaskLGBMRegressor  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("boosted FQE on a Dask cluster needs lightgbm and dask[array]: pip install "
                          "'genpqr[lightgbm,dask]'") from exc
    return params, int(n_iter)


# ============================================================================ blocks (on the workers)
@dataclass
class BellmanBlock:
    """One partition's complete transitions and the running state of FQE (in a worker's memory).

    Attributes
    ----------
    states, next_states : ndarray of shape (n, d)
    actions : ndarray of shape (n,), action codes
    reward : ndarray of shape (n,)
        The known part of the targets: ``u(s_i, a_i) - g(s_i)`` when Q is regressed, or
        ``continues_i * sum_a' mu(a'|s'_i) (u(s'_i, a') - g(s'_i))`` when the continuation
        ``f = P mu Q`` is (``structure="continuation"``; then q, q_next and the targets are f's).
    bootstrap : ndarray of shape (n,)
        ``gamma * continues``.
    next_mu : ndarray of shape (n, K)
    q, q_next : ndarray of shape (n,) and (n, K)
        ``Q_k(s_i, a_i)`` and ``Q_k(s'_i, .)`` (0 on the actions ``mu`` never weighs here).
    targets : ndarray of shape (n,)
        ``y_{k+1}``, the targets of the next iteration.
    sums : tuple
        ``(n, sum (Q_k(s,a) - y_{k+1})^2, sum (y_{k+1} - y_k)^2, max |y_{k+1} - y_k|)`` (zeros
        before the first iteration), on the scale of Q (``scale`` times those of f).
    scale : float
        1 when Q is regressed, ``gamma`` for the continuation (``Q = u - g + gamma f``).
    summary : genpqr.scale.ChoiceSummary or None
        The diagnostics sums of the partition's choices (None: no row).
    """

    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray
    reward: np.ndarray
    bootstrap: np.ndarray
    next_mu: np.ndarray
    q: np.ndarray
    q_next: np.ndarray
    targets: np.ndarray
    sums: tuple = (0, 0.0, 0.0, 0.0)
    summary: object = None
    scale: float = 1.0

    @property
    def n(self) -> int:
        return int(self.actions.shape[0])


def bellman_block_pass(source, labels, policy, normalization, gamma: float, partition=None,
                       progress=None, continuation: bool = False) -> BellmanBlock | None:
    """Read ``source`` (or its ``partition``) into a ``BellmanBlock`` at ``Q_0 = 0``
    (targets ``y_1 = u - g``; with ``continuation`` at ``f_0 = 0``, targets ``continues *
    next_reward``); None when it has no row."""
    problems, summary = [], None
    for chunk in source.chunks(labels, progress, "FQE data", partition=partition):
        raw = policy.raw_proba(chunk.states)
        summary = add_parts(summary, chunk_choice_summary(chunk, raw, policy, normalization))
        problem = bellman_chunk(chunk, policy, normalization, normalization.g, gamma, raw=raw)
        if problem is not None:
            problems.append(problem)
    if summary is None:
        return None
    K, d = len(labels), len(source.state)

    def stack(name, shape):
        return np.concatenate([getattr(p, name) for p in problems]) if problems else np.empty(shape)

    continues = stack("continues", (0,)).astype(np.float64)
    reward = continues * stack("next_reward", (0,)) if continuation else stack("reward", (0,)).astype(np.float64)
    return BellmanBlock(stack("states", (0, d)), stack("actions", (0,)).astype(np.int64), stack("next_states", (0, d)),
                        reward, gamma * continues, stack("next_mu", (0, K)), np.zeros(reward.size),
                        np.zeros((reward.size, K)), reward.copy(), summary=summary,
                        scale=gamma if continuation else 1.0)


def block_features(block: BellmanBlock) -> np.ndarray:
    """``[s, onehot(a)]`` of the block's rows, shape (n, d + K)."""
    return _pair_features(block.states, block.actions, block.next_mu.shape[1])


def block_labels(block: BellmanBlock) -> np.ndarray:
    """The targets of the next iteration."""
    return block.targets


def block_scores(block: BellmanBlock) -> np.ndarray:
    """``Q_k(s_i, a_i)``: LightGBM's init scores of the next iteration."""
    return block.q


def block_info(block: BellmanBlock | None) -> tuple:
    """``(n, sums, summary)`` of a block (``(0, None, None)`` for None)."""
    return (0, None, None) if block is None else (block.n, block.sums, block.summary)


def advance_block(block: BellmanBlock, model_string: str, num_threads: int = 1) -> BellmanBlock:
    """The block after one iteration: ``Q_k = Q_{k-1} +`` the trees of ``model_string`` (a
    LightGBM model text) at the rows and next states, ``y_{k+1}`` from ``Q_k``, and the sums."""
    import lightgbm

    booster = lightgbm.Booster(model_str=model_string)
    n, K = block.n, block.next_mu.shape[1]
    q, q_next = block.q.copy(), block.q_next.copy()
    if n:
        q += booster.predict(block_features(block), num_threads=num_threads)
        support = np.flatnonzero(np.any(block.next_mu != 0, axis=0))
        if support.size:
            rows = np.repeat(block.next_states, support.size, axis=0)
            pairs = _pair_features(rows, np.tile(support, n), K)
            q_next[:, support] += booster.predict(pairs, num_threads=num_threads).reshape(n, support.size)
    targets = block.reward + block.bootstrap * np.sum(block.next_mu * q_next, axis=1)
    resid, diff = block.scale * (q - targets), block.scale * (targets - block.targets)
    sums = (n, float(resid @ resid), float(diff @ diff), float(np.max(np.abs(diff))) if n else 0.0)
    return replace(block, q=q, q_next=q_next, targets=targets, sums=sums)


def _pair_features(states: np.ndarray, actions: np.ndarray, n_actions: int) -> np.ndarray:
    n, d = states.shape
    features = np.zeros((n, d + n_actions))
    features[:, :d] = states
    features[np.arange(n), d + actions] = 1.0
    return features


# ============================================================================ the fitted Q-model
class ClusterBoostedQ:
    """The Q-model of boosted FQE on a cluster: ``Q(s, a) = sum_k B_k([s, onehot(a)])`` over the
    LightGBM boosters of the Bellman iterations (native Q-model interface for prediction).

    Attributes
    ----------
    boosters_ : list of lightgbm.Booster
    n_actions_, n_features_in_ : int
    num_threads : int
        LightGBM threads for prediction (the Q-model's ``n_jobs``; 0: all cores).
    """

    def __init__(self, boosters, n_actions: int, n_features: int, num_threads: int = 1):
        self.boosters_, self.n_actions_, self.n_features_in_ = list(boosters), int(n_actions), int(n_features)
        self.num_threads = int(num_threads)

    @property
    def n_trees_(self) -> int:
        return int(sum(b.num_trees() for b in self.boosters_))

    def _sum(self, features) -> np.ndarray:
        out = np.zeros(features.shape[0])
        for booster in self.boosters_:
            out += booster.predict(features, num_threads=self.num_threads)
        return out

    def _states(self, states) -> np.ndarray:
        states = as_float_array(states, "states", ndim=2, allow_1d_as_column=True)
        if states.shape[1] != self.n_features_in_:
            raise ValueError(f"states has {states.shape[1]} features (columns) but the model was fitted with "
                             f"{self.n_features_in_}")
        return states

    def predict_q(self, states, columns=None) -> np.ndarray:
        """``Q(s, .)``, shape (m, K); with ``columns``, only those actions (others 0)."""
        states = self._states(states)
        m, K = states.shape[0], self.n_actions_
        cols = np.arange(K) if columns is None else np.unique(np.asarray(columns, dtype=np.int64))
        out = np.zeros((m, K))
        if m and cols.size:
            pairs = _pair_features(np.repeat(states, cols.size, axis=0), np.tile(cols, m), K)
            out[:, cols] = self._sum(pairs).reshape(m, cols.size)
        return out

    def predict_q_at(self, states, actions) -> np.ndarray:
        """``Q(s_i, a_i)``, shape (m,)."""
        states = self._states(states)
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (states.shape[0],):
            raise ValueError(f"actions must have shape ({states.shape[0]},), got {actions.shape}")
        return self._sum(_pair_features(states, actions, self.n_actions_)) if states.shape[0] else np.empty(0)


# ============================================================================ the loop (on the client)
def fit_boosted_fqe(est, begun, cluster, partitions, source, policy):
    """Stage 2 of ``est`` (q_model a BoostedQModel) by boosted FQE on the cluster; returns the
    fitted state. ``begun``: the fit's ``genpqr.scale._fit.Start``; ``cluster`` holds the
    ``client`` and ``progress`` and gathers futures with a progress bar (``gather(futures,
    desc)``); ``policy`` is the fitted stage 1 (clip resolved)."""
    spec = fqe_spec(est.q_model)
    params, n_iter = check_boosted(est)
    continuation = check_structure(spec.structure)
    blocks = _read_blocks(cluster.client, partitions, source=source, labels=begun.encoder.labels, policy=policy,
                          normalization=begun.normalization, gamma=begun.gamma, continuation=continuation)
    info = cluster.gather(cluster.client.map(block_info, blocks, pure=False), "FQE data")
    summary = None
    for _, _, part in info:
        summary = add_parts(summary, part)
    if summary is None:
        raise ValueError(f"the Parquet dataset {str(source.path)!r} has no rows")
    check_actions(est, begun, summary)
    lengths = [n for n, _, _ in info]
    blocks = [b for b, n in zip(blocks, lengths) if n]
    lengths = [n for n in lengths if n]
    if not blocks:
        raise ValueError("the data holds no complete transition (every episode is a single choice)")
    loop = _Loop(cluster, blocks, lengths, begun.state_dim + begun.n_actions)
    threads = _prediction_threads(spec.regressor)
    boosters, history, mean_square, converged = loop.run(params, n_iter, spec.tol, threads)
    fqe = StreamedFQE(ClusterBoostedQ(boosters, begun.n_actions, begun.state_dim, threads), history, mean_square,
                      converged, continuation, begun.gamma, solver_name="boosted fqe (dask)")
    return finish_fqe(est, begun, fqe, policy, summary)


def _read_blocks(client, partitions, **kwargs) -> list:
    """One ``bellman_block_pass`` task per partition, placed round-robin on the workers (a
    loose restriction): the blocks stay where they are read, so the data of LightGBM's
    data-parallel training is spread evenly and the placement does not depend on timing."""
    workers = sorted(client.ncores())
    policy = client.scatter(kwargs.pop("policy"), broadcast=True, hash=False)
    return [client.submit(bellman_block_pass, partition=p, policy=policy, progress=False,
                          workers=[workers[i % len(workers)]], allow_other_workers=True, pure=False, **kwargs)
            for i, p in enumerate(partitions)]


class _Loop:
    """The Bellman iterations: LightGBM's Dask training on the blocks, then the blocks advanced."""

    def __init__(self, cluster, blocks, lengths, width):
        import dask.array as da

        self.cluster, self.client, self.blocks, self.lengths = cluster, cluster.client, blocks, lengths
        self.features = self.client.map(block_features, blocks, pure=False)  # kept: the persisted X
        self.X = da.concatenate([da.from_delayed(f, shape=(n, width), dtype=np.float64)
                                 for f, n in zip(self.features, lengths)])

    def column(self, fn):
        import dask.array as da

        futures = self.client.map(fn, self.blocks, pure=False)
        return da.concatenate([da.from_delayed(f, shape=(n,), dtype=np.float64) for f, n in zip(futures, self.lengths)])

    def train(self, params, first: bool):
        """One distributed LightGBM fit of the targets, boosting from the current Q."""
        import contextlib
        import io
        import warnings

        from lightgbm import DaskLGBMRegressor

        y, init = self.column(block_labels), None if first else self.column(block_scores)
        # LightGBM's Dask interface prints "Finding random open ports for workers" on every fit
        # through its default logger; the parameters it drops for Dask (threads) only warn.
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Parameter .* will be ignored")
            model = DaskLGBMRegressor(client=self.client, **params).fit(self.X, y, init_score=init)
        return model.booster_

    def run(self, params, n_iter: int, tol, threads: int):
        from tqdm.auto import tqdm

        from ..stage2._qmodels import FQEHistory

        boosters, history, mean_square, converged = [], FQEHistory(), [], False
        bar = tqdm(range(1, n_iter + 1), desc="boosted FQE (Dask)", leave=False, ncols=bar_width(),
                   disable=None if self.cluster.progress is None else not self.cluster.progress)
        for k in bar:
            booster = self.train(params, k == 1)
            boosters.append(booster)
            model = self.client.scatter(booster.model_to_string(), broadcast=True, hash=False)
            self.blocks = self.client.map(advance_block, self.blocks, model_string=model, num_threads=threads,
                                          pure=False)
            sums = [s for _, s, _ in self.cluster.gather(self.client.map(block_info, self.blocks, pure=False),
                                                         f"FQE iteration {k}")]
            n = sum(s[0] for s in sums)
            change = max(s[3] for s in sums)
            history.bellman_residual.append(float(np.sqrt(sum(s[1] for s in sums) / n)))
            history.target_change.append(change)
            mean_square.append(sum(s[2] for s in sums) / n)
            bar.set_postfix(change=f"{change:.2e}")
            if tol is not None and change <= tol:
                converged = True
                break
        return boosters, history, mean_square, converged


def _prediction_threads(q_model) -> int:
    n_jobs = q_model.get_params().get("n_jobs", 1)
    return 0 if n_jobs is None or n_jobs == -1 else int(n_jobs)
