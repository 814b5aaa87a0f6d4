r"""Latent agent types in the structural model: the augmented state space and the mixture
likelihood with its per-episode scores (Arcidiacono and Miller 2011).

An episode ``e`` (a bus, a patient) is of one of ``M`` types for all its rows. Type ``m`` has
the flow utility ``u_m(s, a) = features(s, a) @ theta_m + offset(s, a)``, where the
parameters named in ``type_specific`` take one value per type and the others are shared, and a
kernel ``P_m`` (shared, or one known kernel per type). The mixture log-likelihood is

    L(theta, alpha) = sum_e log sum_m prior_m(z_e; alpha) prod_{i in e} pi_m(a_i | s_i) [P_m(s'_i | s_i, a_i)],

``pi_m`` the soft-optimal policy of ``u_m`` under ``P_m`` (temperature 1), ``prior_m(z; alpha) =
softmax_m([1, z] @ alpha_m)`` (type 0 the base, ``alpha_0 = 0``; without covariates the
constants ``alpha_m = log(prior_m / prior_0)``).

**The augmented space.** Types and states together, ``(m, s)`` coded ``m S + s``, with a
block-diagonal kernel (type never changes) and features whose type-specific parameters have one
column per type, make all types *one* dynamic logit model in the parameter vector ``theta``
(``TypeSpace``). A weighted M-step is then the single-type estimator on the augmented
space with the weighted counts ``n_m(s, a) = sum_i q_{e(i), m} 1{s_i = s, a_i = a}``: NPL, NFXP
and the likelihood derivatives of ``genpqr.structural._likelihood`` are reused as they are.

**Scores.** With the posteriors ``q_{e m}`` at the parameters (``genpqr.stage1._latent_types.type_posteriors``),
``d log L_e / d theta = sum_m q_{e m} sum_{i in e} d log pi_m(a_i|s_i) / d theta`` (the row
scores of the augmented model, derivative through the fixed point) and
``d log L_e / d alpha_m = (q_{e m} - prior_m(z_e)) [1, z_e]``. Their outer product summed over
episodes is the OPG; the Hessian is the numerical derivative of the analytic gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from ..stage2._kernels import TransitionKernel, as_kernel
from ..data._validation import check_gamma, check_state_indices
from ..stage1._latent_types import episode_codes, type_posteriors, TypePosterior
from ._checks import check_features, check_table
from ._likelihood import likelihood_derivatives

__all__ = ["EpisodeChoices", "as_episode_choices", "TypeSpace", "build_type_space", "Mixing", "MixtureEvaluation",
           "evaluate_mixture", "mixture_hessian"]


@dataclass(frozen=True)
class EpisodeChoices:
    """Choices with their episodes: what a likelihood with latent types needs (counts do not
    say which choices belong together).

    Attributes
    ----------
    episode : int ndarray (n,)
        Each row's episode, coded ``0..n_episodes-1``.
    labels : ndarray (n_episodes,)
        The episodes' own ids, sorted.
    states, actions : int ndarray (n,)
        State indices and action codes.
    next_states : int ndarray (n,) or None
        Next-state indices, ``-1`` where not observed (only read with type-specific kernels).
    """

    episode: np.ndarray
    labels: np.ndarray
    states: np.ndarray
    actions: np.ndarray
    next_states: np.ndarray | None = None

    @property
    def n_episodes(self) -> int:
        return int(self.labels.size)

    @property
    def n(self) -> int:
        return int(self.states.size)

    def indicator(self) -> sp.csr_matrix:
        """``(n_episodes, n)``: sums rows into their episodes."""
        return sp.csr_matrix((np.ones(self.n), (self.episode, np.arange(self.n))), shape=(self.n_episodes, self.n))

    def subset(self, episodes) -> "EpisodeChoices":
        """The rows of the given episode codes, repeats kept as new episodes (a bootstrap draw)."""
        episodes = np.asarray(episodes, dtype=np.int64)
        order = np.argsort(self.episode, kind="stable")
        starts = np.searchsorted(self.episode[order], np.arange(self.n_episodes + 1))
        rows = [order[starts[e]:starts[e + 1]] for e in episodes]
        idx = np.concatenate(rows)
        new_episode = np.repeat(np.arange(episodes.size), [r.size for r in rows])
        nxt = None if self.next_states is None else self.next_states[idx]
        return EpisodeChoices(new_episode, np.arange(episodes.size), self.states[idx], self.actions[idx], nxt)


def as_episode_choices(episodes, n_states: int, n_actions: int) -> EpisodeChoices:
    """``episodes`` as :class:`EpisodeChoices`: a :class:`~genpqr.data.Transitions` with tabular
    states (its ``episode_ids``, states, action codes and observed next states), a mapping with
    keys ``"episode", "state", "action"`` (optional ``"next_state"``), or a tuple
    ``(episode_ids, states, actions[, next_states])`` of arrays of shape (n,)."""
    if isinstance(episodes, EpisodeChoices):
        return episodes
    if hasattr(episodes, "episode_ids") and hasattr(episodes, "next_observed"):
        nxt = check_state_indices(episodes.next_states, n_states, "episodes.next_states") \
            if np.all(episodes.next_observed) else None
        parts = (episodes.episode_ids, episodes.states, episodes.actions, nxt)
    elif isinstance(episodes, dict):
        missing = [k for k in ("episode", "state", "action") if k not in episodes]
        if missing:
            raise ValueError(f"episodes as a mapping needs the keys 'episode', 'state', 'action'; missing {missing}")
        parts = (episodes["episode"], episodes["state"], episodes["action"], episodes.get("next_state"))
    elif isinstance(episodes, (tuple, list)) and len(episodes) in (3, 4):
        parts = tuple(episodes) + (None,) * (4 - len(episodes))
    else:
        raise TypeError("episodes must be Transitions, a mapping with 'episode', 'state', 'action', or a tuple "
                        f"(episode_ids, states, actions[, next_states]); got {type(episodes).__name__}")
    labels, code = episode_codes(np.asarray(parts[0]).reshape(-1))
    if hasattr(episodes, "episode_names"):  # Transitions: the user's episode ids, not their codes
        labels = episodes.episode_names(labels)
    s = check_state_indices(parts[1], n_states, "episodes' states")
    a = np.asarray(parts[2]).reshape(-1)
    if a.shape != s.shape or code.shape != s.shape:
        raise ValueError(f"episodes: episode ids, states and actions must have one entry per row, got "
                         f"{code.shape[0]}, {s.shape[0]}, {a.shape[0]}")
    if not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= n_actions:
        raise ValueError(f"episodes' actions must be integer codes in [0, {n_actions}), got {a[:5].tolist()}...")
    nxt = None
    if parts[3] is not None:
        nxt = np.asarray(parts[3]).reshape(-1).astype(np.int64)
        if nxt.shape != s.shape or nxt.max() >= n_states:
            raise ValueError(f"episodes' next states must be (n,) indices below {n_states} (-1: not observed)")
    return EpisodeChoices(code, labels, s, a.astype(np.int64), nxt)


@dataclass(frozen=True)
class TypeSpace:
    """The model of ``M`` types as one model on the augmented space ``(type, state)``.

    Attributes
    ----------
    n_types, n_states, n_actions : int
    features : ndarray (M S, K, P)
        Row ``m S + s``: type ``m``'s features, each type-specific parameter in its type's column.
    offset : ndarray (M S, K)
    kernel : TransitionKernel
        Block diagonal, ``(M S K, M S)``.
    gamma : float
    names : list of str
        The ``P`` parameters: ``"name"`` shared, ``"name[type m]"`` per type.
    base_names : list of str
        The ``p`` parameters of one type.
    columns : int ndarray (M, p)
        ``theta_m = theta[columns[m]]``.
    varying : bool ndarray (p,)
        Which parameters are type-specific.
    type_kernels : list of TransitionKernel or None
        Known kernels per type (their transitions enter the likelihood), or None (shared).
    """

    n_types: int
    n_states: int
    n_actions: int
    features: np.ndarray = field(repr=False)
    offset: np.ndarray = field(repr=False)
    kernel: object = field(repr=False)
    gamma: float
    names: list
    base_names: list
    columns: np.ndarray
    varying: np.ndarray
    type_kernels: list | None = field(default=None, repr=False)

    def type_params(self, theta) -> np.ndarray:
        """Each type's ``p`` parameters, shape (M, p)."""
        return np.asarray(theta)[self.columns]

    def counts(self, data: EpisodeChoices, weights) -> np.ndarray:
        """Weighted choice counts ``n_m(s, a) = sum_i q_{e(i), m} 1{s_i = s, a_i = a}``, shape (M S, K)."""
        q = np.asarray(weights, dtype=np.float64)[data.episode]  # (n, M)
        S, K, M = self.n_states, self.n_actions, self.n_types
        cell = (np.arange(M)[None, :] * S + data.states[:, None]) * K + data.actions[:, None]
        return np.bincount(cell.ravel(), weights=q.ravel(), minlength=M * S * K).reshape(M * S, K)

    def rows(self, data: EpisodeChoices) -> np.ndarray:
        """Each row's augmented state under each type, ``m S + s_i``, shape (n, M)."""
        return np.arange(self.n_types)[None, :] * self.n_states + data.states[:, None]

    def row_loglik(self, log_policy, data: EpisodeChoices) -> np.ndarray:
        """``ell[i, m] = log pi_m(a_i | s_i)`` (+ ``log P_m(s'_i | s_i, a_i)`` with type kernels), (n, M)."""
        ell = log_policy[self.rows(data), data.actions[:, None]]
        if self.type_kernels is not None and data.next_states is not None:
            seen = data.next_states >= 0
            for m, kern in enumerate(self.type_kernels):
                prob = np.asarray(kern.matrix[data.states[seen] * self.n_actions + data.actions[seen],
                                              data.next_states[seen]]).ravel()
                with np.errstate(divide="ignore"):
                    ell[seen, m] += np.log(prob)
        return ell

    def expand(self, theta_one, spread: float = 0.2) -> np.ndarray:
        """A start for the ``P`` parameters from one type's ``p``: type-specific parameters spread
        around it, ``theta_j + (m - (M - 1) / 2) spread max(1, |theta_j|)``."""
        theta_one = np.asarray(theta_one, dtype=np.float64)
        out = np.empty(len(self.names))
        for m in range(self.n_types):
            shift = (m - (self.n_types - 1) / 2.0) * spread * np.maximum(1.0, np.abs(theta_one))
            out[self.columns[m]] = theta_one + np.where(self.varying, shift, 0.0)
        return out

    def canonical_order(self, theta) -> np.ndarray:
        """The types sorted by their first type-specific parameter (labels are arbitrary in a
        mixture; the sorted order makes fits comparable)."""
        if not np.any(self.varying):
            return np.arange(self.n_types)
        j = int(np.flatnonzero(self.varying)[0])
        return np.argsort(self.type_params(theta)[:, j], kind="stable")

    def permute(self, theta, order) -> np.ndarray:
        """``theta`` with type ``order[m]`` relabelled ``m``."""
        out = np.array(theta, dtype=np.float64)
        out[self.columns] = self.type_params(theta)[np.asarray(order)]
        return out


def _type_specific(type_specific, names) -> np.ndarray:
    p = len(names)
    if type_specific is None or (isinstance(type_specific, str) and type_specific == "all"):
        return np.ones(p, dtype=bool)
    if isinstance(type_specific, str):
        type_specific = [type_specific]
    varying = np.zeros(p, dtype=bool)
    for item in type_specific:
        if isinstance(item, (int, np.integer)) and 0 <= item < p:
            varying[int(item)] = True
        elif item in names:
            varying[names.index(item)] = True
        else:
            raise ValueError(f"type_specific must name parameters among {names} (or their positions), or be 'all'; "
                             f"got {item!r}")
    return varying


def build_type_space(features, kernel, gamma, n_types: int, *, type_specific="all", offset=None,
                     names=None) -> TypeSpace:
    """The augmented model of ``n_types`` types (``TypeSpace``).

    Parameters
    ----------
    features : ndarray (S, K, p)
    kernel : transition kernel, or a list of ``n_types`` kernels (known type-specific transitions)
    gamma : float
    n_types : int
    type_specific : "all", or a list of parameter names (or positions)
        The parameters with one value per type (e.g. ``["RC"]``: type-shifted replacement costs);
        the others are shared.
    offset : ndarray (S, K), optional
    names : list of str, optional
    """
    gamma = check_gamma(gamma)
    X = check_features(features)
    S, K, p = X.shape
    M = int(n_types)
    if M < 1:
        raise ValueError(f"n_types must be a positive number of types, got {n_types!r}")
    off = np.zeros((S, K)) if offset is None else check_table(offset, (S, K), "offset")
    names = list(names) if names is not None else [f"theta[{j}]" for j in range(p)]
    if len(names) != p:
        raise ValueError(f"names must name the {p} features, got {len(names)} names")
    varying = _type_specific(type_specific, names)
    columns, full_names, col = np.empty((M, p), dtype=np.int64), [], 0
    for j in range(p):
        if varying[j] and M > 1:
            columns[:, j] = col + np.arange(M)
            full_names += [f"{names[j]}[type {m}]" for m in range(M)]
            col += M
        else:
            columns[:, j] = col
            full_names.append(names[j])
            col += 1
    XA = np.zeros((M * S, K, col))
    for m in range(M):
        XA[m * S:(m + 1) * S][:, :, columns[m]] = X
    kernels = list(kernel) if isinstance(kernel, (list, tuple)) else None
    if kernels is not None and len(kernels) != M:
        raise ValueError(f"kernel must be one kernel or a list of n_types = {M} kernels, got {len(kernels)}")
    per_type = [as_kernel(k, K) for k in (kernels if kernels is not None else [kernel])]
    for k in per_type:
        if k.n_states != S:
            raise ValueError(f"kernel has {k.n_states} states but features have {S}")
    blocks = [sp.csr_matrix(per_type[m if kernels is not None else 0].matrix) for m in range(M)]
    aug = TransitionKernel(sp.block_diag(blocks, format="csr"), M * S, K)
    return TypeSpace(M, S, K, XA, np.tile(off, (M, 1)), aug, gamma, full_names, names, columns, varying,
                     per_type if kernels is not None else None)


@dataclass(frozen=True)
class Mixing:
    """The mixing proportions as a multinomial logit on ``[1, z_e]`` (type 0 the base).

    Attributes
    ----------
    design : ndarray (n_episodes, d + 1)
    n_types : int
    names : list of str
        ``"mixing[type m]: const"`` (``log(prior_m / prior_0)`` without covariates) and
        ``"mixing[type m]: z_j"``.
    """

    design: np.ndarray = field(repr=False)
    n_types: int
    names: list

    @classmethod
    def of(cls, n_episodes: int, n_types: int, covariates=None, covariate_names=None) -> "Mixing":
        if covariates is None:
            z = np.zeros((n_episodes, 0))
        else:
            z = np.asarray(covariates, dtype=np.float64)
            z = z[:, None] if z.ndim == 1 else z
            if z.ndim != 2 or z.shape[0] != n_episodes:
                raise ValueError(f"mixing_covariates must have one row per episode ({n_episodes}), got shape "
                                 f"{np.shape(covariates)}")
        cov_names = list(covariate_names) if covariate_names is not None else [f"z{j}" for j in range(z.shape[1])]
        names = [f"mixing[type {m}]: {c}" for m in range(1, n_types) for c in ["const"] + cov_names]
        return cls(np.column_stack([np.ones(n_episodes), z]), int(n_types), names)

    @property
    def size(self) -> int:
        return (self.n_types - 1) * self.design.shape[1]

    def log_prior(self, alpha) -> np.ndarray:
        """``log prior_m(z_e)``, shape (n_episodes, M)."""
        coef = np.zeros((self.n_types, self.design.shape[1]))
        coef[1:] = np.reshape(alpha, coef[1:].shape)
        scores = self.design @ coef.T
        return scores - logsumexp(scores, axis=1, keepdims=True)

    def alpha_of(self, log_prior, coef=None) -> np.ndarray:
        """The parameters from ``genpqr.stage1._latent_types.mixing_log_prior``'s output."""
        if coef is not None:
            return np.asarray(coef)[1:].ravel()
        lp = np.asarray(log_prior).reshape(-1)
        alpha = np.zeros((self.n_types - 1, self.design.shape[1]))
        alpha[:, 0] = lp[1:] - lp[0]
        return alpha.ravel()

    def proportions(self, alpha) -> tuple[np.ndarray, np.ndarray]:
        """The mean proportions over episodes (M,) and their Jacobian in ``alpha`` (M, size)."""
        prior = np.exp(self.log_prior(alpha))
        M, D = self.n_types, self.design.shape[1]
        jac = np.empty((M, M - 1, D))
        for k in range(1, M):
            jac[:, k - 1, :] = ((prior * ((np.arange(M) == k) - prior[:, [k]])).T @ self.design) / len(prior)
        return prior.mean(axis=0), jac.reshape(M, -1)


@dataclass(frozen=True)
class MixtureEvaluation:
    """The mixture likelihood at ``(theta, alpha)``.

    Attributes
    ----------
    loglik : float
    grad : ndarray (P + A,)
    episode_scores : ndarray (n_episodes, P + A)
    posterior : TypePosterior
    log_prior : ndarray (n_episodes, M)
    policy : ndarray (M S, K)
        Each type's soft-optimal policy, stacked.
    """

    loglik: float
    grad: np.ndarray
    episode_scores: np.ndarray = field(repr=False)
    posterior: TypePosterior = field(repr=False)
    log_prior: np.ndarray = field(repr=False)
    policy: np.ndarray = field(repr=False)

    @property
    def opg(self) -> np.ndarray:
        return self.episode_scores.T @ self.episode_scores


def evaluate_mixture(space: TypeSpace, data: EpisodeChoices, mixing: Mixing, params, *,
                     policy0=None) -> MixtureEvaluation:
    """The mixture log-likelihood, its per-episode scores and the posteriors (module notes)."""
    params = np.asarray(params, dtype=np.float64)
    P = len(space.names)
    theta, alpha = params[:P], params[P:]
    zero = np.zeros((space.n_types * space.n_states, space.n_actions))
    d = likelihood_derivatives(theta, space.features, zero, space.kernel, space.gamma, offset=space.offset,
                               policy0=policy0)
    with np.errstate(divide="ignore"):
        log_pi = np.log(d.policy)
    log_prior = mixing.log_prior(alpha)
    post = type_posteriors(space.row_loglik(log_pi, data), data.episode, log_prior)
    q = post.weights
    row_scores = d.scores[space.rows(data), data.actions[:, None]]  # (n, M, P)
    theta_scores = data.indicator() @ np.einsum("nm,nmp->np", q[data.episode], row_scores)
    alpha_scores = ((q - np.exp(log_prior))[:, 1:, None] * mixing.design[:, None, :]).reshape(len(q), -1)
    scores = np.column_stack([theta_scores, alpha_scores])
    return MixtureEvaluation(post.loglik, scores.sum(axis=0), scores, post, log_prior, d.policy)


def mixture_hessian(space, data, mixing, params, policy0=None, rel_step: float = 1e-5) -> np.ndarray:
    """The Hessian of the mixture log-likelihood: central differences of the analytic gradient,
    symmetrized."""
    params = np.asarray(params, dtype=np.float64)
    H = np.empty((params.size, params.size))
    for j in range(params.size):
        h = rel_step * max(1.0, abs(params[j]))
        up, down = params.copy(), params.copy()
        up[j] += h
        down[j] -= h
        H[:, j] = (evaluate_mixture(space, data, mixing, up, policy0=policy0).grad
                   - evaluate_mixture(space, data, mixing, down, policy0=policy0).grad) / (2 * h)
    return 0.5 * (H + H.T)
