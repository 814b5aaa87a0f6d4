r"""Low-rank transition kernels: ``P(s'|s,a) = sum_k phi_k(s,a) psi_k(s')``.

The rows of ``psi`` (r, S+1) are next-state profiles on the simplex (termination is outcome
``S+1``), the rows of ``phi`` (S*K, r) mixture weights on the simplex. Maximum likelihood on
the sparse count matrix ``N`` (S*K, S+1) by EM, i.e. the multiplicative updates of KL
non-negative matrix factorization (Lee and Seung, 2001): with ``R = N / (phi psi)`` on the
non-zeros of ``N``,

.. math::

    \phi \leftarrow \phi \odot (R \psi^\top) + c\,\pi, \qquad
    \psi \leftarrow \psi \odot (\phi^\top R) + \alpha

(each then renormalized to rows on the simplex). The prior ``pi(s,a)`` shrinks a thin cell's
weights toward its state's weights pooled over actions, tilted by its action's shift of the
weights pooled over states (a Dirichlet prior of weight ``c`` observations: the MAP-EM update).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..data._validation import check_random_state
from ._kernels import DENSE_KERNEL_MAX_BYTES, KernelOperator
from ._transition_models import KernelModel, TransitionMoves

__all__ = ["LowRankKernel"]


def _normalize(x, axis):
    total = x.sum(axis=axis, keepdims=True)
    return x / np.where(total > 0, total, 1.0)


_ONES = {}


def _ones(n):
    """A read-only vector of ``n`` ones, made once per length (the row sums below are products
    with it; ``np.ones`` at each of the EM's many small products cost more than some products)."""
    ones = _ONES.get(n)
    if ones is None:
        ones = _ONES[n] = np.ones(n)
        ones.flags.writeable = False
    return ones


def _positive_to_simplex(x):
    """``x`` (..., r), positive, scaled in place to sum to 1 over its last axis."""
    total = x @ _ones(x.shape[-1])
    if x.ndim == 2 and x.flags.c_contiguous:  # each row by its total, as one flat division (the same quotients)
        flat = x.reshape(-1)
        np.divide(flat, np.repeat(total, x.shape[1]), out=flat)
        return x
    x /= total[..., None]
    return x


def _take_rows(x, index, out=None):
    """``x[index]`` for a 2-D float array ``x`` and indices known to be in range, into ``out`` if
    given: bit for bit ``np.take(x, index, axis=0)``, at about half its cost (``mode="clip"``
    writes into ``out`` directly, where the default checks the indices and fills a temporary
    first; the rows are gathered as single items of ``x.shape[1]`` doubles, a void view)."""
    if out is None:
        out = np.empty((index.size, x.shape[1]), dtype=x.dtype)
    if x.ndim != 2 or not x.flags.c_contiguous or not out.flags.c_contiguous or x.dtype != out.dtype:
        return np.take(x, index, axis=0, out=out, mode="clip")
    row = np.dtype((np.void, x.itemsize * x.shape[1]))
    np.take(x.view(row).reshape(-1), index, out=out.view(row).reshape(-1), mode="clip")
    return out


WARM_UP = 20
GROUP_PRIOR = 10.0
"""Weight (in observations) of the overall action tilt in a group's action tilt."""


class _Ratios:
    """``R = N / (phi psi)`` on the non-zeros of ``N`` (m, S+1): the sparse structure of ``R`` is
    built once, each EM iteration only replaces its values; ``R^T`` is its transpose as a view on
    the same values (its product sums over the rows of ``R`` in their order, as the product with a
    transposed copy does, to the bit). The denominators ``phi psi`` on the non-zeros are one
    sparse product: row ``j`` of ``Q`` (nnz, m*r) holds ``psi`` at non-zero ``j``'s outcome in the
    columns of its row's weights in ``phi`` flattened, so ``Q @ phi.ravel()`` is each non-zero's
    ``sum_k phi[row, k] psi[k, col]`` in one pass; each iteration refills ``Q``'s values (a
    gather of ``psi^T``'s rows) and never forms the (nnz, r) rows of ``phi``."""

    def __init__(self, counts, rank):
        self.n, self.cols, self.rank = counts.data, counts.indices, rank
        m, nnz = counts.shape[0], counts.data.size
        self.rows = np.repeat(np.arange(m), np.diff(counts.indptr))
        self.R = sp.csr_matrix((self.n.astype(float), self.cols, counts.indptr), shape=counts.shape)
        self.RT = self.R.T
        index = (self.rows[:, None] * rank + np.arange(rank)).reshape(-1)
        self.Q = sp.csr_matrix((np.zeros(nnz * rank), index, np.arange(0, nnz * rank + 1, rank)),
                               shape=(nnz, m * rank))
        self._psi = self.Q.data.reshape(nnz, rank)  # a view: filling it fills Q
        self.log_likelihood = _WeightedLogSum(self.n)

    def update(self, phi, psiT):
        """Sets ``R`` for ``phi`` (m, r) and ``psi^T`` (S+1, r); returns ``phi psi`` on the non-zeros."""
        _take_rows(psiT, self.cols, out=self._psi)
        denom = self.Q @ np.ascontiguousarray(phi).reshape(-1)
        np.divide(self.n, denom, out=self.R.data)
        return denom


LOG_PRODUCT = 16
"""Terms multiplied together per logarithm in ``_WeightedLogSum``."""
_LOG_TINY = 1e-280


def _sum_log(d):
    """``sum(log(d))`` for ``d`` in (0, 1], one logarithm per product of ``LOG_PRODUCT`` terms
    (``d`` cut into ``LOG_PRODUCT`` contiguous blocks multiplied together element by element; a
    product of terms in (0, 1] is in (0, 1]; where one falls below ``_LOG_TINY``, where it would
    lose digits to underflow, the logarithms are taken term by term)."""
    q = d.size // LOG_PRODUCT
    if q == 0:
        return float(np.log(d).sum())
    p = np.multiply.reduce(d[: q * LOG_PRODUCT].reshape(LOG_PRODUCT, q), axis=0)
    if p.min() < _LOG_TINY:
        return float(np.log(d).sum())
    return float(np.log(p, out=p).sum() + np.log(d[q * LOG_PRODUCT:]).sum())


class _WeightedLogSum:
    """``sum_j n_j log d_j`` for fixed counts ``n`` (the EM's log-likelihood, its stopping rule's
    figure) with fewer logarithms: for integer counts it is ``sum_j log d_j`` over the terms
    taken ``n_j`` times each (``plan``: the indices of the repeats past the first), one logarithm
    per product of ``LOG_PRODUCT`` terms (``_sum_log``); other counts: ``n @ log(d)``. The same
    sum as ``n @ log(d)`` up to rounding (about 1e-16 relative)."""

    def __init__(self, n):
        self.n = np.asarray(n, dtype=np.float64)
        self.plan = None
        if self.n.size and np.all(self.n >= 1) and np.all(self.n == np.round(self.n)):
            self.plan = np.repeat(np.arange(self.n.size), (self.n - 1).astype(np.int64))

    def __call__(self, d):
        if self.plan is None:
            return float(self.n @ np.log(d))
        return _sum_log(d) + (_sum_log(d[self.plan]) if self.plan.size else 0.0)


class _Cells:
    """The observed cells of a count matrix ``N`` (S*K, S+1). The EM updates the mixture weights
    there only: an unobserved cell has no expected count, so its weights are its prior's, which
    no observed quantity reads; they are filled in once, after the last iteration
    (:meth:`full`). The sums over the observed cells (by state, by action, by group and action)
    are one sparse product. The expected counts of a cell sum to its count ``n(s, a)`` over the
    rank, so those sums' rows sum to the counts by state, action or group and action: the
    MAP update puts its pooled rows on the simplex by the inverses of those totals plus the
    pseudo-counts added to them (``inverses``; the same rows up to rounding as divided by their
    sums)."""

    def __init__(self, counts, S, K, rank):
        self.S, self.K, self.counts = S, K, counts
        self.cells = np.flatnonzero(np.diff(counts.indptr) > 0)
        self.states, self.actions = np.divmod(self.cells, K)
        self.ratios = _Ratios(counts[self.cells], rank)
        self.totals = np.bincount(self.ratios.rows, self.ratios.n, self.cells.size)  # n(s, a), (m,)
        self.overall_inverse = 1.0 / (self.totals.sum() + rank)
        self.group(None)

    def scales(self, concentration):
        """``(1 / (n(s, a) + c)`` repeated over the rank's columns (m*r,), ``c / (n(s, a) + c)``
        (m,)): a cell's expected counts sum to its count ``n(s, a)`` and its prior to ``c``, so
        these put the MAP update's rows on the simplex (``_map_weights``)."""
        inverse = 1.0 / (self.totals + concentration)
        return np.repeat(inverse, self.ratios.rank), concentration * inverse

    def group(self, groups):
        """Sets the state groups (S,) (None: none): the sums by (group, action) and each cell's
        row of the action tilt (its action's, or its group's and action's)."""
        m, S, K = self.cells.size, self.S, self.K
        self.groups, self.n_groups = groups, 0 if groups is None else int(groups.max()) + 1
        self.tilt_row = self.actions if groups is None else groups[self.states] * K + self.actions
        index = np.concatenate([self.states, S + self.actions] + ([] if groups is None else [S + K + self.tilt_row]))
        self.sums = sp.csr_matrix((np.ones(index.size), (index, np.tile(np.arange(m), index.size // m))),
                                  shape=(S + K + self.n_groups * K, m))
        n = self.sums @ self.totals  # the counts by state, by action, by group and action
        within = n[S + K:].reshape(self.n_groups, K)
        r = self.ratios.rank
        self.inverses = {name: np.repeat((1.0 / total)[..., None], r, axis=-1) for name, total in
                         (("state", n[:S] + 1.0), ("action", n[S:S + K] + K), ("within", within + GROUP_PRIOR),
                          ("group", within.sum(axis=1) + GROUP_PRIOR * K))}

    def full(self, phi, prior):
        """The (S*K, r) weights: ``phi`` at the observed cells, the normalized prior elsewhere."""
        S, K = self.S, self.K
        out = np.zeros((S * K, phi.shape[1]))
        if prior is not None:
            states, actions = np.divmod(np.arange(S * K), K)
            out = _positive_to_simplex(prior(states, actions if self.groups is None else
                                             self.groups[states] * K + actions))
        out[self.cells] = phi
        return out


def _prior(state, ratio, concentration):
    """``c pi(s, a)`` at cells ``(states, tilt rows)``: the state's pooled weights ``state`` (S, r)
    times the action's tilt ``ratio`` ((K, r), or (G*K, r) within groups), scaled to sum to c
    (``weight``: to sum to ``weight``, one per cell, instead)."""

    def at(states, rows, weight=concentration):
        prior = _take_rows(state, states)
        if ratio is None:  # the state's rows are on the simplex
            prior *= weight if np.ndim(weight) == 0 else weight[:, None]
            return prior
        prior *= _take_rows(ratio, rows)
        flat = prior.reshape(-1)
        flat *= np.repeat(weight / (prior @ _ones(prior.shape[1])), prior.shape[1])
        return prior

    return at


def _map_weights(expected, cells, concentration, tilt, scales):
    """The MAP-EM update of ``phi`` at the observed cells: ``expected`` (m, r) ``+ c pi(s, a)``
    with rows on the simplex (in place of ``expected``; ``pi``: the state's pooled weights, times
    the action's tilt (within the state's group when the cells are grouped (:meth:`_Cells.group`),
    shrunk toward the overall tilt)); returns it, the state's pooled weights (S, r) and the prior
    as a function of cells (None when ``c`` is 0). ``scales``: :meth:`_Cells.scales` at ``c``
    (the rows of ``expected`` sum to the cells' counts: the same rows up to rounding as those
    divided by their sums)."""
    S, K = cells.S, cells.K
    sums = cells.sums @ expected
    by_state = sums[:S]
    inverse, weight = scales
    flat = expected.reshape(-1)
    flat *= inverse
    if concentration == 0:
        return expected, by_state, None
    inverses = cells.inverses
    overall = by_state.sum(axis=0) + 1.0
    overall *= cells.overall_inverse
    state = by_state + overall
    state *= inverses["state"]
    ratio = None
    if tilt:
        action = sums[S:S + K] + K * overall  # (K, r)
        action *= inverses["action"]
        if cells.groups is None:
            ratio = action / overall
        else:
            within = sums[S + K:].reshape(cells.n_groups, K, -1)
            ratio = within + GROUP_PRIOR * action
            ratio *= inverses["within"]
            pooled = within.sum(axis=1) + GROUP_PRIOR * K * overall
            pooled *= inverses["group"]
            ratio /= pooled[:, None, :]
            ratio = ratio.reshape(cells.n_groups * K, -1)
    prior = _prior(state, ratio, concentration)
    expected += prior(cells.states, cells.tilt_row, weight)
    return expected, by_state, prior


def _state_groups(by_state, n_groups, rng):
    """Groups of states with similar pooled weights (k-means on their weight profiles), (S,)."""
    S, r = by_state.shape
    profiles = _normalize(by_state + 1.0 / r, 1)
    n_groups = int(min(n_groups, S))
    return _kmeans(profiles, n_groups, by_state.sum(axis=1) + 1e-3, int(rng.integers(0, 2**31 - 1)))


def _kmeans(X, n_clusters, sample_weight, seed, n_init=3, max_iter=300, tol=1e-4):
    """Labels (n,) of weighted k-means: the best of ``n_init`` runs of Lloyd's algorithm from
    k-means++ seeds (``2 + log k`` candidates a centre), drawn from ``RandomState(seed)``. It is
    scikit-learn's ``KMeans(n_clusters, n_init=n_init, random_state=seed).fit(X, sample_weight=...)``
    step for step (its seeding, stopping rule, empty-cluster relocation and choice among the
    runs), so the groups are the same partition up to the rounding of sums (the test compares
    them); written out so that a fit does not import scikit-learn (about a second)."""
    X = np.array(X, dtype=np.float64, order="C")
    X -= X.mean(axis=0)
    w = np.asarray(sample_weight, dtype=np.float64)
    random_state = np.random.RandomState(seed)
    norms = np.einsum("ij,ij->i", X, X)
    tol = float(np.mean(np.var(X, axis=0)) * tol)
    best, best_inertia = None, None
    for _ in range(n_init):
        labels, inertia = _lloyd(X, w, _kmeans_plusplus(X, n_clusters, norms, w, random_state), max_iter, tol)
        if best is None or (inertia < best_inertia and not _same_partition(labels, best, n_clusters)):
            best, best_inertia = labels, inertia
    return best


def _squared_distances(points, X, norms):
    d = -2 * (points @ X.T)
    d += np.einsum("ij,ij->i", points, points)[:, None]
    d += norms[None, :]
    return np.maximum(d, 0, out=d)


def _kmeans_plusplus(X, k, norms, w, random_state):
    trials = 2 + int(np.log(k))
    centers = np.empty((k, X.shape[1]))
    centers[0] = X[random_state.choice(X.shape[0], p=w / w.sum())]
    closest = _squared_distances(centers[:1], X, norms)
    potential = closest @ w
    for c in range(1, k):
        draws = random_state.uniform(size=trials) * potential
        ids = np.searchsorted(np.cumsum(w * closest), draws)
        np.clip(ids, None, closest.size - 1, out=ids)
        to_candidates = np.minimum(closest, _squared_distances(X[ids], X, norms))
        potentials = to_candidates @ w.reshape(-1, 1)
        pick = np.argmin(potentials)
        potential, closest = potentials[pick], to_candidates[pick]
        centers[c] = X[ids[pick]]
    return centers


def _assign(X, centers):
    d = np.einsum("ij,ij->i", centers, centers)[None, :] - 2 * (X @ centers.T)
    return np.argmin(d, axis=1).astype(np.int32)


def _lloyd(X, w, centers, max_iter, tol):
    """``(labels, inertia)`` of one run of Lloyd's algorithm from ``centers``."""
    k = centers.shape[0]
    labels_old = np.full(X.shape[0], -1, dtype=np.int32)
    strict = False
    for _ in range(max_iter):
        labels = _assign(X, centers)
        weights = np.bincount(labels, w, minlength=k)
        weighted = X * w[:, None]
        new = np.stack([np.bincount(labels, weighted[:, j], minlength=k) for j in range(X.shape[1])], axis=1)
        _relocate_empty(X, w, centers, new, weights, labels)
        filled = weights > 0
        new[filled] *= (1.0 / weights[filled])[:, None]
        new[~filled] = new[np.argmax(weights)]
        shift = np.sum((new - centers) ** 2)
        centers = new
        if np.array_equal(labels, labels_old):
            strict = True
            break
        if shift <= tol:
            break
        labels_old = labels
    if not strict:
        labels = _assign(X, centers)
    return labels, float(np.sum(w * np.sum((X - centers[labels]) ** 2, axis=1)))


def _relocate_empty(X, w, centers, new, weights, labels):
    """Each empty cluster takes the point farthest from its centre (scikit-learn's rule)."""
    empty = np.flatnonzero(weights == 0)
    if empty.size == 0:
        return
    distances = np.sum((X - centers[labels]) ** 2, axis=1)
    if np.max(distances) == 0:
        return
    far = np.argpartition(distances, -empty.size)[:-empty.size - 1:-1]
    for cluster, point in zip(empty, far):
        old = labels[point]
        new[old] -= X[point] * w[point]
        new[cluster] = X[point] * w[point]
        weights[cluster] = w[point]
        weights[old] -= w[point]


def _same_partition(a, b, k) -> bool:
    """Whether two labellings are the same partition (the same up to renaming the labels)."""
    mapping = np.full(k, -1)
    for x, y in zip(a, b):
        if mapping[x] == -1:
            mapping[x] = y
        elif mapping[x] != y:
            return False
    return True


def _pooled_rows(counts, states, K):
    """The counts of ``states`` pooled over their actions, (len(states), S+1) dense: the rows
    ``s K .. s K + K - 1`` of ``counts`` (CSR, canonical) summed, for the given states only."""
    out = np.zeros((len(states), counts.shape[1]))
    for i, s in enumerate(states):
        lo, hi = counts.indptr[s * K], counts.indptr[(s + 1) * K]
        np.add.at(out[i], counts.indices[lo:hi], counts.data[lo:hi])
    return out


def _initial_profiles(counts, S, K, rank, termination, rng):
    pick = rng.choice(S, size=rank, replace=S < rank)
    psi = _normalize(_normalize(_pooled_rows(counts, pick, K), 1) + rng.uniform(0.5, 1.5, (rank, S + 1)) / (S + 1), 1)
    if not termination:
        psi[:, S] = 0.0
    return psi


def fit_low_rank(counts: sp.csr_matrix, S: int, K: int, rank: int, concentration: float, *, tilt=True,
                 smoothing=0.1, max_iter=200, tol=1e-5, termination=True, n_groups=None, random_state=None,
                 start=None):
    """Penalized EM for ``counts ~ phi psi`` (``termination``: whether the last outcome can
    occur; else its column stays 0; ``n_groups``: the action tilt is taken within groups of
    states, found by k-means on their pooled weights after a warm-up; ``start``: ``(phi, psi)``
    to start from instead of random profiles, e.g. a fit at neighbouring settings, whose
    weights are already settled: the groups are then found after one iteration); returns
    ``(phi (S*K, r), psi (r, S+1), n_iter)``."""
    em = _EM(counts, S, K, rank, concentration, tilt=tilt, smoothing=smoothing, termination=termination,
             n_groups=n_groups, random_state=random_state, start=start)
    em.run(max_iter, tol)
    return em.result()


class _EM:
    """The EM of :func:`fit_low_rank`, stoppable and resumable: :meth:`run` to a tolerance, then
    :meth:`run` again to a tighter one continues the same iterations (each step depends only on
    the estimates, not on where the run stopped), so a fit stopped early and continued to ``tol``
    is the fit run to ``tol`` at once, to the last bit. ``cells``: the :class:`_Cells` of ``counts``
    at ``rank`` from another fit on them (the fits of a cross-validation's fold share them; their
    state groups are each fit's own, set again whenever a fit runs)."""

    def __init__(self, counts, S, K, rank, concentration, *, tilt, smoothing, termination, n_groups, random_state,
                 start, cells=None):
        if cells is None:
            counts = sp.csr_matrix(counts)
            counts.sum_duplicates()
            cells = _Cells(counts, S, K, rank)
        counts, self.cells, self.groups = cells.counts, cells, None
        self.rng = check_random_state(random_state)
        self.concentration, self.tilt, self.n_groups, self.cold = concentration, tilt, n_groups, start is None
        self.scales = self.cells.scales(concentration)
        if start is None:
            self.phi = np.full((self.cells.cells.size, rank), 1.0 / rank)
            psiT = _initial_profiles(counts, S, K, rank, termination, self.rng).T
            self.warm_up = WARM_UP
        else:
            self.phi, psiT, self.warm_up = start[0][self.cells.cells], start[1].T, 2
        self.psiT = np.ascontiguousarray(psiT)
        self.total, self.previous, self.last = self.cells.ratios.n.sum(), -np.inf, None
        n_out = S + 1 if termination else S
        self.spread = np.repeat(np.where(np.arange(S + 1) < n_out, smoothing / n_out, 0.0)[:, None], rank, axis=1)
        self.prior, self.by_state, self.it, self.stopped = None, None, 0, None

    def run(self, max_iter, tol):
        """Iterations up to ``max_iter`` in all, until the log-likelihood per move changes by less
        than ``tol`` (``stopped``: the tolerance it stopped at; None at ``max_iter``)."""
        if self.stopped is not None:
            if self.stopped <= tol:
                return self
            self.previous, self.stopped = self.last, None  # the step it stopped at, as a run to tol takes it
        cells, ratios, S = self._own_cells(), self.cells.ratios, self.psiT.shape[0] - 1
        phi, psiT = self.phi, self.psiT
        for it in range(self.it + 1, max_iter + 1):
            self.it = it
            if self.n_groups and it == self.warm_up:
                self.groups = _state_groups(self.by_state, self.n_groups, self.rng)
                cells.group(self.groups)
                self.previous = -np.inf
            denom = ratios.update(phi, psiT)
            psiT_new = ratios.RT @ phi
            psiT_new *= psiT
            psiT_new += self.spread
            psiT_new /= np.where((out := _ones(S + 1) @ psiT_new) > 0, out, 1.0)
            expected = ratios.R @ psiT
            expected *= phi
            phi, self.by_state, self.prior = _map_weights(expected, cells, self.concentration, self.tilt, self.scales)
            psiT = psiT_new
            loglik = ratios.log_likelihood(denom) / self.total
            change = loglik - self.previous if self.cold else abs(loglik - self.previous)
            if change < tol and (not self.n_groups or it > self.warm_up):
                self.stopped, self.last = tol, loglik
                break
            self.previous = loglik
        self.phi, self.psiT = phi, psiT
        return self

    def _own_cells(self):
        """The cells, with this fit's state groups (shared cells may hold another fit's)."""
        if self.cells.groups is not self.groups:
            self.cells.group(self.groups)
        return self.cells

    def result(self):
        return self._own_cells().full(self.phi, self.prior), np.ascontiguousarray(self.psiT.T), self.it


def _climb(grid, score, start):
    """The best of an ordered ``grid`` found by climbing from ``grid[start]``: the next setting
    up is tried while the score improves, then (if none up did) the next down likewise. It is
    the grid's best wherever the score is unimodal along the grid, and skips the settings past
    the peak (for the ranks, the costliest). ``score(value, best)``: ``best`` is the grid value
    it must beat (None for the first)."""
    best, top = start, score(grid[start], None)
    for step in (1, -1):
        i = best + step
        while 0 <= i < len(grid) and (value := score(grid[i], grid[best])) > top:
            best, top, i = i, value, i + step
        if best != start:
            break
    return grid[best]


WARM_MAX_ITER = 50
"""Iterations at most of a warm-started fit of the cross-validation (the group counts, started
from the fit without groups). Grouped fits rarely meet ``tol``: their held-out likelihood wanders
by about 0.01 per move between 50 and 200 iterations, more than separates neighbouring group
counts, so longer fits buy the choice nothing (the final fit runs to ``max_iter``)."""
CV_TOL_FACTOR = 10.0
"""The cross-validation's fits from random profiles stop when the log-likelihood per move improves
by less than this many times ``tol``; the chosen setting's fold fits are then continued to ``tol``
(the fits run to ``tol`` at once, to the last bit: :class:`_EM`), so that the fits started from
them (the group counts) and the held-out figure the selection reads are those of fits to ``tol``.
On the thin benchmark of docs/benchmarks.md the settings' held-out scores at 10 x tol are within
0.002 per move of those at ``tol``, below the standard error of the paired difference between
neighbouring settings (0.0022 to 0.0033) and a tenth of their differences (0.019 to 0.047)."""
RACE_STEPS = 2.0
"""The rank search of a transition selection's low-rank candidate stops when its gap to the
leader, less ``RACE_Z`` standard errors, exceeds this many times what the ranks left could gain
at the last step's gain each (``LowRankKernel._raced``)."""
RACE_Z = 3.0
"""A setting of the cross-validation is dropped after a fold when its held-out moves so far trail
those of the best setting by this many standard errors of their paired per-episode difference."""


def _fold_log_p(fit, test):
    """The log-probabilities of the moves ``test`` under a fold fit ``(phi, psi)``."""
    phi, psi = fit
    return np.log(np.einsum("ik,ki->i", phi[test.rows], psi[:, test.outcomes]))


def _trails(log_p, best, seen, episodes) -> bool:
    """Whether the held-out log-likelihoods ``log_p`` trail ``best`` on the moves ``seen`` by more
    than ``RACE_Z`` standard errors (episodes are the units; at least two)."""
    d = np.bincount(episodes[seen], (log_p - best)[seen])
    d = d[np.bincount(episodes[seen]) > 0]
    if d.size < 2:
        return False
    return bool(d.sum() < -RACE_Z * d.std(ddof=1) * np.sqrt(d.size))


class LowRankKernel(KernelModel):
    r"""A low-rank kernel ``P(s'|s,a) = sum_k phi_k(s,a) psi_k(s')`` with shrunk weights.

    Parameters
    ----------
    rank : None or int
        ``r``; None: chosen among ``ranks`` by the held-out next-state log-likelihood
        over ``n_splits`` episode folds.
    concentration : None or float
        Weight ``c`` (in observations) of the prior that pulls a cell's mixture weights
        toward its state's, tilted by its action's; None: chosen among ``concentrations``
        by the same cross-validation (after the rank).
    n_groups : "cv", None or int
        The action tilt of the prior is taken within ``n_groups`` groups of states with similar
        pooled weights (k-means after a warm-up; the treatment effects may differ between
        groups), shrunk toward the overall tilt; None or 0: one overall tilt; ``"cv"``: chosen
        among ``group_counts`` by the same cross-validation (after the concentration).
    ranks, concentrations, group_counts : sequences
        The cross-validation grids (tried in turn: the rank, then the concentration, then the
        groups). The ranks and concentrations start from random profiles; each group count
        starts, on every fold, from the fit without groups at the chosen rank and concentration
        (a warm start; its EM stops when the log-likelihood changes by less than ``tol``
        either way, or after ``WARM_MAX_ITER`` iterations). A warm start of the
        concentrations was tried and dropped: a fit started from another concentration's can
        settle in a worse optimum. Each grid is climbed from
        its start (the smallest rank, the middle concentration, no groups): the next setting
        is tried while the held-out likelihood improves, so the settings past the peak are not
        fitted (the same choice as the whole grid's wherever the likelihood is unimodal along
        it); a setting whose held-out moves trail the best's by ``RACE_Z`` standard errors
        after a fold is dropped without its other folds (``cv_stopped_``). The fits from random
        profiles stop at ``CV_TOL_FACTOR`` x ``tol``; the chosen rank and concentration's are
        then continued to ``tol`` (the same fits as run to ``tol`` at once), so the settings not
        chosen are scored from the looser fits (``cv_scores_``).
    action_tilt : bool
        Whether the prior tilts the state's weights by the action's shift (else the state's
        pooled weights).
    smoothing : float
        Pseudo-count spread over the ``S+1`` outcomes of each profile ``psi_k`` (a held-out
        move into a state never reached has a small positive probability; termination is
        left out when no move in the data terminates).
    max_iter, tol : int, float
        EM stops when the mean log-likelihood per move improves by less than ``tol``.
    n_splits : int
        Episode folds of the cross-validation.
    random_state : None, int or Generator
        The initial profiles (and the folds).

    Attributes
    ----------
    rank_, concentration_ : int, float
    phi_ : ndarray of shape (S*K, r)
    psi_ : ndarray of shape (r, S+1)
        Profiles; column ``S`` is termination.
    n_groups_ : int
    cv_scores_ : dict
        ``(rank, concentration, n_groups) -> mean held-out log-likelihood per move`` (empty when
        all three are given), for the settings scored on every fold.
    cv_stopped_ : dict
        ``(rank, concentration, n_groups) -> folds scored`` for the settings dropped before the
        last fold: their held-out moves so far trailed the best setting's by ``RACE_Z``
        standard errors of the paired per-episode difference.
    cv_raced_ : dict
        Empty, or, where a transition selection's race stopped the rank search short
        (``_raced``): the ``leader``, the ``rank`` it stopped at, the last rank step's ``gain``,
        the ``gap`` to the leader on this cross-validation's folds and its ``standard_error``, and
        the ``ranks_left``; the concentration and group searches are then skipped.
    n_iter_ : int
    """

    _param_names = ("rank", "concentration", "n_groups", "ranks", "concentrations", "group_counts", "action_tilt",
                    "smoothing", "max_iter", "tol", "n_splits", "random_state")

    def __init__(self, rank=None, concentration=None, n_groups="cv", ranks=(2, 5, 10, 20),
                 concentrations=(1.0, 10.0, 100.0), group_counts=(0, 10, 30), action_tilt=True, smoothing=0.1,
                 max_iter=200, tol=1e-5, n_splits=3, random_state=None):
        self.rank = rank
        self.concentration = concentration
        self.n_groups = n_groups
        self.ranks = ranks
        self.concentrations = concentrations
        self.group_counts = group_counts
        self.action_tilt = action_tilt
        self.smoothing = smoothing
        self.max_iter = max_iter
        self.tol = tol
        self.n_splits = n_splits
        self.random_state = random_state

    def _settings(self, groups):
        return dict(tilt=self.action_tilt, smoothing=self.smoothing, max_iter=self.max_iter, tol=self.tol,
                    termination=self.termination_, n_groups=groups or None, random_state=self.random_state)

    def _fit(self, moves):
        S, K = moves.n_states, moves.n_actions
        self.termination_ = bool(np.any(moves.outcomes == S))
        self.cv_scores_, self.cv_stopped_, self.cv_raced_ = {}, {}, {}
        rank, conc, groups = self.rank, self.concentration, None if self.n_groups == "cv" else self.n_groups or 0
        if rank is not None and (int(rank) != rank or rank < 1):
            raise ValueError(f"rank must be a positive integer, got {rank!r}")
        if conc is not None and not conc >= 0:
            raise ValueError(f"concentration must be non-negative, got {conc!r}")
        if groups is not None and (int(groups) != groups or groups < 0):
            raise ValueError(f"n_groups must be 'cv', None or a non-negative integer, got {self.n_groups!r}")
        same = self.__dict__.pop("_fitted_as", None)
        if same is not None and same._repeats(self, moves):  # this very fit was made already
            self.rank_, self.concentration_, self.n_groups_ = same.rank_, same.concentration_, same.n_groups_
            self.phi_, self.psi_, self.n_iter_ = same.phi_.copy(), same.psi_.copy(), same.n_iter_
            return
        if rank is None or conc is None or groups is None:
            rank, conc, groups = self._cross_validate(moves, rank, conc, groups)
        self.rank_, self.concentration_, self.n_groups_ = int(rank), float(conc), int(groups)
        self.phi_, self.psi_, self.n_iter_ = fit_low_rank(self.counts_, S, K, self.rank_, self.concentration_,
                                                          **self._settings(self.n_groups_))

    def fixed_copy(self):
        """An unfitted copy with the fitted rank, concentration and group count fixed. With an
        integer ``random_state`` its first fit, if on the same moves, reuses this model's fit
        instead of repeating it (``genpqr fit`` hands the estimator such a copy); a fit on other
        moves (a bootstrap replicate) runs the EM."""
        self._check_fitted()
        copy = type(self)(**self._fixed_params())
        if isinstance(self.random_state, (int, np.integer)):
            copy._fitted_as = self
        return copy

    def _fit_own_held_out(self, moves):
        """Fit on every move; where the settings were chosen by cross-validation, return ``(p,
        folds)``: per move, its probability under the fold fit of that cross-validation at the
        chosen settings, and its (train, test) folds (``n_splits`` episode folds of its own);
        else ``(None, None)``."""
        self._keep_held_out = True
        try:
            self.fit(moves)
        finally:
            del self._keep_held_out
        return self.__dict__.pop("_own_held_out", (None, None))

    def _fixed_params(self):
        return {**self.get_params(), "rank": self.rank_, "concentration": self.concentration_,
                "n_groups": self.n_groups_}

    def _unfitted_copy(self):
        copy = super()._unfitted_copy()
        if "_fitted_as" in self.__dict__:  # handed on once, to the copy GenPQR fits
            copy._fitted_as = self.__dict__.pop("_fitted_as")
        return copy

    def _repeats(self, other, moves):
        """Whether ``other`` (unfitted, its counts set) would repeat this fit: the same
        settings, an integer seed and the same counts."""
        mine, theirs = self._fixed_params(), other.get_params()
        if set(mine) != set(theirs) or any(np.any(mine[k] != theirs[k]) for k in mine):
            return False
        if (self.n_states_, self.n_actions_) != (moves.n_states, moves.n_actions):
            return False
        a, b = self.counts_, other.counts_
        return a.shape == b.shape and a.nnz == b.nnz and (a != b).nnz == 0

    def _cross_validate(self, moves, rank, conc, groups):
        splits = moves.folds(self.n_splits, self.random_state)
        folds = [(train, test, moves.subset(test)) for (_, test), train in zip(splits, moves.fold_counts(splits))]
        S, K = moves.n_states, moves.n_actions
        episodes = np.unique(moves.episodes, return_inverse=True)[1]
        fits, log_p, ems = {}, {}, {}
        shared = [{} for _ in folds]  # per fold: rank -> the _Cells its fits share
        note = getattr(self, "_progress_note", None) or (lambda text: None)  # the selection's bar, if any

        def held_out(setting, start=None, against=None):
            """The setting's mean held-out log-likelihood per move; -inf when it is dropped
            after a fold, trailing ``against`` (a setting scored in full) by RACE_Z standard errors."""
            if setting in self.cv_scores_:
                return self.cv_scores_[setting]
            log_p[setting], fits[setting], ems[setting] = np.empty(moves.n), [], []
            seen = np.zeros(moves.n, bool)
            for i, (train, index, test) in enumerate(folds):
                note(f"rank {setting[0]}, concentration {setting[1]:g}"
                     + (f", {setting[2]} groups" if setting[2] else "") + f", fold {i + 1}/{len(folds)}")
                em = self._fold_em(train, moves, setting, None if start is None else fits[start][i], shared[i])
                ems[setting].append(em)
                fits[setting].append(em.result()[:2])
                log_p[setting][index] = _fold_log_p(fits[setting][i], test)
                seen[index] = True
                if against is not None and i < len(folds) - 1 and _trails(log_p[setting], log_p[against], seen,
                                                                          episodes):
                    self.cv_stopped_[setting] = i + 1
                    return -np.inf
            self.cv_scores_[setting] = float(np.sum(log_p[setting])) / moves.n
            return self.cv_scores_[setting]

        ranks = [rank] if rank is not None else sorted({int(min(r, S + 1)) for r in self.ranks})
        grid = [conc] if conc is not None else sorted(set(self.concentrations))
        first_c = conc if conc is not None else list(self.concentrations)[len(self.concentrations) // 2]
        first_g = groups or 0
        tried = []  # the ranks scored in full, in the climb's order

        def rank_score(r, best):
            if best is not None and self._raced(ranks, tried, log_p, splits, episodes, first_c, first_g):
                return -np.inf
            value = held_out((r, first_c, first_g), against=None if best is None else (best, first_c, first_g))
            tried.extend([r] if np.isfinite(value) else [])
            return value

        rank = _climb(ranks, rank_score, 0)
        if self.cv_raced_:  # far behind the leader: the rest of the search cannot make it the choice
            conc, groups = first_c, first_g
        else:
            conc = _climb(grid, lambda c, best: held_out((rank, c, first_g),
                                                         against=None if best is None else (rank, best, first_g)),
                          grid.index(first_c))
            self._refine((rank, conc, first_g), ems, fits, log_p, folds)
        if groups is None:
            counts = sorted({int(min(g, S)) for g in self.group_counts})
            groups = _climb(counts, lambda g, best: held_out((rank, conc, g), (rank, conc, first_g),
                                                               against=None if best is None else (rank, conc, best)),
                            counts.index(first_g) if first_g in counts else 0)
        if getattr(self, "_keep_held_out", False):  # for the selection (_fit_own_held_out); not kept on the model
            self._own_held_out = (np.exp(log_p[(rank, conc, groups)]), splits)
        return rank, conc, groups

    def _fold_em(self, train, moves, setting, start, shared):
        """The EM of ``setting`` on a fold's training counts ``train``, run: from ``start`` (the
        fold's fit at other settings) for at most ``WARM_MAX_ITER`` iterations, else from random
        profiles to the loose tolerance (the chosen setting's are continued to ``tol``:
        :meth:`_refine`). ``shared``: the fold's ``_Cells`` by rank, which its fits share."""
        kw = self._settings(setting[2])
        max_iter, tol = kw.pop("max_iter"), kw.pop("tol")
        if start is not None:
            max_iter = min(max_iter, WARM_MAX_ITER)
        else:
            tol *= CV_TOL_FACTOR
        em = _EM(train, moves.n_states, moves.n_actions, *setting[:2], **kw, start=start, cells=shared.get(setting[0]))
        shared.setdefault(setting[0], em.cells)
        return em.run(max_iter, tol)

    def _raced(self, ranks, tried, log_p, splits, episodes, conc, groups) -> bool:
        """Whether the rank search stops short of its next rank, racing the leader of a
        transition selection (``_race``, set by the selection while it fits this model): the last
        rank step gained ``g`` per held-out move; the leader's held-out log-likelihood on this
        cross-validation's own folds (its settings fixed) is above this model's at the best rank
        so far by ``G``, with standard error ``se`` paired over episodes. With diminishing returns
        along the grid (a step gains at most the step before it), the ``n`` ranks left can gain
        at most ``n * g``; the search stops when ``G - RACE_Z * se > RACE_STEPS * n * g`` (the
        factor ``RACE_STEPS`` leaves as much again for the concentration and group searches, which
        are then skipped too), and records why in ``cv_raced_``."""
        leader = getattr(self, "_race", None)
        if leader is None or leader.name is None or len(tried) < 2:
            return False
        best, before = tried[-1], tried[-2]
        gain = self.cv_scores_[(best, conc, groups)] - self.cv_scores_[(before, conc, groups)]
        left = len(ranks) - 1 - ranks.index(best)
        d = np.bincount(episodes, leader.log_lik(splits) - leader.floored(np.exp(log_p[(best, conc, groups)])))
        d = d[np.bincount(episodes) > 0]
        gap, se = d.sum() / episodes.size, d.std(ddof=1) * np.sqrt(d.size) / episodes.size
        if not gap - RACE_Z * se > RACE_STEPS * left * max(gain, 0.0):
            return False
        self.cv_raced_ = dict(leader=leader.name, rank=best, gain=float(gain), gap=float(gap),
                              standard_error=float(se), ranks_left=left)
        return True

    def _refine(self, setting, ems, fits, log_p, folds):
        """The cross-validation's fold fits of ``setting`` from random profiles, stopped at
        ``CV_TOL_FACTOR`` x ``tol``, continued to ``tol`` and rescored (in place)."""
        if setting not in ems or not all(em.cold for em in ems[setting]):
            return
        for i, em in enumerate(ems[setting]):
            if em.stopped is not None and em.stopped > self.tol:
                fits[setting][i] = em.run(self.max_iter, self.tol).result()[:2]
                log_p[setting][folds[i][1]] = _fold_log_p(fits[setting][i], folds[i][2])
        self.cv_scores_[setting] = float(np.sum(log_p[setting])) / log_p[setting].size

    def kernel(self):
        """The fitted kernel as a matrix-free ``genpqr.stage2._kernels.KernelOperator`` on this model,
        at any size: ``expect``, ``push`` and ``P_mu`` (:meth:`under`) are products with the factors,
        and the (S, K, S) array (``to_dense``) is built only where its entries are asked for (a fit
        given it keeps, and saves, the factors: about r / S of the dense kernel's memory)."""
        self._check_fitted()
        return KernelOperator(self)

    def under(self, mu):
        """``P_mu`` (S, S): ``sum_a mu(a|s) P(.|s, a)``, as ``(sum_a mu(a|s) phi(s, a)) psi``."""
        S, K = self.n_states_, self.n_actions_
        mu = np.asarray(mu, dtype=np.float64)
        weights = np.einsum("sa,sak->sk", mu, self.phi_.reshape(S, K, -1))
        return weights @ self.psi_[:, :S]

    def to_dense(self, max_bytes: int = DENSE_KERNEL_MAX_BYTES) -> np.ndarray:
        S, K = self._dense_shape(max_bytes)
        return (self.phi_ @ self.psi_[:, :S]).reshape(S, K, S)  # one product, not row blocks

    def _rows(self, flat_rows):
        return self.phi_[flat_rows] @ self.psi_

    def expect(self, values):
        v = self._values(values)
        out = self.phi_ @ (self.psi_[:, : self.n_states_] @ v)
        return out.reshape((self.n_states_, self.n_actions_) + v.shape[1:])

    def push(self, weights):
        return (self._weights(weights) @ self.phi_) @ self.psi_[:, : self.n_states_]

    def _move_proba(self, moves: TransitionMoves):
        return np.einsum("ik,ki->i", self.phi_[moves.rows], self.psi_[:, moves.outcomes])
